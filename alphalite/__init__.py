"""alphalite: an AlphaGo-style Go engine in Python.

Importing it does nothing to the process (a kernel module puts Numba's cache
stamps in place, alphalite.runtime.kernels): the entry points call
``alphalite.runtime.setup()`` (XLA flags, malloc, Numba's cache stamps).
The layers, top to bottom, each importing only those below it:
cli/demo > arena > gtp > selfplay > engine > search | train > data > nn > go > runtime
(``search`` and ``selfplay`` are top-level packages; see the README)."""
