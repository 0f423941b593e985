"""Self-play speed: games per hour of policy-only batched self-play and of
MCTS self-play, on 9x9 and 19x19, with the shipped nets.

Prints one JSON line. For each size: ``policy_games_per_hour`` (``--games``
games played at once, one network call per move step, sampling at
temperature 1), ``mcts_games_per_hour`` (``--mcts-games`` games one after
another, ``--visits`` visits a move, leaf batch 8, network priors and
random-rollout leaf values), the mean game length of each, and the net used.
19x19 uses checkpoints/policy19; 9x9 uses checkpoints/policy9 when it exists,
else a freshly initialised b4c32 (said in ``net``: speed does not depend on
the weights, game length does). Games run to two passes or the move cap
(2*size*size+20 unless --max-moves). Compilation is done before timing.

AlphaZero self-play against pgx + mctx (``--parts az``): our
``selfplay.alphazero.run_games`` (``search.multigame``: ``--az-games``
games at once, Gumbel root, ``--sims`` simulations, one ONNX Runtime call
for every game's leaf) and pgx (``go_9x9``/``go_19x19``) + mctx
``gumbel_muzero_policy`` (the same Gumbel settings: 16 considered actions,
``--sims`` simulations, completed-Q by mixed value), vmapped over the same
number of games and jitted once (compiled before timing), with the same
b6c64 policy-value network shape (one trunk, both heads; a plain flax
module on their side, as their examples write it) and the same random
weights on both sides (speed does not depend on the weights). Both play
``--az-moves`` moves in every game from the empty board; timed ``--repeats``
times, alternating, best kept. ``visits_per_s`` = moves x simulations / s.
``vs_pgx_mctx`` is our moves/s over theirs. Ours runs ONNX Runtime the way
``onnx_export.fastest_runner`` finds fastest at that batch on the host as
it is (``ours_onnx_threads``), and keeps the played move's evaluated
subtree as a network cache (``ours_net_evals_per_move``; mctx makes 33: the
root and one per simulation). XLA runs with the flags ``runtime.setup``
sets (YNNPACK off: faster here). Needs the ``bench`` extra (pgx, mctx).

    python benchmarks/selfplay.py [--sizes 9,19] [--games 16] [--mcts-games 2] [--visits 32]
    python benchmarks/selfplay.py --parts az [--az-games 64,16] [--az-moves 12,6]
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
# Run as a script, this folder comes first on sys.path; put the repo there.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)


def _net(size: int):
    import jax

    from alphalite.nn import checkpoint, features, nets

    path = ROOT / "checkpoints" / f"policy{size}"
    if (path / "model.json").exists():
        info, variables = checkpoint.load_variables(path)
        preset = info.get("preset", "default")
        model = nets.make_model(info["model"], size, features.num_planes(preset))
        return model, variables, preset, f"checkpoints/policy{size} ({info['model']})"
    model = nets.make_model("b4c32", size, features.num_planes("default"))
    return model, nets.init_variables(model, jax.random.PRNGKey(0)), "default", \
        f"freshly initialised b4c32 (no checkpoints/policy{size})"


def bench_size(size: int, games: int, mcts_games: int, visits: int, max_moves: int | None) -> dict:
    from search.params import SearchParams
    from selfplay import games as sp

    model, variables, preset, label = _net(size)
    player = sp.NetPlayer("net", model, variables, preset, temperature=1.0)
    rng = np.random.default_rng(0)
    ids = [0] * games
    sp.play_policy_games([player], ids, ids, size, 7.5, rng, max_moves=2)  # compile at this batch shape
    t = time.perf_counter()
    played, _ = sp.play_policy_games([player], ids, ids, size, 7.5, rng, max_moves=max_moves)
    dt = time.perf_counter() - t
    out = {"net": label, "policy_games": games, "policy_seconds": round(dt, 2),
           "policy_games_per_hour": round(games * 3600 / dt, 1),
           "policy_mean_moves": float(np.mean([len(g.moves) for g in played])),
           "policy_capped": int(sum(g.ended != "passes" for g in played))}
    if mcts_games:
        mp = sp.mcts_player(model, variables, preset=preset, visits=visits,
                            search_params=SearchParams(batch_size=8, temperature=1.0, temperature_moves=size))
        sp.play_mcts_games(mp, mp, 1, size, 7.5, rng, max_moves=2)  # compile
        t = time.perf_counter()
        played = sp.play_mcts_games(mp, mp, mcts_games, size, 7.5, rng, max_moves=max_moves)
        dt = time.perf_counter() - t
        out.update({"mcts_games": mcts_games, "mcts_visits": visits, "mcts_seconds": round(dt, 2),
                    "mcts_games_per_hour": round(mcts_games * 3600 / dt, 2),
                    "mcts_mean_moves": float(np.mean([len(g.moves) for g in played])),
                    "mcts_capped": int(sum(g.ended != "passes" for g in played))})
    return out


# ---------------------------------------------------------------- AlphaZero vs pgx + mctx


def _pv_model(size: int):
    """Our b6c64 policy-value net and one random init of it (both sides use these weights)."""
    import jax

    from alphalite.nn import features, nets

    model = nets.make_model("b6c64_pv", size, features.num_planes("default"), conv="xla")
    return model, nets.init_variables(model, jax.random.PRNGKey(0))


def _plain_pv(size: int):
    """The same network as a plain flax module (nn.Conv, nn.BatchNorm), as
    pgx's AlphaZero example writes its net; its parameter names are ours,
    so our variables load as they are."""
    import flax.linen as nn
    import jax.numpy as jnp

    bn = dict(use_running_average=True, momentum=0.9, epsilon=1e-5)

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.relu(nn.BatchNorm(**bn)(nn.Conv(64, (3, 3), use_bias=False)(x)))
            h = nn.BatchNorm(**bn)(nn.Conv(64, (3, 3), use_bias=False)(h))
            return nn.relu(h + x)

    class Trunk(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.relu(nn.BatchNorm(**bn, name="stem_bn")(nn.Conv(64, (3, 3), use_bias=False, name="stem")(x)))
            for i in range(6):
                h = Block(name=f"block{i}")(h)
            return h

    class PV(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = Trunk(name="trunk")(x.astype(jnp.float32))
            p = nn.Conv(2, (1, 1), use_bias=False, name="policy_conv")(h)
            p = nn.relu(nn.BatchNorm(**bn, name="policy_bn")(p))
            logits = nn.Dense(size * size + 1, name="policy_dense")(p.reshape(p.shape[0], -1))
            v = nn.Conv(1, (1, 1), use_bias=False, name="value_conv")(h)
            v = nn.relu(nn.BatchNorm(**bn, name="value_bn")(v))
            v = nn.relu(nn.Dense(256, name="value_hidden")(v.reshape(v.shape[0], -1)))
            return logits, jnp.tanh(nn.Dense(1, name="value_out")(v)[:, 0])

    return PV()


def _pgx_runner(size: int, games: int, sims: int, variables):
    """A jitted pgx + mctx self-play move for ``games`` games (pgx's
    AlphaZero example: Gumbel MuZero, mctx's defaults, auto-reset)."""
    import jax
    import jax.numpy as jnp
    import mctx
    import pgx
    from pgx.experimental import auto_reset

    env = pgx.make(f"go_{size}x{size}")
    net = _plain_pv(size)
    step_fn = jax.vmap(auto_reset(env.step, env.init))

    def recurrent_fn(variables, key, action, state):
        player = state.current_player
        state = jax.vmap(env.step)(state, action)
        logits, value = net.apply(variables, state.observation)
        logits = logits - jnp.max(logits, axis=-1, keepdims=True)
        logits = jnp.where(state.legal_action_mask, logits, jnp.finfo(logits.dtype).min)
        reward = state.rewards[jnp.arange(state.rewards.shape[0]), player]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -jnp.ones_like(value))
        return mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value), state

    @jax.jit
    def move(variables, state, key):
        k1, k2 = jax.random.split(key)
        logits, value = net.apply(variables, state.observation)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
        out = mctx.gumbel_muzero_policy(params=variables, rng_key=k1, root=root, recurrent_fn=recurrent_fn,
                                        num_simulations=sims, invalid_actions=~state.legal_action_mask,
                                        qtransform=mctx.qtransform_completed_by_mix_value, gumbel_scale=1.0)
        keys = jax.random.split(k2, games)
        return step_fn(state, out.action, keys), out.action_weights

    init = jax.jit(jax.vmap(env.init))

    def run(moves: int, seed: int) -> float:
        key = jax.random.PRNGKey(seed)
        state = init(jax.random.split(key, games))
        jax.block_until_ready(state)
        t = time.perf_counter()
        for i in range(moves):
            state, w = move(variables, state, jax.random.fold_in(key, i))
        jax.block_until_ready(w)
        return time.perf_counter() - t

    return run


