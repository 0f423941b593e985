"""Which 3x3 convolution runs fastest on this host, measured once and cached.

Why: the fastest method depends on the CPU. On a Xeon with AVX-512/AMX the
Winograd convolution (alphalite/nn/winograd.py) trained b6c64 19x19 1.2x
faster than XLA's own; on an AMD EPYC host the same rule made training 2.7x
slower than XLA's convolution (issue 18). So, as KataGo tunes its OpenCL
kernels per device, ``--conv auto`` times the candidates (``METHODS``) for
the actual layer shape the first time it meets it, keeps the fastest, and
stores it in a JSON file (``cache_file()``, under ``$ALPHALITE_CACHE``, else
``$XDG_CACHE_HOME/alphalite``, else ``~/.cache/alphalite``) keyed by
``Shape.key()``: CPU model and flags, cores, jax/jaxlib version, XLA_FLAGS,
the Winograd code (winograd.py and the native kernels), train or inference,
``[B, H, W, C_in] -> C_out`` and dtype. Later processes read the
choice back.

The measurement (``measure_conv``) compiles each method's forward pass (and
its backward pass for training: gradients of the input and the kernel),
then times them round-robin, best of ``ROUNDS`` short rounds, so that load
from other processes hits all alike (the load average is kept with the
choice, and the line printed says when the machine was busy). A method wins
only if it is faster than the preferred one (XLA's: it compiles several
times faster) by ``MARGIN``; so the choice is deterministic whenever one
method is clearly faster, and a near tie goes to XLA. A tune takes a few seconds (mostly compiling
Winograd's backward pass) and prints one line to stderr.

A choice measured on a busy machine can be wrong; delete the cache file (or
its entry) to measure again.

``choose`` may be called while JAX traces a model (the conv layer asks for
its method at trace time); the measurement then runs in a worker thread,
outside the trace. ``set_tuning(False)`` or ``ALPHALITE_CONV_TUNE=0`` turns
measuring off (the test suite sets the variable, for the processes it starts
too: no timing noise, nothing written outside tmp folders); ``auto`` then
falls back to ``untuned_method``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from alphalite.runtime import cpu, files

METHODS = ("xla", "winograd")  # preference order: ties go to the first
MARGIN = 0.05  # a later method must be 5% faster to be chosen
ROUNDS = 10  # best of: a burst of load from other processes spoils a round, not the choice
ROUND_S = 0.05  # timed seconds per method and round (at least one call)
CACHE_NAME = "convtune.json"
CACHE_VERSION = 2  # 2: small layers timed several to a call
WINOGRAD_SOURCE = Path(__file__).with_name("winograd.py")  # its hash is in the key

_tuning: dict[str, bool | None] = {"on": None}  # None: ALPHALITE_CONV_TUNE decides
_memo: dict[tuple[str, str], str] = {}  # (cache file, key) -> method


@dataclasses.dataclass(frozen=True)
class Shape:
    """One 3x3 'SAME' conv layer as it runs: input ``[batch, height, width,
    cin]``, ``cout`` output channels, computation dtype, training (forward
    and backward) or inference (forward)."""

    train: bool
    batch: int
    height: int
    width: int
    cin: int
    cout: int
    dtype: str = "float32"

    def key(self, host: str | None = None) -> str:
        """The cache key: ``host_key()`` and the layer."""
        mode = "train" if self.train else "infer"
        layer = f"{self.batch}x{self.height}x{self.width}x{self.cin}->{self.cout} {self.dtype}"
        return f"{host if host is not None else host_key()} | {mode} {layer}"


def host_key() -> str:
    """CPU model (and a hash of its flags), the cores this process may use,
    jax and jaxlib versions, XLA_FLAGS, and the code timed: a hash of
    winograd.py and of the native Winograd kernels in use (or none). A
    choice measured on 2 cores is not the one for 16, and changed code is
    timed afresh."""
    import jax
    import jaxlib

    from alphalite.nn import native

    flags = " ".join(sorted(cpu.flags()))
    chip = f"{cpu.name()} #{hashlib.sha256(flags.encode()).hexdigest()[:8]}"
    xla = os.environ.get("XLA_FLAGS", "").strip()
    winograd = hashlib.sha256(WINOGRAD_SOURCE.read_bytes()).hexdigest()[:8]
    return (f"{chip} | {cpu.cores()} cores | jax {jax.__version__} jaxlib {jaxlib.__version__} | "
            f"{jax.default_backend()} | XLA_FLAGS={xla} | winograd {winograd} | native {native.kernel_id()}")


def cache_file() -> Path:
    base = os.environ.get("ALPHALITE_CACHE")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) / "alphalite" if xdg else Path.home() / ".cache" / "alphalite"
    return Path(base) / CACHE_NAME


def set_tuning(on: bool | None) -> None:
    """Measure on a cache miss or not (``auto`` then falls back to
    ``untuned_method`` and nothing is written); None: as the environment
    says (``ALPHALITE_CONV_TUNE=0`` turns it off, the default is on)."""
    _tuning["on"] = None if on is None else bool(on)


def tuning() -> bool:
    if _tuning["on"] is not None:
        return _tuning["on"]
    return os.environ.get("ALPHALITE_CONV_TUNE", "1") != "0"


def untuned_method() -> str:
    """The method used without a measurement: the preferred one, XLA's, for
    every shape. Never far off: Winograd trained b6c64 1.2x faster on a Xeon
    with AVX-512/AMX, but 2.7x slower on an AMD EPYC (the old fixed rule,
    Winograd for training on boards of 9 and more, issue 18)."""
    return METHODS[0]


def read_cache(path: Path) -> dict:
    """{key: entry} from the cache file; empty if missing, unreadable or of
    another version."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def pick(times: dict[str, float], margin: float = MARGIN) -> str:
    """The method to use given seconds per call: the fastest, unless the
    earliest in ``METHODS`` order is within ``margin`` of it."""
    order = [m for m in METHODS if m in times] + sorted(m for m in times if m not in METHODS)
    fastest = min(order, key=lambda m: times[m])
    first = order[0]
    return first if times[first] <= times[fastest] * (1 + margin) else fastest


