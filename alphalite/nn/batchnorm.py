"""Batch norm with the ReLU (and the residual add) fused in, and a
hand-written backward pass.

Why: Flax's ``nn.BatchNorm`` followed by ``nn.relu`` costs 7.1 ms forward +
backward on a [64, 19, 19, 64] batch on this CPU; this one 2.1 ms (0.43 vs
1.10 ms on 9x9). The gain comes from two things: the per-channel sums are
GEMVs (``ones @ x``), which XLA's CPU backend runs far faster than a
reduction over the major axes, and the backward pass makes two passes over
the activations instead of autodiff's many. Within a whole ResNet the gain
is larger still (see the residual note in ``_forward``).

``BatchNorm`` keeps ``nn.BatchNorm``'s variables (params ``scale``/``bias``,
batch_stats ``mean``/``var``), its class name (so auto-names like
``BatchNorm_0`` and every checkpoint stay the same) and its update rule
(biased batch variance, ``ra = momentum * ra + (1 - momentum) * batch``).
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

Dtype = Any


def _col_sums(x2):  # [N, C] -> [C], float32
    return jnp.ones((x2.shape[0],), jnp.float32) @ x2.astype(jnp.float32)


def _affine(x, mean, mul, bias, res, relu: bool):
    """``relu((x - mean) * mul + bias + res)``, the residual and ReLU optional."""
    y = (x - mean) * mul + bias
    if res is not None:
        y = y + res
    return jnp.maximum(y, 0.0) if relu else y


def _forward(x2, scale, bias, res2, relu, eps):
    n = x2.shape[0]
    mean = _col_sums(x2) / n
    var = jnp.maximum(_col_sums(jnp.square(x2.astype(jnp.float32))) / n - mean * mean, 0.0)
    inv = jax.lax.rsqrt(var + eps)
    y = _affine(x2, mean, scale * inv, bias, res2, relu)
    if res2 is not None:
        # A residual block's output feeds the next block twice and the
        # backward pass once, all through elementwise ops, and XLA fused the
        # whole chain of earlier blocks into each of those loops instead of
        # storing it. A conditional is the one op it cannot fuse through;
        # this one always takes the identity branch (NaN included). b6c64
        # training: +5% on 9x9 and on 19x19.
        y = jax.lax.cond(jnp.logical_not(inv[0] < 0), lambda v: v, lambda v: -v, y)
    return y.astype(x2.dtype), mean, var, inv


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def batch_norm_train(x2, scale, bias, res2, relu: bool, eps: float):
    """Training-mode batch norm of ``x2 [N, C]`` (+ ``res2``, then ReLU if
    ``relu``). Returns ``(y [N, C], batch mean [C], biased batch var [C])``."""
    y, mean, var, _ = _forward(x2, scale, bias, res2, relu, eps)
    return y, mean, var


def _fwd(x2, scale, bias, res2, relu, eps):
    y, mean, var, inv = _forward(x2, scale, bias, res2, relu, eps)
    # None (an empty pytree) or a scalar marks whether a residual came in.
    marker = None if res2 is None else jnp.zeros((), x2.dtype)
    return (y, mean, var), (x2, y, mean, inv, scale, marker)


def _bwd(relu, eps, saved, cts):
    x2, y, mean, inv, scale, marker = saved
    dy, dmean, dvar = cts
    n = x2.shape[0]
    dz = jnp.where(y > 0, dy, 0.0) if relu else dy
    xc = x2 - mean
    xhat = xc * inv
    dbias = _col_sums(dz)
    dscale = _col_sums(dz * xhat)
    # d/dx of the normalised output, plus the (normally zero) cotangents of
    # the returned batch statistics.
    dx = (scale * inv / n) * (n * dz - dbias - xhat * dscale) + (dmean + 2.0 * dvar * xc) / n
    dres = None if marker is None else dz.astype(x2.dtype)
    return dx.astype(x2.dtype), dscale, dbias, dres


batch_norm_train.defvjp(_fwd, _bwd)


class BatchNorm(nn.Module):
    """Drop-in for ``nn.BatchNorm`` over the last axis, with an optional
    residual added after the affine step and an optional ReLU after that:
    ``relu(bn(x) + residual)``."""

    use_running_average: bool = False
    momentum: float = 0.99
    epsilon: float = 1e-5
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, residual=None, relu: bool = False):
        c = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (c,), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (c,), jnp.float32)
        ra_mean = self.variable("batch_stats", "mean", lambda: jnp.zeros((c,), jnp.float32))
        ra_var = self.variable("batch_stats", "var", lambda: jnp.ones((c,), jnp.float32))
        x = x.astype(self.dtype)
        if self.use_running_average:
            mul = scale * jax.lax.rsqrt(ra_var.value + self.epsilon)
            return _affine(x, ra_mean.value, mul, bias, residual, relu).astype(self.dtype)
        res2 = None if residual is None else residual.astype(self.dtype).reshape(-1, c)
        y, mean, var = batch_norm_train(
            x.reshape(-1, c), scale, bias, res2, relu, self.epsilon
        )
        if not self.is_initializing():
            m = self.momentum
            ra_mean.value = m * ra_mean.value + (1 - m) * jax.lax.stop_gradient(mean)
            ra_var.value = m * ra_var.value + (1 - m) * jax.lax.stop_gradient(var)
        return y.reshape(x.shape)
