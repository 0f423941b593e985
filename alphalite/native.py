"""A native CPU kernel for the Winograd weight gradient, built on first use.

``batched_tn(v, d)`` is ``einsum("anc,ank->ack", v, d)``. XLA's CPU runtime
runs that batched product (36 products of 64 x 1600 by 1600 x 64 for a
19x19 batch of 64) on one thread at about 64 GFLOP/s; ``native_tn.cc`` shares
the batch over XLA's intra-op thread pool and reaches about 130 on two cores
(it was 40% of a b6c64 19x19 training step). It is an XLA FFI custom call,
compiled with the system's C++ compiler (``$CXX``, else ``c++``) against
jaxlib's FFI headers the first time it is needed, and cached by source,
jaxlib version and CPU under ``$ALPHALITE_CACHE`` (default
``~/.cache/alphalite``). Without a compiler, with ``ALPHALITE_NATIVE=0``, off
the CPU, or for other dtypes and shapes the einsum runs instead, so the
results are the same to float32 rounding either way.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jaxlib
import jax.numpy as jnp
from jax import lax

TARGET = "alphalite_tn"
SOURCE = Path(__file__).with_name("native_tn.cc")


def cache_dir() -> Path:
    return Path(os.environ.get("ALPHALITE_CACHE") or Path.home() / ".cache" / "alphalite")


def cpu_id() -> str:
    """What -march=native compiles for: the CPU model and its flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return "\n".join(sorted({ln for ln in lines if ln.startswith(("model name", "flags", "Features"))}))
    except OSError:
        return platform.processor() or platform.machine()


def _build() -> Path:
    cxx = os.environ.get("CXX", "c++")
    cmd = [cxx, "-O3", "-march=native", "-shared", "-fPIC", "-std=c++17", "-w",
           f"-I{jax.ffi.include_dir()}"]
    parts = [SOURCE.read_text(), jaxlib.__version__, cpu_id(), " ".join(cmd)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    out = cache_dir() / f"native_tn-{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".native_tn-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        subprocess.run(cmd + [str(SOURCE), "-o", tmp], check=True, capture_output=True, text=True, timeout=300)
        os.replace(tmp, out)  # atomic: parallel builders all end with a whole file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


@functools.cache
def _library():
    """Build, load and register the kernel once per process (the cache also
    keeps the library loaded); None, after one warning on stderr, when that
    is not possible."""
    if os.environ.get("ALPHALITE_NATIVE", "1") == "0":
        return None
    try:
        lib = ctypes.cdll.LoadLibrary(str(_build()))
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.AlphaliteTn), platform="cpu")
        return lib
    except (OSError, subprocess.SubprocessError, AttributeError) as e:
        detail = (getattr(e, "stderr", "") or str(e)).strip().splitlines()
        print(f"alphalite: native CPU kernel unavailable, using XLA's product ({detail[-1] if detail else e!r})",
              file=sys.stderr)
        return None


def available() -> bool:
    return _library() is not None


def _einsum(v, d):
    return jnp.einsum("anc,ank->ack", v, d)


def _native(v, d):
    out = jax.ShapeDtypeStruct((v.shape[0], v.shape[2], d.shape[2]), jnp.float32)
    return jax.ffi.ffi_call(TARGET, out)(v, d)


def batched_tn(v, d):
    """``einsum("anc,ank->ack", v, d)``, by the native kernel on the CPU when
    it can be used (float32, K a multiple of 32)."""
    if (v.dtype != jnp.float32 or d.dtype != jnp.float32 or d.shape[2] % 32 or v.shape[:2] != d.shape[:2]
            or not available()):
        return _einsum(v, d)
    return lax.platform_dependent(v, d, cpu=_native, default=_einsum)
