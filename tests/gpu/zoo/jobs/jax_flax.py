#!/usr/bin/env python3
"""jax_flax: JAX and Flax (flax.linen), no PyTorch: a residual MLP (d 4096,
8 blocks of LayerNorm, Dense 4096 -> 4096, GELU; regression onto a fixed
random linear map of the input), optax adam, the whole training step one
jit-compiled XLA program with the parameters and the optimizer state donated
(updated in place). Batch 2048, a new batch each step from jax.random with a
fixed key. Losses are float.hex of float(loss); step times wait with
block_until_ready.

Before jax is imported: XLA_PYTHON_CLIENT_PREALLOCATE=false (memory as
needed, not 75% of the device at start) and --xla_gpu_deterministic_ops=true
in XLA_FLAGS, each unless the environment already says otherwise."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (imports no torch)


def main():
    ap = common.parser(__doc__)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--blocks", type=int, default=8)
    a = common.parse(ap)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_deterministic_ops=true").strip()
    import jax
    import jax.numpy as jnp
    import jaxlib
    import flax
    import flax.linen as nn
    import optax

    backend = jax.default_backend()
    want = "cpu" if common.DEVICE == "cpu" else "gpu"
    if backend != want:
        sys.exit(f"jax_flax: JAX's backend is {backend}, not {want}")

    class Block(nn.Module):
        width: int

        @nn.compact
        def __call__(self, x):
            return x + nn.gelu(nn.Dense(self.width)(nn.LayerNorm()(x)))

    class MLP(nn.Module):
        width: int
        blocks: int

        @nn.compact
        def __call__(self, x):
            for _ in range(self.blocks):
                x = Block(self.width)(x)
            return nn.Dense(self.width)(nn.LayerNorm()(x))

    model = MLP(a.width, a.blocks)
    key = jax.random.PRNGKey(common.SEED)
    k_init, k_map, k_data = jax.random.split(key, 3)
    params = model.init(k_init, jnp.zeros((1, a.width), jnp.float32))
    tx = optax.adam(1e-4)
    opt_state = tx.init(params)
    target_map = jax.random.normal(k_map, (a.width, a.width), jnp.float32) / a.width ** 0.5

    @jax.jit
    def batch(step):
        x = jax.random.normal(jax.random.fold_in(k_data, step), (a.batch, a.width), jnp.float32)
        return x, x @ target_map

    def loss_fn(p, x, y):
        return jnp.mean((model.apply(p, x) - y) ** 2)

    def _train_step(p, s, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    train_step = jax.jit(_train_step, donate_argnums=(0, 1))

    steps = common.Steps("jax_flax", a, sync_fn=lambda: None)
    for i in range(a.steps):
        steps.begin()
        x, y = batch(i)
        params, opt_state, loss = train_step(params, opt_state, x, y)
        jax.block_until_ready((params, opt_state, loss))
        steps.end(loss)
    if "torch" in sys.modules:
        sys.exit("jax_flax: torch was imported")
    nparams = sum(int(v.size) for v in jax.tree_util.tree_leaves(params))
    steps.finish({"python": sys.version.split()[0], "jax": jax.__version__,
                  "jaxlib": jaxlib.__version__,
                  "flax": flax.__version__, "optax": optax.__version__},
                 backend=backend, devices=[str(d) for d in jax.devices()], params=nparams,
                 xla_flags=os.environ.get("XLA_FLAGS", ""),
                 preallocate=os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))


if __name__ == "__main__":
    main()
