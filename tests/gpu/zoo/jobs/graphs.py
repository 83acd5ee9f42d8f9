#!/usr/bin/env python3
"""graphs: CUDA graphs, in the two ways PyTorch users capture them.

Default: torch.cuda.make_graphed_callables on the middle of the model, a
stack of 4 residual MLP blocks (d 2048, hidden 8192, LayerNorm, GELU,
dropout 0.1), with a sample input that requires grad (it comes from an
ungraphed input layer); the training loop then calls the graphed module as
it would the module: its forward and its backward each replay one graph,
while the input layer, the head, the loss and AdamW run eagerly.

--whole-step: the whole training step (forward, loss, backward and a
capturable AdamW step) captured with torch.cuda.graph after warmup steps on
a side stream (PyTorch's "whole network capture"), then replayed with each
step's batch copied into the static input and target.

fp32 without autocast (make_graphed_callables would need autocast's cache
off). Batch 2048 rows of 1024 features, 1000 classes."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__)
    ap.add_argument("--whole-step", action="store_true",
                    help="capture the whole training step with torch.cuda.graph")
    ap.add_argument("--batch", type=int, default=2048)
    a = common.parse(ap)
    common.need_cuda("graphs")
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    common.deterministic()
    dev = common.device()
    d_in, d, hidden, classes = 1024, 2048, 8192, 1000
    inp = nn.Linear(d_in, d).to(dev)
    body = nn.Sequential(*(common.mlp_block(d, hidden, dropout=0.1) for _ in range(4))).to(dev)
    head = nn.Linear(d, classes).to(dev)
    for m in (inp, body, head):
        m.train()
    params = [*inp.parameters(), *body.parameters(), *head.parameters()]
    gen = torch.Generator(device=dev).manual_seed(common.SEED + 5)
    xs = torch.randn(a.steps, a.batch, d_in, device=dev, generator=gen)
    ys = torch.randint(0, classes, (a.steps, a.batch), device=dev, generator=gen)
    steps = common.Steps("graphs_whole" if a.whole_step else "graphs", a)

    if not a.whole_step:
        sample = torch.randn(a.batch, d, device=dev, generator=gen, requires_grad=True)
        gbody = torch.cuda.make_graphed_callables(body, (sample,))
        opt = torch.optim.AdamW(params, lr=1e-4)
        for i in range(a.steps):
            steps.begin()
            loss = F.cross_entropy(head(gbody(inp(xs[i]))), ys[i])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steps.end(loss)
        graphs = 2
    else:
        opt = torch.optim.AdamW(params, lr=1e-4, capturable=True)
        static_x = torch.zeros(a.batch, d_in, device=dev)
        static_y = torch.zeros(a.batch, dtype=torch.long, device=dev)
        warm_x = torch.randn(a.batch, d_in, device=dev, generator=gen)
        warm_y = torch.randint(0, classes, (a.batch,), device=dev, generator=gen)

        def step():
            out = F.cross_entropy(head(body(inp(static_x))), static_y)
            out.backward()
            opt.step()
            return out

        # warm up on a side stream (lazy initialisation, the optimizer's state)
        static_x.copy_(warm_x)
        static_y.copy_(warm_y)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)     # backward allocates .grad from the graph's pool
        with torch.cuda.graph(graph):
            static_loss = step()
        # the capture ran nothing: the first replay is the first step
        for i in range(a.steps):
            steps.begin()
            static_x.copy_(xs[i])
            static_y.copy_(ys[i])
            graph.replay()
            steps.end(static_loss)
        graphs = 1
    steps.finish(common.versions("torch"), whole_step=a.whole_step, graphs=graphs,
                 params=sum(p.numel() for p in params))


if __name__ == "__main__":
    main()