def _ours_runner(size: int, games: int, sims: int, model, variables):
    from selfplay import alphazero

    net_fn, params = alphazero.pv_net(model, variables, "onnx", pad_to=games)  # ORT threads tuned at this batch
    cfg = alphazero.SelfPlayConfig(games_at_once=games, simulations=sims, root="gumbel", max_considered=16)

    def run(moves: int, seed: int) -> float:
        done = [0]

        def stop():  # polled once a move step
            done[0] += 1
            return done[0] > moves

        t = time.perf_counter()
        stats = alphazero.run_games(net_fn, params, games, size=size, config=cfg, gen=np.random.default_rng(seed),
                                    stop=stop)
        dt = time.perf_counter() - t
        assert stats["moves"] == moves * games and stats["leaves"] <= stats["net_calls"] * games
        run.evals_per_move = stats["leaves"] / stats["moves"]
        return dt

    run.setting = net_fn.setting
    return run


def bench_az(size: int, games: int, moves: int, sims: int, repeats: int) -> dict:
    model, variables = _pv_model(size)
    ours = _ours_runner(size, games, sims, model, variables)
    theirs = _pgx_runner(size, games, sims, variables)
    t0 = time.perf_counter()
    ours(1, 0)
    theirs(1, 0)  # compile (outside the timing)
    compile_s = time.perf_counter() - t0
    t_ours, t_theirs = [], []
    for r in range(repeats):
        t_ours.append(ours(moves, r + 1))
        t_theirs.append(theirs(moves, r + 1))
    n = games * moves
    mo, mt = n / min(t_ours), n / min(t_theirs)
    return {"games_at_once": games, "moves_each": moves, "simulations": sims, "net": "b6c64_pv (random init)",
            "ours_moves_per_s": round(mo, 2), "ours_visits_per_s": round(mo * sims, 1),
            "pgx_mctx_moves_per_s": round(mt, 2), "pgx_mctx_visits_per_s": round(mt * sims, 1),
            "ours_seconds": [round(x, 2) for x in t_ours], "pgx_mctx_seconds": [round(x, 2) for x in t_theirs],
            "warmup_seconds": round(compile_s, 1), "ratio": round(mo / mt, 3),
            "ours_net_evals_per_move": round(ours.evals_per_move, 2), "ours_onnx_threads": ours.setting}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="9,19")
    ap.add_argument("--games", type=int, default=16, help="policy-only games, played as one batch")
    ap.add_argument("--mcts-games", type=int, default=2, help="MCTS games (0 = skip)")
    ap.add_argument("--visits", type=int, default=32, help="MCTS visits a move")
    ap.add_argument("--max-moves", type=int, default=0, help="move cap (0 = 2*size*size+20)")
    ap.add_argument("--parts", default="policy,az", help="policy (policy and MCTS games), az (ours vs pgx + mctx)")
    ap.add_argument("--az-games", default="64,16", help="AlphaZero games at once, per size")
    ap.add_argument("--az-moves", default="12,6", help="AlphaZero moves timed in every game, per size")
    ap.add_argument("--sims", type=int, default=32, help="AlphaZero simulations a move")
    ap.add_argument("--repeats", type=int, default=2, help="AlphaZero timings per side (best kept)")
    args = ap.parse_args()
    parts = args.parts.split(",")
    if "az" in parts:
        import importlib.util

        missing = [m for m in ("pgx", "mctx") if importlib.util.find_spec(m) is None]
        if missing:
            print(f"selfplay benchmark: {', '.join(missing)} not installed (pip install -e '.[bench]'); "
                  "the AlphaZero comparison is skipped", file=sys.stderr)
            parts.remove("az")
    res = {"cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2)}
    sizes = [int(s) for s in args.sizes.split(",")]
    az_games = [int(x) for x in args.az_games.split(",")]
    az_moves = [int(x) for x in args.az_moves.split(",")]
    for i, size in enumerate(sizes):
        key = f"{size}x{size}"
        if "policy" in parts:
            res[key] = bench_size(size, args.games, args.mcts_games, args.visits, args.max_moves or None)
        if "az" in parts:
            az = bench_az(size, az_games[min(i, len(az_games) - 1)], az_moves[min(i, len(az_moves) - 1)],
                          args.sims, args.repeats)
            res[f"az_{key}"] = az
            res.setdefault("vs_pgx_mctx", {})[key] = az["ratio"]
    res["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(res, sort_keys=True))


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
