"""Search speed: MCTS visits/s with a ResNet policy + value net, against the
bare network's evals/s at the same batch sizes, so the search overhead shows.

Prints one JSON line. For each board size and leaf batch size (1, 8, 32):

- ``visits_per_s``: visits of run_mcts per second (net priors and values);
- ``net_evals_per_s``: the jitted network alone on batches of that size;
- ``overhead``: the share of search wall time spent outside the network call
  (selection, replay of leaves, feature encoding, backup), measured inside
  the same search by timing the network call.

``engines``: the engine's two searches with the nets ``alphalite gtp`` plays
by default (``checkpoint.DEFAULT_NETS``: az9 on 9x9, policy19ag40b12 +
value19b12 on 19x19; int8 on the CPU, or as ``--inference`` says) from a mid-game
position, each for ``--seconds``: ``mcts`` (PUCT, each visit one network
evaluation in batches of 8 and one uniform rollout, lambda 0.5) and ``apv``
(the asynchronous search: pattern rollouts on every core, the network on
its own thread): visits/s, rollouts/s, net evals/s and the process's CPU
time per wall second (2.0: both cores busy).

Also bf16 against fp32 inference on 19x19 (evals/s, top-1 agreement and the
largest prior difference on positions from real games). The nets are
randomly initialised unless --checkpoint gives a policy: speed does not
depend on the weights, agreement does.

    python benchmarks/search.py [--model b6c64] [--sizes 9,19] [--seconds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, this file's folder comes first on sys.path and its name
# would shadow the `search` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)


def _positions(size: int, n: int, seed: int = 0):
    """Mid-game positions: random legal play, 1/2 of the board's points in."""
    from alphalite.go import board

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s = board.new_game(size)
        for _ in range(size * size // 3):
            legal = np.flatnonzero(board.legal_moves(s)[:-1])
            if len(legal) == 0:
                break
            s = board.play(s, int(rng.choice(legal)))
        out.append(s)
    return out


def _real_positions(size: int, n: int):
    """Positions from the shipped SGF sample (19x19 only), else random ones."""
    from alphalite.go import board, sgf

    sample = ROOT / "tests" / "data" / "tygem-sample.tar.gz"
    if size != 19 or not sample.exists():
        return _positions(size, n)
    import tarfile

    out = []
    rng = np.random.default_rng(1)
    with tarfile.open(sample) as tar:
        for m in tar:
            if not m.name.endswith(".sgf"):
                continue
            rec = sgf.read_sgf(tar.extractfile(m).read())
            s = board.new_game(19, rec.komi)
            stop = int(rng.integers(20, max(21, len(rec.moves))))
            try:
                for colour, mv in rec.moves[:stop]:
                    s = board.play(s, mv, colour)
            except board.IllegalMove:
                continue
            if not s.is_over:
                out.append(s)
            if len(out) >= n:
                break
    return out


def bench_net(net_fn, params, size, planes_n, batch, seconds):
    import jax

    planes = np.random.default_rng(0).random((batch, size, size, planes_n), np.float32)
    legal = np.ones((batch, size * size + 1), bool)
    jax.block_until_ready(net_fn(params, planes, legal))
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        jax.block_until_ready(net_fn(params, planes, legal))
        n += 1
    return n * batch / (time.perf_counter() - t0)


def bench_search(net_fn, params, state, batch, seconds, preset):
    import jax

    from search import evaluators, mcts
    from search.params import SearchParams

    timed = {"t": 0.0}

    def timed_net(p, planes, legal):
        t = time.perf_counter()
        out = jax.block_until_ready(net_fn(p, planes, legal))
        timed["t"] += time.perf_counter() - t
        return out

    evaluate = evaluators.network_evaluator(timed_net, preset=preset, pad_to=batch)
    sims = max(4 * batch, 16)
    mcts.run_mcts(params, 0, state, evaluate, num_simulations=sims,
                  search_params=SearchParams(batch_size=batch))  # warm-up
    visits = 0
    timed["t"] = 0.0
    t0 = time.perf_counter()
    seed = 1
    while time.perf_counter() - t0 < seconds:
        mcts.run_mcts(params, seed, state, evaluate, num_simulations=sims,
                  search_params=SearchParams(batch_size=batch))
        visits += sims
        seed += 1
    wall = time.perf_counter() - t0
    return visits / wall, 1.0 - timed["t"] / wall


def bench_engines(size, seconds, inference="auto", nets_=None):
    """The engine's searches (mcts, apv) with its default nets (or ``nets_``:
    (policy or policy-value net, value net or None)), as the GTP engine builds them."""
    from alphalite.engine import players
    from alphalite.nn.checkpoint import DEFAULT_NETS
    from search.evaluators import net_evaluator
    from search.params import SearchParams
    from search.rollout import PatternPolicy

    pair = nets_ or DEFAULT_NETS[size]
    net = players.load_net(*pair, inference=inference)
    state = _positions(size, 1, seed=2)[0]
    out = {"inference": net.inference, "nets": list(pair)}
    sp = SearchParams()  # the engine's defaults: lambda 0.5, leaf batch 8
    ev = net_evaluator(net.net_fn, has_value=net.has_value, lam=sp.lam, preset=net.preset, pad_to=sp.batch_size)
    mcts = players.MctsPlayer(ev, net.params, search_params=sp)
    mcts.run(state, np.random.default_rng(0), max_visits=32)
    mcts.forget()
    c0, t0 = time.process_time(), time.perf_counter()
    res = mcts.run(state, np.random.default_rng(1), max_visits=10**7, max_seconds=seconds)
    wall = time.perf_counter() - t0
    v = int(res.tree.children_visits[0].sum())
    out["mcts"] = {"visits_per_s": round(v / wall, 1), "rollouts_per_s": round(v / wall, 1),
                   "net_evals_per_s": round(v / wall, 1), "cpu_per_wall": round((time.process_time() - c0) / wall, 2)}
    apv = players.ApvPlayer(net, PatternPolicy.load("tree19"), PatternPolicy.load("rollout19"), sp)
    try:
        apv.search.run(state, max_sims=64)
        c0 = time.process_time()
        res = apv.search.run(state, max_seconds=seconds)
        cpu = time.process_time() - c0
    finally:
        apv.close()
    out["apv"] = {"visits_per_s": round(res.simulations / res.seconds, 1),
                  "rollouts_per_s": round(res.simulations / res.seconds, 1),
                  "net_evals_per_s": round(res.net_evals / res.seconds, 1),
                  "cpu_per_wall": round(cpu / res.seconds, 2), "threads": apv.search.threads}
    out["apv_vs_mcts_visits"] = round(out["apv"]["visits_per_s"] / out["mcts"]["visits_per_s"], 2)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="b6c64", help="ResNet preset")
    p.add_argument("--sizes", default="9,19")
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--seconds", type=float, default=4.0, help="time per measurement")
    p.add_argument("--preset", default="default")
    p.add_argument("--only-engines", action="store_true", help="measure only the engine's searches (shipped nets)")
    p.add_argument("--inference", default="auto", help="where the engine searches run the nets (alphalite gtp --inference)")
    p.add_argument("--engine-nets", default=None, metavar="NET[,VALUE]",
                   help="the engine searches' nets instead of the shipped defaults: a policy net and a value net, "
                        "or one policy-value net (one size in --sizes)")
    args = p.parse_args()
    engine_nets = None
    if args.engine_nets:
        names = args.engine_nets.split(",")
        engine_nets = (names[0], names[1] if len(names) > 1 else None)

    import jax
    import jax.numpy as jnp

    from alphalite.nn import features, nets
    from search import evaluators

    planes_n = features.num_planes(args.preset)
    out = {"benchmark": "search", "model": args.model, "preset": args.preset, "jax": jax.__version__,
           "backend": jax.default_backend(), "cpu_count": os.cpu_count()}
    sys.path.append(str(Path(__file__).resolve().parent))  # after the packages: `search` stays ours
    from inference import cpu_name

    out["cpu"] = cpu_name()
    out["engines"] = {f"{n}x{n}": bench_engines(n, args.seconds, args.inference, engine_nets)
                      for n in [int(s) for s in args.sizes.split(",")]}
    if args.only_engines:
        print(json.dumps(out))
        return
    for size in [int(s) for s in args.sizes.split(",")]:
        policy = nets.make_model(args.model, size, planes_n)
        value = nets.make_model(args.model + "_value", size, planes_n)
        x = jnp.zeros((1, size, size, planes_n), jnp.float32)
        params = {"policy": policy.init(jax.random.PRNGKey(0), x, train=False),
                  "value": value.init(jax.random.PRNGKey(1), x, train=False)}
        net_fn = evaluators.policy_value_fn(policy, value)
        state = _positions(size, 1)[0]
        rows = {}
        for batch in [int(b) for b in args.batches.split(",")]:
            evals = bench_net(net_fn, params, size, planes_n, batch, args.seconds)
            vps, overhead = bench_search(net_fn, params, state, batch, args.seconds, args.preset)
            rows[f"batch{batch}"] = {"visits_per_s": round(vps, 1), "net_evals_per_s": round(evals, 1),
                                     "overhead": round(overhead, 3)}
        out[f"{size}x{size}"] = rows
        if size == 19:
            out["bf16_19x19"] = bf16_check(args.model, size, planes_n, params, args.preset, args.seconds)
    print(json.dumps(out))


