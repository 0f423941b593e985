"""The test session's process is set up as the entry points set theirs up
(XLA flags, malloc, Numba's cache stamps), before any test module loads."""

from alphalite import runtime

runtime.setup()
