"""Rollout speed: uniform playouts (board.playout, search/rollout.py's) and
pattern rollouts (AlphaGo's rollout policy, alphalite.go.patterns) from the
empty board, 9x9 and 19x19, in the same run.

Prints one JSON line: moves/s and full-game rollouts/s per policy and size,
and the host CPU. One core, simple ko (as rollouts in search use), komi 7.5,
cap 3*n*n+20 moves. Each figure is the best of three timed repeats after a
warm-up call. The pattern policy is the shipped ``rollout19`` unless
``--policy`` names another (its 19x19 weights serve 9x9 too: the features
are local).

    python benchmarks/rollout.py [--seconds 2] [--policy rollout19]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit

from alphalite.go import board, patterns
from alphalite.nn import checkpoint
from inference import cpu_name

# (benchmarks/search.py shadows the search package here, so its two helpers are inlined.)


def load_policy(ref):
    d = checkpoint.find_model_dir(ref)
    return patterns.load_policy(d, checkpoint.read_model_info(d))


@njit
def _uniform(base, scratch, rng, max_moves, n):
    moves = 0
    for _ in range(n):
        board.copy_board(scratch, base)
        moves += board.playout(scratch, rng, max_moves)
    return moves


@njit
def _pattern(base, scratch, rng, max_moves, n, rt):
    moves = 0
    S0 = patterns.new_state(base)
    S = patterns.new_state(base)
    for _ in range(n):
        board.copy_board(scratch, base)
        patterns.copy_state(S, S0)
        moves += patterns.rollout(scratch, S, rt, rng, max_moves)
    return moves


def _time(fn, seconds):
    fn(1)
    best = None
    for _ in range(3):
        n, t0, moves = 0, time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds / 3:
            moves += fn(8)
            n += 8
        dt = time.perf_counter() - t0
        if best is None or n / dt > best[0]:
            best = (n / dt, moves / dt)
    return {"rollouts_per_s": round(best[0], 1), "moves_per_s": round(best[1])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case")
    ap.add_argument("--policy", default="rollout19")
    args = ap.parse_args(argv)
    rt = patterns.rollout_tables(*load_policy(args.policy)[:2])
    res = {"benchmark": "rollout", "cpu": cpu_name(), "policy": args.policy, "threads": 1}
    for size in (9, 19):
        mm = board.default_max_moves(size)
        base = board.init_board(size, False, False, board.zobrist_table(), 1)
        scratch = board.init_board(size, False, False, board.zobrist_table(), 1)
        rng = np.array([size], np.int64)
        res[f"uniform_{size}"] = _time(lambda n: _uniform(base, scratch, rng, mm, n), args.seconds)
        res[f"pattern_{size}"] = _time(lambda n: _pattern(base, scratch, rng, mm, n, rt), args.seconds)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
