"""The CPU this process runs on: its name and feature flags, the one reader
of /proc/cpuinfo (the int8 and conv-method caches are keyed by them).

Linux x86 names the model (``model name``) and lists ``flags``; Linux on Arm
usually names no model, so its ``CPU implementer`` and ``CPU part`` name it,
and lists ``Features``. Without /proc/cpuinfo (macOS, Windows) the name is
``platform.processor()`` or the machine and there are no flags: a cache then
keys by less, and no flag-gated kernel is chosen on a guess.
"""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def parse(text: str) -> tuple[str, frozenset[str]]:
    """(name, flags) from the text of /proc/cpuinfo; the name is "" where
    it names none. The flags are those every processor lists: a thread may
    run on any core."""
    name = implementer = part = ""
    flags = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "model name" and not name:
            name = value
        elif key == "CPU implementer" and not implementer:
            implementer = value
        elif key == "CPU part" and not part:
            part = value
        elif key in ("flags", "Features"):
            flags = frozenset(value.split()) if flags is None else flags & frozenset(value.split())
    if not name and implementer:
        name = f"Arm implementer {implementer} part {part}"
    return name, flags or frozenset()


def read(path: Path = CPUINFO) -> tuple[str, frozenset[str]]:
    """(name, flags) of this host from ``path``, with the fallbacks above."""
    try:
        name, flags = parse(Path(path).read_text())
    except OSError:
        name, flags = "", frozenset()
    return name or platform.processor() or platform.machine() or "unknown cpu", flags


@functools.cache
def _host() -> tuple[str, frozenset[str]]:
    return read()


def name() -> str:
    """The CPU's model name (read once a process)."""
    return _host()[0]


def flags() -> frozenset[str]:
    """The CPU's feature flags, e.g. ``avx2``, ``avx512_vnni``, ``asimddp`` (read once a process)."""
    return _host()[1]


def cores() -> int:
    """The cores this process may run on (its affinity: taskset, a
    container's cpuset), as XLA's thread pool counts them."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
