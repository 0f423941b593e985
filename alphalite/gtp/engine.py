"""GTP engine: ``cmd_<name>`` handlers dispatched by name, one pure ``handle``.

::

    eng = Engine(EngineConfig(engine="random", size=9))
    eng.handle("1 genmove b")   # -> "=1 E5\\n\\n"

``Engine.handle(line) -> str`` returns the whole framed response (``""`` for
a line that carries no command); only ``serve`` (the main loop) touches
stdout, and logs go to stderr. Framing follows GTP 2: the id is echoed on
``=`` and ``?``; every response ends with exactly one blank line and holds
none inside; input lines lose control characters (CR included) and ``#``
comments, tabs become spaces, empty lines are ignored. Every handler runs
inside a catch-all, so no input line can crash or desynchronise the engine
(an unexpected error answers ``? internal error: ...``); a failing ``play``
leaves the board as it was.

Errors use the canonical texts: ``unknown command``, ``syntax error``,
``illegal move``, ``unacceptable size``, ``cannot undo``, ``board not
empty``, ``invalid number of stones``, ``cannot load file``.

The engine answers ``name``, ``protocol_version`` and the other ``IDENTITY``
commands at once on start-up, while Numba warm-up, network loading and
compiling (read back from ``alphalite.nn.jitcache``) run in a background thread;
every other command waits for it, so the first ``genmove`` finds a warm
engine. A move's time counts from the arrival of its ``genmove`` line
(``serve`` stamps each line as it is read). Streaming analysis (``lz-analyze``,
``lz-genmove_analyze`` in Leela Zero's format, ``kata-analyze``,
``kata-genmove_analyze`` in KataGo's, with score and ownership estimates:
see ``Engine._kata_line``) is done by ``Engine.stream`` from the main loop,
which stops it when the next input line arrives; through ``handle`` the same
commands run a short search and answer once.

Players (``--engine``): ``random``, ``policy`` (policy net; argmax or
sampling), ``mcts`` (PUCT with policy priors and rollout values, a value net
mixed in with ``--lambda``). Nets (``--checkpoint``, ``--value-checkpoint``):
``auto`` plays the shipped nets of the board size in play
(``checkpoint.DEFAULT_NETS``), loaded and warmed up when a size is first
played (``boardsize`` starts it); nets named on the command line are loaded
and checked before the first command is read, and a wrong one stops the
engine. A net only plays the board size it was trained on; on a size with no
net the engine plays rollout MCTS with a knowledge-free line prior
(``players.line_prior``) and says so once on stderr. Time control, resigning,
passing and scoring: see ``alphalite.engine.timecontrol`` and ``alphalite.engine.players``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import queue
import re
import sys
import threading
import time
import typing
from importlib import metadata
from typing import Callable

NAME = "alphalite"
VERSION = metadata.version("alphalite")  # pyproject.toml's, as installed
PROTOCOL_VERSION = "2"
BLACK, WHITE = 1, -1
STREAMING = ("lz-analyze", "lz-genmove_analyze", "kata-analyze", "kata-genmove_analyze")
# Answered at once on start-up; any other command first waits for the
# warm-up, so a controller's clock never starts on a cold engine.
IDENTITY = ("protocol_version", "name", "version", "known_command", "list_commands", "quit")

_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_ID = re.compile(r"[0-9]+\Z")
_VERTEX = re.compile(r"[A-Za-z][0-9]{1,2}\Z")
AUTO = "auto"  # --checkpoint / --value-checkpoint: the shipped nets of each board size


class GtpFailure(Exception):
    """A handler's way of answering ``? message``."""


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    engine: str = "random"  # random | policy | mcts
    checkpoint: str | None = None  # policy net: shipped net's name, model or run folder; AUTO: shipped; None: none
    # value net, the same forms (AUTO: the shipped one when the policy net is AUTO, else none); mcts mixes
    # it with rollouts by lam, policy resigns by it
    value_checkpoint: str | None = None
    lam: float = 0.5  # leaf value = lam * value net + (1 - lam) * rollout (with a value net)
    visits: int | None = None  # mcts visits per move, a cap; None: players.DEFAULT_VISITS without a clock, none with one
    max_time: float | None = None  # seconds a move may take at most, with or without a clock (KataGo's maxTime)
    lag_buffer: float = 0.2  # seconds kept back per move under a clock for pipes and scheduling (KataGo's lagBuffer)
    batch: int = 8  # leaves per network call
    temperature: float = 0.0  # policy engine: 0 = argmax, > 0 samples p ** (1 / T)
    resign_threshold: float = 0.1  # winrate below which a move counts towards resigning
    resign_moves: int = 3  # consecutive such moves before resigning
    resign: bool = True
    komi: float = 7.5
    size: int = 19
    seed: int = 0
    score_playouts: int = 128  # random playouts for dead stones (final_score, cleanup, passing)
    superko: bool = True

    def __post_init__(self):
        """ValueError naming the flag for a value no game can be played with."""
        def finite(x):
            return isinstance(x, (int, float)) and math.isfinite(x)

        for ok, flag, want, got in (
                (self.engine in ("random", "policy", "mcts"), "engine", "random, policy or mcts", self.engine),
                (isinstance(self.size, int) and 2 <= self.size <= 25, "size", "in 2..25", self.size),
                (finite(self.komi), "komi", "a finite number", self.komi),
                (finite(self.lam) and 0 <= self.lam <= 1, "lambda", "in [0, 1]", self.lam),
                (self.visits is None or self.visits >= 1, "visits", ">= 1", self.visits),
                (self.max_time is None or finite(self.max_time) and self.max_time > 0, "max-time", "> 0",
                 self.max_time),
                (finite(self.lag_buffer) and self.lag_buffer >= 0, "lag-buffer", ">= 0", self.lag_buffer),
                (self.batch >= 1, "batch", ">= 1", self.batch),
                (finite(self.temperature) and self.temperature >= 0, "temperature", ">= 0", self.temperature),
                (finite(self.resign_threshold) and 0 <= self.resign_threshold <= 1, "resign-threshold",
                 "in [0, 1]", self.resign_threshold),
                (self.resign_moves >= 1, "resign-moves", ">= 1", self.resign_moves),
                (self.seed >= 0, "seed", ">= 0", self.seed),
                (self.score_playouts >= 0, "score-playouts", ">= 0", self.score_playouts)):
            if not ok:
                raise ValueError(f"--{flag} must be {want}, got {got!r}")


