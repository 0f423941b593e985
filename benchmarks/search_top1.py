"""Does the search pick better moves than its own priors? On positions of
held-out games (the test split of a built dataset, one random move number
per game between move 10 and 220), how often the `apv` engine's move after
``--seconds`` of search is the move the game's player chose, against the
raw policy's most probable move on the same positions, and how often the
two agree.

A search that reads adds matches to its priors; one whose leaf values are
noise (a few hundred binary rollouts on 19x19) drifts away from them and
loses matches. This is a cheap proxy for strength: a setting it favours
still has to win games (`alphalite arena`).

Prints one JSON line. Each position gets a fresh search (no tree reuse).

    python benchmarks/search_top1.py data/tygem [--checkpoint policy19ag40] [--c-puct 12] [--positions 240]
                                    [--inference onnx]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

# Run as a script, this file's folder comes first on sys.path, where
# benchmarks/search.py would shadow the `search` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from alphalite import runtime  # noqa: E402
from alphalite.data import dataset  # noqa: E402
from alphalite.engine import players  # noqa: E402
from alphalite.go import board  # noqa: E402
from alphalite.runtime import config  # noqa: E402
from search.params import SearchParams  # noqa: E402
from search.rollout import PatternPolicy  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parent))  # after the packages: `search` stays ours
from inference import cpu_name  # noqa: E402


def positions(data, n: int, size: int, seed: int):
    """(state, move played) at one random move number of each of the first
    test games (no handicap, 60 moves at least, the move not a pass)."""
    a = dataset.load_games(data, "test", size).arrays
    rng = np.random.default_rng(seed)
    out = []
    for g in range(len(a["komi"])):
        if len(out) >= n:
            break
        o0, o1 = int(a["move_offsets"][g]), int(a["move_offsets"][g + 1])
        if int(a["setup_offsets"][g + 1]) > int(a["setup_offsets"][g]) or o1 - o0 < 60:
            continue
        m = int(rng.integers(10, min(o1 - o0, 220)))
        state = board.new_game(size, float(a["komi"][g]))
        try:
            for mv in a["moves"][o0:o0 + m]:
                state = board.play(state, int(mv))
        except board.IllegalMove:
            continue
        played = int(a["moves"][o0 + m])
        if played != size * size:
            out.append((state, played))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a built dataset folder (its test split is used)")
    ap.add_argument("--checkpoint", default="policy19ag40", help="policy net (a shipped name or a folder)")
    ap.add_argument("--value-checkpoint", default=None, help="value net beside it (none: rollouts alone)")
    ap.add_argument("--positions", type=int, default=240)
    ap.add_argument("--seconds", type=float, default=0.75, help="search time a position")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--inference", default="auto", choices=players.INFERENCE,
                    help="where the nets run (alphalite gtp --inference)")
    config.add_arguments(ap.add_argument_group("search (as alphalite gtp's flags)"), SearchParams)
    args = ap.parse_args(argv)
    runtime.setup()

    net = players.load_net(args.checkpoint, args.value_checkpoint, args.inference)
    sp = config.from_args(SearchParams, args)
    sp = sp if net.has_value else dataclasses.replace(sp, lam=0.0)
    player = players.ApvPlayer(net, PatternPolicy.load("tree19"), PatternPolicy.load("rollout19"), sp)
    todo = positions(args.data, args.positions, net.size, args.seed)
    player.run(board.new_game(net.size), max_seconds=1.0)  # warm-up
    t0 = time.time()
    search_hits = policy_hits = agree = 0
    rollouts = []
    for state, played in todo:
        prior, _ = net.evaluate(state)
        policy_move = int(np.argmax(prior[:-1]))
        player.forget()
        out = player.run(state, max_seconds=args.seconds)
        search_move = int(out.action)
        rollouts.append(int(out.tree.tree.children_nr[0].sum()))
        search_hits += search_move == played
        policy_hits += policy_move == played
        agree += search_move == policy_move
    n = max(len(todo), 1)
    print(json.dumps({"benchmark": "search_top1", "cpu": cpu_name(), "checkpoint": args.checkpoint,
                      "value_checkpoint": args.value_checkpoint, "inference": net.inference,
                      "search": config.to_dict(sp), "seconds": args.seconds,
                      "positions": len(todo), "search_top1": round(search_hits / n, 4),
                      "policy_top1": round(policy_hits / n, 4), "agree": round(agree / n, 4),
                      "stderr": round((0.25 / n) ** 0.5, 4), "mean_rollouts": int(np.mean(rollouts or [0])),
                      "wall_seconds": round(time.time() - t0, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
