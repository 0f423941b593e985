"""Matches and tournaments between GTP engines (``alphalite arena``).

Engines are named command lines (``"gnugo1=gnugo --mode gtp --level 1"``);
``@alphalite`` at the start of a command stands for this Python running
``alphalite gtp``, ``@gnugo`` for the GNU Go found by ``find_gnugo`` with
``--mode gtp``, ``@pachi`` for the Pachi that ``make pachi`` builds (Chinese
rules; every core and no pondering unless Pachi options are given), and
``{seed}`` anywhere is replaced by a per-game number, so that deterministic
engines do not replay one game over and over.

A tournament is a list of games: every pairing (round-robin: all pairs;
gauntlet: one engine against each of the others) plays ``games`` games,
colours alternating (the first-named engine of a pairing takes Black in
even-numbered games). Games are interleaved across pairings and run
``jobs`` at a time in worker processes; each game starts fresh engine
processes, as gomill's ringmaster and gogui-twogtp do.

One game (``play_game``): ``boardsize``, ``clear_board``, ``komi``,
``fixed_handicap`` (the answer must be the standard points) and, per engine,
``time_settings main byo stones`` with ``time_left`` before every
``genmove`` (the arena keeps a Canadian clock from wall time; overruns are
counted, not forfeited). Every move is checked on our board (positional
superko, no suicide) and relayed with ``play``.

How a game ends, and its result:

* ``resign`` from an engine: the other side wins (``B+R``/``W+R``).
* an illegal move: the other side wins by forfeit (``B+F``/``W+F``).
* two passes in a row, or the move cap: Tromp-Taylor area with komi after
  removing the stones the referee calls dead (a GNU Go process fed the
  moves, ``final_status_list dead``); with no referee (``referee="none"``,
  or none installed) the board is counted as it stands. Each engine's own
  ``final_score`` is asked and any disagreement with the arena's winner is
  recorded.
* an engine crash, a timeout, an unreadable answer or a refused ``play``:
  the game is void. It is logged, saved under ``void/`` and replayed; two
  voids in a row in one pairing stop that pairing (with a message naming the
  engine and the error), never the whole run (``alphalite arena`` then
  exits with status 3; a rerun gives the pairing another try).

Every finished game is saved as SGF (``games/<id>.sgf``: PB/PW the engine
names, KM, HA, RU, RE, the settings in GC) and appended as one JSON line to
``results.jsonl`` (one ``write`` then ``fsync``; readers skip a torn last
line). Running the same command again resumes: finished games are never
replayed, and ``games`` may be raised to extend a tournament.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import datetime
import json
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import sys
import time
import zlib
from collections import Counter, deque
from pathlib import Path

from alphalite.arena import ratings
from alphalite.go import coords
from alphalite.go.gtpclient import GtpClient, GtpEngineDied, GtpError, GtpTimeout, colour_word, find_gnugo, find_pachi
from alphalite.runtime import files, interrupt_on_sigterm

RESULTS = "results.jsonl"
SETTINGS = "arena.json"
BLACK, WHITE = 1, -1


class ArenaError(ValueError):
    """Bad tournament input (engine spec, settings, out folder); one line."""


class Void(Exception):
    """A game that cannot count: crash, timeout, protocol error."""


# ------------------------------------------------------------------ engines


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    name: str
    command: str  # shell-style words; @alphalite / @gnugo / {seed} expanded per game
    time: str = ""  # "MAIN/BYO/STONES" seconds (GTP time_settings); "" = no clock

    def argv(self, seed: int = 0) -> list[str]:
        words = shlex.split(self.command.replace("{seed}", str(seed)))
        if not words:
            raise ArenaError(f"engine {self.name!r} has an empty command")
        if words[0] == "@alphalite":
            words = [sys.executable, "-m", "alphalite.cli", "gtp"] + words[1:]
        elif words[0] == "@gnugo":
            gnugo = find_gnugo()
            if gnugo is None:
                raise ArenaError(f"engine {self.name!r}: GNU Go is not installed (apt-get install gnugo)")
            words = [gnugo, "--mode", "gtp"] + words[1:]
        elif words[0] == "@pachi":
            pachi = find_pachi()
            if pachi is None:
                raise ArenaError(f"engine {self.name!r}: Pachi is not built (make pachi)")
            # Pachi's engine options are one word of name=value pairs; without
            # one it gets every core and no pondering: thinking on the
            # opponent's time would take the cores the opponent is timed on.
            if not any(re.match(r"[A-Za-z_]\w*=", w) for w in words[1:]):
                words.append(f"threads={os.cpu_count() or 1},pondering=0")
            words = [pachi, "-r", "chinese"] + words[1:]
        return words


def parse_engine(text: str) -> EngineSpec:
    """``NAME=COMMAND`` -> EngineSpec."""
    name, sep, command = text.partition("=")
    name = name.strip()
    if not sep or not name or not command.strip():
        raise ArenaError(f"engine must be NAME=COMMAND, got {text!r}")
    if not all(c.isalnum() or c in "-_.+" for c in name):
        raise ArenaError(f"engine name {name!r}: use letters, digits and - _ . + only")
    try:
        shlex.split(command)
    except ValueError as e:
        raise ArenaError(f"engine {name!r}: bad command: {e}") from None
    return EngineSpec(name, command.strip())


def parse_time(text: str) -> tuple[int, int, int]:
    """``MAIN/BYO/STONES`` (GTP time_settings: whole seconds) -> numbers."""
    parts = text.split("/")
    try:
        main, byo, stones = (int(p) for p in parts)
        if main < 0 or byo < 0 or stones < 0:
            raise ValueError
    except ValueError:
        raise ArenaError(f"time must be MAIN/BYO/STONES in whole seconds (e.g. 60/5/1), got {text!r}") from None
    return main, byo, stones


def check_engine(spec: EngineSpec) -> None:
    """The program exists (one clear line now rather than two voids later)."""
    prog = spec.argv(0)[0]
    if os.sep in prog:
        ok = os.path.isfile(prog) and os.access(prog, os.X_OK)
    else:
        ok = shutil.which(prog) is not None
    if not ok:
        raise ArenaError(f"engine {spec.name!r}: program not found: {prog}")


def referee_argv(referee: str) -> list[str] | None:
    """"auto" -> GNU Go if installed, "none" -> None, else a command."""
    if referee == "none":
        return None
    if referee == "auto":
        gnugo = find_gnugo()
        return None if gnugo is None else [gnugo, "--mode", "gtp", "--chinese-rules"]
    return EngineSpec("referee", referee).argv(0)


# ------------------------------------------------------------------ one game


@dataclasses.dataclass(frozen=True)
class GameJob:
    """Everything a worker process needs to play and save one game."""

    game_id: str
    attempt: int
    black: EngineSpec
    white: EngineSpec
    size: int = 9
    komi: float = 7.0
    handicap: int = 0
    max_moves: int = 0  # 0: 3 * size * size
    timeout: float = 120.0  # seconds per GTP answer
    referee: tuple[str, ...] | None = None
    out: str = "."
    event: str = ""


class _Clock:
    """Canadian byo-yomi from wall time: main time, then ``byo`` seconds for
    each ``stones`` moves (``byo == 0``: absolute time)."""

    def __init__(self, main: float, byo: float, stones: int):
        self.main, self.byo, self.stones = main, byo, stones
        self.period, self.left = 0.0, 0  # overtime: seconds and stones left in this period
        self.overruns = 0

    def time_left(self) -> tuple[float, int]:
        if self.left == 0:
            return max(self.main, 0.0), 0
        return max(self.period, 0.0), self.left

    def charge(self, seconds: float) -> None:
        if self.left == 0 and seconds <= self.main:
            self.main -= seconds
            return
        if self.left == 0:  # main time runs out during this move
            seconds -= max(self.main, 0.0)
            self.main = 0.0
            if self.byo <= 0 or self.stones <= 0:
                self.overruns += 1
                return
            self.period, self.left = self.byo, self.stones
        self.period -= seconds
        self.left -= 1
        if self.period < 0:
            self.overruns += 1
        if self.left == 0 or self.period < 0:
            self.period, self.left = self.byo, self.stones


def _seed(game_id: str, attempt: int) -> int:
    return zlib.crc32(f"{game_id}/{attempt}".encode()) & 0x7FFFFFF


def _cpu_seconds(client: GtpClient) -> float | None:
    """User + system CPU of an engine process so far (Linux /proc), else None."""
    proc = getattr(client, "_proc", None)  # GtpClient keeps its Popen private
    try:
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        # fields[0] is the state (field 3); utime, stime, cutime, cstime are fields 14..17
        return sum(int(x) for x in fields[11:15]) / ticks
    except (OSError, AttributeError, ValueError, IndexError):
        return None


def _dead_stones(job: GameJob, moves, size: int, log_path: Path) -> tuple[list[int] | None, str]:
    """Referee's dead stones (flat points) after the moves, or (None, why)."""
    if job.referee is None:
        return None, "no referee"
    try:
        with open(log_path, "a") as err, GtpClient(list(job.referee), timeout=job.timeout, stderr=err,
                                                   name="referee") as ref:
            ref.send(f"boardsize {size}")
            ref.send("clear_board")
            ref.send(f"komi {job.komi}")
            if job.handicap >= 2:
                ref.send(f"fixed_handicap {job.handicap}")
            for c, m in moves:
                ref.send(f"play {colour_word(c)} {coords.to_gtp(m, size)}")
            words = ref.send("final_status_list dead").split()
            return [coords.from_gtp(w, size) for w in words], ""
    except (GtpError, GtpEngineDied, GtpTimeout, OSError, ValueError) as e:
        return None, f"referee failed: {e}"


