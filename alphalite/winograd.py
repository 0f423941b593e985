"""3x3 'SAME' convolution by Winograd's minimal filtering F(4x4, 3x3).

Why: XLA's CPU convolution is about half as fast as oneDNN's (PyTorch), and
its weight gradient, lowered as a convolution with a board-sized window, is
slower still. F(4x4, 3x3) (Lavin & Gray 2015; Leela Zero's CPU backend uses
it for the same nets) turns a 3x3 convolution into 36 independent
``[tiles, C] x [C, K]`` matrix products on 6x6 input tiles, 2.25 times fewer
multiplications than direct convolution on 4x4 output blocks. The backward
pass is written out (``custom_vjp``) so that autodiff never differentiates
the overlapping tile gather:

* ``dM = A dy A^T`` on the non-overlapping output blocks;
* ``dw`` is the 36 products ``V^T dM`` with ``V`` (input tiles, kept from the
  forward pass), then the filter transform's transpose;
* ``dx`` is the 36 products ``dM U^T``, then the input transform's transpose
  (overlapping tiles summed, written as pads and adds that XLA fuses).

Results agree with ``lax.conv_general_dilated`` to float32 rounding (about
1e-5 relative); tests check values and gradients. Shapes: ``x [B, H, W, C]``,
``w [3, 3, C, K]`` (HWIO, as flax ``nn.Conv`` stores it), out ``[B, H, W, K]``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# Lavin & Gray's F(4x4, 3x3) matrices: Y = A^T [(G g G^T) * (B^T d B)] A.
_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float32)
_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float32)
_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]], np.float32)


def _combine(coefs, parts):
    """sum_i coefs[i] * parts[i] with the small integer coefficients written
    as adds, so XLA fuses each transform into elementwise loops."""
    out = None
    for c, p in zip(coefs, parts):
        if c == 0:
            continue
        t = p if c == 1 else (-p if c == -1 else p * float(c))
        out = t if out is None else out + t
    return out


def _tiles(n: int) -> int:
    return -(-n // 4)


def _windows(x, axis: int, t: int) -> list:
    """The six rows ``4k + i`` (i = 0..5, k < t) of overlapping 6-wide
    windows along ``axis`` (of length ``4t + 4``) as six arrays with a tile
    axis in its place. Reshaping the whole axis is free (a bitcast) and the
    picks fuse into their consumers; strided slices or a reshaped slice
    would be copied first."""
    shape = x.shape
    xr = x.reshape(shape[:axis] + (t + 1, 4) + shape[axis + 1:])

    def pick(i, start):
        rows = lax.index_in_dim(xr, i, axis=axis + 1, keepdims=False)
        return lax.slice_in_dim(rows, start, start + t, axis=axis)

    return [pick(i, 0) for i in range(4)] + [pick(0, 1), pick(1, 1)]


def input_transform(x):
    """``[B, H, W, C]`` -> ``V [36, B*th*tw, C]`` (th = ceil(H/4)): B^T d B of
    every 6x6 tile of the zero-padded input."""
    n, h, w, c = x.shape
    th, tw = _tiles(h), _tiles(w)
    xp = jnp.pad(x, ((0, 0), (1, 4 * th + 3 - h), (1, 4 * tw + 3 - w), (0, 0)))
    rows = _windows(xp, 1, th)  # 6 x [B, th, W', C]
    t1 = jnp.stack([_combine(_BT[a], rows) for a in range(6)])  # [6, B, th, W', C]
    cols = _windows(t1, 3, tw)  # 6 x [6, B, th, tw, C]
    v = jnp.stack([_combine(_BT[b], cols) for b in range(6)], axis=1)  # [6, 6, B, th, tw, C]
    return v.reshape(36, n * th * tw, c)


def _windows_t(parts: list, axis: int, t: int):
    """Transpose of ``_windows``: six ``[..., t, ...]`` arrays -> the
    ``4t + 4``-long axis, overlapping rows summed."""
    def grow(p, before):
        pad = [(0, 0)] * p.ndim
        pad[axis] = (1, 0) if before else (0, 1)
        return jnp.pad(p, pad)

    cols = [grow(parts[0], False) + grow(parts[4], True), grow(parts[1], False) + grow(parts[5], True),
            grow(parts[2], False), grow(parts[3], False)]
    out = jnp.stack(cols, axis=axis + 1)  # [..., t + 1, 4, ...]
    shape = out.shape
    return out.reshape(shape[:axis] + (4 * (t + 1),) + shape[axis + 2:])


def input_transform_t(dv, n: int, h: int, w: int):
    """Transpose of ``input_transform``: ``[36, B*th*tw, C]`` -> ``[B, H, W, C]``."""
    th, tw, c = _tiles(h), _tiles(w), dv.shape[-1]
    dv = dv.reshape(6, 6, n, th, tw, c)
    dcols = [_combine(_BT[:, j], [dv[:, b] for b in range(6)]) for j in range(6)]  # 6 x [6, B, th, tw, C]
    dt1 = _windows_t(dcols, 3, tw)  # [6, B, th, W', C]
    drows = [_combine(_BT[:, i], [dt1[a] for a in range(6)]) for i in range(6)]  # 6 x [B, th, W', C]
    dxp = _windows_t(drows, 1, th)  # [B, H', W', C]
    return dxp[:, 1:1 + h, 1:1 + w]


def output_transform(m, n: int, h: int, w: int):
    """``M [36, B*th*tw, K]`` -> ``[B, H, W, K]``: A^T m A per tile, cropped."""
    th, tw, k = _tiles(h), _tiles(w), m.shape[-1]
    m = m.reshape(6, 6, n, th, tw, k)
    r = [_combine(_AT[i], [m[a] for a in range(6)]) for i in range(4)]  # 4 x [6, B, th, tw, K]
    y = jnp.stack([jnp.stack([_combine(_AT[j], [r[i][b] for b in range(6)]) for j in range(4)], axis=3)
                   for i in range(4)], axis=2)  # [B, th, 4, tw, 4, K]
    return y.reshape(n, 4 * th, 4 * tw, k)[:, :h, :w]


def output_transform_t(dy):
    """Transpose of ``output_transform``: ``[B, H, W, K]`` -> ``[36, B*th*tw, K]``."""
    n, h, w, k = dy.shape
    th, tw = _tiles(h), _tiles(w)
    d = jnp.pad(dy, ((0, 0), (0, 4 * th - h), (0, 4 * tw - w), (0, 0))).reshape(n, th, 4, tw, 4, k)
    rows = [d[:, :, i] for i in range(4)]  # 4 x [B, th, tw, 4, K]
    s = [_combine(_AT[:, a], rows) for a in range(6)]
    cols = [[s[a][:, :, :, j] for j in range(4)] for a in range(6)]
    dm = jnp.stack([jnp.stack([_combine(_AT[:, b], cols[a]) for b in range(6)]) for a in range(6)])
    return dm.reshape(36, n * th * tw, k)


def filter_transform(w):
    """``[3, 3, C, K]`` -> ``U [36, C, K]`` (G g G^T)."""
    c, k = w.shape[2:]
    return jnp.einsum("ai,ijck,bj->abck", _G, w, _G).reshape(36, c, k)


def filter_transform_t(du):
    """Transpose of ``filter_transform``: ``[36, C, K]`` -> ``[3, 3, C, K]``."""
    c, k = du.shape[1:]
    return jnp.einsum("ai,abck,bj->ijck", _G, du.reshape(6, 6, c, k), _G)


def _forward(x, w):
    v = input_transform(x)
    m = jnp.einsum("anc,ack->ank", v, filter_transform(w).astype(v.dtype))
    return output_transform(m, *x.shape[:3]), v


@jax.custom_vjp
def conv3x3(x, w):
    """3x3 convolution, stride 1, zero 'SAME' padding, no bias: NHWC x HWIO."""
    return _forward(x, w)[0]


def _fwd(x, w):
    y, v = _forward(x, w)
    return y, (v, w)


def _bwd(res, dy):
    v, w = res
    dm = output_transform_t(dy)
    dw = filter_transform_t(jnp.einsum("anc,ank->ack", v, dm)).astype(w.dtype)
    dv = jnp.einsum("ank,ack->anc", dm, filter_transform(w).astype(dm.dtype))
    dx = input_transform_t(dv, dy.shape[0], dy.shape[1], dy.shape[2])
    return dx, dw


conv3x3.defvjp(_fwd, _bwd)


def reference_conv3x3(x, w):
    """The same convolution by XLA (for tests and comparisons)."""
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
