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

    python benchmarks/selfplay.py [--sizes 9,19] [--games 16] [--mcts-games 2] [--visits 32]
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
                            search_params=SearchParams(batch_size=8))
        sp.play_mcts_games(mp, mp, 1, size, 7.5, rng, max_moves=2)  # compile
        t = time.perf_counter()
        played = sp.play_mcts_games(mp, mp, mcts_games, size, 7.5, rng, max_moves=max_moves,
                                    temperature_moves=size)
        dt = time.perf_counter() - t
        out.update({"mcts_games": mcts_games, "mcts_visits": visits, "mcts_seconds": round(dt, 2),
                    "mcts_games_per_hour": round(mcts_games * 3600 / dt, 2),
                    "mcts_mean_moves": float(np.mean([len(g.moves) for g in played])),
                    "mcts_capped": int(sum(g.ended != "passes" for g in played))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="9,19")
    ap.add_argument("--games", type=int, default=16, help="policy-only games, played as one batch")
    ap.add_argument("--mcts-games", type=int, default=2, help="MCTS games (0 = skip)")
    ap.add_argument("--visits", type=int, default=32, help="MCTS visits a move")
    ap.add_argument("--max-moves", type=int, default=0, help="move cap (0 = 2*size*size+20)")
    args = ap.parse_args()
    res = {"cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2)}
    for size in [int(s) for s in args.sizes.split(",")]:
        res[f"{size}x{size}"] = bench_size(size, args.games, args.mcts_games, args.visits, args.max_moves or None)
    res["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(res, sort_keys=True))


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
