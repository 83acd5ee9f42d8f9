#!/usr/bin/env python3
"""lightning_trainer (job "lightning"): a LightningModule (a residual MLP, d 2048, hidden 8192, 4
blocks; 1000 classes) trained by lightning's Trainer(max_steps=N,
accelerator="gpu", devices=1, precision="bf16-mixed", deterministic=True,
logger=False, enable_checkpointing=False) on a TensorDataset of random
inputs and labels made from a seeded generator, seed_everything(1234). A
Callback times each batch (on_train_batch_start to on_train_batch_end) and
takes the loss training_step returned."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__)
    ap.add_argument("--batch", type=int, default=2048)
    a = common.parse(ap)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    try:
        import lightning.pytorch as pl
        lname = "lightning"
    except ImportError:
        import pytorch_lightning as pl
        lname = "pytorch_lightning"

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(1024, 2048), *(common.mlp_block(2048, 8192) for _ in range(4)),
                                     nn.LayerNorm(2048), nn.Linear(2048, 1000))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Record(pl.Callback):
        def __init__(self):
            self.steps = common.Steps("lightning", a)

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.steps.begin()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self.steps.end(outputs["loss"])

    pl.seed_everything(common.SEED, workers=True)
    gen = torch.Generator().manual_seed(common.SEED + 8)
    n = a.steps * a.batch
    data = torch.utils.data.TensorDataset(torch.randn(n, 1024, generator=gen),
                                          torch.randint(0, 1000, (n,), generator=gen))
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=False, num_workers=0)
    rec = Record()
    trainer = pl.Trainer(max_steps=a.steps, accelerator="gpu" if common.DEVICE == "cuda" else "cpu",
                         devices=1, precision="bf16-mixed", deterministic=True, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[rec])
    model = Net()
    trainer.fit(model, loader)
    if trainer.global_step != a.steps:
        sys.exit(f"lightning: {trainer.global_step} optimizer steps, {a.steps} asked for")
    rec.steps.finish(common.versions("torch", lname),
                     params=sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
