"""How well can anything predict the winner of value-data games at move M?

Plays ``--positions`` games with the SL policy (temperature 1, the
value-data candidate rule) to move M, then ``--continuations`` games from
each of those positions with the RL policy at ``--temperature`` to the end
(two passes or the move cap), scored by Tromp-Taylor. The games after M are
the value-data protocol's (``selfplay.valuedata``; no random move here).

``vote_accuracy``: each continuation's winner predicted by the majority of
the position's other continuations (ties, possible with an odd count, count
half). It estimates what a predictor that knew each position's true win
rate p would score, mean max(p, 1 - p), from below: the vote of 7 samples
errs more often (at p = 0.7 it scores about 0.65). With 64 positions its
own sampling error is several points.
``settled``: share of positions whose continuations all agree.

Prints one JSON line:

    python benchmarks/value_ceiling.py [--moves 130,180] [--positions 64] [--continuations 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)


def play_on(boards, net, temperature, rng, until):
    """Lock-step policy moves on ``boards`` (all with the same colour to move)
    until two passes or ``until`` moves."""
    from alphalite.go import board
    from alphalite.nn import features
    from selfplay.games import policy_moves

    size = net["size"]
    pid = features.preset_id(net["preset"])
    planes = np.zeros((len(boards), size, size, features.num_planes(net["preset"])), np.float32)
    masks = np.ones((len(boards), size * size + 1), np.bool_)
    own = np.zeros(size * size, np.int8)
    meta = [b.meta for b in boards]
    live = np.array([m[board.M_PASSES] < 2 and m[board.M_MOVES] < until for m in meta])
    while live.any():
        rows = np.flatnonzero(live)
        picks = policy_moves(boards, rows, pid, own, planes, masks, False, net["model"], net["variables"],
                             temperature, rng, True)
        for g, m in zip(rows, picks):
            board.play_flat(boards[g], int(m), meta[g][board.M_TOPLAY])
            live[g] = meta[g][board.M_PASSES] < 2 and meta[g][board.M_MOVES] < until


def main() -> None:
    from alphalite.go import board
    from selfplay import valuedata
    from alphalite.go.board import default_max_moves

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sl", default=str(ROOT / "checkpoints" / "policy19"))
    ap.add_argument("--rl", default=None, help="default: checkpoints/rl<size>, else --sl")
    ap.add_argument("--moves", default="130,180")
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--continuations", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--komi", type=float, default=7.5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sl = valuedata.load_policy(a.sl)
    size = sl["size"]
    rl_path = a.rl or valuedata.default_rl_checkpoint(size)
    rl = valuedata.load_policy(rl_path, size) if rl_path else sl
    cap = default_max_moves(size)
    rng = np.random.default_rng(a.seed)
    N, K = a.positions, a.continuations
    out = {"sl": a.sl, "rl": rl_path or a.sl, "positions": N, "continuations": K, "temperature": a.temperature,
           "komi": a.komi, "size": size}
    for M in sorted(int(m) for m in a.moves.split(",")):
        t0 = time.time()
        pre = [board.new_game(size, a.komi).copy_tuple(extra_history=cap + 1) for _ in range(N)]
        play_on(pre, sl, 1.0, rng, M)
        pre = [b for b in pre if b.meta[board.M_MOVES] == M]  # games over before M drop out
        copies = []
        for b in pre:
            for _ in range(K):
                c = board.new_game(size, a.komi).copy_tuple(extra_history=cap + 1)
                board.copy_board(c, b)
                copies.append(c)
        play_on(copies, rl, a.temperature, rng, cap)
        wins = np.array([board.area(c)[0] - board.area(c)[1] - a.komi > 0 for c in copies]).reshape(len(pre), K)
        others = (wins.sum(1, keepdims=True) - wins) / (K - 1)  # the other continuations' black share
        vote = np.where(others == 0.5, 0.5, (others > 0.5) == wins)
        out[f"vote_accuracy_{M}"] = round(float(vote.mean()), 4)
        out[f"settled_{M}"] = round(float(np.mean(wins.all(1) | ~wins.any(1))), 4)
        out[f"black_wins_{M}"] = round(float(wins.mean()), 4)
        out[f"positions_{M}"] = len(pre)
        out[f"seconds_{M}"] = round(time.time() - t0, 1)
    print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
