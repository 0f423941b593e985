"""SGF files, folders and archives -> compact game shards; the batch loader.

Building (``build`` / ``alphalite data build SRC... --out DIR``)
-----------------------------------------------------------------
Sources are ``.sgf`` files, folders (searched recursively for ``.sgf`` files
and archives) and archives (``.tar.gz``/``.tgz``, ``.tar.bz2``/``.tbz2``,
``.tar``, ``.zip``, the way KGS/u-go.net and ../shared/data ship them), read
member by member without extracting to disk. Records are parsed and replayed
(``alphalite.go.sgf``) in worker processes; the main process keeps the order of
the sources, drops exact duplicates and writes the shards, so the output is
the same for any ``--jobs``.

A game's identity is a 64-bit BLAKE2b hash of its size, setup stones and
full move sequence (with colours). It decides the split (hash / 2**64 below
``test_frac`` -> test, below ``test_frac + val_frac`` -> val, else train), so
a game found twice, in two archives, lands in the same split and its second
copy is counted as a duplicate.

Output folder::

    index.json            {"format", "complete", "shards": [{"file", "split",
                           "games", "moves", "sizes"}], "summary", "options"}
    skipped.tsv           every record not kept and every corrupt archive:
                          record, reason, detail (one per line)
    train-00000.npz ...   shards, written to a temp name then renamed
    val-00000.npz, test-00000.npz

Shard arrays (G games, M moves, S setup stones), all plain numpy (no pickle)::

    size [G] int8, komi [G] float32, handicap [G] int8,
    winner [G] int8          +1 black won, -1 white won, 0 draw/void/unknown
    margin [G] float32       points for scored results, NaN otherwise
    num_moves [G] int32      moves kept (the legal prefix of the main line)
    total_moves [G] int32    moves in the record (>= num_moves)
    stop [G] int8            why fewer were kept: 0 none, board.REASONS code,
                             -1 bad setup, -2 setup stones mid-game
    move_offsets [G+1] int64, moves [M] int16 (flat, pass = size*size),
    colors [M] int8          colour of each move (+1/-1; records may repeat)
    setup_offsets [G+1] int64, setup_points [S] int16, setup_colors [S] int8
    game_hash [G] uint64, game_id [G] str (source path, archive member),
    result, black_player, white_player, black_rank, white_rank, date,
    rules [G] str

Optional value targets (``selfplay.valuedata``; every shard of a folder has
them or none does)::

    score [G] float32        final area score, black - white - komi (NaN = unknown)
    ownership [G, N] int8    final owner of each point, row-major in the game's
                             first size*size columns (N: the folder's largest
                             size*size); +1 black, -1 white, 0 neutral or unknown

Loading
-------
``iterate_batches`` (training: shuffled, endless, resumable) and
``iterate_eval`` (each position once, in game order) yield dicts::

    planes       [B, H, W, C] float32   features.encode_into for the mover
    moves        [B] int32              expert move (symmetry applied)
    outcomes     [B] float32            +1 mover won, -1 lost, 0 unknown/draw
    legal        [B, A] bool            legal moves (A = size*size+1, pass last)
    move_number  [B] int32              moves played before this position
    moves_left   [B] int32              record moves after this one (0 = last)
    symmetry     [B] int8               the D4 element applied (0 = none)
    game         [B] int32              index of the game in its Games set
    stones       [B, H, W] int8         +1 black, -1 white, 0 empty (symmetry applied)
    to_play      [B] int8               colour to move (+1/-1)
    captures     [B, 2] int32           prisoners taken by black, by white
    ownership    [B, H, W] int8         final owner of each point, black's view
                                        (symmetry applied; all 0 when unknown)
    score        [B] float32            final black - white - komi (NaN = unknown)

Value-net options (both loaders): ``decided_only`` keeps games with a known
winner; ``move_numbers`` keeps positions after exactly those numbers of
moves; ``marked_only`` keeps, per game, the position after
``value_move[g]`` moves (a shard field of value self-play data);
``counted_only`` keeps the games with a known final score (value targets).
``iterate_batches(per_game=k)`` draws k positions per game anew each epoch
(AlphaGo's value net saw one per game: neighbours in a game are nearly the
same position with the same label, so all of them overfit).

Positions come from replaying games inside Numba: a chunk of games (given as
concatenated arrays) is replayed once, the sampled positions are kept as
compact board snapshots (colours + meta + legal mask, ~1 KB each on 19x19,
not planes), and each batch encodes its positions from the snapshots. The
legal mask is exact (positional superko); the planes are encoded on a board
rebuilt from the snapshot without superko history, so a feature plane that
asks about legality (``default`` plane 9, ``book11`` plane 10) marks simple
ko but not a superko-only ban (rare in real games).

Shuffling is two-level (GoGoGo): each epoch permutes the games (RNG from
``(seed, epoch)``), cuts them into chunks of ``chunk_games``, and permutes
the positions inside each chunk (RNG from ``(seed, epoch, chunk)``), which
also draws each position's symmetry. The epoch's position stream is the
chunks one after another; batch ``j`` of an epoch is positions
``[j*B, (j+1)*B)`` of it, so batches are a pure function of (seed, epoch,
batch index). ``start_batch=k`` finds the chunk holding batch k from the
per-game position counts (shard metadata) and replays only that chunk on.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import signal
import sys
import tarfile
import time
import zipfile
from collections import Counter, deque
from pathlib import Path
from typing import Iterator

import numpy as np

from alphalite.go import board, coords, sgf
from alphalite.runtime.kernels import njit

from alphalite.nn import features
from alphalite.runtime import config, files, interrupt_on_sigterm, process_pool

FORMAT = "alphalite-games-v1"
SKIPPED_LOG = "skipped.tsv"  # in a built folder: every record not kept, with the reason
SPLITS = ("train", "val", "test")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz", ".tar", ".zip")
MAX_RECORD_BYTES = 8 << 20  # a member larger than this is not a game record
STOP_BAD_SETUP = -1
STOP_SETUP = -2
_STR_FIELDS = ("game_id", "result", "black_player", "white_player", "black_rank", "white_rank", "date", "rules")


class DatasetError(ValueError):
    """Bad sources or dataset folder; the message is one line."""


class BuildInterrupted(KeyboardInterrupt):
    """``build`` stopped by Ctrl-C or SIGTERM after writing and indexing
    what it finished (``"complete": false``); ``summary`` says what."""

    def __init__(self, summary: dict):
        super().__init__()
        self.summary = summary


class NoGamesKept(DatasetError):
    """``build`` kept no game; ``detail`` is the message without the log's
    path (for builds into a temporary folder)."""

    def __init__(self, message: str, detail: str):
        super().__init__(message)
        self.detail = detail


# ====================================================================== sources


def _is_archive(name: str) -> bool:
    low = name.lower()
    return any(low.endswith(s) for s in ARCHIVE_SUFFIXES)


def _is_sgf(name: str) -> bool:
    return name.lower().endswith(".sgf")


def check_sources(srcs) -> list[Path]:
    """The sources as Paths; DatasetError naming the first that is missing."""
    out = []
    for s in srcs:
        p = Path(s)
        if not p.exists():
            raise DatasetError(f"no such file or folder: {s}")
        if p.is_file() and not (_is_sgf(p.name) or _is_archive(p.name)):
            raise DatasetError(f"not an .sgf file or an archive ({', '.join(ARCHIVE_SUFFIXES)}): {s}")
        out.append(p)
    return out


def _expand_sources(paths: list[Path]) -> Iterator[Path]:
    for p in paths:
        if p.is_dir():
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for f in sorted(names):
                    if _is_sgf(f) or _is_archive(f):
                        yield Path(root) / f
        else:
            yield p


def iter_records(path: Path, errors: Counter, log=None) -> Iterator[tuple[str, bytes | None]]:
    """(name, bytes) for each SGF record of one file or archive, in order.

    A member that cannot be read yields (name, None); a corrupt archive stops
    (what it gave so far stays), counts ``errors["corrupt_archive"]`` and
    calls ``log(name, "corrupt_archive", why)``."""
    name = str(path)
    if _is_sgf(name):
        try:
            yield name, path.read_bytes()
        except OSError:
            yield name, None
        return
    try:
        if name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if info.is_dir() or not _is_sgf(info.filename):
                        continue
                    member = f"{name}:{info.filename}"
                    if info.file_size > MAX_RECORD_BYTES:
                        yield member, None
                        continue
                    try:
                        yield member, zf.read(info)
                    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError):
                        yield member, None
        else:
            with tarfile.open(path, "r:*") as tf:
                for info in tf:
                    if not info.isfile() or not _is_sgf(info.name):
                        continue
                    member = f"{name}:{info.name}"
                    if info.size > MAX_RECORD_BYTES:
                        yield member, None
                        continue
                    f = tf.extractfile(info)
                    yield member, (f.read() if f is not None else None)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        errors["corrupt_archive"] += 1
        if log is not None:
            log(name, "corrupt_archive", f"{type(e).__name__}: {e}")


# ====================================================================== workers


def game_hash(size: int, sp, sc, mv, cl) -> int:
    h = hashlib.blake2b(digest_size=8)
    h.update(np.int32(size).tobytes())
    order = np.argsort(sp, kind="stable")
    h.update(np.asarray(sp, np.int16)[order].tobytes())
    h.update(np.asarray(sc, np.int8)[order].tobytes())
    h.update(b"|")
    h.update(np.asarray(mv, np.int16).tobytes())
    h.update(np.asarray(cl, np.int8).tobytes())
    return int.from_bytes(h.digest(), "little")


def process_record(name: str, data: bytes | None, sizes: tuple[int, ...]) -> list[tuple[str, str, object]]:
    """``(name, 'game', dict)`` or ``(name, 'skip', (reason, detail))`` for
    each game of one record (an SGF collection holds several: ``name#k``)."""
    if data is None:
        return [(name, "skip", ("read_error", f"unreadable, or larger than {MAX_RECORD_BYTES >> 20} MiB"))]
    try:
        recs = sgf.read_sgf_collection(data)
    except sgf.SgfError as e:
        return [(name, "skip", ("parse_error", str(e)))]
    names = [name] if len(recs) == 1 else [f"{name}#{k}" for k in range(1, len(recs) + 1)]
    return [(n, *_game_of(n, r, sizes)) for n, r in zip(names, recs)]


def _game_of(name: str, rec, sizes: tuple[int, ...]):
    """('game', dict) or ('skip', (reason, detail)) for one parsed game (or its SgfError)."""
    if isinstance(rec, sgf.SgfError):
        return "skip", ("unsupported_size" if str(rec).startswith("unsupported board size") else "parse_error", str(rec))
    if sizes and rec.size not in sizes:
        return "skip", ("unsupported_size", f"board size {rec.size}, not in --sizes {','.join(map(str, sizes))}")
    if not rec.moves:
        return "skip", ("empty", "no moves")
    sp, sc, mv, cl = sgf.record_arrays(rec)
    n, why = sgf.replay_moves(rec.size, sp, sc, mv, cl, True, False, board.zobrist_table())
    n, why = int(n), int(why)
    if why < 0:
        return "skip", ("bad_setup", "the setup stones are not a legal position")
    if n == 0:
        return "skip", ("illegal_move", f"the first move is illegal ({stop_name(why)})")
    stop = why
    if not stop and rec.stop == "setup":
        stop = STOP_SETUP
    g = {
        "size": rec.size, "komi": rec.komi, "handicap": rec.handicap, "winner": rec.winner,
        "margin": math.nan if rec.margin is None else rec.margin, "num_moves": n, "total_moves": len(mv),
        "stop": stop, "moves": mv[:n], "colors": cl[:n], "setup_points": sp, "setup_colors": sc,
        "game_hash": game_hash(rec.size, sp, sc, mv, cl), "game_id": name, "result": rec.result,
        "black_player": rec.black_player, "white_player": rec.white_player, "black_rank": rec.black_rank,
        "white_rank": rec.white_rank, "date": rec.date, "rules": rec.rules,
    }
    return "game", g


def _work(items, sizes):
    return [r for name, data in items for r in process_record(name, data, sizes)]


def pool_worker_init():
    """Initializer of worker pools whose parent handles Ctrl-C and kill."""
    # The parent stops the pool (SIGTERM); a forked worker would otherwise run
    # the parent's SIGTERM handler, and a terminal's Ctrl-C would kill it mid-task
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# ====================================================================== shards


def stop_name(code: int) -> str:
    if code == STOP_SETUP:
        return "setup_midgame"
    if code == STOP_BAD_SETUP:
        return "bad_setup"
    return board.REASONS[code].replace(" ", "_")


def pack_games(games: list[dict]) -> dict[str, np.ndarray]:
    nm = np.array([g["num_moves"] for g in games], np.int64)
    ns = np.array([len(g["setup_points"]) for g in games], np.int64)
    arr = {
        "size": np.array([g["size"] for g in games], np.int8),
        "komi": np.array([g["komi"] for g in games], np.float32),
        "handicap": np.array([g["handicap"] for g in games], np.int8),
        "winner": np.array([g["winner"] for g in games], np.int8),
        "margin": np.array([g["margin"] for g in games], np.float32),
        "num_moves": nm.astype(np.int32),
        "total_moves": np.array([g["total_moves"] for g in games], np.int32),
        "stop": np.array([g["stop"] for g in games], np.int8),
        "move_offsets": np.concatenate([[0], np.cumsum(nm)]).astype(np.int64),
        "moves": np.concatenate([g["moves"] for g in games] + [np.zeros(0, np.int16)]).astype(np.int16),
        "colors": np.concatenate([g["colors"] for g in games] + [np.zeros(0, np.int8)]).astype(np.int8),
        "setup_offsets": np.concatenate([[0], np.cumsum(ns)]).astype(np.int64),
        "setup_points": np.concatenate([g["setup_points"] for g in games] + [np.zeros(0, np.int16)]).astype(np.int16),
        "setup_colors": np.concatenate([g["setup_colors"] for g in games] + [np.zeros(0, np.int8)]).astype(np.int8),
        "game_hash": np.array([g["game_hash"] for g in games], np.uint64),
    }
    for k in _STR_FIELDS:
        arr[k] = np.array([str(g[k]) for g in games], dtype=np.str_) if games else np.zeros(0, "U1")
    return arr


def write_shard(out: Path, name: str, split: str, games: list[dict], extra: dict | None = None) -> dict:
    """Pack ``games`` (plus ``extra`` per-game arrays) into the shard
    ``out/name``, atomically; returns its index entry."""
    return write_arrays(out, name, split, {**pack_games(games), **(extra or {})})


def write_arrays(out: Path, name: str, split: str, arr: dict[str, np.ndarray]) -> dict:
    """Write packed shard arrays (``pack_games`` plus per-game fields, e.g.
    a shard read back with ``read_shard`` and given value targets) to
    ``out/name``, atomically; returns its index entry."""
    files.write_atomic(out / name, lambda f: np.savez(f, **arr))
    sizes = Counter(int(s) for s in arr["size"])
    return {"file": name, "split": split, "games": int(arr["size"].shape[0]), "moves": int(arr["num_moves"].sum()),
            "sizes": {str(k): v for k, v in sorted(sizes.items())}}


class _ShardWriter:
    def __init__(self, out: Path, shard_games: int):
        self.out = out
        self.shard_games = shard_games
        self.pending = {s: [] for s in SPLITS}
        self.count = {s: 0 for s in SPLITS}
        self.shards: list[dict] = []

    def add(self, split: str, g: dict) -> None:
        self.pending[split].append(g)
        if len(self.pending[split]) >= self.shard_games:
            self.flush(split)

    def flush(self, split: str) -> None:
        games = self.pending[split]
        if not games:
            return
        self.shards.append(write_shard(self.out, f"{split}-{self.count[split]:05d}.npz", split, games))
        self.count[split] += 1
        self.pending[split] = []

    def flush_all(self) -> None:
        for s in SPLITS:
            self.flush(s)


def split_of(h: int, val_frac: float, test_frac: float) -> str:
    u = h / 2.0**64
    if u < test_frac:
        return "test"
    if u < test_frac + val_frac:
        return "val"
    return "train"


def build(srcs, out, *, jobs: int = 0, sizes=(9, 13, 19), val_frac: float = 0.02, test_frac: float = 0.02,
          max_games: int = 0, shard_games: int = 4096, batch_files: int = 64, progress: bool = True) -> dict:
    """Build a dataset folder from SGF sources; returns the summary dict.

    Ctrl-C (KeyboardInterrupt) or SIGTERM writes the games finished so far
    as complete shards with ``"complete": false`` in the index, then raises
    BuildInterrupted (a KeyboardInterrupt); a rerun builds it whole. Every
    record not kept (and every corrupt archive) is listed with the reason in
    ``skipped.tsv`` in ``out``; a build that keeps no game raises
    DatasetError pointing there."""
    t0 = time.time()
    paths = check_sources(srcs)
    if not (0 <= val_frac <= 1 and 0 <= test_frac <= 1 and val_frac + test_frac <= 1):
        raise DatasetError("--val-frac and --test-frac must be in [0, 1] and sum to at most 1")
    sizes = tuple(sorted(int(s) for s in sizes))
    # values no build can use, refused before anything is written
    config.refuse((
            ("--shard-games", shard_games >= 1, ">= 1", shard_games),  # 0 wrote a shard file per game
            ("--max-games", max_games >= 0, ">= 0 (0: all)", max_games),
            ("--jobs", jobs >= 0, ">= 0 (0: all cores)", jobs),
            ("--sizes", bool(sizes) and all(coords.MIN_SIZE <= n <= coords.MAX_SIZE for n in sizes),
             f"board sizes in {coords.MIN_SIZE}..{coords.MAX_SIZE}", ",".join(map(str, sizes)))), DatasetError)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DatasetError(f"--out is a file, not a folder: {out}")
    out.mkdir(parents=True, exist_ok=True)
    try:
        old_index = _read_index(out, warn=False) if (out / "index.json").exists() else None
    except DatasetError:
        old_index = None

    errors: Counter = Counter()
    skipped: Counter = Counter()
    truncated: Counter = Counter()
    kept = Counter()
    positions = Counter()
    seen: set[int] = set()
    n_files = 0
    writer = _ShardWriter(out, shard_games)
    jobs = jobs or os.cpu_count() or 1
    log_path = out / SKIPPED_LOG
    log_file = open(out / f".{SKIPPED_LOG}.tmp", "w")
    log_file.write("record\treason\tdetail\n")

    def log(name, reason, detail):
        clean = " ".join(str(detail).split())  # one line, no tabs
        log_file.write(f"{name}\t{reason}\t{clean}\n")
        if reason == "corrupt_archive":  # the records after the damage are lost: say so at once
            print(f"warning: {name} is damaged ({clean}): only the records before the damage are read",
                  file=sys.stderr, flush=True)

    def batches():
        batch = []
        for p in _expand_sources(paths):
            for item in iter_records(p, errors, log):
                batch.append(item)
                if len(batch) >= batch_files:
                    yield batch
                    batch = []
        if batch:
            yield batch

    def results():
        if jobs <= 1:
            for b in batches():
                yield b, _work(b, sizes)
            return
        pool = process_pool(jobs, initializer=pool_worker_init)
        try:
            window: deque = deque()
            for b in batches():
                window.append((b, pool.apply_async(_work, (b, sizes))))
                if len(window) >= 2 * jobs:
                    b0, r = window.popleft()
                    yield b0, r.get()
            while window:
                b0, r = window.popleft()
                yield b0, r.get()
            pool.close()
        finally:
            pool.terminate()
            pool.join()

    from tqdm import tqdm

    bar = tqdm(desc="data build", unit="file", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    complete = False
    stream = results()
    on_term = interrupt_on_sigterm()  # kill stops the build as Ctrl-C does
    try:
        for items, res in stream:
            on_term.check()
            stop = False
            n_files += len(items)
            for name, kind, val in res:
                if kind == "skip":
                    skipped[val[0]] += 1
                    log(name, *val)
                    continue
                h = val["game_hash"]
                if h in seen:
                    skipped["duplicate"] += 1
                    log(name, "duplicate", "the same game as an earlier record")
                    continue
                seen.add(h)
                if val["stop"]:
                    truncated[stop_name(val["stop"])] += 1
                split = split_of(h, val_frac, test_frac)
                kept[split] += 1
                positions[split] += val["num_moves"]
                writer.add(split, val)
                if max_games and sum(kept.values()) >= max_games:
                    stop = True
                    break
            bar.update(len(items))
            if stop:
                break
        on_term.check()
        complete = True
    except KeyboardInterrupt:
        pass  # what finished is written below, then BuildInterrupted says so
    finally:
        on_term()
        stream.close()  # stops the worker pool
        bar.close()
        writer.flush_all()
        log_file.close()
        os.replace(log_file.name, log_path)
        summary = {
            "files": n_files, "games": sum(kept.values()), "games_by_split": {s: kept[s] for s in SPLITS},
            "positions": sum(positions.values()), "positions_by_split": {s: positions[s] for s in SPLITS},
            "skipped": dict(sorted(skipped.items())), "truncated": dict(sorted(truncated.items())),
            "corrupt_archives": errors["corrupt_archive"], "skipped_log": str(log_path),
            "shards": len(writer.shards),
            "out": str(out), "complete": complete, "seconds": round(time.time() - t0, 2),
        }
        options = {"sources": [str(p) for p in paths], "sizes": list(sizes), "val_frac": val_frac,
                   "test_frac": test_frac, "max_games": max_games, "shard_games": shard_games}
        files.write_json_atomic(out / "index.json", {"format": FORMAT, "complete": complete, "shards": writer.shards,
                                               "summary": summary, "options": options})
        if old_index is not None:  # shards of an earlier build that this one did not rewrite
            new = {s["file"] for s in writer.shards}
            for s in old_index["shards"]:
                if s["file"] not in new and (out / s["file"]).exists():
                    (out / s["file"]).unlink()
    if not complete:
        raise BuildInterrupted(summary)
    if not summary["games"]:
        why = [f"{k} {v}" for k, v in sorted(skipped.items())]
        why += [f"corrupt archives {errors['corrupt_archive']}"] if errors["corrupt_archive"] else []
        detail = (f"kept no game of size {','.join(map(str, sizes))} from {n_files} SGF records"
                  + (f" ({', '.join(why)})" if why else ""))
        raise NoGamesKept(f"{detail}; each skipped record and why: {log_path}", detail)
    return summary




def cli_build(args) -> int:
    try:
        sizes = tuple(int(s) for s in str(args.sizes).split(",") if s.strip())
    except ValueError:
        raise DatasetError(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
    try:  # bad input (DatasetError) is cli.main's one line
        summary = build(args.src, args.out, jobs=args.jobs, sizes=sizes, val_frac=args.val_frac,
                        test_frac=args.test_frac, max_games=args.max_games,
                        shard_games=getattr(args, "shard_games", 4096),
                        progress=not getattr(args, "quiet", False))
    except BuildInterrupted as e:
        s = e.summary
        print(f"data build: interrupted; the {s['games']} games finished are kept in {s['out']} ({s['shards']} "
              "shards, index.json marks them incomplete); rerun the same command to build it all",
              file=sys.stderr, flush=True)
        return 130
    print(json.dumps(summary), flush=True)
    return 0


# ====================================================================== games in memory


@dataclasses.dataclass
class Games:
    """Games as concatenated arrays (the shard format, several shards joined)."""

    arrays: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.arrays["size"].shape[0])

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def select(self, idx) -> "Games":
        """The games at indices ``idx`` (in that order)."""
        return Games(_pack_select(self.arrays, np.asarray(idx, np.int64)))

    @staticmethod
    def concat(parts: list[dict[str, np.ndarray]]) -> "Games":
        if not parts:
            return Games(pack_games([]))
        out = {}
        for k in parts[0]:
            if k.endswith("_offsets"):
                offs = [parts[0][k]]
                base = parts[0][k][-1]
                for p in parts[1:]:
                    offs.append(p[k][1:] + base)
                    base += p[k][-1]
                out[k] = np.concatenate(offs).astype(np.int64)
            else:
                out[k] = np.concatenate([p[k] for p in parts])
        return Games(out)


def _gather(offsets, values, idx):
    starts = offsets[idx]
    lens = offsets[idx + 1] - starts
    new_off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    flat = np.repeat(starts - new_off[:-1], lens) + np.arange(new_off[-1])
    return new_off, values[flat]


def _pack_select(a: dict, idx: np.ndarray) -> dict:
    out = {}
    for k, v in a.items():
        if k in ("moves", "colors", "setup_points", "setup_colors") or k.endswith("_offsets"):
            continue
        out[k] = v[idx]
    out["move_offsets"], out["moves"] = _gather(a["move_offsets"], a["moves"], idx)
    _, out["colors"] = _gather(a["move_offsets"], a["colors"], idx)
    out["setup_offsets"], out["setup_points"] = _gather(a["setup_offsets"], a["setup_points"], idx)
    _, out["setup_colors"] = _gather(a["setup_offsets"], a["setup_colors"], idx)
    return out


def _read_index(data_dir: Path, warn: bool = True) -> dict:
    try:
        index = json.loads((Path(data_dir) / "index.json").read_text())
    except (OSError, ValueError) as e:
        raise DatasetError(f"not a dataset folder (no readable index.json): {data_dir}: {e}") from None
    if index.get("format") != FORMAT:
        raise DatasetError(f"unknown dataset format {index.get('format')!r} in {data_dir}")
    key = str(Path(data_dir).resolve())
    if warn and index.get("complete") is False and key not in _WARNED_INCOMPLETE:
        _WARNED_INCOMPLETE.add(key)
        print(f"alphalite: warning: {data_dir} holds only part of its sources: its build was stopped "
              "(run `alphalite data build` again for all of them)", file=sys.stderr, flush=True)
    return index


_WARNED_INCOMPLETE: set[str] = set()


def read_index(data_dir) -> dict:
    """The ``index.json`` of a dataset folder; DatasetError if it is not one."""
    return _read_index(Path(data_dir))


def read_shard(path) -> dict[str, np.ndarray]:
    """All arrays of one shard file."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError) as e:
        raise DatasetError(f"cannot read shard {path}: {e}") from None


def load_games(data, split: str = "train", board_size: int | None = None) -> Games:
    """The games of one split of a dataset folder (or a Games, filtered),
    optionally only one board size."""
    if isinstance(data, Games):
        games = data
    else:
        if split not in SPLITS and split != "all":
            raise DatasetError(f"unknown split {split!r}; use one of {', '.join(SPLITS)} or all")
        data_dir = Path(data)
        index = _read_index(data_dir)
        parts = []
        for s in index["shards"]:
            if split != "all" and s["split"] != split:
                continue
            parts.append(read_shard(data_dir / s["file"]))
        games = Games.concat(parts)
    if board_size is not None and len(games) and (games["size"] != board_size).any():
        games = games.select(np.flatnonzero(games["size"] == board_size))
    return games


def resolve_eval_source(sources, tmp_dir, *, split: str = "test", board_size: int = 19,
                        max_games: int = 0) -> tuple[str, str]:
    """(dataset folder, split) for evaluation: a built dataset folder as it is,
    or SGF sources built into ``tmp_dir`` with every game in split "test"."""
    sources = [str(s) for s in sources]
    if len(sources) == 1 and (Path(sources[0]) / "index.json").exists():
        return sources[0], split
    try:
        build(sources, tmp_dir, jobs=1, sizes=(board_size,), val_frac=0.0, test_frac=1.0,
              max_games=max_games, progress=False)
    except NoGamesKept as e:
        raise DatasetError(f"{', '.join(sources)}: {e.detail}") from None
    return str(tmp_dir), "test"


# ====================================================================== kernels


@njit(cache=True, nogil=True)
def _expand_chunk(size, superko, zob, move_off, moves, colors, setup_off, setup_pts, setup_cols,
                  slot, snap_color, snap_meta, legal):
    """Replay each game of a chunk once; at every move whose ``slot`` >= 0,
    store the position before it (colours, meta, legal mask) in that slot.
    Returns the number of positions stored."""
    G = move_off.shape[0] - 1
    stored = 0
    hist_cap = 2 * size * size + 64
    for g in range(G):
        a = move_off[g]
        b = move_off[g + 1]
        cap = hist_cap if hist_cap > 2 * (b - a) + 16 else 2 * (b - a) + 16
        B = board.init_board(size, superko, False, zob, cap)
        color = B.color
        meta = B.meta
        s0 = setup_off[g]
        s1 = setup_off[g + 1]
        if s1 > s0:
            board.set_up(B, setup_pts[s0:s1], setup_cols[s0:s1])
        for i in range(a, b):
            stone = colors[i]
            board.set_to_play(B, stone)
            s = slot[i]
            if s >= 0:
                snap_color[s, :] = color
                snap_meta[s, :] = meta
                board.legal_mask(B, legal[s])
                stored += 1
            board.play_flat(B, moves[i], stone)
    return stored


@njit(cache=True, nogil=True)
def _encode_batch(size, preset_id, zob, snap_color, snap_meta, legal, smove, src, syms, symtab,
                  planes_out, legal_out, moves_out, out0):
    """Encode snapshots ``src[j]`` into rows ``out0 + j`` with symmetry ``syms[j]``."""
    B = board.init_board(size, False, False, zob, 1)
    tmp = np.zeros(planes_out.shape[1:], np.float32)
    A = size * size + 1
    for j in range(src.shape[0]):
        s = src[j]
        k = syms[j]
        board.restore(B, snap_color[s], snap_meta[s])
        o = out0 + j
        if k == 0:
            features.encode_into(B, preset_id, planes_out[o])
        else:
            features.encode_into(B, preset_id, tmp)
            features.transform_planes_into(tmp, k, planes_out[o])
        for a in range(A):
            legal_out[o, symtab[k, a]] = legal[s, a]
        moves_out[o] = symtab[k, smove[s]]


# ====================================================================== loader


def _positions(games: Games, winner_only: bool, include_passes: bool, decided_only: bool = False,
               move_numbers=None, marked_only: bool = False, counted_only: bool = False):
    """(eligible [M] bool, per-game counts [G] int64)."""
    a = games.arrays
    G = len(games)
    nm = np.diff(a["move_offsets"])
    game_of = np.repeat(np.arange(G), nm)
    elig = np.ones(a["moves"].shape[0], bool)
    if not include_passes:
        elig &= a["moves"].astype(np.int64) != (a["size"].astype(np.int64) ** 2)[game_of]
    if winner_only:
        elig &= a["colors"] == a["winner"][game_of]
    if decided_only:
        elig &= a["winner"][game_of] != 0
    if counted_only:
        if "score" not in a:
            raise DatasetError("counted_only needs value targets (a score field: alphalite value-targets)")
        elig &= np.isfinite(a["score"])[game_of]
    if move_numbers is not None or marked_only:
        move_no = np.arange(a["moves"].shape[0]) - np.repeat(a["move_offsets"][:-1], nm)
        if move_numbers is not None:
            elig &= np.isin(move_no, np.asarray(list(move_numbers), np.int64))
        if marked_only:
            if "value_move" not in a:
                raise DatasetError("marked_only needs value self-play data (a value_move field)")
            elig &= move_no == a["value_move"][game_of]
    counts = np.bincount(game_of, weights=elig, minlength=G).astype(np.int64) if G else np.zeros(0, np.int64)
    return elig, counts


class _Chunk:
    """A replayed chunk: snapshots in output order plus per-slot labels."""

    def __init__(self, games: Games, idx: np.ndarray, elig: np.ndarray, order: np.ndarray | None,
                 size: int):
        a = _pack_select(games.arrays, idx)
        n_moves = np.diff(a["move_offsets"])
        gidx = np.repeat(idx, n_moves)
        g_local = np.repeat(np.arange(len(idx)), n_moves)
        move_no = np.arange(a["moves"].shape[0]) - np.repeat(a["move_offsets"][:-1], n_moves)
        _, e = _gather(games.arrays["move_offsets"], elig, idx)
        pos = np.flatnonzero(e)  # chunk-local move indices of the positions, game order
        P = pos.shape[0]
        if order is None:
            order = np.arange(P)
        slot = np.full(a["moves"].shape[0], -1, np.int64)
        slot[pos[order]] = np.arange(P)
        W = size + 2
        self.snap_color = np.empty((P, W * W), np.int8)
        self.snap_meta = np.empty((P, board.N_META), np.int64)
        self.legal = np.empty((P, size * size + 1), np.bool_)
        _expand_chunk(size, True, board.zobrist_table(), a["move_offsets"], a["moves"], a["colors"],
                      a["setup_offsets"], a["setup_points"], a["setup_colors"], slot,
                      self.snap_color, self.snap_meta, self.legal)
        p = pos[order]
        self.move = a["moves"][p].astype(np.int32)
        mover = a["colors"][p].astype(np.int32)
        win = a["winner"][g_local[p]].astype(np.int32)
        self.outcome = (mover * win).astype(np.float32)
        self.move_number = move_no[p].astype(np.int32)
        self.moves_left = (a["total_moves"][g_local[p]] - 1 - move_no[p]).astype(np.int32)
        self.game = gidx[p].astype(np.int32)
        self.size = P
        N = size * size
        if "score" in a:  # value targets (selfplay.valuedata): black's view
            self.score = a["score"][g_local[p]].astype(np.float32)
            self.ownership = a["ownership"][g_local[p], :N].astype(np.int8)
        else:
            self.score = np.full(P, np.nan, np.float32)
            self.ownership = np.zeros((P, N), np.int8)


@functools.cache
def _pool(threads: int):
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(threads, thread_name_prefix="alphalite-encode")


def _emit(chunks_parts, size, preset, syms_parts, threads: int = 1):
    """Build one batch dict from [(chunk, lo, hi), ...] with symmetries;
    ``threads`` > 1 encodes the rows on that many threads."""
    W = size + 2
    pid = features.preset_id(preset)
    C = features.num_planes(preset)
    n = sum(hi - lo for _, lo, hi in chunks_parts)
    A = size * size + 1
    planes = np.empty((n, size, size, C), np.float32)
    legal = np.zeros((n, A), np.bool_)
    moves = np.empty(n, np.int32)
    symtab = features.sym_move_table(size).astype(np.int64)
    zob = board.zobrist_table()
    cols = {k: [] for k in ("outcomes", "move_number", "moves_left", "game", "stones", "to_play", "captures",
                            "score", "ownership")}
    o = 0
    calls = []
    for (ch, lo, hi), syms in zip(chunks_parts, syms_parts):
        src = np.arange(lo, hi, dtype=np.int64)
        syms = syms.astype(np.int64)
        # rows split into `threads` runs: each run writes its own rows, and the kernel releases the GIL
        step = -(-(hi - lo) // max(threads, 1))
        for a in range(0, hi - lo, max(step, 1)):
            calls.append((size, pid, zob, ch.snap_color, ch.snap_meta, ch.legal, ch.move, src[a:a + step],
                          syms[a:a + step], symtab, planes, legal, moves, o + a))
        cols["outcomes"].append(ch.outcome[lo:hi])
        cols["move_number"].append(ch.move_number[lo:hi])
        cols["moves_left"].append(ch.moves_left[lo:hi])
        cols["game"].append(ch.game[lo:hi])
        cols["stones"].append(ch.snap_color[lo:hi].reshape(-1, W, W)[:, 1:-1, 1:-1])
        cols["to_play"].append(ch.snap_meta[lo:hi, board.M_TOPLAY].astype(np.int8))
        cols["captures"].append(ch.snap_meta[lo:hi, board.M_CAPB:board.M_CAPW + 1].astype(np.int32))
        cols["score"].append(ch.score[lo:hi])
        cols["ownership"].append(ch.ownership[lo:hi].reshape(-1, size, size))
        o += hi - lo
    if threads > 1:
        list(_pool(threads).map(lambda args: _encode_batch(*args), calls))
    else:
        for args in calls:
            _encode_batch(*args)
    sym = np.concatenate(syms_parts).astype(np.int8) if syms_parts else np.zeros(0, np.int8)
    stones = _apply_symmetries(np.concatenate(cols["stones"]), sym)
    ownership = _apply_symmetries(np.concatenate(cols["ownership"]), sym)
    return {"score": np.concatenate(cols["score"]), "ownership": ownership, "planes": planes, "moves": moves, "outcomes": np.concatenate(cols["outcomes"]),
            "legal": legal, "move_number": np.concatenate(cols["move_number"]),
            "moves_left": np.concatenate(cols["moves_left"]), "symmetry": sym,
            "game": np.concatenate(cols["game"]), "stones": stones,
            "to_play": np.concatenate(cols["to_play"]), "captures": np.concatenate(cols["captures"])}


def _apply_symmetries(x: np.ndarray, sym: np.ndarray) -> np.ndarray:
    """Board maps ``x [B, H, W]`` under each row's symmetry, in place;
    features' convention: mirror (k >= 4), then k % 4 quarter turns."""
    for k in np.unique(sym[sym != 0]):
        sel = sym == k
        y = x[sel][:, :, ::-1] if k >= 4 else x[sel]
        x[sel] = np.rot90(y, int(k) % 4, axes=(1, 2))
    return x


@dataclasses.dataclass
class _Plan:
    games: Games
    elig: np.ndarray
    counts: np.ndarray
    total: int
    per_game: int = 0


def _plan(data, split, board_size, winner_only, include_passes, per_game: int = 0, **select) -> _Plan:
    games = load_games(data, split, board_size)
    elig, counts = _positions(games, winner_only, include_passes, **select)
    if per_game:
        counts = np.minimum(counts, per_game)
    return _Plan(games, elig, counts, int(counts.sum()), per_game)


def _sample_per_game(plan: _Plan, seed: int, epoch: int) -> np.ndarray:
    """The epoch's eligible mask: ``plan.per_game`` random positions of each
    game (all of a game that has fewer)."""
    idx = np.flatnonzero(plan.elig)
    nm = np.diff(plan.games["move_offsets"])
    game = np.repeat(np.arange(len(plan.games)), nm)[idx]
    keys = np.random.default_rng([seed, epoch, 0x9A3E]).random(idx.shape[0])
    order = np.lexsort((keys, game))  # by game, random inside a game
    first = np.searchsorted(game[order], game[order], side="left")
    rank = np.arange(order.shape[0]) - first
    out = np.zeros_like(plan.elig)
    out[idx[order[rank < plan.per_game]]] = True
    return out


def count_positions(data, *, split: str = "train", board_size: int = 19, winner_only: bool = False,
                    include_passes: bool = True, per_game: int = 0, **select) -> int:
    """Positions per epoch under these options (``select``: decided_only,
    move_numbers, marked_only, counted_only)."""
    return _plan(data, split, board_size, winner_only, include_passes, per_game, **select).total


def iterate_batches(data, *, split: str = "train", preset: str = "default", batch_size: int = 256,
                    seed: int = 0, symmetries: bool = True, winner_only: bool = False,
                    include_passes: bool = True, board_size: int = 19, start_batch: int = 0,
                    epochs: int | None = None, chunk_games: int = 256, per_game: int = 0,
                    threads: int = 1, **select) -> Iterator[dict]:
    """Shuffled training batches (see the module docstring), endless by default.

    ``data``: a dataset folder or a ``Games``. Batch ``k`` counts across
    epochs: with ``n = count_positions(...) // batch_size`` full batches per
    epoch (the remainder of an epoch is dropped), batch k is batch ``k % n``
    of epoch ``k // n``, a pure function of (seed, epoch, k % n);
    ``start_batch=k`` resumes there, replaying only the chunk that holds it
    and those after. ``epochs`` stops after that many epochs (counted from
    epoch 0). ``threads`` encodes each batch on that many threads (the
    same batches; for a GPU that outruns one core). Raises DatasetError when
    the split holds no full batch."""
    features.preset_id(preset)  # fail early on an unknown preset
    if batch_size < 1:
        raise DatasetError(f"batch_size must be >= 1, got {batch_size}")
    plan = _plan(data, split, board_size, winner_only, include_passes, per_game, **select)
    per_epoch = plan.total // batch_size
    if per_epoch == 0:
        src = data if isinstance(data, (str, os.PathLike)) else f"the {len(plan.games)} games given"
        raise DatasetError(f"split {split!r} of {src} has {plan.total} positions of size {board_size}, "
                           f"fewer than one batch of {batch_size}")
    return _batches(plan, preset, batch_size, seed, symmetries, board_size, int(start_batch), epochs,
                    chunk_games, per_epoch, threads)


def _batches(plan, preset, batch_size, seed, symmetries, size, k, epochs, chunk_games, per_epoch, threads):
    G = len(plan.games)
    while epochs is None or k // per_epoch < epochs:
        epoch, j = divmod(k, per_epoch)
        rng = np.random.default_rng([seed, epoch, 0x5EED])
        perm = rng.permutation(G)
        elig = _sample_per_game(plan, seed, epoch) if plan.per_game else plan.elig
        chunk_games_idx = [perm[i:i + chunk_games] for i in range(0, G, chunk_games)]
        chunk_pos = np.array([plan.counts[c].sum() for c in chunk_games_idx], np.int64)
        chunk_start = np.concatenate([[0], np.cumsum(chunk_pos)])
        cache: dict[int, tuple] = {}

        def chunk(c):
            if c not in cache:
                for old in [x for x in cache if x < c]:
                    del cache[old]
                crng = np.random.default_rng([seed, epoch, int(c), 0xC4])
                P = int(chunk_pos[c])
                order = crng.permutation(P)
                syms = crng.integers(0, 8, P) if symmetries else np.zeros(P, np.int64)
                cache[c] = (_Chunk(plan.games, np.sort(chunk_games_idx[c]), elig, order, size), syms)
            return cache[c]

        while j < per_epoch:
            lo, hi = j * batch_size, (j + 1) * batch_size
            parts, sym_parts = [], []
            c = int(np.searchsorted(chunk_start, lo, side="right") - 1)
            pos = lo
            while pos < hi:
                ch, syms = chunk(c)
                a = pos - int(chunk_start[c])
                b = min(hi, int(chunk_start[c + 1])) - int(chunk_start[c])
                if b > a:
                    parts.append((ch, a, b))
                    sym_parts.append(syms[a:b])
                    pos += b - a
                c += 1
            yield _emit(parts, size, preset, sym_parts, threads)
            j += 1
            k += 1


def iterate_eval(data, *, split: str = "test", preset: str = "default", batch_size: int = 256,
                 board_size: int = 19, max_games: int = 0, winner_only: bool = False,
                 include_passes: bool = True, chunk_games: int = 64, **select) -> Iterator[dict]:
    """Every position of a split once, in game order and move order, no
    symmetry; the last batch may be short. ``max_games`` > 0 keeps the first
    that many games of the split."""
    features.preset_id(preset)
    plan = _plan(data, split, board_size, winner_only, include_passes, **select)
    return _eval_batches(plan, preset, batch_size, board_size, max_games, chunk_games)


def _eval_batches(plan, preset, batch_size, size, max_games, chunk_games):
    G = len(plan.games) if not max_games else min(max_games, len(plan.games))
    pending: list = []
    have = 0
    for g0 in range(0, G, chunk_games):
        ch = _Chunk(plan.games, np.arange(g0, min(G, g0 + chunk_games)), plan.elig, None, size)
        lo = 0
        while lo < ch.size:
            take = min(batch_size - have, ch.size - lo)
            pending.append((ch, lo, lo + take))
            have += take
            lo += take
            if have == batch_size:
                yield _emit(pending, size, preset, [np.zeros(hi - a, np.int64) for _, a, hi in pending])
                pending, have = [], 0
    if have:
        yield _emit(pending, size, preset, [np.zeros(hi - a, np.int64) for _, a, hi in pending])
