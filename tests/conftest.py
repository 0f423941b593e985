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
