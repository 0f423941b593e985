"""``njit`` for this project's kernels: Numba's own, with our cache locator
(``numba_cache``) put in place before the first kernel is decorated.

Every process that imports a kernel, entry point or not (a notebook, a
``python -c`` probe, a worker), thus stamps Numba's on-disk cache alike. One
with Numba's own stamps saw our cache as stale, compiled every kernel again
and wrote its stamp over the index the next process reads, which then did
the same: a test's probe process made the next engine start compile for a
minute (issue 17's CI run, a GTP test's 60 s timeout)."""

from numba import njit

from alphalite.runtime import numba_cache

numba_cache.install()

__all__ = ["njit"]
