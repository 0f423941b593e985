"""int8 inference: our ONNX nets quantized by ONNX Runtime (static, QDQ).

Why: on the 2-core AMD EPYC (Zen 4, AVX-512 VNNI) host, ORT ran int8
b4c32/b6c64 19x19 nets 1.7-3.4x faster than the same nets in fp32, at batch
1 to 32, 3-6x PyTorch's fp32, with the policy's top-1 on held-out Tygem
positions within 0.4 points (`benchmarks/inference.py`,
`benchmarks/int8_accuracy.py`; the README's figures).

Only the convolutions are quantized (``QUANTIZED_OPS``), all but the stem
(the first, on the input planes): weights int8 per output channel,
activations uint8 per tensor. ORT
needs each activation's range, measured on inputs like the real ones
(calibration). Random planes gave `policy19` 86% top-1 agreement with fp32,
positions of real games 97%. A user has no dataset at hand, so the net
plays ``CALIB_GAMES`` games against itself, sampling its own fp32 policy,
and every ``CALIB_EVERY``-th position is kept. Half the kept positions
calibrate; on the other half the int8 net must agree with the fp32 net
at least ``MIN_AGREE`` of the time on every output (else
``QuantizationError``): the top move, the value and each point's ownership
within 0.1 (``agreement``).

Weights use all 8 bits on every host. ORT suggests 7 (``reduce_range``) on
hosts without VNNI, whose u8 x s8 instruction can saturate; measured on such
a host (2-core AMD EPYC, Zen 3, AVX2; calibration and check as below) 7 bits
cost more than saturation: `value19b12` within 0.1 of fp32 on 59.7% of the
positions with 7 bits, 85.6% with 8, 91.0% with 8 and the stem in fp32;
`policy19b12`'s top move 95.1% and 97.0%; the speed the same.

The quantized graphs are cached (``cache_dir()``, beside the conv tuning's
file), keyed by the fp32 graphs, ORT's version and ``MIN_AGREE``: a second start loads them
at once. A net that failed its check is remembered there too (``.failed``,
its reason), so later starts take fp32 at once rather than calibrate again
(minutes for a 19x19 b12 pair on two cores). Of a policy and its value
net, one that fails while the other passes keeps its fp32 graph (and the
note says so): with MinMax ranges `value19b12` beside `policy19ag40b12`
agreed on 81% of that policy's self-play positions (``CALIB_PERCENTILE``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from alphalite.runtime import cpu

# Only the convolutions, where the time goes. Quantized, the heads' dense
# layers clip their outputs at the calibration's range: value9 said 0.57 in
# a position it calls won at 0.99996 in fp32 (tests/test_gtp.py's resign test).
QUANTIZED_OPS = ["Conv"]
CALIB_GAMES = 16
CALIB_EVERY = 4
MIN_AGREE = 0.85
# Activation ranges from the 99.999th percentile of the calibration
# positions, not their extremes (ORT's default, MinMax), which a few
# outliers stretch. Measured (Zen 3 host; the engine's calibration and
# check, 288 + 288 positions), MinMax / 99.999 / 99.99: value19b12 within
# 0.1 on policy19b12's self-play 91.0 / 95.8 / 96.2%, on policy19ag40b12's
# 80.9 / 91.0 / 90.8%; top move of policy19b12 95.8 / 96.0 / 91.0%, of
# policy19ag40b12 94.1 / 96.7 / 90.8%.
CALIB_PERCENTILE = 99.999
CACHE_VERSION = 5  # 2: the convolutions only; 3: not the stem, 8-bit weights everywhere, failures kept;
# 4: of a pair, a net that fails alone stays fp32 (a pair failed whole under 3); 5: percentile ranges


class QuantizationError(ValueError):
    pass


def cache_dir() -> Path:
    from alphalite.nn import convtune

    return convtune.cache_file().parent / "int8"


# The CPU features that choose ORT's int8 kernels: without VNNI, AVX2's
# u8 x s8 products can saturate, so a net checked on one kind of host is not
# checked on another (the cache is keyed by them; a shared cache folder too).
INT8_FLAGS = ("avx2", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm")


def has_vnni() -> bool:
    """Whether ORT's int8 products run on VNNI here (reported by the benchmarks)."""
    return bool({"avx512_vnni", "avx_vnni"} & cpu.flags())


