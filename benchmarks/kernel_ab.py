"""Two builds of the native CPU kernels compared in whole training steps.

    python benchmarks/kernel_ab.py A.cc B.cc [--size 19] [--batch 64] [--rounds 10]

A and B are versions of ``alphalite/nn/native_winograd.cc`` (give the file
itself as one of them). Both are compiled as the project builds its own
(``native.build``: ``-O3 -march=native``, cached by source),
registered under two FFI names, and a b6c64 training step (SGD with
momentum, Winograd convolutions) is compiled once against each; the two
steps then alternate in one process, in rounds of a few steps, and the
median of the paired time ratios A/B is printed (one JSON line). Separate
processes on a shared 2-core VM moved by about 5% from run to run and hid
gains of that size; A against itself gives 0.99-1.00 here (range
0.97-1.02).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _build(src: Path, name: str) -> str:
    from alphalite.nn import native

    return native.register(native.build(source=src), name)


def _step(target: str, size: int, batch: int):
    """A blocking training step whose convolutions call the kernels
    registered as ``target``."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from alphalite.nn import native, nets

    native._library = lambda: target  # the name the convolutions are traced with
    model = nets.make_model("b6c64", size, 18, conv="winograd")
    variables = nets.init_variables(model, jax.random.key(0))
    tx = optax.sgd(0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((batch, size, size, 18), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, size * size + 1, batch), dtype=jnp.int32)

    def step(params, stats, opt, x, y):
        def loss_fn(p):
            logits, upd = model.apply({"params": p, "batch_stats": stats}, x, train=True, mutable=["batch_stats"])
            return nets.masked_cross_entropy(logits, None, y).mean(), upd["batch_stats"]

        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), stats, opt, loss

    state = [variables["params"], variables["batch_stats"], tx.init(variables["params"])]
    compiled = jax.jit(step, donate_argnums=(0, 1, 2)).lower(*state, x, y).compile()
    if target not in compiled.as_text():
        raise SystemExit(f"kernel_ab: the step does not call {target} (no Winograd convolution at this size?)")

    def once():
        params, stats, opt, loss = compiled(*state, x, y)
        state[:] = [params, stats, opt]
        loss.block_until_ready()

    return once


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--size", type=int, default=19)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args(argv)
    for f in (args.a, args.b):
        if not f.is_file():
            print(f"kernel_ab: {f}: no such file", file=sys.stderr)
            return 2

    from alphalite import runtime

    runtime.setup(training=True)
    import numpy as np

    steps = {"a": _step(_build(args.a, "kernel_ab_a"), args.size, args.batch),
             "b": _step(_build(args.b, "kernel_ab_b"), args.size, args.batch)}
    n = 20 if args.size <= 9 else 6  # steps a round: about a second each
    for once in steps.values():
        for _ in range(3 * n):
            once()
    ms = {"a": [], "b": []}
    for r in range(args.rounds):
        for name in ("a", "b") if r % 2 == 0 else ("b", "a"):
            t0 = time.perf_counter()
            for _ in range(n):
                steps[name]()
            ms[name].append((time.perf_counter() - t0) / n * 1000)
    ratios = [a / b for a, b in zip(ms["a"], ms["b"])]
    print(json.dumps({"benchmark": "kernel_ab", "a": str(args.a), "b": str(args.b), "size": args.size,
                      "batch": args.batch, "rounds": args.rounds, "steps_per_round": n,
                      "a_ms": round(float(np.median(ms["a"])), 2), "b_ms": round(float(np.median(ms["b"])), 2),
                      "ratio_a_over_b": round(float(np.median(ratios)), 3),
                      "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
