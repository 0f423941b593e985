"""The process: what the entry points set up before any work, and the
utilities every layer may use (typed configs, atomic files, worker pools).

Importing alphalite, or any module of it, changes nothing in the process
but Numba's cache stamps (below). ``setup()`` does, once: the entry points
(the ``alphalite`` command, ``run_sl.py``, ``run_rl.py``, the benchmarks,
the tests' conftest) call it before JAX or a Numba kernel starts. Code
that imports our modules without calling it gets JAX's, glibc's and
NumPy's defaults; Numba's cache stamps come with the first kernel module
imported (``alphalite.runtime.kernels``)."""

from __future__ import annotations

import functools
import os
from importlib import metadata

from alphalite.runtime import numba_cache


def version() -> str:
    """pyproject.toml's version as installed; a source tree run without
    ``pip install`` (``python -m alphalite.cli``) has no metadata."""
    try:
        return metadata.version("alphalite")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


# jaxlib 0.10 hands CPU convolutions and matrix products to YNNPACK by
# default. On our 2-core x86 machine that made them about 2x slower: a
# 64-channel 3x3 conv on [64, 19, 19, 64] took 67 ms forward + backward with
# it and 34 ms without; b6c64 9x9 training went from 322 to 489 positions/s.
# So we turn it off, unless the user set the flag, and only for the jaxlib
# versions where we measured it (an unknown XLA flag aborts the process).
# It must be in XLA_FLAGS before JAX starts its CPU backend.
YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type="
YNN_OFF_JAXLIB = ("0.10.",)

# XLA's CPU runtime allocates every step's buffers afresh. glibc serves large
# ones with mmap, or from per-thread heaps that it unmaps once empty, so each
# step faulted its memory in again page by page: 4-5 million page faults and
# a sixth of the CPU time in the kernel for 90 s of b6c64 training. No mmap,
# no trimming and one arena per core (fewer heaps to empty) cut that to 0.85
# million; b6c64 19x19 training went from about 120 to 165 positions/s (batch
# 64). One arena for all threads faulted least but made XLA's compiles
# contend for it (the test suite ran 17% slower). But a per-thread arena is
# unmapped whole once empty, whatever the trim threshold: in b6c64 19x19
# training (batch 64, 15 MB Winograd buffers) some processes went on
# faulting 80,000 pages a step (330 ms a step instead of 230, a sixth of
# it in the kernel), and one arena faulted none. So a training process
# (``setup(training=True)``), which compiles once and then runs one step
# shape for hours, gets one arena; everything else one per core. glibc
# reads its MALLOC_* variables before Python starts, so we call mallopt.
# Left alone when the user set any MALLOC_ variable or ALPHALITE_MALLOC=system.
M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8


def malloc_settings(training: bool) -> tuple:
    arenas = 1 if training else (os.cpu_count() or 1)
    return ((M_ARENA_MAX, arenas), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 2**31 - 1))


def ynn_off() -> bool:
    """Add the YNNPACK-off flag to XLA_FLAGS (see above); True if added."""
    flags = os.environ.get("XLA_FLAGS", "")
    if YNN_FLAG.strip("-=") in flags:
        return False
    try:
        jaxlib = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return False
    if not jaxlib.startswith(YNN_OFF_JAXLIB):
        return False
    os.environ["XLA_FLAGS"] = (flags + " " + YNN_FLAG).strip()
    return True


def tune_malloc(training: bool = False) -> bool:
    """glibc's malloc settings above; True if all were taken."""
    import ctypes
    import platform

    if os.environ.get("ALPHALITE_MALLOC", "") == "system" or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(param, value) == 1 for param, value in malloc_settings(training))


