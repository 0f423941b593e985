"""Encoding speed of the feature presets on real 19x19 positions.

Replays the first ``--games`` games of the Tygem test split (every
``--stride``-th position kept, so openings, middle games and endgames all
count) and times ``features.encode_into`` per preset over those positions,
one core, best of three after a warm-up call. Prints one JSON line with
positions/s per preset.

    python benchmarks/features.py [--data /work/data/tygem] [--games 20] [--stride 5]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from alphalite import runtime
from alphalite.data.dataset import load_games
from alphalite.go import board
from alphalite.nn import features


def positions(data: str, games: int, stride: int) -> list:
    g = load_games(data, "test", 19)
    off, mv, cl = g["move_offsets"], g["moves"], g["colors"]
    out = []
    for i in range(min(games, len(g))):
        s = board.new_game(19)
        for j, k in enumerate(range(off[i], off[i + 1])):
            if j % stride == 0:
                out.append(s.board_tuple)
            s = board.play(s, int(mv[k]), int(cl[k]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/data/tygem")
    ap.add_argument("--games", type=int, default=20)
    ap.add_argument("--stride", type=int, default=5)
    ap.add_argument("--presets", default="default,alphago40,alphago48")
    a = ap.parse_args()
    runtime.setup()
    pos = positions(a.data, a.games, a.stride)
    result = {"bench": "features", "board": 19, "positions": len(pos)}
    for name in a.presets.split(","):
        pid = features.preset_id(name)
        out = np.zeros((19, 19, features.num_planes(name)), np.float32)
        features.encode_into(pos[0], pid, out)  # compile or cache load
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for B in pos:
                features.encode_into(B, pid, out)
            best = min(best, time.perf_counter() - t)
        result[f"{name}_pos_per_s"] = round(len(pos) / best, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
