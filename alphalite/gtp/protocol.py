"""GTP 2 as a protocol, apart from what the commands do: parsing, framing,
dispatch by name, the serve loop.

Framing follows GTP 2: the id is echoed on ``=`` and ``?``; every response
ends with exactly one blank line and holds none inside; input lines lose
control characters (CR included) and ``#`` comments, tabs become spaces,
empty lines are ignored. A handler raises ``GtpFailure`` to answer
``? message``; any other error answers ``? internal error: ...``, so no
input line can crash or desynchronise the engine.

``Dispatcher`` (a mixin) turns the ``cmd_<name>`` methods of a class into
commands (``cmd_kgs_genmove_cleanup`` answers ``kgs-genmove_cleanup``) and
answers ``protocol_version``, ``known_command``, ``list_commands`` and
``quit`` itself. ``serve`` is the only code that touches stdin and stdout:
a reader thread stamps each line with its arrival time (a move's clock
starts there) and queues it, so a streaming command (``Dispatcher.streaming``,
run by its ``stream``) stops when the next line arrives.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import queue
import re
import sys
import threading
import time
from typing import Callable

PROTOCOL_VERSION = "2"
BLACK, WHITE = 1, -1  # alphalite.go.board's colours; not imported from there, which loads Numba

_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_ID = re.compile(r"[0-9]+\Z")
_PREFIXES = ("kgs_", "lz_", "kata_", "gogui_", "alphalite_")


class GtpFailure(Exception):
    """A handler's way of answering ``? message``."""


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


def sanitize(body: str) -> str:
    """A response body that cannot break the framing: no CR, no control
    characters, no blank lines inside, no trailing newline."""
    body = body.replace("\r", "").replace("\t", " ")
    lines = [_CONTROL.sub("", ln).rstrip() for ln in body.split("\n")]
    if not lines:
        return ""
    first, rest = lines[0], [ln for ln in lines[1:] if ln.strip()]
    return "\n".join([first] + rest)


def frame(ident: str, ok: bool, body: str) -> str:
    body = sanitize(body)
    head = ("=" if ok else "?") + ident
    if body.startswith("\n"):
        return f"{head}{body}\n\n"
    return f"{head} {body}\n\n" if body else f"{head}\n\n"


def gtp_name(method: str) -> str:
    """``cmd_kgs_genmove_cleanup`` -> ``kgs-genmove_cleanup``."""
    name = method[len("cmd_"):]
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return prefix[:-1] + "-" + name[len(prefix):]
    return name


def accepts(fn: Callable, nargs: int) -> bool:
    """Whether ``fn`` takes ``nargs`` positional words."""
    try:
        inspect.signature(fn).bind(*([""] * nargs))
        return True
    except TypeError:
        return False


# ---------------------------------------------------------------- arguments


def parse_color(word: str) -> int:
    w = word.lower()
    if w in ("b", "black"):
        return BLACK
    if w in ("w", "white"):
        return WHITE
    raise GtpFailure("syntax error")


def parse_int(word: str, lo: int | None = None) -> int:
    if not re.fullmatch(r"[+-]?[0-9]{1,9}", word):
        raise GtpFailure("syntax error")
    v = int(word)
    if lo is not None and v < lo:
        raise GtpFailure("syntax error")
    return v


def parse_float(word: str) -> float:
    if len(word) > 40:
        raise GtpFailure("syntax error")
    try:
        v = float(word)
    except ValueError:
        raise GtpFailure("syntax error") from None
    if not math.isfinite(v):
        raise GtpFailure("syntax error")
    return v


# ---------------------------------------------------------------- dispatch


class Dispatcher:
    """Mixin: a class's ``cmd_<name>`` methods as GTP commands. Call
    ``init_dispatch`` from ``__init__``; override ``wait_ready`` to hold
    every command but those in ``immediate`` until the engine is ready,
    and ``stream`` for the commands in ``streaming``."""

    immediate: tuple[str, ...] = ("protocol_version", "name", "version", "known_command", "list_commands", "quit")
    streaming: tuple[str, ...] = ()
    engine_name = "gtp"  # what log lines start with

    def init_dispatch(self, log: Callable[[str], None] | None = None) -> None:
        self.quit = False
        self.arrived = time.perf_counter()  # when the command being answered was read
        self._log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.commands = {gtp_name(m): getattr(self, m) for m in dir(self) if m.startswith("cmd_")}

    def log(self, msg: str) -> None:
        try:
            self._log(msg)
        except Exception:  # noqa: BLE001 - a closed stderr must not kill the engine
            pass

    def wait_ready(self) -> None:
        """Block until commands outside ``immediate`` may run."""

    def handle(self, line: str) -> str:
        """One input line -> the framed response ("" for no command)."""
        cmd = parse(line)
        if cmd is None:
            return ""
        return self.execute(cmd)

    def execute(self, cmd: Command, *, arrived: float | None = None) -> str:
        """Answer one command. ``arrived``: ``time.perf_counter()`` when its
        line was read (default: now)."""
        self.arrived = time.perf_counter() if arrived is None else arrived
        fn = self.commands.get(cmd.name)
        if fn is None:
            return frame(cmd.id, False, "unknown command")
        if cmd.name not in self.immediate:
            self.wait_ready()
        try:
            if not accepts(fn, len(cmd.args)):
                raise GtpFailure("syntax error")
            return frame(cmd.id, True, fn(*cmd.args))
        except GtpFailure as e:
            return frame(cmd.id, False, str(e))
        except MemoryError:
            return frame(cmd.id, False, "out of memory")
        except Exception as e:  # noqa: BLE001 - no input line may kill the engine
            self.log(f"{self.engine_name}: internal error in {cmd.name!r}: {type(e).__name__}: {e}")
            return frame(cmd.id, False, f"internal error: {type(e).__name__}")

    def stream(self, cmd: Command, write: Callable[[str], None], stop: Callable[[], bool], *,
               arrived: float | None = None) -> None:
        """A ``streaming`` command: write its response as it comes, until
        ``stop()``. By default the whole answer at once."""
        write(self.execute(cmd, arrived=arrived))

    def cmd_protocol_version(self):
        return PROTOCOL_VERSION

    def cmd_known_command(self, name):
        return "true" if name in self.commands else "false"

    def cmd_list_commands(self):
        return "\n".join(sorted(self.commands))

    def cmd_quit(self):
        self.quit = True
        return ""


# ---------------------------------------------------------------- main loop


def serve(engine: Dispatcher, stdin=None, stdout=None) -> int:
    """Read commands from ``stdin`` (bytes), answer on ``stdout`` (bytes)
    until ``quit`` or end of input. A reader thread feeds a queue so that a
    streaming command stops as soon as the next line arrives."""
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
            if cmd.name in engine.streaming:
                engine.stream(cmd, write, stop=lambda: not lines.empty(), arrived=arrived)
            else:
                write(engine.execute(cmd, arrived=arrived))
    except (BrokenPipeError, ConnectionResetError):
        return 0
    except KeyboardInterrupt:
        return 130
    return 0
