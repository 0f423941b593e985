"""Native CPU kernels of the Winograd convolution, built on first use.

``batched_tn(v, d)`` is ``einsum("anc,ank->ack", v, d)``, the weight
gradient's products. XLA's CPU runtime runs that batched product (36
products of 64 x 1600 by 1600 x 64 for a 19x19 batch of 64) on one thread at
about 64 GFLOP/s; ``native_winograd.cc`` shares the batch over XLA's
intra-op thread pool and reaches about 130 on two cores (it was 40% of a
b6c64 19x19 training step). ``winograd_forward(x, u, m)`` is the whole
forward convolution from the transformed filter, fused per block of tiles
so that the transformed input and the products stay in the cache (XLA's
transforms, each a pass over memory, took as long as its products).
``winograd_weight_grad(x, dy)`` is the weight gradient of a large batch,
the transforms of ``x`` and ``dy`` and the products fused per block of
tiles in the same way. They are XLA FFI custom calls,
compiled with the system's C++ compiler (``$CXX``, else ``c++``) against
jaxlib's FFI headers the first time it is needed, and cached by source,
jaxlib version, CPU and target under ``$ALPHALITE_CACHE`` (default
``~/.cache/alphalite``). Training builds it for ``-march=native``;
``load(march)`` builds it for another target (the tests run the AVX2 build,
``x86-64-v3``, on any x86 host, so an AVX-512 host tests the code an AVX2
host runs; an AVX2 host only compiles the AVX-512 build, ``x86-64-v4``). Without
a compiler, with ``ALPHALITE_NATIVE=0``, off the CPU, or for other dtypes and
shapes the einsum runs instead, so the results are the same to float32
rounding either way.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jaxlib
import jax.numpy as jnp
from jax import lax

from alphalite.runtime import cpu

TARGET = "alphalite_tn"
# FFI targets: the weight gradient's products, the forward convolution, the
# forward that also returns the transformed input (kept for the backward
# pass), and the weight gradient from dy (its transform fused in).
SYMBOLS = {"": "AlphaliteTn", "_winograd": "AlphaliteWinograd", "_winograd_v": "AlphaliteWinogradV",
           "_winograd_dw": "AlphaliteWinogradDw"}
SOURCE = Path(__file__).with_name("native_winograd.cc")


def cache_dir() -> Path:
    return Path(os.environ.get("ALPHALITE_CACHE") or Path.home() / ".cache" / "alphalite")


def cpu_id() -> str:
    """What -march=native compiles for: the CPU model and its flags."""
    return "\n".join([cpu.name(), *sorted(cpu.flags())])


def build(march: str = "native", source: Path = SOURCE) -> Path:
    """The kernels of ``source`` compiled for ``-march=MARCH`` (cached;
    compiled on a miss)."""
    cxx = os.environ.get("CXX", "c++")
    cmd = [cxx, "-O3", f"-march={march}", "-shared", "-fPIC", "-std=c++17", "-w",
           f"-I{jax.ffi.include_dir()}"]
    parts = [source.read_text(), jaxlib.__version__, cpu_id(), " ".join(cmd)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    out = cache_dir() / f"native_winograd-{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".native_winograd-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        subprocess.run(cmd + [str(source), "-o", tmp], check=True, capture_output=True, text=True, timeout=300)
        os.replace(tmp, out)  # atomic: parallel builders all end with a whole file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


@functools.cache
def load(march: str = "native") -> str:
    """Build, load and register the kernels for ``-march=MARCH`` once per
    process; the weight gradient's FFI target name (``TARGET`` for native;
    the other kernels' are that name with the suffixes of ``SYMBOLS``).
    Raises OSError or SubprocessError when they cannot be built or loaded."""
    name = TARGET if march == "native" else f"{TARGET}_{re.sub(r'[^0-9A-Za-z]', '_', march)}"
    return register(build(march), name)


def register(library: Path, name: str) -> str:
    """Load a build of the kernels and register them as FFI targets ``name``
    + the suffixes of ``SYMBOLS``; returns ``name``."""
    lib = ctypes.cdll.LoadLibrary(str(library))  # the cache keeps it loaded
    for suffix, symbol in SYMBOLS.items():
        jax.ffi.register_ffi_target(name + suffix, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
    return name


@functools.cache
def _library():
    """The native kernel's target, or None, after one warning on stderr,
    when it cannot be used."""
    if os.environ.get("ALPHALITE_NATIVE", "1") == "0":
        return None
    try:
        return load()
    except (OSError, subprocess.SubprocessError, AttributeError) as e:
        detail = (getattr(e, "stderr", "") or str(e)).strip().splitlines()
        print(f"alphalite: native CPU kernel unavailable, using XLA's product ({detail[-1] if detail else e!r})",
              file=sys.stderr)
        return None


def available() -> bool:
    return _library() is not None


def kernel_id() -> str:
    """A short hash of the kernels' source when they are in use, else "none"."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:8] if available() else "none"


