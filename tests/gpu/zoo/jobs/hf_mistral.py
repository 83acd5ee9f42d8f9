#!/usr/bin/env python3
"""hf_mistral: a Mistral causal LM from HF transformers (not Llama), random
weights from a small config (hidden 1024, 8 layers, 16 heads over 4 key/value
heads, vocab 32000), seq 1024, batch 4, attn_implementation="sdpa", bf16
autocast, fused AdamW. A new batch of random tokens each step, copied from
the host."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__, anchors=True, log_every=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    a = common.parse(ap)
    import torch
    from transformers import AutoModelForCausalLM, MistralConfig

    common.deterministic()
    dev = common.device()
    vocab = 32000
    # sliding_window None: causal attention over the whole sequence, so sdpa
    # gets is_causal and no mask tensor
    cfg = MistralConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers,
                        num_attention_heads=16, num_key_value_heads=4, vocab_size=vocab,
                        max_position_embeddings=max(2048, a.seq), sliding_window=None,
                        tie_word_embeddings=False, use_cache=False)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa",
                                             dtype=torch.float32).to(dev)
    if model.config._attn_implementation != "sdpa":
        sys.exit(f"hf_mistral: attention is {model.config._attn_implementation}, not sdpa")
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    gen = torch.Generator().manual_seed(common.SEED + 1)
    data = torch.randint(0, vocab, (a.steps, a.batch, a.seq), generator=gen)

    steps = common.train_lm("hf_mistral", a, model, opt, data, dev, autocast=torch.bfloat16)
    steps.finish(common.versions("torch", "transformers"),
                 params=sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
