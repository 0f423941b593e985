"""GNU Go plays itself: SGF games for supervised training where no human
archive is at hand (the 9x9 start of RL).

``alphalite data gnugo --size 9 --games N --out DIR [--level L]`` writes
``DIR/game-000000.sgf`` ... one file per game, each written to a temporary
name and renamed, so a reader (``alphalite data build DIR``) never sees half
a game. A rerun with the same DIR plays only the games whose file is missing
(up to N); finished files are never rewritten. ``DIR/gnugo.json`` keeps the
options; a rerun with different ones is refused with one line.

Variety. GNU Go is deterministic for a given ``--seed`` (the default seed is
the clock, so runs would not repeat), and the seed alone gives few openings:
60 seeds at level 1 on 9x9 gave 6 distinct first moves and 52 distinct
games. So game ``i`` gets its own seed and, drawn from ``(seed, i)``, 0 to
``random_moves`` random opening stones (off the first line, not touching
other stones, colours alternating, black first). Those stones are written as
root setup (``AB``/``AW`` with ``PL``), not as moves, so a policy trained on
the records imitates only GNU Go's own moves; games with 0 random stones keep
the empty-board opening in the data. ``--level 1,3,5`` cycles levels by game.
Measured on the first 900 level-1 games (random_moves=4): 12% were exact
repeats of an earlier game, nearly all with 0 or 1 random stones (39 of 184
and 62 of 169); ``alphalite data build`` drops them. A larger
``--random-moves`` wastes fewer games.

A game ends after two passes in a row, a resignation or ``max_moves`` moves;
the result is GNU Go's ``final_score`` under ``--chinese-rules`` (area
scoring with its own dead-stone judgement), ``B+R``/``W+R`` after a
resignation.

Each game is a pure function of (size, level, komi, seed, random_moves,
max_moves, index), so a killed run resumes with the same games it would have
made.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import numpy as np

from alphalite.go import board, coords, sgf
from alphalite.go.gtpclient import GtpClient, GtpEngineDied, GtpError, GtpTimeout, colour_word, find_gnugo
from alphalite.runtime import files, process_pool

FORMAT = "alphalite-gnugo-games-v1"
OPTIONS_FILE = "gnugo.json"
_GAME_RE = re.compile(r"^game-(\d{6,})\.sgf$")
_TMP_RE = re.compile(r"^\.game-\d{6,}\.sgf\.tmp-\d+$")
_OPTION_KEYS = ("size", "levels", "komi", "seed", "random_moves", "max_moves")


class GnugoGamesError(ValueError):
    """Bad options, a folder made with other options, or no GNU Go; one line."""


@dataclasses.dataclass(frozen=True)
class GameSpec:
    """Everything that decides one game."""

    index: int
    size: int
    level: int
    komi: float
    gnugo_seed: int  # GNU Go --seed (never 0: 0 would mean "from the clock")
    opening: tuple[tuple[int, int], ...]  # random setup stones (colour, flat), black first
    max_moves: int


def game_name(index: int) -> str:
    return f"game-{index:06d}.sgf"


def random_opening(size: int, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """``count`` stones, colours alternating from black, on points off the
    first line (the whole board below 5x5) that neither hold nor touch a
    stone, so no stone is ever captured or short of liberties."""
    lo, hi = (1, size - 1) if size >= 5 else (0, size)
    free = [coords.to_flat(r, c, size) for r in range(lo, hi) for c in range(lo, hi)]
    taken: set[int] = set()
    out: list[tuple[int, int]] = []
    colour = board.BLACK
    for _ in range(count):
        ok = [m for m in free if m not in taken]
        if not ok:
            break
        m = int(ok[rng.integers(len(ok))])
        out.append((colour, m))
        r, c = divmod(m, size)
        taken.update(coords.to_flat(rr, cc, size) for rr, cc in
                     ((r, c), (r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)) if 0 <= rr < size and 0 <= cc < size)
        colour = -colour
    return out


def game_spec(index: int, *, size: int = 9, levels=(1,), komi: float = 7.0, seed: int = 0,
              random_moves: int = 4, max_moves: int = 0) -> GameSpec:
    """The spec of game ``index``: a pure function of its arguments."""
    rng = np.random.default_rng([int(seed), int(index)])
    gnugo_seed = int(rng.integers(1, 2**31 - 1))
    count = int(rng.integers(0, random_moves + 1)) if random_moves > 0 else 0
    return GameSpec(index=index, size=size, level=int(levels[index % len(levels)]), komi=float(komi),
                    gnugo_seed=gnugo_seed, opening=tuple(random_opening(size, count, rng)),
                    max_moves=max_moves or 3 * size * size)


def play_game(spec: GameSpec, gnugo: str, *, timeout: float = 120.0) -> tuple[sgf.GameRecord, str]:
    """Let GNU Go play ``spec`` against itself; (record, GNU Go version).

    Raises GtpError/GtpEngineDied/GtpTimeout when the engine misbehaves."""
    argv = [gnugo, "--mode", "gtp", "--chinese-rules", "--level", str(spec.level), "--seed", str(spec.gnugo_seed)]
    size = spec.size
    with GtpClient(argv, timeout=timeout, name="gnugo") as eng:
        version = (eng.send("version").split() or ["?"])[0]
        eng.send(f"boardsize {size}")
        eng.send("clear_board")
        eng.send(f"komi {spec.komi}")
        for colour, m in spec.opening:
            eng.send(f"play {colour_word(colour)} {coords.to_gtp(m, size)}")
        to_play = board.WHITE if len(spec.opening) % 2 else board.BLACK
        moves: list[tuple[int, int]] = []
        passes = 0
        result = ""
        while len(moves) < spec.max_moves:
            vertex = eng.send(f"genmove {colour_word(to_play)}")
            if vertex.strip().lower() == "resign":
                result = ("W" if to_play == board.BLACK else "B") + "+R"
                break
            m = coords.from_gtp(vertex, size)
            moves.append((to_play, m))
            passes = passes + 1 if m == size * size else 0
            if passes >= 2:
                break
            to_play = -to_play
        if not result:
            result = eng.send("final_score").strip()
            if sgf.parse_result(result)[2] not in ("score", "draw"):
                raise GtpError("final_score", f"unexpected score {result!r}")
    black = tuple(sorted(m for c, m in spec.opening if c == board.BLACK))
    white = tuple(sorted(m for c, m in spec.opening if c == board.WHITE))
    winner, margin, kind = sgf.parse_result(result)
    player = f"GNU Go {version} level {spec.level}"
    rec = sgf.GameRecord(
        size=size, komi=spec.komi, rules="Chinese", black_player=player, white_player=player,
        date=time.strftime("%Y-%m-%d", time.gmtime()), result=result, winner=winner, margin=margin,
        result_kind=kind, setup_black=black, setup_white=white, moves=tuple(moves),
        first_player=(board.WHITE if len(spec.opening) % 2 else board.BLACK) if spec.opening else 0)
    return rec, version


def game_comment(spec: GameSpec) -> str:
    return (f"gnugo --mode gtp --chinese-rules --level {spec.level} --seed {spec.gnugo_seed}; "
            f"{len(spec.opening)} random opening stones as setup; alphalite game {spec.index}")


def write_game(path: Path, rec: sgf.GameRecord, comment: str = "") -> None:
    """The record as SGF at ``path``: temp name in the same folder, then rename."""
    data = sgf.write_sgf(rec)
    if comment:
        from sgfmill import sgf as sgfmill_sgf

        game = sgfmill_sgf.Sgf_game.from_bytes(data)
        game.get_root().set("GC", comment)
        data = game.serialise()

    files.write_atomic(path, lambda f: f.write(data))


def _worker_init():
    # Ignored here and so also in the GNU Go children (exec keeps SIG_IGN):
    # Ctrl-C reaches only the main process, which stops the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_one(job):
    spec, gnugo, out = job
    t0 = time.time()
    try:
        rec, _ = play_game(spec, gnugo)
    except (GtpError, GtpEngineDied, GtpTimeout, coords.CoordError, OSError) as e:
        return spec.index, None, f"{type(e).__name__}: {e}", time.time() - t0
    write_game(Path(out) / game_name(spec.index), rec, game_comment(spec))
    return spec.index, len(rec.moves), "", time.time() - t0


def finished_games(out: Path) -> dict[int, Path]:
    """Index -> path of every finished game file in ``out``."""
    found = {}
    if out.is_dir():
        for p in out.iterdir():
            m = _GAME_RE.match(p.name)
            if m and p.is_file():
                found[int(m.group(1))] = p
    return found


def _check_options(out: Path, options: dict) -> None:
    path = out / OPTIONS_FILE
    if path.exists():
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise GnugoGamesError(f"unreadable {path}: {e}") from None
        diff = [k for k in _OPTION_KEYS if saved.get(k) != options[k]]
        if diff:
            raise GnugoGamesError(f"{out} holds games made with other options ("
                                  + ", ".join(f"{k}={saved.get(k)!r}" for k in diff)
                                  + "); use another --out or the same options")
    else:

        files.write_json_atomic(path, {"format": FORMAT, **options})


def scan(out: Path) -> dict:
    """Counts over the finished games in ``out``: games, moves, unique games
    (same setup and moves), unreadable files and the results."""
    games = moves = bad = 0
    hashes = set()
    wins = {"B": 0, "W": 0, "draw": 0}
    for _, p in sorted(finished_games(out).items()):
        try:
            rec = sgf.read_sgf(p.read_bytes())
        except (sgf.SgfError, OSError):
            bad += 1
            continue
        games += 1
        moves += len(rec.moves)
        h = hashlib.blake2b(digest_size=8)
        h.update(repr((rec.size, rec.setup_black, rec.setup_white, rec.moves)).encode())
        hashes.add(h.digest())
        wins["B" if rec.winner > 0 else "W" if rec.winner < 0 else "draw"] += 1
    return {"games": games, "moves": moves, "unique_games": len(hashes), "unreadable": bad, "wins": wins}


def generate(out, *, games: int, size: int = 9, levels=(1,), komi: float = 7.0, seed: int = 0,
             random_moves: int = 4, max_moves: int = 0, jobs: int = 1, gnugo: str | None = None,
             progress: bool = True) -> dict:
    """Play games ``0 .. games-1`` not yet in ``out``; returns the summary.

    Ctrl-C stops the workers (the game in play is dropped, finished files
    stay) and re-raises KeyboardInterrupt after the summary is made; the
    summary then says ``"complete": false``."""
    if games < 0:
        raise GnugoGamesError(f"--games must be >= 0, got {games}")
    try:
        coords.check_size(size)
    except coords.CoordError as e:
        raise GnugoGamesError(str(e)) from None
    if size > 19:
        raise GnugoGamesError(f"GNU Go plays sizes up to 19, got {size}")
    levels = tuple(int(x) for x in levels)
    if not levels or any(not 1 <= x <= 10 for x in levels):
        raise GnugoGamesError(f"--level must be in 1..10 (comma separated to cycle), got {levels}")
    if random_moves < 0 or max_moves < 0 or jobs < 1:
        raise GnugoGamesError("--random-moves and --max-moves must be >= 0, --jobs >= 1")
    gnugo = gnugo or find_gnugo()
    if gnugo is None:
        raise GnugoGamesError("GNU Go not found on PATH or in /usr/games: install the gnugo package")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise GnugoGamesError(f"--out is a file, not a folder: {out}")
    out.mkdir(parents=True, exist_ok=True)
    options = {"size": size, "levels": list(levels), "komi": float(komi), "seed": int(seed),
               "random_moves": int(random_moves), "max_moves": int(max_moves)}
    _check_options(out, options)
    for p in out.iterdir():  # temp files of a killed run: never renamed, never read
        if _TMP_RE.match(p.name):
            p.unlink(missing_ok=True)

    done = finished_games(out)
    todo = [i for i in range(games) if i not in done]
    specs = [game_spec(i, size=size, levels=levels, komi=komi, seed=seed, random_moves=random_moves,
                       max_moves=max_moves) for i in todo]
    from tqdm import tqdm

    t0 = time.time()
    made = new_moves = 0
    failed: list[str] = []
    complete = False
    bar = tqdm(total=games, initial=games - len(todo), desc="gnugo games", unit="game", disable=not progress,
               file=sys.stderr, dynamic_ncols=True, mininterval=1.0)
    pool = process_pool(min(jobs, max(len(specs), 1)), initializer=_worker_init)
    try:
        for _index, n, err, _secs in pool.imap_unordered(_run_one, [(s, gnugo, str(out)) for s in specs]):
            if err:
                failed.append(err)
                if len(failed) >= 5 and made == 0:
                    raise GnugoGamesError(f"GNU Go failed {len(failed)} games in a row: {failed[-1]}")
            else:
                made += 1
                new_moves += n
            bar.update(1)
            bar.set_postfix(moves=new_moves, failed=len(failed))
        complete = not failed
    finally:
        pool.terminate()
        pool.join()
        bar.close()
    seconds = time.time() - t0
    summary = {**scan(out), "requested": games, "new_games": made, "new_moves": new_moves,
               "failed": len(failed), "seconds": round(seconds, 2),
               "seconds_per_game": round(seconds * min(jobs, max(len(specs), 1)) / made, 3) if made else None,
               "jobs": jobs, "levels": list(levels), "size": size, "out": str(out), "complete": complete}
    if failed:
        summary["first_error"] = failed[0]
    return summary


def _parse_levels(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise GnugoGamesError(f"--level must be an integer or a comma-separated list, got {text!r}") from None


def cli(args) -> int:
    """``alphalite data gnugo``: prints one JSON summary line."""
    try:  # bad input (GnugoGamesError) is cli.main's one line
        summary = generate(args.out, games=args.games, size=args.size, levels=_parse_levels(args.level),
                           komi=args.komi, seed=args.seed, random_moves=args.random_moves,
                           max_moves=args.max_moves, jobs=args.jobs, progress=not args.quiet)
    except KeyboardInterrupt:
        summary = {**scan(Path(args.out)), "requested": args.games, "out": str(args.out), "complete": False,
                   "stopped": "interrupted"}
        print(json.dumps(summary), flush=True)
        return 130
    print(json.dumps(summary), flush=True)
    return 0 if summary["complete"] else 1


def demo_games(out_dir, games: int = 8, size: int = 9, level: int = 1, seed: int = 0) -> Path | None:
    """A handful of quick GNU Go games (level 1, ~1 s each on 9x9) in
    ``out_dir``; None, with a printed message, when GNU Go is not installed."""
    if find_gnugo() is None:
        print("GNU Go not found (install the gnugo package): no GNU Go demo games", file=sys.stderr)
        return None
    out = Path(out_dir)
    generate(out, games=games, size=size, levels=(level,), seed=seed, jobs=min(2, os.cpu_count() or 1),
             progress=False)
    return out