def isa_tag() -> str:
    """The machine and its int8-relevant CPU features, as the cache key has them."""
    import platform

    return " ".join([platform.machine(), *sorted(set(INT8_FLAGS) & cpu.flags())])


def self_play_planes(run, size: int, preset: str, games: int = CALIB_GAMES, every: int = CALIB_EVERY,
                     seed: int = 0) -> np.ndarray:
    """float32 [N, H, W, C]: every ``every``-th position of ``games`` games
    played in lock step by sampling ``run(planes) -> logits [B, A]`` over the
    legal moves, up to 0.8 * size^2 moves (later positions are filled boards
    no game reaches)."""
    from alphalite.go import board
    from alphalite.nn import features

    rng = np.random.default_rng(seed)
    states = [board.new_game(size) for _ in range(games)]
    kept = []
    for move in range(int(0.8 * size * size)):
        x = np.stack([features.encode(s, preset) for s in states])
        if move % every == 0:
            kept.append(x)
        legal = np.stack([board.legal_moves(s) for s in states]).astype(bool)
        logits = np.where(legal, np.asarray(run(x), np.float64), -np.inf)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        nxt = []
        for s, row in zip(states, p):
            s = board.play(s, int(rng.choice(len(row), p=row)))
            nxt.append(board.new_game(size) if s.is_over else s)
        states = nxt
    return np.concatenate(kept)


@contextlib.contextmanager
def _quiet():
    """ORT's quantizer warns on the root logger (run its pre-processing
    first) and its histogram calibrator prints to stdout, where GTP
    answers go: keep both off the engine's streams."""
    logging.disable(logging.WARNING)
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            yield
    finally:
        logging.disable(logging.NOTSET)


def stem(proto: bytes) -> list[str]:
    """The name of the graph's first convolution (the stem, on the input
    planes), as a list for ``nodes_to_exclude``; [] if it has none or no name."""
    import onnx

    convs = [n.name for n in onnx.load_from_string(proto).graph.node if n.op_type == "Conv"]
    return convs[:1] if convs and convs[0] else []


