"""Numba's on-disk cache, made stale by a change to any of our kernel files.

Numba stamps a cached kernel with its own source file's mtime and size only.
Our kernels call, and inline, kernels from other files (above all
``board.py``), so after an edit or a ``git pull`` that touched board.py,
``features.py``'s cached kernels would still run machine code built from
the old board: wrong answers, not errors. ``install()`` puts a locator in
front of Numba's own: for a function defined in this project's packages it
takes the locator Numba would have used (the same cache folder) and
replaces the stamp with the stamps of every package file that defines
kernels. Other code's kernels are left to Numba. A user's
``NUMBA_CACHE_LOCATOR_CLASSES`` replaces the whole list, ours included.

Called by ``board.py`` before its first kernel: every kernel module imports
board first.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("alphalite", "search", "selfplay")


@functools.cache
def kernel_files() -> tuple[str, ...]:
    """The package files that define Numba kernels (an ``@njit`` line)."""
    out = []
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).glob("*.py")):
            try:
                text = p.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if any(line.startswith("@njit") for line in text.splitlines()):
                out.append(str(p))
    return tuple(out)


def package_stamp() -> tuple:
    """(name, mtime, size) of every kernel file, read anew each call so a
    long-lived process still sees later edits for kernels it compiles later."""
    stamp = []
    for f in kernel_files():
        try:
            st = os.stat(f)
        except OSError:
            continue
        stamp.append((os.path.relpath(f, ROOT), st.st_mtime, st.st_size))
    return tuple(stamp)


def _ours(path: str) -> bool:
    try:
        rel = Path(path).resolve().relative_to(ROOT)
    except (OSError, ValueError):
        return False
    return len(rel.parts) == 2 and rel.parts[0] in PACKAGES


def _impl(caching):
    """Numba's cache implementation class (``CacheImpl``, ``_CacheImpl`` before 0.68)."""
    return getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)


class _PackageLocator:
    """Wraps the locator Numba would pick; only the stamp differs."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def get_source_stamp(self):
        return (self._inner.get_source_stamp(), package_stamp())

    @classmethod
    def from_function(cls, py_func, py_file):
        from numba.core import caching

        if not _ours(py_file):
            return None
        for other in _impl(caching)._locator_classes:
            if other is cls:
                continue
            inner = other.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner)
        return None


def install() -> bool:
    """Put the locator first in Numba's list (once). False where this Numba
    has no such list; its caches then go by each file's own stamp."""
    from numba.core import caching

    classes = getattr(_impl(caching), "_locator_classes", None)
    if not isinstance(classes, list):
        return False
    if _PackageLocator not in classes:
        classes.insert(0, _PackageLocator)
    return True
