"""How well an ownership head foresees the end of a game, against the
pattern rollouts the engine otherwise judges by: on fresh self-play games
(played out and scored by Tromp-Taylor area, so every point's final owner
is exact), at a few move numbers, the share of owned points whose owner
each estimate names (``metrics.OwnershipScoreStats``), and the score error.

The games are played by ``--player`` (default ``az9``) with AlphaZero's
self-play search (``selfplay.alphazero``, the run's settings: Gumbel root,
32 simulations, komi 7, own area searched); the nets under test never saw
them. Estimates: each ``--net`` (a ``*_aux_pv`` or ``*_aux_value`` net: its
ownership and score heads, one call), ``--playouts`` pattern rollouts
(``decisions.playout_territory`` with ``rollout19``, the engine's judge),
and each net's heads and the rollouts half and half (the apv search's
mixing at its lambda 0.5).

Prints one JSON line.

    python benchmarks/ownership.py --net runs/az9aux [--net ...] [--games 64] [--moves 10,20,40,60,80]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# Run as a script, this file's folder comes first on sys.path, where
# benchmarks/search.py would shadow the `search` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)


def head_fn(path: str):
    """``predict(states) -> (ownership [B, size*size], score [B])`` from
    black's side, by the heads of a net that has them."""
    from alphalite.nn import checkpoint as ckpt
    from alphalite.nn import features, nets
    from alphalite.train.value import make_predict_aux

    info, model, variables = ckpt.load_model(path, ("value", "policy_value"))
    if not nets.has_ownership(model):
        raise SystemExit(f"{path} ({info['model']}) has no ownership head")
    run = make_predict_aux(model)

    def predict(states):
        x = np.stack([features.encode(s, info.get("preset", "default")) for s in states])
        _, own, score = (np.asarray(a, np.float64) for a in run(variables, x))
        mover = np.array([s.to_play for s in states], np.float64)
        return own.reshape(len(states), -1) * mover[:, None], score * mover

    return predict


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net", action="append", required=True, help="net with an ownership head (repeatable)")
    ap.add_argument("--player", default="az9", help="policy-value net that plays the games")
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--moves", default="10,20,40,60,80")
    ap.add_argument("--playouts", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    from alphalite.engine.decisions import playout_territory
    from alphalite.go import board
    from alphalite.nn import checkpoint as ckpt
    from alphalite.train.metrics import OwnershipScoreStats
    from alphalite.zero.learner import build_model
    from search.rollout import PatternPolicy
    from selfplay import alphazero, records
    from selfplay.config import SelfPlayConfig

    t0 = time.perf_counter()
    info, variables = ckpt.load_variables(ckpt.resolve(args.player))
    size = int(info["board_size"])
    net_fn, params = alphazero.pv_net(build_model(info), variables, "onnx")
    with tempfile.TemporaryDirectory() as tmp:
        paths = alphazero.play_games(net_fn, params, args.games, tmp, size=size, seed=args.seed,
                                     config=SelfPlayConfig(games_at_once=min(args.games, 64), komi=7.0, moves="area"))
        games = [records.read_game(p) for p in paths]
    moves = [int(m) for m in args.moves.split(",")]
    states, finals, scores, at = [], [], [], []
    for g in games:
        st = board.new_game(size, g.komi)
        for t, (c, m) in enumerate(zip(g.colours, g.moves)):
            if t in moves:
                states.append(st)
                finals.append(g.ownership.reshape(size, size))
                scores.append(g.score)
                at.append(t)
            st = board.play(st, int(m))
    finals, scores, at = np.stack(finals), np.array(scores, np.float64), np.array(at)
    judges = {}
    for path in args.net:
        own, score = head_fn(path)(states)
        judges[path] = (own, score)
    rollout = PatternPolicy.load("rollout19")
    terr = [playout_territory(s, args.playouts, args.seed, rollout) for s in states]
    rolled = (np.stack([t.ownership for t in terr]), np.array([t.margin for t in terr]))
    for path in args.net:  # what the apv search reports: lambda 0.5 of each
        judges[f"{path} + rollouts"] = tuple(0.5 * a + 0.5 * b for a, b in zip(judges[path], rolled))
    judges[f"rollouts{args.playouts}"] = rolled
    out = {"benchmark": "ownership", "player": args.player, "games": len(games), "positions": len(states),
           "mean_game_length": float(np.mean([len(g.moves) for g in games])), "size": size}
    for name, (own, score) in judges.items():
        stats = OwnershipScoreStats()
        stats.update(own.reshape(finals.shape), finals, score, scores, at)
        r = stats.result()
        out[name] = {"ownership_accuracy": round(r["ownership_accuracy"], 4), "score_mae": round(r["score_mae"], 2),
                     "by_move": {m: {k: round(v, 4) for k, v in b.items()} for m, b in r["by_move"].items()}}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
