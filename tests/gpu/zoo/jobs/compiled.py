#!/usr/bin/env python3
"""compiled: a small decoder-only transformer written in torch.nn (pre-norm
blocks, causal scaled_dot_product_attention, GELU MLP; d_model 1024, 6
layers, 16 heads, vocab 8192), seq 1024, batch 8, bf16 autocast, under
torch.compile (inductor, default mode), so Triton kernels that inductor
generates run beside the library kernels. The first steps compile the
forward and the backward (leave them in --warmup, default 3); the loss of
every step is printed. Fused AdamW outside the compiled region."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=6)
    a = common.parse(ap)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class LM(nn.Module):
        def __init__(self, vocab, d, layers, heads, seq):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, ids, targets):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.tok(ids) + self.pos(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln(x)).float()
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    common.deterministic()
    dev = common.device()
    vocab = 8192
    model = LM(vocab, 1024, a.layers, 16, a.seq).to(dev)
    model.train()
    cmodel = torch.compile(model)           # inductor, mode "default"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    gen = torch.Generator().manual_seed(common.SEED + 4)
    data = torch.randint(0, vocab, (a.steps, a.batch, a.seq + 1), generator=gen)

    steps = common.Steps("compiled", a)
    for i in range(a.steps):
        steps.begin()
        chunk = data[i].to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = cmodel(chunk[:, :-1], chunk[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps.end(loss)
    import torch._dynamo
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    if frames < 1:
        sys.exit("compiled: dynamo compiled no graph")
    steps.finish(common.versions("torch", "triton"),
                 params=sum(p.numel() for p in model.parameters()), dynamo_graphs=frames)


if __name__ == "__main__":
    main()