# NumPy asks the kernel for transparent huge pages (madvise) on every array
# of 4 MB or more. Where the kernel defragments on such a fault (defrag
# "madvise", as on our Zen 3 host) the fault may wait for compaction: the search's
# tree doubling (9x9, 6,000 to 12,000 nodes, 44 MB) took 0.1-0.52 s in a
# long-lived engine instead of at most 0.04 s, under the search's lock and
# past its deadline (moves of 1.13 s at a 0.75 s budget; with them off the
# longest of 376 was 0.76 s), and the apv search lost no speed without them
# (visits/s off/on, 8 pairs: median 1.3 on 9x9, 1.1 on 19x19; 2-core AMD
# EPYC Zen 3). Left on for a training process (not measured there) and
# where the user set NUMPY_MADVISE_HUGEPAGE.
def hugepages_off(training: bool) -> bool:
    """NumPy's huge-page advice off (see above); True if turned off."""
    if training or "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return False
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # NumPy 1.x
        from numpy.core.multiarray import _set_madvise_hugepage
    _set_madvise_hugepage(False)
    return True


_DONE: dict = {}


def setup(training: bool = False) -> dict:
    """Set up this process, once (the first call decides; later calls
    return its result): XLA flags (before JAX's CPU backend starts: a
    process that already started it keeps its flags), malloc tuning (one
    arena for a ``training`` process, see above), and the Numba cache
    locator (before the first cached kernel), NumPy's huge pages off
    (not for ``training``). Returns what was done: {"ynn_disabled",
    "malloc_tuned", "hugepages_off", "training", "numba_locator"}."""
    if not _DONE:
        _DONE.update(ynn_disabled=ynn_off(), malloc_tuned=tune_malloc(training),
                     hugepages_off=hugepages_off(training), training=training,
                     numba_locator=numba_cache.install())
    return dict(_DONE)


def process_pool(jobs: int, initializer=None):
    """A multiprocessing pool for CPU work that needs no JAX (SGF parsing,
    GNU Go games). Forked when JAX is not loaded (workers start at once);
    otherwise from a fork server: forking a process whose JAX threads may
    hold locks can deadlock the child (Python warns of it). Fork-server
    workers import the caller's main module, so a script that builds a
    pool after importing JAX needs the ``if __name__ == "__main__":`` guard."""
    import multiprocessing
    import sys

    method = "forkserver" if "jax" in sys.modules else "fork"
    return multiprocessing.get_context(method).Pool(jobs, initializer=_start_worker, initargs=(initializer,))


def _start_worker(initializer):
    # A fork-server worker is a fresh interpreter: without our Numba stamps
    # its kernels would overwrite the cache index the parent reads.
    setup()
    if initializer is not None:
        initializer()


def interrupt_on_sigterm() -> "SigtermInterrupt":
    """Until the returned guard is called, SIGTERM (``kill``, a service
    manager) raises KeyboardInterrupt in the main thread, so a job stops as
    on Ctrl-C instead of dying mid-write; Ctrl-C itself, where Python's own
    handler has it, goes through the same guard. Off the main thread (where
    no handler can be set) it does nothing."""
    return SigtermInterrupt()


class SigtermInterrupt:
    """The handler ``interrupt_on_sigterm`` installs; calling it restores the
    previous one. The handler runs wherever the main thread is, and there
    Python may drop what it raises: in a finaliser (a tar member's file
    object closed as it is freed) the KeyboardInterrupt is only printed, and
    the job went on to the end. ``check()``, called by the job's loop, raises
    such a lost interrupt again; the print is left out (the job says it).
    Ctrl-C (SIGINT) is dropped the same way, so the guard takes it too,
    unless someone set SIGINT aside (``nohup`` ignores it; a caller's own
    handler stays)."""

    def __init__(self):
        import signal
        import sys
        import threading

        self.fired = False
        self._installed = threading.current_thread() is threading.main_thread()
        if not self._installed:
            return
        self._previous = signal.signal(signal.SIGTERM, self._interrupt)
        self._sigint = signal.getsignal(signal.SIGINT) is signal.default_int_handler
        if self._sigint:
            signal.signal(signal.SIGINT, self._interrupt)
        self._hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable

    def _interrupt(self, signum, frame):
        self.fired = True
        raise KeyboardInterrupt

    def _unraisable(self, unraisable):
        if not (self.fired and unraisable.exc_type is KeyboardInterrupt):
            self._hook(unraisable)

    def check(self) -> None:
        if self.fired:
            raise KeyboardInterrupt

    def __call__(self) -> None:
        import signal
        import sys

        if not self._installed:
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL if self._previous is None else self._previous)
        if self._sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self._hook
        self._installed = False
