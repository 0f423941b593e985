"""3x3 'SAME' convolution by Winograd's minimal filtering F(m x m, 3x3).

Why: XLA's CPU convolution is slower than oneDNN's (PyTorch), and its weight
gradient, lowered as a convolution with a board-sized window, slower still.
F(m x m, 3x3) (Lavin & Gray 2015; Leela Zero's CPU backend uses F(4x4) for
the same nets) turns a 3x3 convolution into (m+2)^2 independent
``[tiles, C] x [C, K]`` matrix products on (m+2)x(m+2) input tiles: 9 m^2 /
(m+2)^2 times fewer multiplications than direct convolution (2.25x for m=4,
3.24x for m=3). ``tile_size`` picks m per board: 3 on 9x9 (three tiles, no
padding), 4 on 19x19 (padded to 20). The matrices are built from
interpolation points (``matrices``) and checked when the module loads.

On the CPU the forward pass runs fused in a native kernel
(alphalite/nn/native.py): the three stages per block of tiles in the cache,
where XLA's passes over memory between them took as long as the products;
the XLA version here is the reference and the fallback (other dtypes,
accelerators, no compiler).

The backward pass is written out (``custom_vjp``) so that autodiff never
differentiates the overlapping tile gather:

* ``dM = A dy A^T`` on the non-overlapping output blocks;
* ``dw`` is the products ``V^T dM`` with ``V`` the input tiles, then the
  filter transform's transpose; on the CPU, for large batches, a native
  kernel (alphalite/nn/native.py) transforms ``x`` and ``dy`` again per
  block of tiles and takes the products in the cache (keeping ``V``, 2.5
  times the size of ``x``, cost more in memory traffic than transforming
  again); for small ones the forward pass keeps ``V`` and the products run
  in a native kernel, as XLA runs them on one thread;
* ``dx`` is the forward convolution of ``dy`` with the kernel turned 180
  degrees and its channel axes swapped (it measured faster than the input
  transform's transpose, whose overlapping-tile sums XLA fused poorly).

Results agree with ``lax.conv_general_dilated`` to float32 rounding (about
1e-6 relative); tests check values and gradients. Shapes: ``x [B, H, W, C]``,
``w [3, 3, C, K]`` (HWIO, as flax ``nn.Conv`` stores it), out ``[B, H, W, K]``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from alphalite.nn import native

# Interpolation points (the last one is infinity) for F(m, 3): Lavin & Gray's
# for m = 2 and 4, the usual small ones for 3 and 5.
POINTS = {2: (0, 1, -1), 3: (0, 1, -1, 2), 4: (0, 1, -1, 2, -2), 5: (0, 1, -1, 2, -2, 0.5)}


def matrices(m: int, r: int = 3):
    """Cook-Toom matrices of F(m, r): ``A^T [m, n]``, ``G [n, r]``,
    ``B^T [n, n]`` with n = m + r - 1, such that the correlation of a
    length-n input with a length-r filter is ``A^T [(G g) * (B^T d)]``.
    A^T and G are Vandermonde rows at the points (G scaled by 1 / prod(a_t -
    a_s), as Lavin's wincnn does), plus infinity; B^T is solved from the
    identity and checked."""
    pts = POINTS[m]
    n = m + r - 1
    assert len(pts) == n - 1
    at = np.zeros((m, n))
    g = np.zeros((n, r))
    for t, a in enumerate(pts):
        f = np.prod([a - b for b in pts if b != a])
        at[:, t] = [a ** k for k in range(m)]
        g[t] = [a ** j / f for j in range(r)]
    at[m - 1, n - 1] = g[n - 1, r - 1] = 1.0
    # sum_t AT[k, t] G[t, j] BT[t, i] = [i == k + j] for all k, j, i
    sys_ = np.einsum("kt,tj->kjt", at, g).reshape(m * r, n)
    rhs = np.zeros((m, r, n))
    for k in range(m):
        for j in range(r):
            rhs[k, j, k + j] = 1.0
    bt, *_ = np.linalg.lstsq(sys_, rhs.reshape(m * r, n), rcond=None)
    bt[np.abs(bt) < 1e-12] = 0.0
    assert np.allclose(sys_ @ bt, rhs.reshape(m * r, n), atol=1e-9)
    return at.astype(np.float32), g.astype(np.float32), bt.astype(np.float32)


_MATS = {m: matrices(m) for m in POINTS}


def tile_size(h: int, w: int) -> int:
    """The output tile m that needs the fewest transformed values,
    ceil(h/m) ceil(w/m) (m+2)^2 (ties to the smaller m): 3 on 9x9 (no
    padding), 4 on 19x19 (to 20x20), 2 on tiny boards."""
    return min((2, 3, 4), key=lambda m: (_tiles(h, m) * _tiles(w, m) * (m + 2) ** 2, m))


def _combine(coefs, parts):
    """sum_i coefs[i] * parts[i] with +-1 written as adds and zeros skipped,
    so XLA fuses each transform into elementwise loops."""
    out = None
    for c, p in zip(coefs, parts):
        if c == 0:
            continue
        t = p if c == 1 else (-p if c == -1 else p * float(c))
        out = t if out is None else out + t
    return out


def _tiles(size: int, m: int) -> int:
    return -(-size // m)


def _windows(x, axis: int, t: int, m: int) -> list:
    """The m + 2 rows ``m k + i`` (i = 0..m+1, k < t) of overlapping windows
    along ``axis`` (of length ``m (t + 1)``) as m + 2 arrays with a tile axis
    in its place. Reshaping the whole axis is free (a bitcast) and the picks
    fuse into their consumers; strided slices would be copied first."""
    shape = x.shape
    xr = x.reshape(shape[:axis] + (t + 1, m) + shape[axis + 1:])

    def pick(i, start):
        rows = lax.index_in_dim(xr, i, axis=axis + 1, keepdims=False)
        return lax.slice_in_dim(rows, start, start + t, axis=axis)

    return [pick(i, 0) for i in range(m)] + [pick(0, 1), pick(1, 1)]


def input_transform(x, m: int):
    """``[B, H, W, C]`` -> ``V [(m+2)^2, B*th*tw, C]`` (th = ceil(H/m)):
    B^T d B of every (m+2)x(m+2) tile of the zero-padded input."""
    n, h, w, c = x.shape
    th, tw, nt = _tiles(h, m), _tiles(w, m), m + 2
    bt = _MATS[m][2]
    xp = jnp.pad(x, ((0, 0), (1, m * th + m - 1 - h), (1, m * tw + m - 1 - w), (0, 0)))
    rows = _windows(xp, 1, th, m)  # nt x [B, th, W', C]
    t1 = jnp.stack([_combine(bt[a], rows) for a in range(nt)])  # [nt, B, th, W', C]
    cols = _windows(t1, 3, tw, m)  # nt x [nt, B, th, tw, C]
    v = jnp.stack([_combine(bt[b], cols) for b in range(nt)], axis=1)  # [nt, nt, B, th, tw, C]
    return v.reshape(nt * nt, n * th * tw, c)


def output_transform(mm, n: int, h: int, w: int, m: int):
    """``M [(m+2)^2, B*th*tw, K]`` -> ``[B, H, W, K]``: A^T M A per tile, cropped."""
    th, tw, k, nt = _tiles(h, m), _tiles(w, m), mm.shape[-1], m + 2
    at = _MATS[m][0]
    mm = mm.reshape(nt, nt, n, th, tw, k)
    r = [_combine(at[i], [mm[a] for a in range(nt)]) for i in range(m)]  # m x [nt, B, th, tw, K]
    y = jnp.stack([jnp.stack([_combine(at[j], [r[i][b] for b in range(nt)]) for j in range(m)], axis=3)
                   for i in range(m)], axis=2)  # [B, th, m, tw, m, K]
    return y.reshape(n, m * th, m * tw, k)[:, :h, :w]


def output_transform_t(dy, m: int):
    """Transpose of ``output_transform``: ``[B, H, W, K]`` -> ``[(m+2)^2, B*th*tw, K]``."""
    n, h, w, k = dy.shape
    th, tw, nt = _tiles(h, m), _tiles(w, m), m + 2
    at = _MATS[m][0]
    d = jnp.pad(dy, ((0, 0), (0, m * th - h), (0, m * tw - w), (0, 0))).reshape(n, th, m, tw, m, k)
    rows = [d[:, :, i] for i in range(m)]  # m x [B, th, tw, m, K]
    s = [_combine(at[:, a], rows) for a in range(nt)]
    cols = [[s[a][:, :, :, j] for j in range(m)] for a in range(nt)]
    dm = jnp.stack([jnp.stack([_combine(at[:, b], cols[a]) for b in range(nt)]) for a in range(nt)])
    return dm.reshape(nt * nt, n * th * tw, k)


def _sandwich(mat, w):
    """``mat w mat^T`` over the two leading axes, as elementwise sums (a
    three-way einsum became two dots with transposes, 0.1 ms per call)."""
    rows = [_combine(mat[a], [w[i] for i in range(w.shape[0])]) for a in range(mat.shape[0])]
    return jnp.stack([jnp.stack([_combine(mat[b], [r[j] for j in range(w.shape[1])]) for b in range(mat.shape[0])])
                      for r in rows])


def filter_transform(w, m: int):
    """``[3, 3, C, K]`` -> ``U [(m+2)^2, C, K]`` (G g G^T)."""
    c, k = w.shape[2:]
    return _sandwich(_MATS[m][1], w).reshape((m + 2) ** 2, c, k)


def filter_transform_t(du, m: int):
    """Transpose of ``filter_transform``: ``[(m+2)^2, C, K]`` -> ``[3, 3, C, K]``."""
    c, k = du.shape[1:]
    return _sandwich(_MATS[m][1].T, du.reshape(m + 2, m + 2, c, k))


def _forward(x, w, m, keep_v: bool):
    """``(y, v)``: the convolution and, when ``keep_v``, the transformed
    input (else None). On the CPU the fused native kernel runs it."""
    at, _, bt = _MATS[m]

    def xla(x, u):
        v = input_transform(x, m)
        y = output_transform(jnp.einsum("anc,ack->ank", v, u), *x.shape[:3], m)
        return y, (v if keep_v else None)

    u = filter_transform(w, m).astype(x.dtype)
    return native.winograd_forward(x, u, bt, at, keep_v=keep_v, fallback=xla)


# The weight gradient with the transforms of x and dy fused in
# (native.winograd_weight_grad) from this many tiles; below it the forward
# keeps V for XLA's transform of dy and the product. 9x9 b6c64 training
# steps on an Intel Xeon (AVX-512): batch 64 (576 tiles) 40.0-40.7 ms fused
# against 43.3-44.8, batch 32 (288) 23.9 against 23.5, batch 16 (144) 13.8
# against 11.4.
FUSED_WEIGHT_GRAD_TILES = 512


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _conv(x, w, m):
    return _forward(x, w, m, keep_v=False)[0]


def _fused_weight_grad(x, m) -> bool:
    tiles = x.shape[0] * _tiles(x.shape[1], m) * _tiles(x.shape[2], m)
    return tiles >= FUSED_WEIGHT_GRAD_TILES and native.available()


def _fwd(x, w, m):
    if _fused_weight_grad(x, m):  # the weight gradient transforms x again
        return _forward(x, w, m, keep_v=False)[0], (x, w)
    y, v = _forward(x, w, m, keep_v=True)
    return y, (v, w)


def _bwd(m, res, dy):
    xv, w = res

    def unfused(v, dy):
        return native.batched_tn(v, output_transform_t(dy, m))

    if xv.ndim == 4:  # x, kept for the fused weight gradient
        at, _, bt = _MATS[m]
        du = native.winograd_weight_grad(xv, dy, bt, at, fallback=lambda x, dy: unfused(input_transform(x, m), dy))
    else:
        du = unfused(xv, dy)
    dw = filter_transform_t(du, m).astype(w.dtype)
    # dx is the same convolution of dy with the kernel turned 180 degrees and
    # its channel axes swapped.
    dx = _forward(dy, jnp.transpose(w[::-1, ::-1], (0, 1, 3, 2)), m, keep_v=False)[0]
    return dx, dw


_conv.defvjp(_fwd, _bwd)


def conv3x3(x, w, m: int | None = None):
    """3x3 convolution, stride 1, zero 'SAME' padding, no bias: NHWC x HWIO,
    by F(m x m, 3x3) (m from ``tile_size`` unless given)."""
    return _conv(x, w, m or tile_size(x.shape[1], x.shape[2]))


def reference_conv3x3(x, w):
    """The same convolution by XLA (for tests and comparisons)."""
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
