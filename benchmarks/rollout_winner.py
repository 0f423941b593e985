"""What rollouts are worth to a search: from positions of held-out games
(the test split of a built dataset) after 80, 130 and 180 moves, how often
the majority of 64 rollouts names the game's winner, pattern rollouts
(AlphaGo's rollout policy) against uniform ones (board.playout), on the same
positions with the same komi.

Prints one JSON line: per policy and move number the positions, the
accuracy and its binomial standard error. Games without a known winner or
shorter than the move number are skipped; a tie of the 64 counts as wrong.

    python benchmarks/rollout_winner.py /work/data/tygem [--games 100] [--policy rollout19]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit

from alphalite.data import dataset
from alphalite.go import board, patterns
from inference import cpu_name
from rollout import load_policy


@njit
def _votes(B, scratch, rng, max_moves, komi, n, rt, use_patterns):
    """Rollouts from ``B`` that black wins, of ``n``."""
    S0 = patterns.state_for(B)
    S = patterns.new_state(B)
    black_wins = 0
    for _ in range(n):
        board.copy_board(scratch, B)
        if use_patterns:
            patterns.copy_state(S, S0)
            patterns.rollout(scratch, S, rt, rng, max_moves)
        else:
            board.playout(scratch, rng, max_moves)
        b, wh = board.area(scratch)
        if b - wh - komi > 0:
            black_wins += 1
    return black_wins


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a built dataset folder (its test split is used)")
    ap.add_argument("--games", type=int, default=100, help="test games to use (the first ones)")
    ap.add_argument("--rollouts", type=int, default=64)
    ap.add_argument("--moves", default="80,130,180")
    ap.add_argument("--policy", default="rollout19")
    ap.add_argument("--beta", type=float, default=1.0, help="scale the pattern weights (inverse temperature)")
    args = ap.parse_args(argv)
    tab, w, _ = load_policy(args.policy)
    rt = patterns.rollout_tables(tab, w * np.float32(args.beta))
    games = dataset.load_games(args.data, "test", 19)
    a = games.arrays
    move_numbers = [int(x) for x in args.moves.split(",")]
    mm = board.default_max_moves(19)
    hits = {(k, m): 0 for k in ("uniform", "pattern") for m in move_numbers}
    count = {m: 0 for m in move_numbers}
    rng = np.array([1], np.int64)
    t0 = time.time()
    used = 0
    for g in range(len(games)):
        if used >= args.games:
            break
        winner = int(a["winner"][g])
        o0, o1 = int(a["move_offsets"][g]), int(a["move_offsets"][g + 1])
        if winner == 0 or int(a["setup_offsets"][g + 1]) > int(a["setup_offsets"][g]):
            continue  # unknown result, or handicap stones
        used += 1
        for m in move_numbers:
            if o1 - o0 < m:
                continue
            B = board.init_board(19, False, False, board.zobrist_table(), 1)
            if board.replay(B, a["moves"][o0:o0 + m].astype(np.int64), m) != m:
                continue
            scratch = board.init_board(19, False, False, board.zobrist_table(), 1)
            count[m] += 1
            for kind in ("uniform", "pattern"):
                bw = _votes(B, scratch, rng, mm, float(a["komi"][g]), args.rollouts, rt, kind == "pattern")
                black_says = 1 if 2 * bw > args.rollouts else (-1 if 2 * bw < args.rollouts else 0)
                hits[(kind, m)] += int(black_says == winner)
    res = {"benchmark": "rollout_winner", "cpu": cpu_name(), "policy": args.policy, "beta": args.beta, "games": used,
           "rollouts": args.rollouts, "seconds": round(time.time() - t0, 1)}
    for kind in ("uniform", "pattern"):
        res[kind] = {}
        for m in move_numbers:
            n = max(count[m], 1)
            p = hits[(kind, m)] / n
            res[kind][str(m)] = {"positions": count[m], "accuracy": round(p, 4),
                                 "stderr": round((p * (1 - p) / n) ** 0.5, 4)}
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