@dataclasses.dataclass
class AnalyzeRequest:
    """What an analysis command (``lz-``/``kata-analyze``, ``..genmove_analyze``) asked for."""

    color: int  # the side analysed: every number is from its view
    kata: bool = False  # KataGo's format (floats, scores, ownership) instead of Leela Zero's
    interval: float = 0.0  # seconds between info lines (0: the final one only)
    min_moves: int = 0  # report at least this many moves (unvisited ones by prior)
    max_moves: int | None = None  # and at most this many
    ownership: bool = False  # kata: ``ownership`` of every point after the info items
    moves_ownership: bool = False  # kata: ``movesOwnership`` in each info item
    root_info: bool = False  # kata: ``rootInfo`` (the root's visits, winrate, score)
    pv_visits: bool = False  # ``pvVisits``: visits along each pv


class Territory(typing.NamedTuple):
    """Expected end of a game from one position (``Engine._territory``)."""

    ownership: object  # float64 [size*size] in [-1, 1], black's view (+1 black), row 0 the top row
    margin: float  # mean final area, black minus white minus komi
    stdev: float  # its standard deviation over the playouts


@dataclasses.dataclass
class Command:
    id: str  # "" when none was given
    name: str
    args: list[str]


def clean_line(raw: str) -> str:
    """GTP preprocessing: control characters but HT/LF removed, ``#``
    comments cut, HT -> space, surrounding space stripped."""
    line = _CONTROL.sub("", raw.replace("\t", " "))
    if "#" in line:
        line = line[: line.index("#")]
    return line.strip()


def parse(raw: str) -> Command | None:
    """A preprocessed input line as a Command; None for an empty line."""
    words = clean_line(raw).split()
    if not words:
        return None
    ident = ""
    if _ID.match(words[0]):
        ident = words.pop(0)
    if not words:
        return Command(ident, "", [])
    return Command(ident, words[0], words[1:])


def _sanitize(body: str) -> str:
    """A response body that cannot break the framing: no CR, no control
    characters, no blank lines inside, no trailing newline."""
    body = body.replace("\r", "").replace("\t", " ")
    lines = [_CONTROL.sub("", ln).rstrip() for ln in body.split("\n")]
    if not lines:
        return ""
    first, rest = lines[0], [ln for ln in lines[1:] if ln.strip()]
    return "\n".join([first] + rest)


def frame(ident: str, ok: bool, body: str) -> str:
    body = _sanitize(body)
    head = ("=" if ok else "?") + ident
    if body.startswith("\n"):
        return f"{head}{body}\n\n"
    return f"{head} {body}\n\n" if body else f"{head}\n\n"


def _gtp_name(method: str) -> str:
    name = method[len("cmd_"):]
    for prefix in ("kgs_", "lz_", "kata_", "gogui_", "alphalite_"):
        if name.startswith(prefix):
            return prefix[:-1] + "-" + name[len(prefix):]
    return name


def _parse_color(word: str) -> int:
    w = word.lower()
    if w in ("b", "black"):
        return BLACK
    if w in ("w", "white"):
        return WHITE
    raise GtpFailure("syntax error")


def _parse_int(word: str, lo: int | None = None) -> int:
    if not re.fullmatch(r"[+-]?[0-9]{1,9}", word):
        raise GtpFailure("syntax error")
    v = int(word)
    if lo is not None and v < lo:
        raise GtpFailure("syntax error")
    return v


def _num(x: float) -> str:
    """A float as KataGo-style analysis prints it, always with a decimal
    point (Sabaki tells kata's floats from Leela Zero's integers by it)."""
    text = f"{float(x) + 0.0:.6f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _playouts_for(visits: int, most: int) -> int:
    """Playouts for a move's score estimate: its visits rounded up to a
    power of two, at least 16, at most ``most`` (a few sizes, so the cached
    estimates are redone at most a few times as a move gains visits)."""
    return min(max(16, 1 << max(int(visits) - 1, 0).bit_length()), max(most, 1))


def _parse_float(word: str) -> float:
    if len(word) > 40:
        raise GtpFailure("syntax error")
    try:
        v = float(word)
    except ValueError:
        raise GtpFailure("syntax error") from None
    if not math.isfinite(v):
        raise GtpFailure("syntax error")
    return v


