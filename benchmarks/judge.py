"""How well the engine's judge settles finished games: dead stones and the
score from uniform random playouts, from pattern rollouts
(``checkpoints/rollout19``), and from the apv engine's own search (its
ownership, ``ApvPlayer.territory``, with the shipped 19x19 nets as
``alphalite gtp`` loads them; ``--value NET`` adds the search with that
value net beside the default policy, e.g. one with an ownership head),
each through ``decisions.Judge``, on Tygem games that ended by count
(from an archive, or ``--data``: a dataset's held-out test games), with
GNU Go's ``final_status_list dead`` and the recorded result as the
reference.

Prints one JSON line: per judge, the share of stones whose life/death agrees
with GNU Go, the share of games where every stone agrees, and the share of
games whose winner after removing the dead stones matches the record.

``--records GLOB`` judges arena records instead (``alphalite arena``'s
``games/*.sgf``, any size) that ended by two passes: the engine's
``final_score`` as ``alphalite gtp`` answers it (the board size's default
engine, ``loadsgf`` of the whole game) against the result the arena's
referee gave (RE). Prints the share with the same score and with the same
winner, and the games that differ.

    python benchmarks/judge.py [--archive ../shared/data/tygem-2011-11.tar.gz | --data data/tygem]
        [--games 30] [--playouts 128] [--value NET ...]
    python benchmarks/judge.py --records 'docs/games/*/games/*.sgf' [--size 9] [--games 400]
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

# Run as a script, this file's folder comes first on sys.path, where
# benchmarks/search.py would shadow the `search` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)


def counted_games(archive, n):
    from alphalite.go import sgf

    out = []
    with tarfile.open(archive) as tar:
        for m in tar:
            if not m.name.endswith(".sgf"):
                continue
            try:
                rec = sgf.read_sgf(tar.extractfile(m).read())
            except Exception:  # noqa: BLE001 - a broken record is skipped
                continue
            if rec.size != 19 or rec.result_kind != "score" or rec.handicap:
                continue
            out.append(rec)
            if len(out) >= n:
                break
    return out


class Record(NamedTuple):
    komi: float
    moves: list  # (colour, flat move)
    result: str


def held_out_games(data, n):
    """The first ``n`` counted 19x19 test games of a dataset, no handicap or setup."""
    from alphalite.data import dataset

    g = dataset.load_games(data, "test", 19)
    off, soff = g["move_offsets"], g["setup_offsets"]
    out = []
    for i in range(len(g)):
        if np.isfinite(g["margin"][i]) and not g["handicap"][i] and soff[i + 1] == soff[i]:
            mv = [(int(c), int(m)) for c, m in zip(g["colors"][off[i]:off[i + 1]], g["moves"][off[i]:off[i + 1]])]
            out.append(Record(float(g["komi"][i]), mv, str(g["result"][i])))
            if len(out) >= n:
                break
    return out


def two_pass_records(pattern, n, size=None):
    """Paths of the first ``n`` arena records matching ``pattern`` (sorted)
    whose game ended by two passes (on a ``size`` board, when given), with
    their referee's result."""
    import glob

    from alphalite.go import sgf

    out = []
    for path in sorted(glob.glob(pattern)):
        data = Path(path).read_bytes()
        if b"end: two passes" not in data:
            continue
        rec = sgf.read_sgf(data)
        if size is not None and rec.size != size:
            continue
        out.append((path, rec.result))
        if len(out) >= n:
            break
    return out


