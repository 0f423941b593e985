"""Supervised-training speed of the ResNet policy: JAX/Flax/Optax vs PyTorch.

Prints one JSON line: training positions/s (forward + backward + SGD-momentum
update, one jitted step with donated state, warm-up excluded) and inference positions/s (eval
mode) for a ResNet preset (default b6c64) on 9x9 and 19x19, for alphalite.nn.nets
and for the same architecture written in PyTorch, measured in the same run,
with the JAX/PyTorch ratios and both parameter counts. JAX's 3x3 convolutions use ``--conv`` (default ``auto``:
on the CPU, whichever of XLA's convolution and Winograd F(m x m, 3x3) measured
faster on this host, tuned on first use and cached, see alphalite/nn/convtune.py;
``jax_conv`` reports the choice for the residual blocks); when Winograd is in
use, XLA's own convolution is timed beside it as ``jax_xla_*``. ``xla_flags`` reports
XLA_FLAGS as JAX saw them (importing alphalite turns YNNPACK off on the CPU,
see alphalite/__init__.py), ``malloc_tuned`` whether ``runtime.setup`` set glibc's
malloc to keep freed memory (PyTorch, in the same process, gets it too),
``malloc_one_arena`` whether it gave the process one arena, as for training
(see alphalite/runtime/__init__.py), and
``native_weight_grad`` whether the Winograd weight gradient ran in
alphalite/nn/native.py's kernel. Inputs are random
planes; targets random moves. The measurements of a size run round-robin
and the best round counts, so load from other processes on a shared machine
hits both frameworks alike (numbers on a busy machine are still noisy). Each
measurement starts after a ``SETTLE_S`` pause, so that the other framework's
worker threads (PyTorch's OpenMP threads spin-wait) have gone idle.

PyTorch is an optional benchmark extra (``pip install torch==2.13.0``, the CPU
build); without it the torch fields are replaced by ``"torch_skipped"``.

    python benchmarks/sl_train.py [--preset b6c64] [--sizes 9 19] [--batch 64]
                                  [--planes 18] [--seconds 4] [--no-torch]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


SETTLE_S = 0.5


def _time_interleaved(fns: dict, *, seconds: float, rounds: int = 5, warmup: int = 2) -> dict:
    """Time several blocking callables round-robin so that load from other
    processes hits all of them alike. Each gets ``warmup`` untimed calls, then
    ``rounds`` rounds of about ``seconds / rounds`` each (at least one call).
    Returns {name: best seconds per call over the rounds} (the best-of
    estimator: on a shared machine the minimum is the least disturbed)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(SETTLE_S)
            n, t0 = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                elapsed = time.perf_counter() - t0
                if elapsed >= seconds / rounds:
                    break
            best[name] = min(best[name], elapsed / n)
    return best


# --------------------------------------------------------------------------
# JAX


