"""JAX's persistent compilation cache for processes that start often (the
GTP engine: every arena game and every GUI session is a fresh process) or
start again (a training run resumed, a self-play actor restarted by Ray).

Compiling the policy/value nets for the search's batch shapes took 0.6-0.8 s
of a 19x19 engine's start-up; read back from this cache it takes about 0.3 s.
A 24-step ``run_sl.py`` run of ``b1c8`` took 25 s, 14 s of it compiling; run
again with the cache, 9.4 s (2-core Zen 3 EPYC).
The folder is keyed by jaxlib version and CPU (XLA compiles for the host's
instruction set, and a home folder can be shared by machines with different
CPUs), under ``$ALPHALITE_CACHE`` like the native kernel. A user's own
``JAX_COMPILATION_CACHE_DIR`` is left alone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_path() -> Path:
    import jaxlib

    from alphalite.nn import native

    key = hashlib.sha256(f"{jaxlib.__version__}\0{native.cpu_id()}".encode()).hexdigest()[:16]
    return native.cache_dir() / f"jax-{key}"


def enable() -> Path | None:
    """Turn the cache on for this process (before its first compile); the
    folder used, or None when the user configured JAX's cache already."""
    import jax

    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    path = cache_path()
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # No jax_compilation_cache_max_size: with a bound, each write takes a file
    # lock and reads the size and access time of every entry (thousands of
    # small ones here): a fresh-clone test run had done 68% in 12.3 minutes,
    # against 10.7 minutes for all of it without the bound.
    return path
