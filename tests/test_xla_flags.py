"""Process settings made by alphalite.runtime.setup() (and not by importing
our modules, which only stamp Numba's cache): YNNPACK off through XLA_FLAGS
(jaxlib 0.10), the user's own setting kept, JAX still starts; glibc malloc
tuned; NumPy's huge-page advice off outside training. Worker pools that
never fork a process with JAX loaded."""

import os
import platform
import subprocess
import sys
from importlib import metadata

import pytest

PROBE = ("import os, jax, jax.numpy as jnp; from alphalite import runtime; "
         "print(runtime.setup()['ynn_disabled'], os.environ.get('XLA_FLAGS', ''), float(jnp.ones(3).sum()), sep='|')")


def _run(xla_flags):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().split("|")


@pytest.mark.subprocess
@pytest.mark.skipif(not metadata.version("jaxlib").startswith("0.10."), reason="flag set for jaxlib 0.10 only")
def test_ynn_flag_added_once_and_user_setting_kept():
    disabled, flags, total = _run(None)
    assert disabled == "True" and "--xla_cpu_experimental_ynn_fusion_type=" in flags and total == "3.0"
    disabled, flags, _ = _run("--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT")
    assert disabled == "False" and flags.count("ynn_fusion_type") == 1
    disabled, flags, _ = _run("--xla_force_host_platform_device_count=1")
    assert disabled == "True" and "--xla_force_host_platform_device_count=1" in flags


MALLOC_PROBE = """
import ctypes, numpy as np
from alphalite import runtime
tuned = runtime.setup()["malloc_tuned"]

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
a = np.empty(25_000_000, np.float32)  # 100 MB, as large as XLA's step buffers
a.fill(1.0)
mapped = mallinfo2().hblkhd  # bytes in chunks of their own mmap, unmapped on free
del a
print(tuned, mapped, mallinfo2().arena, sep="|")
"""


def _probe(code, *args, drop=lambda k: False, **env_extra) -> str:
    """``code`` run in a fresh interpreter with ``args``, the variables
    ``drop`` names left out of its environment and ``env_extra`` added: its stdout."""
    env = {k: v for k, v in os.environ.items() if not drop(k)}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _malloc_run(**env_extra):
    out = _probe(MALLOC_PROBE, drop=lambda k: k.startswith("MALLOC_") or k == "ALPHALITE_MALLOC", **env_extra)
    tuned, mapped, kept = out.strip().split("|")
    return tuned == "True", int(mapped), int(kept)


@pytest.mark.subprocess
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt tuning is for glibc")
def test_malloc_keeps_large_buffers_unless_told_not_to():
    """With the tuning a 100 MB buffer comes from the heap and stays there
    after free (glibc would mmap it and unmap it on free, so that the next
    step faults it in again); MALLOC_* variables or ALPHALITE_MALLOC=system
    leave glibc alone."""
    tuned, mapped, kept = _malloc_run()
    assert tuned and mapped < 10**6 and kept > 10**8, (mapped, kept)
    tuned, mapped, kept = _malloc_run(ALPHALITE_MALLOC="system")
    assert not tuned and mapped > 10**8 and kept < 10**8, (mapped, kept)
    tuned, _, _ = _malloc_run(MALLOC_ARENA_MAX="4")
    assert not tuned


ARENA_PROBE = """
import ctypes, sys, tempfile, threading
import numpy as np
from alphalite import runtime
runtime.setup(training=sys.argv[1] == "train")
hold = []
threads = [threading.Thread(target=lambda: hold.append(np.ones(1000))) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile(suffix=".xml") as f:
    fp = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    print(open(f.name).read().count("<heap nr="))
"""


@pytest.mark.subprocess
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt tuning is for glibc")
def test_a_training_process_gets_one_malloc_arena():
    """Threads that allocate get arenas of their own, up to one per core;
    a training process keeps to glibc's main arena (its per-thread heaps
    were unmapped and faulted in again every step)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "ALPHALITE_MALLOC"}
    heaps = {}
    for role in ("train", "other"):
        out = subprocess.run([sys.executable, "-c", ARENA_PROBE, role], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        heaps[role] = int(out.stdout.strip())
    assert heaps["train"] == 1 and heaps["other"] == min(os.cpu_count(), 5), heaps


HUGEPAGE_PROBE = """
import sys
from alphalite import runtime
done = runtime.setup(training=sys.argv[1] == "train") if sys.argv[1] != "none" else {"hugepages_off": False}
try:
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:
    from numpy.core.multiarray import _set_madvise_hugepage
print(done["hugepages_off"], _set_madvise_hugepage(True))  # the setting in force (the call returns it)
"""


def _hugepage_run(role, **env_extra):
    return _probe(HUGEPAGE_PROBE, role, drop=lambda k: k == "NUMPY_MADVISE_HUGEPAGE", **env_extra).split()


@pytest.mark.subprocess
def test_numpy_huge_pages_off_outside_training():
    """NumPy's MADV_HUGEPAGE made the search's tree doubling wait up to
    0.5 s for the kernel's compaction, past the move's deadline: setup()
    turns it off, except in a training process and where the user set
    NUMPY_MADVISE_HUGEPAGE, which keep NumPy's own choice."""
    numpy_default = _hugepage_run("none")[1]
    assert _hugepage_run("other") == ["True", "False"]
    assert _hugepage_run("train") == ["False", numpy_default]
    assert _hugepage_run("other", NUMPY_MADVISE_HUGEPAGE="1") == ["False", "True"]


POOL_PROBE = """
import os
from alphalite import runtime
forks = []
os.register_at_fork(before=lambda: forks.append(1))
with runtime.process_pool(2) as pool:
    assert pool.map(abs, [-1, -2]) == [1, 2]
before_jax = len(forks)
import jax
jax.numpy.ones(2).block_until_ready()
with runtime.process_pool(2) as pool:
    assert pool.map(abs, [-3]) == [3]
print(before_jax, len(forks) - before_jax)
"""


@pytest.mark.subprocess
def test_process_pool_forks_only_before_jax_is_loaded():
    """Forking a process whose JAX threads may hold locks can deadlock the
    child: with JAX loaded the pool's workers come from a fork server."""
    out = subprocess.run([sys.executable, "-c", POOL_PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "0"]
    assert "os.fork() was called" not in out.stderr


IMPORT_PROBE = """
import os, sys
os.environ.pop("XLA_FLAGS", None)
import alphalite.go.board, alphalite.nn.nets, alphalite.nn.features, alphalite.train.supervised, alphalite.gtp.engine
import alphalite.arena.tournament, alphalite.data.dataset, alphalite.engine.players, search, selfplay.rl
from numba.core import caching
impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
from alphalite.runtime import numba_cache
print(os.environ.get("XLA_FLAGS", "unset"), numba_cache._PackageLocator in impl._locator_classes, sep="|")
"""


@pytest.mark.subprocess
def test_importing_sets_no_xla_flag_and_stamps_the_kernels():
    """Importing our modules sets no XLA flag: only runtime.setup(), called
    by the entry points, does (the malloc tuning has no outside trace to
    check; it sits in the same function). Numba's cache locator does come
    with the kernel modules (alphalite.runtime.kernels), so that a process
    without setup() shares the entry points' cache."""
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["unset|True"]
