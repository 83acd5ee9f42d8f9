#!/usr/bin/env python3
"""hf_trainer: transformers.Trainer as users run it: TrainingArguments with
max_steps N, logging_steps 1, report_to "none", bf16, a fixed seed and
full_determinism, dataloader_num_workers 0, save_strategy "no", the default
optimizer (fused AdamW) and linear schedule, output_dir under /tmp; a Qwen2
causal LM from a small config (hidden 768, 8 layers, 12 heads over 4
key/value heads, vocab 32000) with random weights; a synthetic dataset of
random tokens (seq 1024, batch 8) whose items depend only on their index.

full_determinism calls transformers.enable_full_determinism, which also sets
CUDA_LAUNCH_BLOCKING=1 (every launch waits) and CUBLAS_WORKSPACE_CONFIG=:16:8
before CUDA starts. The one addition to a plain Trainer run is a
TrainerCallback that times each optimizer step (on_step_begin to
on_step_end) and takes each step's loss from the Trainer's own log
(logging_steps 1: the loss of that step, a full-precision float)."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    a = common.parse(ap)
    import time

    import torch
    import transformers
    from transformers import (AutoModelForCausalLM, Qwen2Config, Trainer, TrainerCallback,
                              TrainingArguments)

    vocab = 32000

    class Tokens(torch.utils.data.Dataset):
        """Item i: random tokens from a generator seeded with i."""

        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(common.SEED * 1000 + i)
            ids = torch.randint(0, vocab, (a.seq,), generator=g)
            return {"input_ids": ids, "labels": ids.clone()}

    class Record(TrainerCallback):
        """Each optimizer step's time and the loss the Trainer logs for it."""

        def __init__(self):
            self.steps = common.Steps("hf_trainer", a)
            self.pending = None             # (step, seconds) until the step's loss is logged
            self.t0 = None

        def on_step_begin(self, args, state, control, **kwargs):
            common.sync()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            common.sync()
            self.pending = (state.global_step, time.perf_counter() - self.t0)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                step, dt = self.pending
                if step != state.global_step:
                    sys.exit(f"hf_trainer: a loss logged at step {state.global_step}, "
                             f"the last step timed was {step}")
                if not isinstance(logs["loss"], float):
                    sys.exit(f"hf_trainer: the logged loss {logs['loss']!r} is not a float")
                self.steps.record(logs["loss"], dt)
                self.pending = None

    transformers.enable_full_determinism(common.SEED)
    out = tempfile.mkdtemp(prefix="zoo-hf-trainer-", dir="/tmp")
    try:
        cfg = Qwen2Config(hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                          num_attention_heads=12, num_key_value_heads=4, vocab_size=vocab,
                          max_position_embeddings=max(2048, a.seq), tie_word_embeddings=False,
                          use_cache=False)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        targs = TrainingArguments(
            output_dir=out, max_steps=a.steps, per_device_train_batch_size=a.batch,
            learning_rate=3e-4, logging_steps=1, logging_nan_inf_filter=False, report_to="none",
            bf16=True, seed=common.SEED, data_seed=common.SEED, full_determinism=True,
            dataloader_num_workers=0, save_strategy="no", disable_tqdm=True,
            use_cpu=(common.DEVICE == "cpu"))
        rec = Record()
        trainer = Trainer(model=model, args=targs, train_dataset=Tokens(a.steps * a.batch),
                          callbacks=[rec])
        trainer.train()
        if trainer.args.device.type != common.DEVICE:
            sys.exit(f"hf_trainer: the Trainer ran on {trainer.args.device}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    rec.steps.finish(common.versions("torch", "transformers", "accelerate"),
                     optim=str(getattr(targs.optim, "value", targs.optim)),
                     attn=model.config._attn_implementation,
                     cuda_launch_blocking=os.environ.get("CUDA_LAUNCH_BLOCKING"),
                     params=sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
