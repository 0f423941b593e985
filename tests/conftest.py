"""The test session's process is set up as the entry points set theirs up
(XLA flags, malloc, Numba's cache stamps), before any test module loads.

Markers (pyproject.toml): ``slow`` (2.5 s or more here; ``make test-fast``
runs the rest), ``gnugo`` (needs GNU Go), ``subprocess`` (starts processes)."""

import os

from alphalite import runtime
from alphalite.nn import jitcache

runtime.setup()
# Tests train many short runs of the same nets, in this process and in the
# training and engine processes they start (whose entry points enable the
# same cache): each compile happens once (alphalite/nn/jitcache.py).
jitcache.enable()
# --conv auto takes XLA's convolution untuned, here and in the processes tests start: no
# timing noise, no cache written (alphalite/nn/convtune.py).
os.environ["ALPHALITE_CONV_TUNE"] = "0"


def popen_interruptible(argv, **kwargs):
    """``subprocess.Popen(argv, start_new_session=True, text=True, ...)``
    whose child takes Ctrl-C (SIGINT) as a terminal's would: a background
    test run inherits SIGINT ignored, and only a handled one is reset to the
    default at exec (a preexec_fn would fork this process, JAX's threads and
    all, and run Python in the child)."""
    import signal
    import subprocess

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, text=True, start_new_session=True, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)
