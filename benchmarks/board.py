"""Board speed: random playouts inside Numba, and the same games through sgfmill.

Prints one JSON line. Playouts pick uniformly among legal moves that do not
fill the mover's own eyes and pass only when none is left (board.playout);
many games run in one Numba call, resetting a scratch board with copy_board,
so no Python runs per game or per move. "light" is simple ko (no superko
hashing or history, as engines do in rollouts); "full" is positional superko
with the history kept. Single-threaded: one core. The first call of every
kernel (JIT compile or cache load) happens before the clock starts; each
figure is the best of a few repeats, the machine being shared. The drivers
below are compiled afresh on every run, not cached: Numba's cache checks
only the file a function lives in, so a cached driver would keep running the
board kernels from before an edit of alphalite/go/board.py.

The sgfmill figure replays recorded full-rules games of ours through
sgfmill's pure-Python ``boards.Board.play`` (captures only: no legality or
ko checks, no move choice); the same games replayed through our
``board.replay`` (legality and superko checked, in Numba) give the like-for-like
ratio ``speedup_replay_vs_sgfmill``; the playout ratios compare our move
generation plus play with sgfmill's play alone. sgfmill's figure is one
pass (best of one), ours best of three.

    python benchmarks/board.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit
from sgfmill import boards

from alphalite.go import board as bd
from alphalite.go import coords


@njit
def run_playouts(size, superko, ngames, seed, zob):
    """Play ``ngames`` random games; return total moves (passes included)."""
    max_moves = 3 * size * size
    template = bd.init_board(size, superko, False, zob, max_moves + 16)
    B = bd.init_board(size, superko, False, zob, max_moves + 16)
    rng = np.empty(1, np.int64)
    rng[0] = seed
    total = 0
    for _ in range(ngames):
        bd.copy_board(B, template)
        total += bd.playout(B, rng, max_moves)
    return total


@njit
def record_playouts(size, superko, ngames, seed, zob, moves, lengths, finals):
    """The same games as run_playouts(seed), move by move into ``moves``."""
    max_moves = 3 * size * size
    template = bd.init_board(size, superko, False, zob, max_moves + 16)
    B = bd.init_board(size, superko, False, zob, max_moves + 16)
    rng = np.empty(1, np.int64)
    rng[0] = seed
    W = size + 2
    for g in range(ngames):
        bd.copy_board(B, template)
        n = 0
        while n < max_moves and B.meta[bd.M_PASSES] < 2:
            bd.playout(B, rng, 1)
            moves[g, n] = B.meta[bd.M_LAST]
            n += 1
        lengths[g] = n
        color = B.color
        for r in range(size):
            for c in range(size):
                finals[g, r * size + c] = color[(r + 1) * W + c + 1]


@njit
def replay_games(size, zob, moves, lengths):
    """Replay recorded games through board.replay (full legality and superko);
    returns moves replayed, or -1 if one was refused."""
    max_moves = 3 * size * size
    template = bd.init_board(size, True, False, zob, max_moves + 16)
    B = bd.init_board(size, True, False, zob, max_moves + 16)
    total = 0
    for g in range(moves.shape[0]):
        bd.copy_board(B, template)
        if bd.replay(B, moves[g], lengths[g]) != lengths[g]:
            return -1
        total += lengths[g]
    return total


def timed(size, superko, ngames, repeats, seed=12345):
    zob = bd.zobrist_table()
    run_playouts(size, superko, 2, seed, zob)  # compile / load cache
    best = None
    for _ in range(repeats):
        t = time.perf_counter()
        total = run_playouts(size, superko, ngames, seed, zob)
        dt = time.perf_counter() - t
        best = dt if best is None or dt < best else best
    return {"games_per_s": round(ngames / best), "moves_per_s": round(total / best),
            "moves_per_game": round(total / ngames, 1)}


def sgfmill_replay(size, ngames, seed=777):
    zob = bd.zobrist_table()
    cap = 3 * size * size
    moves = np.full((ngames, cap), -1, np.int64)
    lengths = np.zeros(ngames, np.int64)
    finals = np.zeros((ngames, size * size), np.int8)
    record_playouts(size, True, ngames, seed, zob, moves, lengths, finals)
    games = []
    for g in range(ngames):
        seq = []
        for i in range(int(lengths[g])):
            m = int(moves[g, i])
            seq.append(None if m == size * size else coords.to_sgfmill(m, size))
        games.append(seq)
    t = time.perf_counter()
    total = 0
    ends = []
    for seq in games:
        b = boards.Board(size)
        colour = "b"
        for pt in seq:
            if pt is not None:
                b.play(pt[0], pt[1], colour)
            colour = "w" if colour == "b" else "b"
        total += len(seq)
        ends.append(b)
    dt = time.perf_counter() - t
    replay_games(size, zob, moves[:1], lengths[:1])  # compile / load cache
    ours = None
    for _ in range(3):
        t0 = time.perf_counter()
        n = replay_games(size, zob, moves, lengths)
        d = time.perf_counter() - t0
        ours = d if ours is None or d < ours else ours
    assert n == total, "our board refused a move of its own game"
    # Same final positions, or the comparison would be meaningless.
    agree = True
    for b, fin in zip(ends, finals):
        for m in range(size * size):
            r, c = coords.to_sgfmill(m, size)
            v = {"b": 1, "w": -1, None: 0}[b.get(r, c)]
            if v != fin[m]:
                agree = False
    return {"games": ngames, "moves_per_s": round(total / dt), "final_positions_agree": agree,
            "ours_replay_moves_per_s": round(total / ours)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer games (a smoke run)")
    args = ap.parse_args(argv)
    k = 10 if args.quick else 1
    reps = 1 if args.quick else 3
    out = {"benchmark": "board", "threads": 1}
    for size, light_games, full_games, replay_games in ((9, 40000, 20000, 400), (19, 6000, 3000, 200)):
        light = timed(size, False, light_games // k, reps)
        full = timed(size, True, full_games // k, reps)
        sgf = sgfmill_replay(size, max(replay_games // k, 10))
        out[f"{size}x{size}"] = {
            "light": light,
            "full_superko": full,
            "sgfmill_replay": sgf,
            "speedup_light_vs_sgfmill": round(light["moves_per_s"] / sgf["moves_per_s"], 1),
            "speedup_full_vs_sgfmill": round(full["moves_per_s"] / sgf["moves_per_s"], 1),
            "speedup_replay_vs_sgfmill": round(sgf["ours_replay_moves_per_s"] / sgf["moves_per_s"], 1),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
