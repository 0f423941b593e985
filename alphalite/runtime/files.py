"""Files that a kill never leaves half written: atomic replace, and JSON
lines whose torn last line readers skip."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike, write) -> None:
    """``write(f)`` (a binary file) into a temporary file beside ``path``,
    fsync, then rename: readers see the old file or the whole new one,
    never half of it. Creates the parent folder. Ctrl-C or a kill (whose
    handler raises) leaves no temporary file: they are held while it is
    made, so that one arriving then acts where it is cleaned up."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    held = _hold_signals()
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        held = _release(held)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        _release(held)


def _hold_signals():
    """Until ``_release``: SIGINT and SIGTERM are only noted (their handlers,
    ours or Python's Ctrl-C, would raise anywhere). Python runs signal
    handlers in the main thread only, so elsewhere there is nothing to hold
    (None). A per-thread signal mask would not do: the signal goes to a
    thread that does not block it (a pool's), and the main thread still
    runs the handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    got: list[int] = []
    saved = {s: signal.signal(s, lambda n, frame: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    return saved, got


def _release(held) -> None:
    """Restore the handlers ``_hold_signals`` replaced and send again what
    arrived meanwhile: each handler acts here, where the caller cleans up."""
    import signal

    if held is None:
        return None
    saved, got = held
    for s, h in saved.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)
    pending = list(dict.fromkeys(got))
    got.clear()  # a second release (the caller's finally) sends nothing again
    for n in pending:
        signal.raise_signal(n)
    return None


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_atomic(path, lambda f: f.write((json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()))


def append_jsonl(path: str | os.PathLike, obj: Any) -> None:
    """One line per call; a line is written with a single write() so a kill
    leaves at worst a torn last line, which readers skip."""
    with open(path, "a") as f:
        f.write(json.dumps(obj, sort_keys=True) + "\n")
        f.flush()


def write_jsonl(path: str | os.PathLike, records) -> None:
    """Replace a JSON-lines file with ``records``, atomically (a run
    dropping what a killed process logged past its last checkpoint)."""
    write_atomic(path, lambda f: f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode()))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """The records of a JSON-lines file (none if it is missing), skipping a torn line."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # torn last line of a killed run
    except FileNotFoundError:
        pass
    return out
