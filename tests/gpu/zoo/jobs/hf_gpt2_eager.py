#!/usr/bin/env python3
"""hf_gpt2_eager: a GPT-2 LM from HF transformers, random weights from a small
config (n_embd 1024, 8 layers, 16 heads, vocab 32000), seq 512, batch 4,
attn_implementation="eager" (attention as matmul, softmax, dropout), in fp32
without autocast, AdamW (foreach). Dropout stays at GPT-2's default 0.1
(embeddings, attention, residuals), so the device's random numbers are drawn
every step; a fixed seed keeps them the same run to run."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__, anchors=True, log_every=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    a = common.parse(ap)
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config

    common.deterministic()
    dev = common.device()
    vocab = 32000
    cfg = GPT2Config(n_embd=1024, n_layer=8, n_head=16, n_positions=max(1024, a.seq),
                     vocab_size=vocab, use_cache=False)
    if not (cfg.resid_pdrop > 0 and cfg.attn_pdrop > 0 and cfg.embd_pdrop > 0):
        sys.exit("hf_gpt2_eager: GPT-2's default dropout is 0 in this transformers")
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                             dtype=torch.float32).to(dev)
    if model.config._attn_implementation != "eager":
        sys.exit(f"hf_gpt2_eager: attention is {model.config._attn_implementation}, not eager")
    model.train()                           # dropout on
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(common.SEED + 2)
    data = torch.randint(0, vocab, (a.steps, a.batch, a.seq), generator=gen)

    steps = common.train_lm("hf_gpt2_eager", a, model, opt, data, dev)
    steps.finish(common.versions("torch", "transformers"),
                 params=sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