def play_game(job: GameJob) -> dict:
    """Play one game; save its SGF; return its result record (a dict with
    ``status`` "done" or "void"). Never raises for engine trouble."""
    t0 = time.time()
    out = Path(job.out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    rec = {"game": job.game_id, "attempt": job.attempt, "black": job.black.name, "white": job.white.name,
           "size": job.size, "komi": job.komi, "handicap": job.handicap,
           "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    clients: dict[int, GtpClient] = {}
    moves: list[tuple[int, int]] = []
    try:
        body = _play(job, rec, clients, moves, logs)
        rec.update(body)
        rec["status"] = "done"
    except Void as e:
        rec.update(status="void", error=str(e))
    except (GtpEngineDied, GtpTimeout, GtpError, OSError) as e:
        rec.update(status="void", error=f"{type(e).__name__}: {e}")
    finally:
        for c, client in clients.items():
            rec.setdefault("cpu", {})[(job.black if c == BLACK else job.white).name] = _cpu_seconds(client)
        for client in clients.values():
            try:
                client.close(timeout=2.0)
            except Exception:  # noqa: BLE001 - closing a broken engine must not hide the result
                pass
    rec["moves"] = len(moves)
    rec["seconds"] = round(time.time() - t0, 2)
    rec["sgf"] = _save_sgf(job, rec, moves)
    return rec


def _play(job: GameJob, rec: dict, clients: dict, moves: list, logs: Path) -> dict:
    # board and sgf bring Numba: imported where used, as the CLI's parser imports this module.
    from alphalite.go import board, sgf

    size = job.size
    seed = _seed(job.game_id, job.attempt)
    rec["seed"] = seed
    names = {BLACK: job.black.name, WHITE: job.white.name}
    specs = {BLACK: job.black, WHITE: job.white}
    log_of = {c: logs / f"{job.game_id}.{'b' if c == BLACK else 'w'}.{names[c]}.log" for c in (BLACK, WHITE)}

    def died(c: int, e: Exception) -> Void:
        """A dead engine's void, with the last line it wrote (its reason, mostly) and its log."""
        try:
            lines = [ln.strip() for ln in log_of[c].read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        tail = f"; its last words: {lines[-1][:200]!r}" if lines else ""
        return Void(f"{names[c]}: {e}{tail} (log {log_of[c]})")

    for c in (BLACK, WHITE):
        argv = specs[c].argv(seed)
        err = open(log_of[c], "w")
        try:
            clients[c] = GtpClient(argv, timeout=job.timeout, stderr=err, name=names[c])
        except OSError as e:
            raise Void(f"{names[c]} did not start: {e}") from None
        finally:
            err.close()  # the child holds its own copy

    def send(c: int, command: str) -> str:
        try:
            return clients[c].send(command)
        except GtpError as e:
            raise Void(f"{names[c]} refused {command!r}: {e.message}") from None
        except GtpEngineDied as e:
            raise died(c, e) from None
        except GtpTimeout as e:
            raise Void(f"{names[c]}: {e}") from None

    engine_names = {}
    clocks: dict[int, _Clock] = {}
    for c in (BLACK, WHITE):
        try:
            engine_names[names[c]] = clients[c].send("name")
        except GtpError:
            engine_names[names[c]] = "?"
        except GtpEngineDied as e:
            raise died(c, e) from None
        except GtpTimeout as e:
            raise Void(f"{names[c]}: {e}") from None
        send(c, f"boardsize {size}")
        send(c, "clear_board")
        send(c, f"komi {job.komi:g}")
        if specs[c].time:
            main, byo, stones = parse_time(specs[c].time)
            send(c, f"time_settings {main} {byo} {stones}")
            clocks[c] = _Clock(main, byo, stones)
    rec["engine_names"] = engine_names

    state = board.new_game(size, job.komi)
    to_play = BLACK
    if job.handicap >= 2:
        points = sgf.handicap_points(size, job.handicap)
        for c in (BLACK, WHITE):
            answer = send(c, f"fixed_handicap {job.handicap}")
            got = {coords.from_gtp(v, size) for v in answer.split()} if answer.strip() else set(points)
            if got != set(points):
                raise Void(f"{names[c]} placed handicap stones {answer!r}, not the standard ones")
        grid = [[0] * size for _ in range(size)]
        for p in points:
            grid[p // size][p % size] = BLACK
        state = board.from_stones(grid, komi=job.komi, to_play=WHITE)
        to_play = WHITE

    max_moves = job.max_moves or 3 * size * size
    think = {BLACK: 0.0, WHITE: 0.0}
    passes, end, winner, score = 0, "", 0, None
    while True:
        if len(moves) >= max_moves:
            end = "move cap"
            break
        c = to_play
        if c in clocks:
            secs, stones = clocks[c].time_left()
            # GTP wants whole seconds; rounding down keeps the engine on the safe side
            send(c, f"time_left {colour_word(c)} {int(secs)} {stones}")
        t = time.perf_counter()
        answer = send(c, f"genmove {colour_word(c)}").strip()
        dt = time.perf_counter() - t
        think[c] += dt
        if c in clocks:
            clocks[c].charge(dt)
        word = answer.lower()
        if word == "resign":
            end, winner = "resign", -c
            break
        try:
            move = coords.from_gtp(word, size)
        except (coords.CoordError, ValueError):
            raise Void(f"{names[c]} answered genmove with {answer!r}") from None
        try:
            state = board.play(state, move, c)
        except board.IllegalMove as e:
            end, winner = "illegal move", -c
            rec["illegal"] = f"{names[c]}: {coords.to_gtp(move, size)} ({e.reason})"
            break
        moves.append((c, move))
        send(-c, f"play {colour_word(c)} {coords.to_gtp(move, size)}")
        passes = passes + 1 if move == size * size else 0
        if passes >= 2:
            end = "two passes"
            break
        to_play = -c

    body = {"end": end, "think": {names[c]: round(think[c], 2) for c in (BLACK, WHITE)}}
    if clocks:
        body["time_overruns"] = {names[c]: clocks[c].overruns for c in clocks}
    if end in ("two passes", "move cap"):
        dead, why = _dead_stones(job, moves, size, logs / f"{job.game_id}.referee.log")
        body["referee"] = "none" if dead is None else os.path.basename(job.referee[0])
        if why and job.referee is not None:
            body["referee_error"] = why
        final = state
        if dead:
            s = board.stones(state).ravel()
            dead = [p for p in dead if s[p] != 0]
            final = board.setup(state, empty=dead)
        body["dead"] = len(dead or [])
        score = float(board.area_score(final))
        winner = 1 if score > 0 else -1 if score < 0 else 0
        result = sgf.result_string(score)
        body["score"] = score
        own, disagree = {}, []
        for cc in (BLACK, WHITE):
            try:
                own[names[cc]] = clients[cc].send("final_score")
            except GtpError:
                own[names[cc]] = None  # not supported: no opinion
                continue
            except (GtpEngineDied, GtpTimeout):
                own[names[cc]] = None
                continue
            w, _, _ = sgf.parse_result(own[names[cc]])
            if w != winner:
                disagree.append(names[cc])
        body["final_score"] = own
        body["disagree"] = disagree
    else:
        result = f"{'B' if winner == BLACK else 'W'}+{'R' if end == 'resign' else 'F'}"
    body.update(result=result, winner_colour={1: "B", -1: "W", 0: None}[winner],
                winner=names.get(winner))
    return body


def _save_sgf(job: GameJob, rec: dict, moves) -> str:
    """games/<id>.sgf (or void/<id>.<attempt>.sgf), written atomically."""
    from sgfmill import sgf as sgfmill_sgf

    from alphalite.go import sgf

    done = rec.get("status") == "done"
    rel = f"games/{job.game_id}.sgf" if done else f"void/{job.game_id}.{job.attempt}.sgf"
    gr = sgf.GameRecord(size=job.size, komi=float(job.komi), handicap=job.handicap,
                        rules="Tromp-Taylor" if done else "",
                        black_player=job.black.name, white_player=job.white.name,
                        date=datetime.date.today().isoformat(),
                        result=rec.get("result", "Void") if done else "Void",
                        setup_black=tuple(sgf.handicap_points(job.size, job.handicap)) if job.handicap >= 2 else (),
                        moves=tuple(moves), first_player=WHITE if job.handicap >= 2 else 0)
    game = sgfmill_sgf.Sgf_game.from_bytes(sgf.write_sgf(gr))
    root = game.get_root()
    root.set("AP", ("alphalite-arena", "0.1"))
    if job.event:
        root.set("EV", job.event)
    root.set("GN", job.game_id)
    lines = [f"black: {job.black.name} = {job.black.command}" + (f" [time {job.black.time}]" if job.black.time else ""),
             f"white: {job.white.name} = {job.white.command}" + (f" [time {job.white.time}]" if job.white.time else ""),
             f"size {job.size}, komi {job.komi:g}, handicap {job.handicap}, move cap "
             f"{job.max_moves or 3 * job.size * job.size}, attempt {job.attempt}, seed {rec.get('seed')}"]
    for k in ("end", "referee", "referee_error", "dead", "final_score", "disagree", "illegal", "error"):
        if k in rec:
            lines.append(f"{k}: {rec[k]}")
    root.set("GC", "\n".join(lines))
    data = game.serialise()
    files.write_atomic(Path(job.out) / rel, lambda f: f.write(data))
    return rel


# ------------------------------------------------------------------ results file


def append_result(path: str | os.PathLike, rec: dict) -> None:
    """One JSON line in one write, then fsync: a kill leaves at worst a torn
    last line, which ``read_results`` skips."""
    line = (json.dumps(rec, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_results(path: str | os.PathLike) -> list[dict]:
    out = []
    try:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    rec = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue  # torn last line of a killed run
                if isinstance(rec, dict):
                    out.append(rec)
    except FileNotFoundError:
        pass
    return out


def _repair_tail(path: Path) -> None:
    """Cut a torn last line so the next append starts on a line of its own."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)


# ------------------------------------------------------------------ tournament


@dataclasses.dataclass(frozen=True)
class Tournament:
    engines: tuple[EngineSpec, ...]
    games: int = 10  # per pairing (a maximum in SPRT mode)
    gauntlet: str | None = None  # None: round-robin
    size: int = 9
    komi: float = 7.0
    handicap: int = 0
    max_moves: int = 0  # 0: 3 * size * size
    timeout: float = 120.0
    referee: str = "auto"  # auto | none | a GTP command
    anchor: str | None = None  # engine whose Elo is fixed (default: the gauntlet engine, else the last one)
    anchor_elo: float = 0.0
    sprt: str = ""  # "elo0=0,elo1=35,alpha=0.05,beta=0.05": first engine = candidate

    def validate(self) -> None:
        from alphalite.go import sgf

        names = [e.name for e in self.engines]
        if len(names) < 2:
            raise ArenaError("a tournament needs at least two engines")
        if len(set(names)) != len(names):
            raise ArenaError(f"engine names must differ: {names}")
        try:
            coords.check_size(self.size)
        except coords.CoordError as e:
            raise ArenaError(str(e)) from None
        if self.handicap == 1 or self.handicap < 0:
            raise ArenaError("handicap must be 0 or 2..9")
        if self.handicap:
            try:
                sgf.handicap_points(self.size, self.handicap)
            except sgf.SgfError as e:
                raise ArenaError(str(e)) from None
        if self.games < 1:
            raise ArenaError("games must be at least 1")
        if self.gauntlet is not None and self.gauntlet not in names:
            raise ArenaError(f"gauntlet engine {self.gauntlet!r} is not one of {names}")
        if self.anchor is not None and self.anchor not in names:
            raise ArenaError(f"anchor {self.anchor!r} is not one of {names}")
        for e in self.engines:
            if e.time:
                parse_time(e.time)
        if self.sprt:
            ratings.Sprt.parse(self.sprt)
            if len(names) != 2:
                raise ArenaError("--sprt compares exactly two engines: candidate first, then the current best")
        seen: dict[str, tuple[str, str]] = {}
        for gid, _, _, _, pairing in self.schedule():  # names with "-" can spell one id two ways
            if gid in seen and seen[gid] != pairing:
                raise ArenaError(f"pairings {' vs '.join(seen[gid])} and {' vs '.join(pairing)} both name "
                                 f"game {gid}: rename an engine")
            seen[gid] = pairing

    def pairings(self) -> list[tuple[str, str]]:
        names = [e.name for e in self.engines]
        if self.gauntlet is not None:
            return [(self.gauntlet, n) for n in names if n != self.gauntlet]
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]

    def schedule(self) -> list[tuple[str, str, str, int, tuple[str, str]]]:
        """(game id, black, white, index, pairing) for every game, interleaved
        across pairings; the first engine of a pairing is Black in even games."""
        out = []
        for i in range(self.games):
            for a, b in self.pairings():
                black, white = (a, b) if i % 2 == 0 else (b, a)
                out.append((f"{a}-{b}-{i:04d}", black, white, i, (a, b)))
        return out

    def anchor_name(self) -> str:
        if self.anchor:
            return self.anchor
        if self.gauntlet and not self.sprt:
            # the usual gauntlet is a new engine against references: anchor the
            # first reference, so the engine under test gets an interval
            return self.pairings()[0][1]
        return self.engines[-1].name

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["engines"] = [dataclasses.asdict(e) for e in self.engines]
        return d

    def identity(self) -> dict:
        """The settings a resumed run must share (games may grow)."""
        d = self.to_json()
        d.pop("games")
        d.pop("timeout")
        return d


class _Inline:
    """A one-at-a-time executor in this process (jobs == 1)."""

    def submit(self, fn, *args):
        fut = cf.Future()
        try:
            fut.set_result(fn(*args))
        except Exception as e:  # noqa: BLE001 - reported like a worker's failure
            fut.set_exception(e)
        return fut

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def _worker_init():
    # Ctrl-C is the parent's business: a worker (and the engines it starts)
    # just dies; the unfinished game is replayed on resume.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_tournament(t: Tournament, out: str | os.PathLike, *, jobs: int = 1, progress: bool = True,
                   say=print) -> dict:
    """Play every game not yet in ``out/results.jsonl``; write the report.
    Returns {"played", "void", "stopped_pairings", "sprt", "report"}.
    Raises ArenaError if another arena is playing in ``out``."""
    t.validate()
    for e in t.engines:
        check_engine(e)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lock = _lock(out)
    # kill (SIGTERM) stops the arena as Ctrl-C does: the games in play are dropped and replayed on resume
    on_term = interrupt_on_sigterm()
    try:
        return _run(t, out, jobs=jobs, progress=progress, say=say, check=on_term.check)
    finally:
        on_term()
        lock.close()


def _lock(out: Path):
    """One arena per folder: a second one would replay the same games."""
    import fcntl

    f = open(out / ".lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise ArenaError(f"another arena is running in {out}") from None
    return f


def _run(t: Tournament, out: Path, *, jobs: int, progress: bool, say, check) -> dict:
    _check_settings(t, out)
    results_path = out / RESULTS
    _repair_tail(results_path)
    past = read_results(results_path)
    done_ids = {r["game"] for r in past if r.get("status") == "done"}
    attempts = Counter(r["game"] for r in past if r.get("status") == "void")
    ref = referee_argv(t.referee)
    if ref is None and t.referee == "auto":
        say("arena: GNU Go not found: no referee, two-pass games are counted as the board stands")
    specs = {e.name: e for e in t.engines}
    todo = deque(g for g in t.schedule() if g[0] not in done_ids)
    sprt = ratings.Sprt.parse(t.sprt) if t.sprt else None
    cand = t.engines[0].name if sprt else None

    def sprt_state():
        if sprt is None:
            return None
        return sprt.decide([r for r in read_results(results_path) if r.get("status") == "done"], cand)

    state = sprt_state()
    if state and state["decision"] != "continue":
        say(f"arena: SPRT already decided: {state['decision']}")
        todo.clear()
    log = open(out / "arena.log", "a")

    def note(msg: str):
        log.write(f"{datetime.datetime.now().isoformat(timespec='seconds')} {msg}\n")
        log.flush()

    total = len(t.schedule())
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=len(done_ids & {g[0] for g in t.schedule()}), unit="game",
                   desc="arena", dynamic_ncols=True)
    voids_in_row: Counter = Counter()
    stopped: dict[tuple[str, str], str] = {}
    played = voided = 0
    def new_executor():
        if jobs <= 1:
            return _Inline()
        # spawn, not fork: the parent may hold threads (tqdm) and Numba state
        return cf.ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_worker_init)

    executor = new_executor()
    inflight: dict = {}
    interrupted = False
    try:
        while todo or inflight:
            check()  # a kill whose KeyboardInterrupt a finaliser dropped
            while todo and len(inflight) < max(jobs, 1):
                gid, b, w, i, pair = todo.popleft()
                if pair in stopped:
                    continue
                job = GameJob(game_id=gid, attempt=attempts[gid], black=specs[b], white=specs[w], size=t.size,
                              komi=t.komi, handicap=t.handicap, max_moves=t.max_moves, timeout=t.timeout,
                              referee=None if ref is None else tuple(ref), out=str(out), event=out.name)
                note(f"start {gid} attempt {job.attempt}: {b} (B) vs {w} (W)")
                try:
                    fut = executor.submit(play_game, job)
                except cf.BrokenExecutor:  # a worker was killed (OOM, signal): start a fresh pool
                    executor.shutdown(wait=False)
                    executor = new_executor()
                    fut = executor.submit(play_game, job)
                inflight[fut] = (gid, b, w, i, pair)
            done, _ = cf.wait(list(inflight), return_when=cf.FIRST_COMPLETED)
            for fut in done:
                gid, b, w, i, pair = inflight.pop(fut)
                try:
                    rec = fut.result()
                except Exception as e:  # noqa: BLE001 - a worker that died: the game is void
                    rec = {"game": gid, "attempt": attempts[gid], "black": b, "white": w, "status": "void",
                           "error": f"worker failed: {type(e).__name__}: {e}"}
                rec["pairing"] = list(pair)
                rec["index"] = i
                rec["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
                append_result(results_path, rec)
                if rec["status"] == "done":
                    played += 1
                    voids_in_row[pair] = 0
                    note(f"done {gid}: {rec['result']} ({rec['end']}, {rec['moves']} moves)")
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix_str(f"{gid} {rec['result']}")
                    else:
                        say(f"{gid}: {b} (B) vs {w} (W): {rec['result']} ({rec['end']}, {rec['moves']} moves)")
                    if rec.get("disagree"):
                        note(f"{gid}: final_score disagrees with {rec['result']}: {rec['final_score']}")
                    continue
                voided += 1
                attempts[gid] += 1
                voids_in_row[pair] += 1
                msg = f"void {gid} (attempt {rec['attempt']}): {rec.get('error')}"
                note(msg)
                say(f"arena: {msg}")
                if voids_in_row[pair] >= 2:
                    stopped[pair] = rec.get("error", "")
                    stop = (f"arena: pairing {pair[0]} vs {pair[1]} stopped after two void games in a row "
                            f"(last: {rec.get('error')}); other pairings go on")
                    note(stop)
                    say(stop)
                    append_result(results_path, {"status": "stopped", "pairing": list(pair), "error": rec.get("error"),
                                                 "finished": rec["finished"]})
                else:
                    todo.appendleft((gid, b, w, i, pair))
            if sprt is not None and todo:
                state = sprt_state()
                if state["decision"] != "continue":
                    note(f"SPRT: {state['decision']} (LLR {state['llr']:.2f})")
                    say(f"arena: SPRT stops early: {state['decision']} (LLR {state['llr']:.2f} in "
                        f"[{state['lower']:.2f}, {state['upper']:.2f}])")
                    todo.clear()
    except KeyboardInterrupt:
        interrupted = True
        # a worker would play its game to the end (and write its record) after we stop: end it now
        for proc in list((getattr(executor, "_processes", None) or {}).values()):
            proc.terminate()
        executor.shutdown(wait=False, cancel_futures=True)
        executor = None
        say(f"\narena: interrupted; {played} games finished in this run are kept in {results_path}; "
            "rerun the same command to resume")
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
        if bar is not None:
            bar.close()
        log.close()
    if interrupted:
        raise KeyboardInterrupt
    report = ratings.write_report(out, read_results(results_path), anchor=t.anchor_name(), anchor_elo=t.anchor_elo,
                                  sprt=sprt, candidate=cand, settings=t.to_json())
    return {"played": played, "void": voided, "stopped_pairings": [list(p) for p in stopped],
            "sprt": sprt_state(), "report": report}


def _check_settings(t: Tournament, out: Path) -> None:
    path = out / SETTINGS
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            raise ArenaError(f"{path} is unreadable; use a new --out folder") from None
        oldt = dict(old)
        oldt.pop("games", None)
        oldt.pop("timeout", None)
        if oldt != t.identity():
            diff = sorted(k for k in set(oldt) | set(t.identity()) if oldt.get(k) != t.identity().get(k))
            raise ArenaError(f"{out} holds a tournament with other settings ({', '.join(diff)}); "
                             "use a new --out folder or the same settings")

    files.write_json_atomic(path, t.to_json())


# ------------------------------------------------------------------ CLI


def add_arguments(p) -> None:
    p.add_argument("--engine", action="append", default=[], metavar="NAME=COMMAND",
                   help="an engine: name and GTP command line; @alphalite = this alphalite's `gtp`, @pachi = Pachi "
                        "(make pachi; every core, no pondering), @gnugo = "
                        "GNU Go in GTP mode, {seed} = a per-game seed (repeat, at least twice)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--round-robin", action="store_true", help="every engine against every other (default)")
    mode.add_argument("--gauntlet", metavar="NAME", help="NAME against each of the others")
    p.add_argument("--games", type=int, default=10, help="games per pairing (colours alternate); "
                                                         "raise it and rerun to extend")
    p.add_argument("--size", type=int, default=9, help="board size")
    p.add_argument("--komi", type=float, default=7.0, help="komi of every game")
    p.add_argument("--handicap", type=int, default=0, help="fixed handicap stones for Black (2..9)")
    p.add_argument("--time", action="append", default=[], metavar="[NAME=]MAIN/BYO/STONES",
                   help="GTP time_settings in seconds for NAME (or all engines), e.g. 10/1/1; "
                        "the arena keeps the clock and sends time_left")
    p.add_argument("--max-moves", type=int, default=0, help="move cap, then the game is scored (0: 3*size*size)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds an engine may take for one answer")
    p.add_argument("--referee", default="auto",
                   help="dead-stone referee: auto (GNU Go if installed), none, or a GTP command")
    p.add_argument("--jobs", type=int, default=1, help="games played at once (worker processes)")
    p.add_argument("--anchor", help="engine whose Elo is fixed (default: the first opponent in a gauntlet, "
                                    "else the last engine)")
    p.add_argument("--anchor-elo", type=float, default=0.0, help="Elo given to the anchor engine")
    p.add_argument("--sprt", default="", metavar="elo0=0,elo1=35,alpha=0.05,beta=0.05",
                   help="gate the first engine (candidate) against the second (current best); stops early")
    p.add_argument("--out", required=True, help="tournament folder (created, or resumed)")
    p.add_argument("--report-only", action="store_true", help="rebuild the report from results.jsonl")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def tournament_from_args(args) -> Tournament:
    engines = [parse_engine(e) for e in args.engine]
    times = {}
    for text in args.time:
        name, sep, value = text.rpartition("=")
        parse_time(value)
        times[name if sep else "*"] = value
    known = {e.name for e in engines}
    for name in times:
        if name != "*" and name not in known:
            raise ArenaError(f"--time for unknown engine {name!r}")
    engines = [dataclasses.replace(e, time=times.get(e.name, times.get("*", ""))) for e in engines]
    return Tournament(engines=tuple(engines), games=args.games, gauntlet=args.gauntlet, size=args.size,
                      komi=args.komi, handicap=args.handicap, max_moves=args.max_moves, timeout=args.timeout,
                      referee=args.referee, anchor=args.anchor, anchor_elo=args.anchor_elo, sprt=args.sprt)


def cli(args) -> int:
    if args.report_only:
        out = Path(args.out)
        if not (out / SETTINGS).exists():
            raise ArenaError(f"no tournament in {out}")
        s = json.loads((out / SETTINGS).read_text())
        t = Tournament(engines=tuple(EngineSpec(**e) for e in s.pop("engines")), **s)
        sprt = ratings.Sprt.parse(t.sprt) if t.sprt else None
        report = ratings.write_report(out, read_results(out / RESULTS), anchor=t.anchor_name(),
                                      anchor_elo=t.anchor_elo, sprt=sprt,
                                      candidate=t.engines[0].name if sprt else None, settings=t.to_json())
        print(report["text"])
        return 0
    t = tournament_from_args(args)
    res = run_tournament(t, args.out, jobs=args.jobs, progress=not args.quiet)
    print(res["report"]["text"])
    print(f"report: {res['report']['markdown']}  plot: {res['report']['plot']}")
    return 3 if res["stopped_pairings"] else 0


# ------------------------------------------------------------------ demo


def demo_match(out_dir, *, games: int = 4, jobs: int = 2) -> dict:
    """`make demo`: a few fast 9x9 games of our rollout MCTS against GNU Go
    level 1, with the result table; a clear message and no error where GNU Go
    is not installed. Resumes like any tournament."""
    if find_gnugo() is None:
        print("arena demo skipped: GNU Go is not installed (apt-get install gnugo, or brew install gnu-go)")
        return {"skipped": "gnugo not installed"}
    t = Tournament(
        engines=(EngineSpec("alphalite-mcts", "@alphalite --engine mcts --checkpoint none --visits 200 --size 9 "
                                              "--seed {seed}"),
                 EngineSpec("gnugo-l1", "@gnugo --level 1 --seed {seed}")),
        games=games, size=9, komi=7.0, max_moves=160, timeout=60.0, anchor="gnugo-l1")
    print(f"arena: {games} games on 9x9, {t.engines[0].name} (rollout MCTS, 200 visits) vs "
          f"{t.engines[1].name}, {jobs} at a time -> {out_dir}", flush=True)
    t0 = time.time()
    res = run_tournament(t, out_dir, jobs=jobs, progress=False)
    print(res["report"]["text"])
    print(f"arena demo: {time.time() - t0:.0f} s; report {res['report']['markdown']}")
    return res