def judge_records(pattern, n, size=None):
    """``--records``: each record's ``final_score`` by the default engine."""
    from alphalite.cli import build_parser
    from alphalite.go import sgf
    from alphalite.gtp.engine import Engine, config_from_args

    engine = Engine(config_from_args(build_parser().parse_args(["gtp"])), log=lambda msg: None)
    engine.wait_ready()
    games = same_score = same_winner = 0
    differ, seconds = [], 0.0
    for path, result in two_pass_records(pattern, n, size):
        answer = engine.handle(f"loadsgf {Path(path).resolve()}")
        if not answer.startswith("="):
            continue
        t = time.perf_counter()
        ours = engine.handle("final_score").lstrip("= ").strip()
        seconds += time.perf_counter() - t
        games += 1
        winner = sgf.parse_result(result)[0]
        same_score += ours == result
        same_winner += sgf.parse_result(ours)[0] == winner
        if ours != result:
            differ.append({"record": path, "referee": result, "final_score": ours})
    return {"benchmark": "judge", "records": pattern, "size": size, "games": games,
            "same_score": round(same_score / max(games, 1), 4), "same_winner": round(same_winner / max(games, 1), 4),
            "seconds_per_game": round(seconds / max(games, 1), 3), "differ": differ}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archive", default="../shared/data/tygem-2011-11.tar.gz")
    p.add_argument("--games", type=int, default=30)
    p.add_argument("--playouts", type=int, default=128)
    p.add_argument("--data", help="a dataset folder: its counted test games instead of --archive")
    p.add_argument("--value", action="append", default=[], help="also judge by the search with this value net")
    p.add_argument("--records", help="arena records (a glob): final_score against the referee's result")
    p.add_argument("--size", type=int, help="--records: only games on this board size")
    args = p.parse_args()
    if args.records:
        print(json.dumps(judge_records(args.records, args.games, args.size)))
        return

    from alphalite.engine import players
    from alphalite.engine.decisions import Judge
    from alphalite.go import board, coords
    from alphalite.go.gtpclient import GtpClient, find_gnugo
    from alphalite.nn import checkpoint
    from search.rollout import PatternPolicy

    policy = PatternPolicy.load("rollout19")
    nets = [str(checkpoint.shipped(x)) for x in checkpoint.DEFAULT_NETS[19]]
    engines = {"search": players.ApvPlayer(players.load_net(*nets), PatternPolicy.load("tree19"), policy)}
    for v in args.value:
        engines[f"search:{Path(v).name}"] = players.ApvPlayer(players.load_net(nets[0], v), PatternPolicy.load("tree19"),
                                                              policy)
    for engine in engines.values():
        engine.territory(board.new_game(19, 6.5), 8)  # compiled before the clock
    judges = {"uniform": Judge(args.playouts, 1), "patterns": Judge(args.playouts, 1, policy=policy),
              **{k: Judge(args.playouts, 1, search=e.territory) for k, e in engines.items()}}
    stats = {k: {"stones": 0, "agree": 0, "games_all_agree": 0, "winner_ok": 0, "seconds": 0.0} for k in judges}
    games = 0
    with GtpClient([find_gnugo(), "--mode", "gtp", "--chinese-rules"], timeout=120) as gg:
        for rec in held_out_games(args.data, args.games) if args.data else counted_games(args.archive, args.games):
            s = board.new_game(19, rec.komi)
            try:
                for colour, mv in rec.moves:
                    s = board.play(s, mv, colour)
            except board.IllegalMove:
                continue
            gg.send("boardsize 19")
            gg.send("clear_board")
            gg.send(f"komi {rec.komi}")
            for colour, mv in rec.moves:
                gg.send(f"play {'b' if colour == 1 else 'w'} {coords.to_gtp(mv, 19)}")
            words = gg.send("final_status_list dead", timeout=300).split()
            ref = {coords.from_gtp(w, 19) for w in words}
            stones = np.flatnonzero(board.stones(s).ravel() != 0)
            want_black = rec.result.startswith("B")
            games += 1
            for name, judge in judges.items():
                t = time.perf_counter()
                score, dead = judge(s)
                st = stats[name]
                st["seconds"] += time.perf_counter() - t
                dead = set(int(x) for x in dead)
                agree = sum((int(q) in dead) == (int(q) in ref) for q in stones)
                st["stones"] += len(stones)
                st["agree"] += agree
                st["games_all_agree"] += agree == len(stones)
                st["winner_ok"] += (score > 0) == want_black
    for engine in engines.values():
        engine.close()
    out = {"benchmark": "judge", "games": games, "playouts": args.playouts, "search_nets": nets,
           "source": args.data or args.archive, "values": args.value}
    for name, st in stats.items():
        out[name] = {"stone_agreement": round(st["agree"] / max(st["stones"], 1), 4),
                     "games_all_agree": round(st["games_all_agree"] / max(games, 1), 3),
                     "winner_matches_record": round(st["winner_ok"] / max(games, 1), 3),
                     "seconds_per_game": round(st["seconds"] / max(games, 1), 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
