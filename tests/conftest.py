"""The test session's process is set up as the entry points set theirs up
(XLA flags, malloc, Numba's cache stamps), before any test module loads.

Markers (pyproject.toml): ``slow`` (2.5 s or more here; ``make test-fast``
runs the rest), ``gnugo`` (needs GNU Go), ``subprocess`` (starts processes)."""

from alphalite import runtime
from alphalite.nn import convtune

runtime.setup()
# --conv auto uses the fixed rule: no timing noise, no cache written.
convtune.set_tuning(False)
