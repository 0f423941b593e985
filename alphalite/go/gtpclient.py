"""A small GTP client: talk to a Go engine (GNU Go, our own, others) over pipes.

    with GtpClient(["gnugo", "--mode", "gtp"]) as eng:
        eng.send("boardsize 9")
        move = eng.send("genmove black")

``send`` returns the response text without the leading ``=`` and the blank
line that ends it; a ``?`` response raises ``GtpError`` carrying the engine's
message, a dead engine or a missing answer raises ``GtpEngineDied`` or
``GtpTimeout``. The engine's stderr is discarded unless a file is given.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading

GNUGO_FALLBACKS = ("/usr/games/gnugo", "/usr/local/bin/gnugo", "/opt/homebrew/bin/gnugo")


def find_pachi() -> str | None:
    """Path of the Pachi that ``make pachi`` built beside this Python (the
    venv's bin), else None. Not PATH: Debian's ``pachi`` in /usr/games is a
    platform game; another Pachi goes to the arena as a plain command."""
    here = os.path.join(os.path.dirname(sys.executable), "pachi")
    return here if os.path.isfile(here) and os.access(here, os.X_OK) else None


class GtpError(RuntimeError):
    """The engine answered ``? message``."""

    def __init__(self, command: str, message: str):
        self.command = command
        self.message = message
        super().__init__(f"GTP command {command!r} failed: {message}")


class GtpEngineDied(RuntimeError):
    """The engine process exited or closed its output."""


class GtpTimeout(RuntimeError):
    """No complete answer within the timeout."""


def colour_word(colour: int) -> str:
    """GTP's colour argument for a stone colour (+1 black, -1 white)."""
    return "black" if colour > 0 else "white"


def find_gnugo() -> str | None:
    """Path of a GNU Go executable: on PATH, else a usual install place, else None."""
    found = shutil.which("gnugo")
    if found:
        return found
    for path in GNUGO_FALLBACKS:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


class GtpClient:
    """One engine subprocess spoken to in GTP; use as a context manager.

    ``argv`` is the command line; ``timeout`` (seconds) bounds each answer.
    """

    def __init__(self, argv: list[str], *, timeout: float = 30.0, stderr=None, name: str | None = None):
        self.argv = list(argv)
        self.timeout = timeout
        self.name = name or os.path.basename(self.argv[0])
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        try:
            for line in self._proc.stdout:
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def send(self, command: str, timeout: float | None = None) -> str:
        """Send one command; return the answer's text (may be several lines)."""
        command = command.strip()
        if not command or "\n" in command:
            raise ValueError(f"one non-empty GTP command per call, got {command!r}")
        if not self.alive:
            raise GtpEngineDied(f"{self.name} has exited (code {self._proc.returncode}) before {command!r}")
        try:
            self._proc.stdin.write(command + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise GtpEngineDied(f"{self.name} closed its input before {command!r}: {e}") from None
        wait = self.timeout if timeout is None else timeout
        lines: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=wait)
            except queue.Empty:
                raise GtpTimeout(f"{self.name} gave no complete answer to {command!r} within {wait} s") from None
            if line is None:
                self._lines.put(None)  # keep the end marker for later calls
                raise GtpEngineDied(f"{self.name} exited while answering {command!r}")
            line = line.rstrip("\r\n")
            if not lines and not line.strip():
                continue  # stray blank lines before an answer
            if lines and not line.strip():
                break
            lines.append(line)
        first = lines[0]
        status, rest = first[0], first[1:]
        # Strip an optional numeric id after the status character.
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        # lstrip("\n") only: a multi-line answer (showboard) keeps its indentation.
        body = "\n".join([rest[i:].strip()] + lines[1:]).lstrip("\n").rstrip()
        if status == "=":
            return body
        if status == "?":
            raise GtpError(command, body)
        raise GtpEngineDied(f"{self.name} answered {command!r} with garbage: {first!r}")

    def close(self, timeout: float = 5.0):
        """Say ``quit``, then wait; kill the process if it lingers."""
        if self._proc.poll() is None:
            try:
                self._proc.stdin.write("quit\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        self._reader.join(timeout=1.0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