def quantize(proto: bytes, planes: np.ndarray, reduce_range: bool = False) -> bytes:
    """The int8 graph of the fp32 graph ``proto``, calibrated on ``planes``
    (``reduce_range``: 7-bit weights, for measurements)."""
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    # batches of one size: ORT's percentile calibrator stacks every batch's activations into
    # one array, and a shorter last batch (13x13 self-play: 272 positions) made it fail
    k = -(-len(planes) // 64)
    each = len(planes) // k
    chunks = [np.ascontiguousarray(planes[i * each:(i + 1) * each], np.float32) for i in range(k)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(chunks)

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else {"planes": x}

    with tempfile.TemporaryDirectory() as d, _quiet():
        src, dst = os.path.join(d, "fp32.onnx"), os.path.join(d, "int8.onnx")
        Path(src).write_bytes(proto)
        quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=reduce_range,
                        op_types_to_quantize=QUANTIZED_OPS, nodes_to_exclude=stem(proto),
                        calibrate_method=CalibrationMethod.Percentile,
                        extra_options={"CalibPercentile": CALIB_PERCENTILE})
        return Path(dst).read_bytes()


def agreement(fp32, int8, planes: np.ndarray) -> float:
    """How often two sessions agree, the least over their outputs: the top
    move for policy logits [B, A]; within 0.1 for values [B] and for each
    point of an ownership head [B, H*W]."""
    names = [o.name for o in fp32.get_outputs()]
    out = []
    for name, a, b in zip(names, fp32.run(None, {"planes": planes}), int8.run(None, {"planes": planes})):
        if a.ndim == 2 and name != "ownership":
            out.append(float((a.argmax(axis=1) == b.argmax(axis=1)).mean()))
        else:
            out.append(float((np.abs(a - b) <= 0.1).mean()))
    return min(out)


def quantized(protos: list[bytes], planes_fn, split: int | None = None) -> tuple[list[bytes], str]:
    """(the int8 graphs of the fp32 graphs ``protos`` (one net's, or a
    policy and its value net), what was done): read from the cache, or
    quantized now on ``planes_fn()`` (planes for all of them; with
    ``split``, a preset pair's: the first net reads channels ``[:split]``,
    the second the rest), checked (``MIN_AGREE``) and cached."""
    import onnxruntime as ort

    h = hashlib.sha256(f"{CACHE_VERSION} {ort.__version__} {MIN_AGREE} {isa_tag()}".encode())
    for p in protos:
        h.update(hashlib.sha256(p).digest())
    key = h.hexdigest()[:32]
    paths = [cache_dir() / f"{key}-{i}.onnx" for i in range(len(protos))]
    failed, kept = cache_dir() / f"{key}.failed", cache_dir() / f"{key}.fp32"

    def cached():
        try:
            if all(p.exists() for p in paths):
                return [p.read_bytes() for p in paths], "cached" + (f" ({kept.read_text()})" if kept.exists() else "")
            if failed.exists():
                raise QuantizationError(failed.read_text().strip() + " (remembered)")
        except OSError:
            pass
        return None

    found = cached()
    if found is not None:
        return found
    # one calibration at a time (two engines of an arena start together): the second then reads the first's
    with _locked(cache_dir() / f"{key}.lock"):
        found = cached()
        if found is not None:
            return found
        return _calibrate(protos, planes_fn, split, paths, failed, kept)


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (none where the folder cannot be written: the work is then just done twice)."""
    import fcntl

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "w")
    except OSError:
        yield
        return
    try:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
    finally:
        f.close()


def _calibrate(protos, planes_fn, split, paths, failed, kept) -> tuple[list[bytes], str]:
    from alphalite.nn import features, onnx_export
    from alphalite.runtime import files

    planes = planes_fn()
    out, agrees, fp32 = [], [], []
    for i, (proto, x) in enumerate(zip(protos, features.split_planes(planes, split))):
        x = np.ascontiguousarray(x)
        calib, held = x[0::2], x[1::2]
        q = quantize(proto, calib)
        agree = agreement(onnx_export.session_of(proto), onnx_export.session_of(q), held)
        agrees.append(f"{agree:.1%}")
        if agree < MIN_AGREE:
            q = proto
            fp32.append(f"{('policy', 'value')[i] if len(protos) == 2 else 'net'} net in fp32: "
                        f"int8 agreed on {agree:.1%}, needs {MIN_AGREE:.0%}")
        out.append(q)
    if len(fp32) == len(protos):
        why = (f"the int8 net agrees with fp32 on {' and '.join(agrees)} of {len(held)} positions "
               f"(needs {MIN_AGREE:.0%}): use --inference onnx")
        with contextlib.suppress(OSError):  # not remembered: the next start checks again
            files.write_atomic(failed, lambda f: f.write(why.encode()))
        raise QuantizationError(why)
    note = (f"calibrated now on {len(calib)} positions of self-play, agrees with fp32 on "
            f"{' and '.join(agrees)} of {len(held)} others")
    if fp32:
        note += f"; {'; '.join(fp32)}"
    try:
        if fp32:
            files.write_atomic(kept, lambda f: f.write("; ".join(fp32).encode()))
        for p, q in zip(paths, out):
            files.write_atomic(p, lambda f, q=q: f.write(q))
    except OSError as e:
        note += f"; not cached ({e.strerror or e})"
    return out, note