def bf16_check(model_name, size, planes_n, params, preset, seconds):
    import jax.numpy as jnp

    from alphalite.nn import features, nets
    from search import evaluators

    f32 = evaluators.policy_value_fn(nets.make_model(model_name, size, planes_n),
                                     nets.make_model(model_name + "_value", size, planes_n))
    b16 = evaluators.policy_value_fn(nets.make_model(model_name, size, planes_n, dtype=jnp.bfloat16),
                                     nets.make_model(model_name + "_value", size, planes_n, dtype=jnp.bfloat16))
    res = {}
    for name, fn in (("fp32", f32), ("bf16", b16)):
        res[f"{name}_evals_per_s_batch8"] = round(bench_net(fn, params, size, planes_n, 8, seconds), 1)
    states = _real_positions(size, 64)
    planes = np.stack([features.encode(s, preset) for s in states])
    from alphalite.go import board

    legal = np.stack([board.legal_moves(s) for s in states])
    pa, va = (np.asarray(a) for a in f32(params, planes, legal))
    pb, vb = (np.asarray(a) for a in b16(params, planes, legal))
    res.update(positions=len(states), top1_agreement=float((pa.argmax(1) == pb.argmax(1)).mean()),
               max_prior_diff=float(np.abs(pa - pb).max()), max_value_diff=float(np.abs(va - vb).max()),
               speedup=round(res["bf16_evals_per_s_batch8"] / res["fp32_evals_per_s_batch8"], 2))
    return res


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