def tune(shape: Shape, *, measure: Callable[[Shape, tuple[str, ...]], dict[str, float]] | None = None,
         path: Path | None = None, host: str | None = None, log=sys.stderr,
         clock: Callable[[], float] = time.perf_counter) -> str:
    """Measure the methods for ``shape`` (``measure(shape, METHODS)`` ->
    {method: seconds per call}; default ``measure_conv``), store the choice
    in the cache file (atomically, keeping other entries) and return it."""
    path = Path(path) if path is not None else cache_file()
    key = shape.key(host)
    t0 = clock()
    times = (measure or measure_conv)(shape, METHODS)
    method = pick(times)
    took = clock() - t0
    entries = read_cache(path)
    load = _load()
    entries[key] = {"method": method, "ms": {m: round(t * 1e3, 3) for m, t in times.items()}, "load": load}
    files.write_json_atomic(path, {"version": CACHE_VERSION, "entries": entries})
    _memo[(str(path), key)] = method
    if log is not None:
        ms = ", ".join(f"{m} {t * 1e3:.3g} ms" for m, t in times.items())
        busy = ""
        if load is not None and load > (os.cpu_count() or 1):
            busy = f"; load {load:.1f} on {os.cpu_count()} cores: delete the file to measure again when idle"
        print(f"alphalite: tuned the 3x3 conv for {key.rsplit(' | ', 1)[1]} in {took:.1f} s: "
              f"{method} ({ms}); cached in {path}{busy}", file=log, flush=True)
    return method


def _load() -> float | None:
    """The 1-minute load average (None where unknown), kept with each entry:
    other processes' load can make the choice wrong."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def choose(shape: Shape, *, measure=None, path: Path | None = None, host: str | None = None,
           log=sys.stderr) -> str:
    """The method for ``shape``: from this process's memory, else the cache
    file, else tuned now (or ``untuned_method`` with tuning off)."""
    path = Path(path) if path is not None else cache_file()
    key = shape.key(host)
    method = _memo.get((str(path), key))
    if method is not None:
        return method
    entry = read_cache(path).get(key)
    if isinstance(entry, dict) and entry.get("method") in METHODS:
        _memo[(str(path), key)] = entry["method"]
        return entry["method"]
    if not tuning():
        return untuned_method()
    # A worker thread: JAX's tracing state is per thread, so the timing runs
    # eagerly even when a model is being traced here.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(tune, shape, measure=measure, path=path, host=host, log=log).result()


def forget() -> None:
    """Drop this process's memory of choices (the cache file stays)."""
    _memo.clear()


# --------------------------------------------------------------------------
# the measurement


MIN_CALL_FLOP = 2e8  # small layers are timed several to a call, as in a net


def reps(shape: Shape) -> int:
    """Convolutions per timed call: enough (at most 8) that a call does
    ``MIN_CALL_FLOP``, so that the dispatch of a call, which a whole net pays
    once, does not decide between methods on small layers (a 19x19 batch of
    one)."""
    flop = 2 * 9 * shape.batch * shape.height * shape.width * shape.cin * shape.cout
    return max(1, min(8, -(-int(MIN_CALL_FLOP) // flop)))


def _conv_fns(shape: Shape, methods):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from alphalite.nn import winograd

    impl = {"xla": winograd.reference_conv3x3, "winograd": winograd.conv3x3}
    dtype = jnp.dtype(shape.dtype)
    rng = np.random.default_rng(0)
    r = reps(shape)
    # r different inputs, so that XLA cannot merge the r convolutions
    xs = jnp.asarray(rng.standard_normal((r, shape.batch, shape.height, shape.width, shape.cin)), dtype)
    w = jnp.asarray(rng.standard_normal((3, 3, shape.cin, shape.cout)) * 0.1, dtype)
    # The loss weights the outputs so that dy is not constant.
    scale = jnp.linspace(0.5, 1.5, shape.cout, dtype=dtype)
    fns = {}
    for m in methods:
        def convs(xs, w, conv=impl[m]):
            return sum(conv(xs[i], w) for i in range(r))

        if shape.train:
            f = jax.jit(jax.grad(lambda xs, w, convs=convs: jnp.sum(convs(xs, w) * scale).astype(jnp.float32),
                                 argnums=(0, 1)))
        else:
            f = jax.jit(convs)
        fns[m] = lambda f=f: jax.block_until_ready(f(xs, w))
    return fns, r


def measure_conv(shape: Shape, methods=METHODS, *, rounds: int = ROUNDS, round_s: float = ROUND_S,
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """{method: best seconds per convolution}: each compiled and run once,
    then timed round-robin for ``rounds`` rounds of about ``round_s`` each
    (``reps(shape)`` convolutions to a call)."""
    fns, r = _conv_fns(shape, methods)
    for fn in fns.values():
        fn()  # compile and warm up
    best = {m: float("inf") for m in fns}
    for _ in range(rounds):
        for m, fn in fns.items():
            n, t0 = 0, clock()
            while True:
                fn()
                n += 1
                elapsed = clock() - t0
                if elapsed >= round_s:
                    break
            best[m] = min(best[m], elapsed / (n * r))
    return best
