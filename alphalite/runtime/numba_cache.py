"""Numba's on-disk cache, made stale by a change to any of our kernel files.

Numba stamps a cached kernel with its own source file only. Our kernels
call, and inline, kernels from other files (above all ``board.py``), so
after an edit or a ``git pull`` that touched board.py, ``features.py``'s
cached kernels would still run machine code built from the old board: wrong
answers, not errors. ``install()`` puts a locator in front of Numba's own:
for a function defined in this project's packages it takes the locator
Numba would have used (the same cache folder) and adds to its stamp the
content hashes of every package file that defines kernels, as this process
imported them. Any kernel file's change thus rebuilds all our kernels once:
broader than needed, but it stays right when a new call across files
appears. Other code's kernels are left to Numba. A user's
``NUMBA_CACHE_LOCATOR_CLASSES`` replaces the whole list, ours included.

Installed by ``alphalite.runtime.kernels``, whose ``njit`` every kernel
module uses, before its first kernel is decorated (and by
``alphalite.runtime.setup()``)."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the folder holding the packages
PACKAGES = ("alphalite", "search", "selfplay")


@functools.cache
def package_stamp() -> tuple:
    """(name, sha1 of the text) of every package file, subpackages included, that defines kernels
    (an ``@njit`` line), read once per process, when ``install()`` runs:
    Numba compiles the code this process imported, so a file edited later
    must not lend its stamp to kernels built from the old text (they would be
    loaded as current by the next process)."""
    stamp = []
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            try:
                data = p.read_bytes()
            except OSError:
                continue
            if any(line.startswith(b"@njit") for line in data.splitlines()):
                stamp.append((os.path.relpath(p, ROOT), hashlib.sha1(data).hexdigest()))
    return tuple(stamp)


def _ours(path: str) -> bool:
    try:
        rel = Path(path).resolve().relative_to(ROOT)
    except (OSError, ValueError):
        return False
    return len(rel.parts) >= 2 and rel.parts[0] in PACKAGES


def _impl(caching):
    """Numba's cache implementation class (``CacheImpl``, ``_CacheImpl`` before 0.68)."""
    return getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)


class _PackageLocator:
    """Wraps the locator Numba would pick; only the stamp differs."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        if name == "_inner":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
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
    package_stamp()  # the sources as this process imports them
    if _PackageLocator not in classes:
        classes.insert(0, _PackageLocator)
    return True
