"""Self-play games on disk: compact ``.npz`` training records and SGF.

A record ``<name>.npz`` holds ``moves`` int16 [T] (flat, pass = size*size),
``colours`` int8 [T] (+1 black, -1 white), ``score`` float (Tromp-Taylor
black minus white minus komi), ``winner`` int8, ``komi``, ``size``, ``black``
and ``white`` (player ids), ``ended`` ("passes", "move cap" or "resign"). Records
of searched self-play (``selfplay.alphazero``) also hold the search's
policy targets, sparse (``policy_offsets`` int32 [T+1], ``policy_moves``
int16, ``policy_probs`` float16), ``root_values`` float32 [T], the final
``ownership`` int8 [size*size] and ``resigned`` (the colour, 0: none).

Every file is written under a hidden temporary name in the same folder and
renamed into place (``os.replace``), so a killed writer leaves at worst a
``.<name>.*.tmp`` file. Readers take only ``*.npz`` names that do not start
with a dot and skip files that do not load, so nothing half-written is read.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Iterator

import numpy as np

from alphalite.go import sgf
from alphalite.runtime import files
from selfplay.games import Game


# the search's arrays a record may hold, and their dtypes
_SEARCH_FIELDS = {"policy_offsets": np.int32, "policy_moves": np.int16, "policy_probs": np.float16,
                  "root_values": np.float32, "ownership": np.int8}


def game_to_sgf(game: Game) -> bytes:
    rec = sgf.GameRecord(size=game.size, komi=game.komi, rules="Chinese", black_player=game.black,
                         white_player=game.white, result=game.result, winner=game.winner,
                         moves=tuple((int(c), int(m)) for c, m in zip(game.colours, game.moves)))
    return sgf.write_sgf(rec)


def write_game(folder: str | os.PathLike, name: str, game: Game, *, sgf: bool = True) -> Path:
    """Write ``<folder>/<name>.npz`` (and ``<name>.sgf``) atomically; returns the npz path."""
    folder = Path(folder)
    if sgf:
        data = game_to_sgf(game)
        files.write_atomic(folder / f"{name}.sgf", lambda f: f.write(data))
    path = folder / f"{name}.npz"
    extra = {k: np.asarray(getattr(game, k), dt) for k, dt in _SEARCH_FIELDS.items() if getattr(game, k) is not None}
    if game.resigned:
        extra["resigned"] = np.int8(game.resigned)
    files.write_atomic(path, lambda f: np.savez(
        f, moves=np.asarray(game.moves, np.int16), colours=np.asarray(game.colours, np.int8),
        score=np.float64(game.score), winner=np.int8(game.winner), komi=np.float64(game.komi),
        size=np.int16(game.size), black=np.str_(game.black), white=np.str_(game.white),
        ended=np.str_(game.ended), **extra))
    return path


def read_game(path: str | os.PathLike) -> Game:
    """One record; raises ValueError (one line) if the file is not a record."""
    try:
        with np.load(path, allow_pickle=False) as z:
            extra = {k: z[k].astype(dt) for k, dt in _SEARCH_FIELDS.items() if k in z.files}
            return Game(int(z["size"]), float(z["komi"]), z["moves"].astype(np.int16),
                        z["colours"].astype(np.int8), float(z["score"]), str(z["black"]),
                        str(z["white"]), str(z["ended"]), resigned=int(z["resigned"]) if "resigned" in z.files else 0,
                        **extra)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{path}: not a self-play record ({type(e).__name__}: {e})") from None


def record_paths(folder: str | os.PathLike) -> list[Path]:
    """Finished record files under ``folder`` (recursively), sorted; hidden
    and temporary files left out."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no such record folder: {folder}")
    return sorted(p for p in folder.rglob("*.npz")
                  if not any(part.startswith(".") for part in p.relative_to(folder).parts))


def iter_games(folder: str | os.PathLike) -> Iterator[Game]:
    """The games of every readable record under ``folder``; unreadable files
    (torn by a crash outside our atomic writes) are skipped."""
    for p in record_paths(folder):
        try:
            yield read_game(p)
        except ValueError:
            continue


def read_games(folder: str | os.PathLike) -> list[Game]:
    return list(iter_games(folder))