def _einsum(v, d):
    return jnp.einsum("anc,ank->ack", v, d)


def _on_cpu(native, fallback, *args, fits: bool, march: str):
    """``native(*args, target=...)`` on the CPU when the kernels can run on
    these arrays (all float32, and ``fits``: the caller's shape condition)
    and are built for ``march`` (native: ``_library()``; another target
    must build); ``fallback(*args)`` otherwise and off the CPU."""
    if not fits or any(a.dtype != jnp.float32 for a in args):
        return fallback(*args)
    target = _library() if march == "native" else load(march)
    if target is None:
        return fallback(*args)
    return lax.platform_dependent(*args, cpu=functools.partial(native, target=target), default=fallback)


def _native(v, d, *, target):
    out = jax.ShapeDtypeStruct((v.shape[0], v.shape[2], d.shape[2]), jnp.float32)
    return jax.ffi.ffi_call(target, out)(v, d)


def batched_tn(v, d, *, march: str = "native"):
    """``einsum("anc,ank->ack", v, d)``, by the native kernel on the CPU when
    it can be used (float32, K a multiple of 32). ``march`` other than
    native: the kernel built for that target, which must build."""
    return _on_cpu(_native, _einsum, v, d, fits=d.shape[2] % 32 == 0 and v.shape[:2] == d.shape[:2], march=march)


def _winograd_native(x, u, *, bt, at, target, keep_v):
    n, h, w, _ = x.shape
    y = jax.ShapeDtypeStruct((n, h, w, u.shape[2]), jnp.float32)
    if not keep_v:
        return jax.ffi.ffi_call(target + "_winograd", y)(x, u, bt, at), None
    m = at.shape[0]
    v = jax.ShapeDtypeStruct((u.shape[0], n * (-(-h // m)) * (-(-w // m)), x.shape[3]), jnp.float32)
    return tuple(jax.ffi.ffi_call(target + "_winograd_v", (y, v))(x, u, bt, at))


def winograd_forward(x, u, bt, at, *, keep_v: bool, fallback, march: str = "native"):
    """The Winograd forward convolution of ``x [B, H, W, C]`` with the
    transformed filter ``u [(m+2)^2, C, K]`` (``bt``/``at`` the transform
    matrices B^T and A^T): ``(y, v)``, ``v`` the transformed input
    ``[(m+2)^2, tiles, C]`` when ``keep_v`` (else None). By the fused native
    kernel on the CPU where it can run (float32, K a multiple of 32, m
    from 2 to 5); otherwise ``fallback(x, u)``, which must return the same
    pair."""
    native = functools.partial(_winograd_native, bt=jnp.asarray(bt), at=jnp.asarray(at), keep_v=keep_v)
    return _on_cpu(native, fallback, x, u, fits=u.shape[2] % 32 == 0 and 2 <= at.shape[0] <= 5, march=march)


def _weight_grad_native(x, dy, *, bt, at, target):
    out = jax.ShapeDtypeStruct((at.shape[1] ** 2, x.shape[3], dy.shape[3]), jnp.float32)
    return jax.ffi.ffi_call(target + "_winograd_dw", out)(x, dy, bt, at)


def winograd_weight_grad(x, dy, bt, at, *, fallback, march: str = "native"):
    """``du [(m+2)^2, C, K]``, the weight gradient before the filter
    transform's transpose: ``sum over tiles of V^T (A dy A^T)`` with ``V``
    the transformed input of ``x [B, H, W, C]`` (B^T x B, made again here,
    per block of tiles: cheaper than keeping it from the forward pass) and
    ``dy [B, H, W, K]``. By the native kernel where it can run (as
    ``winograd_forward``); otherwise ``fallback(x, dy)``."""
    native = functools.partial(_weight_grad_native, bt=jnp.asarray(bt), at=jnp.asarray(at))
    return _on_cpu(native, fallback, x, dy, fits=dy.shape[3] % 32 == 0 and 2 <= at.shape[0] <= 5, march=march)