def setup_jax(preset, size, planes, batch, lr=0.01, dtype="float32", conv="auto"):
    """-> (param count, train_once, infer_once), both blocking."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from alphalite.nn import nets

    model = nets.make_model(preset, size, planes, conv=conv)
    infer_model = nets.make_model(preset, size, planes, dtype=getattr(jnp, dtype), conv=conv)
    variables = nets.init_variables(model, jax.random.key(0))
    params, batch_stats = variables["params"], variables["batch_stats"]
    tx = optax.sgd(lr, momentum=0.9)
    opt_state = tx.init(params)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((batch, size, size, planes), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, size * size + 1, batch), dtype=jnp.int32)

    def train_step(params, batch_stats, opt_state, x, y):
        def loss_fn(p):
            logits, updates = model.apply(
                {"params": p, "batch_stats": batch_stats}, x, train=True, mutable=["batch_stats"]
            )
            return nets.masked_cross_entropy(logits, None, y).mean(), updates["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss

    step = jax.jit(train_step, donate_argnums=(0, 1, 2))
    state = [params, batch_stats, opt_state]

    def train_once():
        p, s, o, loss = step(state[0], state[1], state[2], x, y)
        state[:] = [p, s, o]
        loss.block_until_ready()

    infer = jax.jit(lambda v, x: infer_model.apply(v, x))

    def infer_once():
        infer({"params": state[0], "batch_stats": state[1]}, x).block_until_ready()

    return nets.param_count(params), train_once, infer_once


# --------------------------------------------------------------------------
# PyTorch (the same architecture)


def import_torch(no_torch: bool):
    """(torch, None), or (None, why it is skipped): not installed, or ``--no-torch``."""
    try:
        import torch
    except ImportError:
        return None, "torch not installed (pip install torch==2.13.0, CPU build)"
    return (None, "--no-torch") if no_torch else (torch, None)


def torch_resnet(blocks, channels, size, planes):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(channels)
            self.c2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.b2 = nn.BatchNorm2d(channels)

        def forward(self, x):
            h = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(h)) + x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(planes, channels, 3, padding=1, bias=False)
            self.stem_bn = nn.BatchNorm2d(channels)
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.pconv = nn.Conv2d(channels, 2, 1, bias=False)
            self.pbn = nn.BatchNorm2d(2)
            self.dense = nn.Linear(2 * size * size, size * size + 1)

        def forward(self, x):  # [B, C, H, W]
            h = torch.relu(self.stem_bn(self.stem(x)))
            h = self.blocks(h)
            h = torch.relu(self.pbn(self.pconv(h)))
            return self.dense(h.flatten(1))

    return Net()


def setup_torch(preset, size, planes, batch, lr=0.01, channels_last=False):
    """-> (param count, train_once, infer_once); the net switches train/eval mode."""
    import numpy as np
    import torch

    from alphalite.nn import nets

    blocks, channels = nets.parse_preset(preset)
    torch.manual_seed(0)
    net = torch_resnet(blocks, channels, size, planes)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.random((batch, planes, size, size), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, size * size + 1, batch))
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train_once():
        net.train()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    def infer_once():
        net.eval()
        with torch.inference_mode():
            net(x)

    return sum(p.numel() for p in net.parameters()), train_once, infer_once


# --------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="b6c64", help="ResNet preset (default b6c64)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[9, 19])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--planes", type=int, default=18, help="input planes (random inputs)")
    ap.add_argument("--seconds", type=float, default=4.0, help="timed seconds per measurement")
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds (best one kept)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    ap.add_argument(
        "--torch-channels-last", action="store_true", help="run PyTorch in channels_last (NHWC)"
    )
    ap.add_argument(
        "--infer-dtype", default="float32", choices=["float32", "bfloat16"],
        help="JAX inference computation dtype (params stay float32)",
    )
    ap.add_argument(
        "--conv", default="auto", choices=["auto", "xla", "winograd"],
        help="JAX 3x3 convs (alphalite.nn.nets.conv_method; auto = measured on this host, cached)",
    )
    ap.add_argument(
        "--no-xla-baseline", action="store_true",
        help="do not also time JAX with XLA's own convolution (jax_xla_* fields)",
    )
    ap.add_argument(
        "--xla-flags", default=None, help="XLA_FLAGS to set before JAX starts (for experiments)"
    )
    args = ap.parse_args(argv)
    if args.xla_flags is not None:
        os.environ["XLA_FLAGS"] = args.xla_flags

    from alphalite import runtime

    done = runtime.setup(training=True)  # after --xla-flags, before JAX starts; one malloc arena
    import jax
    import jax.numpy as jnp

    from alphalite.nn import native, nets

    result = {
        "benchmark": "sl_train",
        "preset": args.preset,
        "batch": args.batch,
        "planes": args.planes,
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "infer_dtype": args.infer_dtype,
        "conv": args.conv,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "malloc_tuned": done["malloc_tuned"],
        "malloc_one_arena": done["malloc_tuned"] and done["training"],
        "native_weight_grad": native.available(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
    }
    torch, skipped = import_torch(args.no_torch)
    if skipped:
        result["torch_skipped"] = skipped
    if torch is not None:
        result["torch"] = torch.__version__
        result["torch_threads"] = torch.get_num_threads()
        result["torch_channels_last"] = args.torch_channels_last

    for size in args.sizes:
        print(f"[sl_train] {args.preset} {size}x{size} ...", file=sys.stderr, flush=True)
        j_params, j_train, j_infer = setup_jax(
            args.preset, size, args.planes, args.batch, dtype=args.infer_dtype, conv=args.conv
        )
        fns = {"jax_train": j_train, "jax_infer": j_infer}
        _, channels = nets.parse_preset(args.preset)
        block = (args.batch, size, size, channels)  # the residual blocks' 3x3 convs (tuned if auto)
        used = {"train": nets.conv_method(args.conv, True, block, channels),
                "infer": nets.conv_method(args.conv, False, block, channels, getattr(jnp, args.infer_dtype))}
        if "winograd" in used.values() and not args.no_xla_baseline:
            _, x_train, x_infer = setup_jax(
                args.preset, size, args.planes, args.batch, dtype=args.infer_dtype, conv="xla"
            )
            fns.update(jax_xla_train=x_train, jax_xla_infer=x_infer)
        if torch is not None:
            t_params, t_train, t_infer = setup_torch(
                args.preset, size, args.planes, args.batch, channels_last=args.torch_channels_last
            )
            fns.update(torch_train=t_train, torch_infer=t_infer)
        best = _time_interleaved(fns, seconds=args.seconds, rounds=args.rounds)
        pos_s = {name: args.batch / s for name, s in best.items()}
        entry = {"params": j_params, "jax_conv": used}
        entry.update({f"{name}_pos_s": round(v, 1) for name, v in pos_s.items()})
        if torch is not None:
            entry.update(
                torch_params=t_params,
                same_param_count=t_params == j_params,
                train_ratio_jax_over_torch=round(pos_s["jax_train"] / pos_s["torch_train"], 3),
                infer_ratio_jax_over_torch=round(pos_s["jax_infer"] / pos_s["torch_infer"], 3),
            )
        result[f"{size}x{size}"] = entry
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