class Engine:
    """GTP state and handlers. ``log`` is a callable taking one line (stderr
    by default); ``warmup=False`` skips the background warm-up thread (the
    first ``genmove`` then loads what it needs)."""

    def __init__(self, config: EngineConfig | None = None, *, log: Callable[[str], None] | None = None,
                 warmup: bool = True):
        self.config = config or EngineConfig()
        self._log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.quit = False
        self.size = self.config.size
        self.komi = float(self.config.komi)
        self._stack = None  # list of GoStates, created on first use
        self.moves: list[tuple[int, int]] = []  # (colour, flat move) leading to stack[i + 1]
        self.setup_black: list[int] = []
        self.setup_white: list[int] = []
        self.handicap = 0
        self._judged: dict = {}
        self._territories: dict = {}
        self._players: dict = {}
        self._said: set = set()
        self._nets: dict[int, tuple[str, str | None]] = {}  # board size -> (policy, value net or None)
        self._loaded: dict[int, object] = {}  # board size -> PolicyNet, or the CheckpointError loading it
        self._ready = threading.Event()
        self._warm = warmup
        self._rng = None
        self._arrived = time.perf_counter()  # when the command being answered was read
        self._time = None  # TimeSettings, set lazily
        self._clocks: dict[int, object] = {}
        self._resign = None
        self.commands = {_gtp_name(m): getattr(self, m) for m in dir(self) if m.startswith("cmd_")}
        if self.config.engine != "random":
            self._plan_nets()
        if warmup:
            threading.Thread(target=self._warmup, name="gtp-warmup", daemon=True).start()
        else:
            self._ready.set()

    # ------------------------------------------------------------ plumbing

    def log(self, msg: str) -> None:
        try:
            self._log(msg)
        except Exception:  # noqa: BLE001 - a closed stderr must not kill the engine
            pass

    def _warmup(self):
        try:
            self._load()
            import numpy as np

            from alphalite.go import board

            from alphalite.engine import players

            # Every kernel a genmove runs (tests/test_clock.py checks none is
            # left to load or compile), with a generator of its own so that
            # the engine's moves do not depend on whether it warmed up.
            n = self.size
            st = board.new_game(n, self.komi, superko=self.config.superko)
            st = board.play(board.play(st, (n // 2) * n + n // 2), 0)  # both colours: territory is judged
            players.candidate_moves(st)
            players.final_score(st, 4, 1)
            p = self._player()
            if isinstance(p, players.MctsPlayer):
                p.run(st, np.random.default_rng(0), max_visits=16).tree.root_analysis()
                p.forget()
            elif isinstance(p, players.PolicyPlayer):
                p.prior(st)
        except Exception as e:  # noqa: BLE001 - reported, genmove then falls back
            self.log(f"{NAME}: warm-up failed: {type(e).__name__}: {e}")
        finally:
            self._ready.set()

    def _plan_nets(self):
        """Which nets play which board size. Nets named in the config are
        loaded and checked now (CheckpointError naming the folder); the
        shipped ones (AUTO) only found now, and loaded when their size is
        first played."""
        from alphalite.nn import checkpoint
        from alphalite.engine import players

        policy, value = self.config.checkpoint, self.config.value_checkpoint
        if policy == AUTO:  # the installed ones, whatever folders the working folder holds
            for n, (p, v) in checkpoint.DEFAULT_NETS.items():
                self._nets[n] = (str(checkpoint.shipped(p)), str(checkpoint.shipped(v)) if value == AUTO else None)
        if value in (None, AUTO) and policy in (None, AUTO):
            return
        if policy is None:
            raise checkpoint.CheckpointError(f"the value net {value} needs a policy net beside it "
                                             "(--checkpoint is none)")
        if policy == AUTO:  # the value net named replaces the shipped one of its size
            info = checkpoint.read_model_info(checkpoint.find_model_dir(value))
            n = int(info["board_size"])
            if n not in self._nets:
                raise checkpoint.CheckpointError(f"{value} is a {n}x{n} value net, but no shipped policy net "
                                                 f"plays {n}x{n} (give --checkpoint)")
            policy = self._nets[n][0]
        value = None if value == AUTO else value
        t0 = time.perf_counter()
        net = players.load_net(policy, value)
        self._nets[net.size] = (policy, value)
        self._loaded[net.size] = net
        self._log_loaded(net.size, time.perf_counter() - t0)

    def _log_loaded(self, n: int, seconds: float):
        policy, value = self._nets[n]
        self.log(f"{NAME}: {n}x{n} nets: policy {policy}, value {value or 'none'} (loaded in {seconds:.1f} s)")

    def _load(self, size: int | None = None):
        """The PolicyNet for ``size`` (default: the board's), loaded once;
        None where no net plays that size. A net that fails to load answers
        every command that needs it with a failure (logged once)."""
        from alphalite.nn import checkpoint
        from alphalite.engine import players

        n = self.size if size is None else size
        if n not in self._nets:
            return None
        if n not in self._loaded:
            t0 = time.perf_counter()
            try:
                self._loaded[n] = players.load_net(*self._nets[n])
                self._log_loaded(n, time.perf_counter() - t0)
            except checkpoint.CheckpointError as e:
                self._loaded[n] = e
                self.log(f"{NAME}: cannot load the {n}x{n} nets: {e}")
        net = self._loaded[n]
        if isinstance(net, Exception):
            raise GtpFailure(f"cannot load the {n}x{n} network")
        return net

    def _start_warmup(self):
        """After a board size change: warm up that size's player (its nets
        loaded, their functions compiled) in the background; the next
        commands wait for it as they do at start-up."""
        if self._warm and self.config.engine != "random" and self.size not in self._players:
            self._ready.clear()
            threading.Thread(target=self._warmup, name="gtp-warmup", daemon=True).start()

    def _gen(self):
        import numpy as np

        if self._rng is None:
            self._rng = np.random.default_rng(self.config.seed)
        return self._rng

    def _say_once(self, msg: str):
        if msg not in self._said:
            self._said.add(msg)
            self.log(msg)

    def _player(self):
        """The move chooser for the current board size."""
        from alphalite.engine import players

        size = self.size
        if size in self._players:
            return self._players[size]
        cfg = self.config
        if cfg.engine == "random":
            p = players.RandomPlayer()
        else:
            net = self._load()
            if net is not None:
                if cfg.engine == "policy":
                    p = players.PolicyPlayer(net, cfg.temperature)
                else:
                    from search.evaluators import mix_rollouts, network_evaluator

                    lam = cfg.lam if net.value_model is not None else 0.0
                    ev = mix_rollouts(network_evaluator(net.net_fn, preset=net.preset, pad_to=cfg.batch), lam)
                    p = players.MctsPlayer(ev, net.params, visits=cfg.visits, batch_size=cfg.batch,
                                           prior_fn=net.priors, label="mcts")
            else:
                sizes = ", ".join(f"{n}x{n}" for n in sorted(self._nets)) or "none (--checkpoint none)"
                self._say_once(f"{NAME}: no network plays {size}x{size} (nets: {sizes}): {cfg.engine} engine "
                               "using rollout MCTS with line priors")
                from search.evaluators import rollout_evaluator

                p = players.MctsPlayer(rollout_evaluator(players.line_prior_fn(size)), visits=cfg.visits,
                                       batch_size=cfg.batch, label="rollout-mcts")
        self._players[size] = p
        return p

    def _analysis_player(self):
        from alphalite.engine import players

        p = self._player()
        if isinstance(p, players.MctsPlayer):
            return p
        key = ("analysis", self.size)
        if key not in self._players:
            from search.evaluators import rollout_evaluator

            prior_fn = p.prior if getattr(p, "has_prior", False) else None
            ev = rollout_evaluator(None if prior_fn is None else
                                   (lambda params, leaves: _batch_priors(prior_fn, leaves)))
            self._players[key] = players.MctsPlayer(ev, visits=self.config.visits, batch_size=self.config.batch,
                                                    prior_fn=prior_fn, label="analysis")
        return self._players[key]

    @property
    def stack(self):
        if self._stack is None:
            from alphalite.go import board

            self._stack = [board.new_game(self.size, self.komi, superko=self.config.superko)]
        return self._stack

    @property
    def state(self):
        return self.stack[-1]

    def _timing(self):
        from alphalite.engine import timecontrol as tc

        if self._time is None:
            self._time = tc.TimeSettings()
            self._clocks = {BLACK: tc.Clock(), WHITE: tc.Clock()}
        return tc

    @property
    def resign_policy(self):
        if self._resign is None:
            from alphalite.engine.players import ResignPolicy

            self._resign = ResignPolicy(threshold=self.config.resign_threshold,
                                        consecutive=self.config.resign_moves, enabled=self.config.resign)
        return self._resign

    def _reset(self, size: int):
        from alphalite.go import board

        self.size = size
        self._stack = [board.new_game(size, self.komi, superko=self.config.superko)]
        self.moves = []
        self.setup_black, self.setup_white = [], []
        self.handicap = 0
        self._judged.clear()
        self.resign_policy.reset()
        for p in self._players.values():
            p.forget()

    def _vertex(self, word: str) -> int:
        from alphalite.go import coords

        if word.lower() == "pass":
            return self.size * self.size
        if not _VERTEX.match(word) or word[0].upper() == "I":
            raise GtpFailure("syntax error")
        try:
            return coords.from_gtp(word, self.size)
        except (coords.CoordError, ValueError):
            raise GtpFailure("illegal move") from None  # well formed, off this board

    def _to_gtp(self, move: int) -> str:
        from alphalite.go import coords

        return coords.to_gtp(int(move), self.size)

    def _with_to_play(self, state, color: int):
        from alphalite.go import board
        from alphalite.engine import players

        state = players.resume(state)
        if state.to_play == color:
            return state
        b = state.copy_tuple()
        b[board.B_META][board.M_TOPLAY] = color
        b[board.B_META][board.M_KO] = -1  # a ko ban binds only the player who was next
        return board.GoState(state.size, state.komi, state.superko, state.suicide, b)

    def _board_empty(self) -> bool:
        from alphalite.go import board

        return not board.stones(self.state).any()

    # ------------------------------------------------------------ entry points

    def handle(self, line: str) -> str:
        """One input line -> the framed response ("" for no command)."""
        cmd = parse(line)
        if cmd is None:
            return ""
        return self.execute(cmd)

    def execute(self, cmd: Command, *, arrived: float | None = None) -> str:
        """Answer one command. ``arrived``: ``time.perf_counter()`` when its
        line was read (default: now); a move's time is counted from there."""
        self._arrived = time.perf_counter() if arrived is None else arrived
        fn = self.commands.get(cmd.name)
        if fn is None:
            return frame(cmd.id, False, "unknown command")
        if cmd.name not in IDENTITY:
            self._ready.wait()
        try:
            if not _accepts(fn, len(cmd.args)):
                raise GtpFailure("syntax error")
            return frame(cmd.id, True, fn(*cmd.args))
        except GtpFailure as e:
            return frame(cmd.id, False, str(e))
        except MemoryError:
            return frame(cmd.id, False, "out of memory")
        except Exception as e:  # noqa: BLE001 - no input line may kill the engine
            self.log(f"{NAME}: internal error in {cmd.name!r}: {type(e).__name__}: {e}")
            return frame(cmd.id, False, f"internal error: {type(e).__name__}")

    def stream(self, cmd: Command, write: Callable[[str], None], stop: Callable[[], bool], *,
               arrived: float | None = None) -> None:
        """The ``STREAMING`` commands with output as it comes: ``=id``, then
        an ``info ...`` line every interval, until ``stop()`` (analysis) or
        the move is chosen (``play <vertex>``), then the blank line."""
        self._arrived = time.perf_counter() if arrived is None else arrived
        self._ready.wait()
        try:
            req = self._analyze_args(cmd.args, cmd.name)
        except GtpFailure as e:
            write(frame(cmd.id, False, str(e)))
            return
        except Exception as e:  # noqa: BLE001
            write(frame(cmd.id, False, f"internal error: {type(e).__name__}"))
            return
        write(f"={cmd.id}\n")
        last = [time.perf_counter()]

        def emit(tree, force=False):
            now = time.perf_counter()
            if force or (req.interval > 0 and now - last[0] >= req.interval):
                text = _sanitize(self._info_line(tree, req)).replace("\n", " ")
                if text:
                    write(text + "\n")
                last[0] = time.perf_counter()  # the interval runs from the end of a (costly) line

        def cb(tree, n):
            if stop():
                return True
            emit(tree)
            return False

        try:
            if cmd.name.endswith("genmove_analyze"):
                trees = []

                def cb_keep(tree, n):
                    trees[:] = [tree]
                    return cb(tree, n)

                move = self._genmove(req.color, callback=cb_keep)
                if trees:
                    emit(trees[0], force=True)
                write(_sanitize(f"play {move}").replace("\n", " ") + "\n")
            else:
                self._analyze(req.color, cb, until_stopped=stop)
        except Exception as e:  # noqa: BLE001 - keep the framing whatever happens
            self.log(f"{NAME}: internal error in {cmd.name!r}: {type(e).__name__}: {e}")
        write("\n")

    # ------------------------------------------------------------ GTP required

    def cmd_protocol_version(self):
        return PROTOCOL_VERSION

    def cmd_name(self):
        return NAME

    def cmd_version(self):
        return VERSION

    def cmd_known_command(self, name):
        return "true" if name in self.commands else "false"

    def cmd_list_commands(self):
        return "\n".join(sorted(self.commands))

    def cmd_quit(self):
        self.quit = True
        return ""

    def cmd_boardsize(self, size):
        n = _parse_int(size)
        if not 2 <= n <= 25:
            raise GtpFailure("unacceptable size")
        self._reset(n)
        self._start_warmup()
        return ""

    def cmd_clear_board(self):
        self._reset(self.size)
        return ""

    def cmd_komi(self, komi):
        k = _parse_float(komi)
        from alphalite.go import board

        self.komi = k
        self._stack = [board.with_komi(s, k) for s in self.stack]
        self._judged.clear()
        return ""

    def cmd_play(self, color, vertex):
        from alphalite.go import board

        c = _parse_color(color)
        move = self._vertex(vertex)
        from alphalite.engine import players

        state = players.resume(self.state)
        try:
            new = board.play(state, move, c)
        except board.IllegalMove as e:
            self.log(f"{NAME}: {e}")
            raise GtpFailure("illegal move") from None
        self.stack.append(new)
        self.moves.append((c, move))
        return ""

    def cmd_genmove(self, color):
        return self._genmove(_parse_color(color))

    # ------------------------------------------------------------ more commands

    def cmd_undo(self):
        if len(self.stack) <= 1:
            raise GtpFailure("cannot undo")
        self.stack.pop()
        self.moves.pop()
        return ""

    def cmd_showboard(self):
        from alphalite.go import board

        return "\n" + board.render(self.state)

    def cmd_fixed_handicap(self, n):
        from alphalite.go import sgf

        k = _parse_int(n)
        if not self._board_empty():
            raise GtpFailure("board not empty")
        if k < 2:
            raise GtpFailure("invalid number of stones")
        try:
            points = sgf.handicap_points(self.size, k)
        except sgf.SgfError:
            raise GtpFailure("invalid number of stones") from None
        self._place_handicap(points)
        return " ".join(self._to_gtp(p) for p in points)

    def cmd_place_free_handicap(self, n):
        import numpy as np

        from alphalite.go import sgf

        k = _parse_int(n)
        if not self._board_empty():
            raise GtpFailure("board not empty")
        pts = self.size * self.size
        if k < 2 or k > pts - 1:
            raise GtpFailure("invalid number of stones")
        try:
            points = sgf.handicap_points(self.size, min(k, 9))
        except sgf.SgfError:
            points = []
        if len(points) < k:
            n = self.size
            rest = [p for p in range(pts) if p not in points]
            line = [min(p // n, p % n, n - 1 - p // n, n - 1 - p % n) for p in rest]
            want = 3 if n >= 13 else 2
            noise = self._gen().random(len(rest))
            order = np.lexsort((noise, [abs(v - want) for v in line]))
            points = points + [rest[i] for i in order[: k - len(points)]]
        self._place_handicap(points)
        return " ".join(self._to_gtp(p) for p in points)

    def cmd_set_free_handicap(self, *vertices):
        if not self._board_empty():
            raise GtpFailure("board not empty")
        try:
            points = [self._vertex(v) for v in vertices]
        except GtpFailure as e:  # a well-formed vertex off this board is a bad list, not a bad move
            raise GtpFailure("bad vertex list" if str(e) == "illegal move" else str(e)) from None
        if len(points) < 2 or len(points) > self.size * self.size - 1:
            raise GtpFailure("invalid number of stones")
        if len(set(points)) != len(points) or self.size * self.size in points:
            raise GtpFailure("bad vertex list")
        self._place_handicap(points)
        return ""

    def _place_handicap(self, points):
        import numpy as np

        from alphalite.go import board

        grid = np.zeros((self.size, self.size), np.int8)
        for p in points:
            grid[p // self.size, p % self.size] = BLACK
        try:
            st = board.from_stones(grid, komi=self.komi, to_play=WHITE, superko=self.config.superko)
        except ValueError:
            raise GtpFailure("bad vertex list") from None
        self._stack = [st]
        self.moves = []
        self.setup_black, self.setup_white = sorted(int(p) for p in points), []
        self.handicap = len(points)
        self._judged.clear()
        for p in self._players.values():
            p.forget()

    # time

    def cmd_time_settings(self, main, byo, stones):
        tc = self._timing()
        try:
            settings = tc.from_gtp_time_settings(_parse_float(main), _parse_float(byo), _parse_int(stones))
        except ValueError:
            raise GtpFailure("syntax error") from None
        self._set_time(settings)
        return ""

    def cmd_kgs_time_settings(self, *args):
        tc = self._timing()
        if len(args) > 4 or any(len(a) > 40 for a in args):
            raise GtpFailure("syntax error")
        try:
            settings = tc.from_kgs(list(args))
        except ValueError:
            raise GtpFailure("syntax error") from None
        self._set_time(settings)
        return ""

    def _set_time(self, settings):
        tc = self._timing()
        self._time = settings
        self._clocks = {BLACK: tc.start_clock(settings), WHITE: tc.start_clock(settings)}
        self.log(f"{NAME}: time settings {settings}")

    def cmd_time_left(self, color, seconds, stones):
        tc = self._timing()
        c = _parse_color(color)
        t = _parse_float(seconds)
        s = _parse_int(stones)
        if t < 0 or s < 0:
            raise GtpFailure("syntax error")
        if self._time.kind == tc.NONE:  # a clock nobody announced: treat it as absolute time
            self._time = tc.TimeSettings(tc.ABSOLUTE, main=t) if s == 0 else \
                tc.TimeSettings(tc.CANADIAN, main=0.0, period=t, stones=s)
        self._clocks[c] = tc.from_time_left(self._time, t, s)
        return ""

    # play

    def cmd_kgs_genmove_cleanup(self, color):
        return self._genmove(_parse_color(color), cleanup=True)

    def cmd_reg_genmove(self, color):
        return self._genmove(_parse_color(color), commit=False)

    def _genmove(self, color: int, *, commit: bool = True, cleanup: bool = False, callback=None) -> str:
        from alphalite.go import board
        from alphalite.engine import players

        t0 = self._arrived  # everything from the command's arrival is charged to the move
        self._ready.wait()
        tc = self._timing()
        state = self._with_to_play(self.state, color)
        n2 = self.size * self.size
        budget = tc.allocate(self._time, self._clocks[color], state.move_number, n2, lag=self.config.lag_buffer)
        if self.config.max_time is not None:
            budget = self.config.max_time if budget is None else min(budget, self.config.max_time)
        allocated = budget
        if budget is not None:  # what the wait for warm-up (or anything else) took is gone
            budget = max(budget - (time.perf_counter() - t0), tc.MIN_MOVE)
        cand = players.candidate_moves(state)
        decision = None
        if cleanup:
            decision = self._cleanup_move(state, color)
        if decision is None and players.last_was_pass(state) and self._pass_wins(state, color):
            decision = players.Decision(n2, note="the opponent passed and passing wins")
        if decision is None and not cand[:-1].any():
            decision = players.Decision(n2, note="no move left outside own territory and eyes")
        if decision is None:
            player = self._player()
            decision = player.genmove(state, cand, budget, self._gen(), callback)
            if cleanup and decision.move == n2 and cand[:-1].any():
                decision = players.Decision(int(self._gen().choice(board_indices(cand))), note="cleanup")
            elif (decision.move == n2 and players.last_was_pass(state) and cand[:-1].any()
                  and self._judge(state)[0] * color <= 0):
                # Our pass would end the game, and with the dead stones off
                # (as servers and referees score) we lose: play on. The
                # search scores two passes by Tromp-Taylor as the board
                # stands, so a dead stone in our area can make it pass here.
                decision = self._play_on(state, cand, decision)
        move = decision.move
        elapsed = time.perf_counter() - t0
        wr = "" if decision.winrate is None else f" winrate {decision.winrate:.3f}"
        self.log(f"{NAME}: {'B' if color == BLACK else 'W'} {self._to_gtp(move)}{wr} visits {decision.visits} "
                 f"in {elapsed:.2f} s" + (f" (budget {allocated:.2f} s)" if allocated is not None else "")
                 + (f" [{decision.note}]" if decision.note else ""))
        if not commit:
            return self._to_gtp(move)
        self._clocks[color] = tc.charge(self._time, self._clocks[color], elapsed)
        if self.resign_policy.observe(decision.winrate, move_number=state.move_number, board_points=n2,
                                      color=color, handicap=self.handicap):
            self.log(f"{NAME}: resigning (winrate {decision.winrate:.3f})")
            return "resign"
        new = board.play(state, move, color)
        self.stack.append(new)
        self.moves.append((color, move))
        return self._to_gtp(move)

    def _play_on(self, state, cand, decision):
        """The searched move with most visits among the candidates (else the
        candidate the prior likes best) instead of a game-ending pass."""
        import numpy as np

        rows = [r for r in (decision.analysis or []) if r["move"] < len(cand) - 1 and cand[r["move"]]]
        if rows:
            move = max(rows, key=lambda r: r["visits"])["move"]
        else:
            prior = np.asarray(self._player().prior(state), np.float64)
            move = int(np.argmax(np.where(cand, prior + 1e-9, -1.0)))
        return dataclasses.replace(decision, move=int(move),
                                   note="passing would end the game lost: playing on")

    def _judge(self, state):
        """(score, dead points) of a position, cached."""
        from alphalite.engine import players

        key = (state.hash, state.komi, state.move_number, state.to_play)
        if key not in self._judged:
            if len(self._judged) >= 64:
                self._judged.clear()
            seed = (state.hash ^ self.config.seed) & 0x7FFFFFFFFFFFFFFF
            self._judged[key] = players.final_score(state, self.config.score_playouts, seed)
        return self._judged[key]

    def _pass_wins(self, state, color) -> bool:
        """After the opponent's pass: do we win both by the Tromp-Taylor count
        as the board stands and with the dead stones taken off?"""
        from alphalite.go import board

        score, _ = self._judge(state)
        return board.area_score(state) * color > 0 and score * color > 0

    def _cleanup_move(self, state, color):
        """kgs-genmove_cleanup: while the opponent has dead stones, fill a
        liberty of the dead group with the fewest liberties."""
        from alphalite.go import board
        from alphalite.engine import players

        _, dead = self._judge(state)
        s = board.stones(state).ravel()
        dead = [int(p) for p in dead if s[p] == -color]
        if not dead:
            return None
        n = self.size
        libs = board.liberties(state).ravel()
        legal = board.legal_moves(state)
        best = None
        for p in sorted(dead, key=lambda q: libs[q]):
            r, c = divmod(p, n)
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= rr < n and 0 <= cc < n:
                    q = rr * n + cc
                    if s[q] == 0 and legal[q]:
                        best = q
                        break
            if best is not None:
                break
        if best is None:
            return None
        return players.Decision(int(best), note=f"cleanup: {len(dead)} dead stones left")

    # scoring

    def cmd_final_score(self):
        from alphalite.engine import players

        score, _ = self._judge(self.state)
        return players.result_string(score)

    def cmd_final_status_list(self, status):
        from alphalite.go import board

        status = status.lower()
        if status not in ("alive", "dead", "seki"):
            raise GtpFailure("syntax error")
        if status == "seki":
            return ""
        _, dead = self._judge(self.state)
        s = board.stones(self.state).ravel()
        dead_set = set(int(p) for p in dead)
        pts = [p for p in range(s.size) if s[p] != 0 and ((p in dead_set) == (status == "dead"))]
        return "\n".join(" ".join(self._to_gtp(p) for p in group) for group in _groups(pts, s, self.size))

    # SGF

    def cmd_loadsgf(self, filename, move_number=None):
        from alphalite.go import board, sgf

        limit = None if move_number is None else _parse_int(move_number, lo=1) - 1
        try:
            if not os.path.isfile(filename):  # not a FIFO or device that could block or never end
                raise OSError("not a regular file")
            with open(filename, "rb") as f:
                data = f.read(16 << 20)
            rec = sgf.read_sgf(data)
            st = board.new_game(rec.size, rec.komi, superko=self.config.superko)
            if rec.setup_black or rec.setup_white:
                st = board.setup(st, rec.setup_black, rec.setup_white)
        except (OSError, ValueError) as e:
            self.log(f"{NAME}: cannot load {filename!r}: {e}")
            raise GtpFailure("cannot load file") from None
        first = rec.first_player or (rec.moves[0][0] if rec.moves else (WHITE if rec.setup_black and not
                                                                        rec.setup_white else BLACK))
        st = self._with_to_play(st, first)
        stack, moves = [st], []
        for colour, m in rec.moves[:limit]:
            try:
                stack.append(board.play(board_resume(stack[-1]), m, colour))
            except board.IllegalMove as e:
                self.log(f"{NAME}: {filename}: stopped at move {len(moves) + 1}: {e}")
                break
            moves.append((colour, m))
        self.size, self.komi = rec.size, float(rec.komi)
        self._stack, self.moves = stack, moves
        self.setup_black, self.setup_white = list(rec.setup_black), list(rec.setup_white)
        self.handicap = rec.handicap
        self._judged.clear()
        self.resign_policy.reset()
        for p in self._players.values():
            p.forget()
        self._start_warmup()
        return ""

    def _record(self):
        from alphalite.engine import players
        from alphalite.go import sgf

        result = ""
        if self.state.is_over:
            score, _ = self._judge(self.state)
            result = players.result_string(score)
        first = self.stack[0].to_play
        return sgf.GameRecord(size=self.size, komi=self.komi, handicap=self.handicap,
                              result=result,
                              setup_black=tuple(self.setup_black), setup_white=tuple(self.setup_white),
                              moves=tuple(self.moves), first_player=first if first == WHITE else 0)

    def cmd_printsgf(self, filename=None):
        from alphalite.go import sgf

        data = sgf.write_sgf(self._record())
        if filename is None:
            return data.decode("utf-8", "replace").strip()
        try:
            tmp = f"{filename}.tmp{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, filename)
        except OSError as e:
            self.log(f"{NAME}: cannot write {filename!r}: {e}")
            raise GtpFailure("cannot save file") from None
        return ""

    # analysis

    def _analyze_args(self, args, command: str) -> AnalyzeRequest:
        """``[colour] [interval] [key value ...]`` of the Leela Zero and
        KataGo analysis commands (colour required by ``lz-genmove_analyze``
        only, as Leela Zero does)."""
        args = list(args)
        color = None
        if args and args[0].lower() in ("b", "w", "black", "white"):
            color = _parse_color(args.pop(0))
        elif command == "lz-genmove_analyze":
            raise GtpFailure("syntax error")
        req = AnalyzeRequest(color=self.state.to_play if color is None else color,
                             kata=command.startswith("kata-"))
        if args and re.fullmatch(r"[0-9]{1,9}", args[0]):
            req.interval = int(args.pop(0)) / 100.0
        flags = {"ownership": "ownership", "movesownership": "moves_ownership", "rootinfo": "root_info",
                 "pvvisits": "pv_visits"}
        while args:
            key = args.pop(0).lower()
            if key == "interval" and args:
                req.interval = _parse_int(args.pop(0), lo=0) / 100.0
            elif key in ("minmoves", "maxmoves") and args:
                setattr(req, "min_moves" if key == "minmoves" else "max_moves", _parse_int(args.pop(0), lo=0))
            elif key in flags and args and args[0].lower() in ("true", "false"):
                setattr(req, flags[key], args.pop(0).lower() == "true")
            elif key in ("avoid", "allow") and len(args) >= 3:
                _parse_color(args.pop(0))
                try:
                    for v in args.pop(0).split(","):
                        self._vertex(v)
                except GtpFailure:  # off this board too: a bad argument, not a bad move
                    raise GtpFailure("syntax error") from None
                _parse_int(args.pop(0), lo=0)
                # The search has no per-move ban yet: say so rather than
                # pretend.
                self._say_once(f"{NAME}: {key} is parsed but not honoured: the search has no move bans")
            else:
                raise GtpFailure("syntax error")
        return req

    def _analysis_rows(self, tree, req: AnalyzeRequest) -> list[dict]:
        """``tree.root_analysis()`` rows (most visits first), padded to
        ``min_moves`` with unvisited legal moves by prior (the root's own
        winrate, lcb 0), cut to ``max_moves``."""
        import numpy as np

        rows = tree.root_analysis()
        if len(rows) < req.min_moves:
            seen = {r["move"] for r in rows}
            prior = tree.raw_root_prior if tree.raw_root_prior is not None else tree.children_prior[0]
            q = tree.value(0)
            for a in np.argsort(-prior, kind="stable"):
                if len(rows) >= req.min_moves:
                    break
                if int(a) not in seen and tree.children_legal[0, a]:
                    rows.append(dict(move=int(a), visits=0, q=q, winrate=0.5 * (q + 1.0), prior=float(prior[a]),
                                     lcb=0.0, pv=[int(a)], pv_visits=[0]))
        return rows if req.max_moves is None else rows[: req.max_moves]

    def _info_line(self, tree, req: AnalyzeRequest) -> str:
        """One analysis update: Leela Zero's ``info`` items (winrate, prior
        and lcb as integers * 10000), or KataGo's (see ``_kata_line``)."""
        rows = self._analysis_rows(tree, req)
        if req.kata:
            return self._kata_line(tree, req, rows)
        parts = []
        for order, row in enumerate(rows):
            wr = int(round(10000 * row["winrate"]))
            lcb = int(round(10000 * min(max(row["lcb"], 0.0), 1.0)))
            prior = int(round(10000 * row["prior"]))
            pv = " ".join(self._to_gtp(m) for m in row["pv"])
            parts.append(f"info move {self._to_gtp(row['move'])} visits {row['visits']} winrate {wr} "
                         f"prior {prior} lcb {lcb} order {order} pv {pv}"
                         + (" pvVisits " + " ".join(map(str, row["pv_visits"])) if req.pv_visits else ""))
        return " ".join(parts)

    def _kata_line(self, tree, req: AnalyzeRequest, rows: list[dict]) -> str:
        """KataGo's ``kata-analyze`` line, every number from the analysed
        side's view and every float written with a decimal point::

            info move M visits N edgeVisits N utility U winrate W scoreMean S
              scoreStdev D scoreLead S scoreSelfplay S prior P lcb L
              utilityLcb UL order K pv M ... [pvVisits N ...]
              [movesOwnership O*size*size] info ...
            [rootInfo visits N utility U winrate W scoreMean S scoreStdev D
              scoreLead S scoreSelfplay S] [ownership O*size*size]

        ``winrate``/``lcb``: the search's (as ``lz-analyze``, as floats);
        ``utility``: the search's mean value in [-1, 1] (no score term),
        ``utilityLcb = 2 * lcb - 1``. Scores and ownership come from
        ``_territory`` of the position after the move (of the root for
        ``rootInfo`` and ``ownership``): scoreMean, scoreLead and
        scoreSelfplay are all its mean final margin, scoreStdev its spread;
        a move gets as many playouts as visits (``_playouts_for``), so the
        hundreds of one-visit moves of a 19x19 search stay cheap.
        Ownership rows run from the top row (A19 on 19x19), left to right."""
        from alphalite.go import board

        state = tree.root_state
        me = state.to_play
        parts = []
        for order, row in enumerate(rows):
            m = row["move"]
            t = self._territory(board.play(state, m), _playouts_for(row["visits"], self.config.score_playouts))
            lead = _num(me * t.margin)
            lcb = min(max(row["lcb"], 0.0), 1.0)
            pv = " ".join(self._to_gtp(x) for x in row["pv"])
            text = (f"info move {self._to_gtp(m)} visits {row['visits']} edgeVisits {row['visits']} "
                    f"utility {_num(row['q'])} winrate {_num(row['winrate'])} scoreMean {lead} "
                    f"scoreStdev {_num(t.stdev)} scoreLead {lead} scoreSelfplay {lead} prior {_num(row['prior'])} "
                    f"lcb {_num(lcb)} utilityLcb {_num(2.0 * lcb - 1.0)} order {order} pv {pv}")
            if req.pv_visits:
                text += " pvVisits " + " ".join(map(str, row["pv_visits"]))
            if req.moves_ownership:
                text += " movesOwnership " + " ".join(_num(me * x) for x in t.ownership)
            parts.append(text)
        if req.root_info or req.ownership:
            t = self._territory(state)
            if req.root_info:
                q = tree.value(0)
                lead = _num(me * t.margin)
                parts.append(f"rootInfo visits {int(tree.node_visits[0])} utility {_num(q)} "
                             f"winrate {_num(0.5 * (q + 1.0))} scoreMean {lead} scoreStdev {_num(t.stdev)} "
                             f"scoreLead {lead} scoreSelfplay {lead}")
            if req.ownership:
                parts.append("ownership " + " ".join(_num(me * x) for x in t.ownership))
        return " ".join(parts)

    def _territory(self, state, playouts: int | None = None) -> Territory:
        """Expected final ownership and area margin of ``state``: the one
        place an ownership or score head would plug in. Today ``playouts``
        (default ``score_playouts``) random playouts
        (``players.playout_outcomes``, the rollout policy), seeded by the
        position, cached by it."""
        from alphalite.engine import players

        n = max(self.config.score_playouts if playouts is None else playouts, 1)
        key = (state.hash, state.komi, state.move_number, state.to_play, n)
        if key not in self._territories:
            if len(self._territories) >= 4096:
                self._territories.clear()
            seed = (state.hash ^ self.config.seed) & 0x7FFFFFFFFFFFFFFF
            black, white, margins = players.playout_outcomes(state, n, seed)
            self._territories[key] = Territory((black - white) / n, float(margins.mean()), float(margins.std()))
        return self._territories[key]

    def _analyze(self, color, callback, until_stopped=None, max_visits=None):
        from alphalite.engine import players

        self._ready.wait()
        state = self._with_to_play(self.state, color)
        player = self._analysis_player()
        cap = max_visits if max_visits is not None else players.max_tree_visits(state.size)
        out = player.run(state, self._gen(), max_visits=cap, callback=callback)
        if until_stopped is not None:
            while not until_stopped():
                time.sleep(0.02)
        return out

    def _analyze_once(self, args, command: str) -> str:
        """An analysis command through ``handle``: a short search, one answer."""
        req = self._analyze_args(args, command)
        out = self._analyze(req.color, None, max_visits=min(self.config.visits or 200, 200))
        return self._info_line(out.tree, req)

    def _genmove_analyze(self, args, command: str) -> str:
        req = self._analyze_args(args, command)
        trees = []

        def cb(tree, n):
            trees[:] = [tree]
            return False

        move = self._genmove(req.color, callback=cb)
        return "\n".join([self._info_line(t, req) for t in trees] + [f"play {move}"])

    def cmd_lz_analyze(self, *args):
        return self._analyze_once(args, "lz-analyze")

    def cmd_lz_genmove_analyze(self, *args):
        return self._genmove_analyze(args, "lz-genmove_analyze")

    def cmd_kata_analyze(self, *args):
        return self._analyze_once(args, "kata-analyze")

    def cmd_kata_genmove_analyze(self, *args):
        return self._genmove_analyze(args, "kata-genmove_analyze")

    def cmd_gogui_analyze_commands(self):
        return "\n".join([
            "gfx/Policy heatmap/alphalite-policy_heatmap",
            "dboard/Policy (percent)/alphalite-policy_dboard",
            "gfx/Ownership and dead stones/alphalite-ownership",
            "string/Final score/final_score",
            "plist/Dead stones/final_status_list dead",
        ])

    def _policy(self):
        from alphalite.engine import players

        self._ready.wait()
        state = players.resume(self.state)
        return state, self._player().prior(state)

    def cmd_alphalite_policy_heatmap(self):
        import numpy as np

        state, p = self._policy()
        n2 = self.size * self.size
        pts = p[:n2]
        top = float(pts.max()) if pts.size else 0.0
        infl = " ".join(f"{self._to_gtp(m)} {pts[m] / top:.3f}" for m in np.flatnonzero(pts > 0.001 * top)) \
            if top > 0 else ""
        labels = " ".join(f"{self._to_gtp(m)} {int(round(100 * pts[m]))}"
                          for m in np.argsort(-pts)[:10] if pts[m] >= 0.005)
        lines = []
        if infl:
            lines.append("INFLUENCE " + infl)
        if labels:
            lines.append("LABEL " + labels)
        lines.append(f"TEXT pass {100 * float(p[n2]):.1f}%")
        return "\n".join(lines)

    def cmd_alphalite_policy_dboard(self):
        state, p = self._policy()
        n = self.size
        return "\n".join(" ".join(f"{100 * float(p[r * n + c]):.1f}" for c in range(n)) for r in range(n))

    def cmd_alphalite_ownership(self):
        from alphalite.engine import players

        state = self.state
        black, white = players.ownership_counts(state, self.config.score_playouts, self.config.seed or 1)
        own = (black - white) / max(self.config.score_playouts, 1)
        _, dead = self._judge(state)
        lines = ["INFLUENCE " + " ".join(f"{self._to_gtp(m)} {own[m]:.2f}" for m in range(own.size))]
        if len(dead):
            lines.append("MARK " + " ".join(self._to_gtp(int(m)) for m in dead))
        return "\n".join(lines)


# ---------------------------------------------------------------- helpers


def board_indices(cand):
    import numpy as np

    return np.flatnonzero(cand[:-1])


def board_resume(state):
    from alphalite.engine import players

    return players.resume(state)


def _batch_priors(prior_fn, leaves):
    import numpy as np

    return np.stack([np.asarray(prior_fn(s), np.float32) for s in leaves.states()])


def _groups(points, stones, size):
    """Connected same-colour groups among ``points`` (flat), each sorted."""
    left = set(points)
    out = []
    while left:
        p = min(left)
        left.remove(p)
        group, todo = [p], [p]
        while todo:
            q = todo.pop()
            r, c = divmod(q, size)
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                m = rr * size + cc
                if 0 <= rr < size and 0 <= cc < size and m in left and stones[m] == stones[p]:
                    left.remove(m)
                    group.append(m)
                    todo.append(m)
        out.append(sorted(group))
    return out


def _accepts(fn, nargs: int) -> bool:
    import inspect

    try:
        inspect.signature(fn).bind(*([""] * nargs))
        return True
    except TypeError:
        return False


# ---------------------------------------------------------------- main loop


def serve(engine: Engine, stdin=None, stdout=None) -> int:
    """Read commands from ``stdin`` (bytes), answer on ``stdout`` (bytes)
    until ``quit`` or end of input. A reader thread feeds a queue so that a
    streaming analysis stops as soon as the next line arrives."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    lines: queue.Queue = queue.Queue()

    def reader():
        try:
            for raw in iter(stdin.readline, b""):
                lines.put((raw, time.perf_counter()))  # a move's clock starts when its line arrives
        except (OSError, ValueError):
            pass
        finally:
            lines.put(None)

    threading.Thread(target=reader, name="gtp-stdin", daemon=True).start()

    def write(text: str):
        stdout.write(text.encode("utf-8", "replace"))
        stdout.flush()

    try:
        while not engine.quit:
            item = lines.get()
            if item is None:
                break
            raw, arrived = item
            cmd = parse(raw.decode("utf-8", "replace"))
            if cmd is None:
                continue
            if cmd.name in STREAMING:
                engine.stream(cmd, write, stop=lambda: not lines.empty(), arrived=arrived)
            else:
                write(engine.execute(cmd, arrived=arrived))
    except (BrokenPipeError, ConnectionResetError):
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


def config_from_args(args) -> EngineConfig:
    """The config of ``alphalite gtp``'s flags (``none`` for a net: no net);
    ValueError for a value out of range."""
    def net(word):
        return None if word is None or word.lower() == "none" else word

    return EngineConfig(engine=args.engine, checkpoint=net(args.checkpoint),
                        value_checkpoint=net(args.value_checkpoint), lam=args.lam, visits=args.visits,
                        max_time=args.max_time,
                        lag_buffer=args.lag_buffer, batch=args.batch, temperature=args.temperature,
                        resign_threshold=args.resign_threshold, resign_moves=args.resign_moves,
                        resign=not args.no_resign, komi=args.komi, size=args.size, seed=args.seed,
                        score_playouts=args.score_playouts)


@contextlib.contextmanager
def _stray_errors_held():
    """Hold the errors Python would print for nobody (unraisable exceptions,
    asyncio's unretrieved futures) while the nets load: a failed Orbax
    restore leaves reads whose callbacks raise later in TensorStore's
    threads. After a good start they are printed after all; after a failed
    one they stay held, so the refusal is one line."""
    held: list = []
    hook, sys.unraisablehook = sys.unraisablehook, held.append
    log = logging.getLogger("asyncio")

    def hold(record):
        held.append(record)
        return False

    log.addFilter(hold)
    yield  # an exception from the body leaves everything held: the process is ending
    log.removeFilter(hold)
    sys.unraisablehook = hook
    for item in held:
        if isinstance(item, logging.LogRecord):
            log.handle(item)
        else:
            hook(item)


def run(args) -> int:
    """The ``alphalite gtp`` entry point. A bad flag or a net that is not
    what it should be stops it before it reads a command: one line on
    stderr, exit status 2."""
    from alphalite.nn import checkpoint, jitcache

    try:
        with _stray_errors_held():
            cfg = config_from_args(args)
            jitcache.enable()
            engine = Engine(cfg)
    except (ValueError, checkpoint.CheckpointError) as e:
        print(f"{NAME}: error: {e}", file=sys.stderr)
        code = 2
    else:
        code = serve(engine)
    # The stdin reader is a daemon thread blocked in readline, and a failed
    # Orbax restore leaves callbacks in its threads; leave without the
    # interpreter's shutdown touching either.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
