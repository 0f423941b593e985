"""Flax (linen) models: the seed CNNs, the ResNet policy and the ResNet value net.

Every model takes channels-last planes ``x: [B, H, W, C]`` (float32, any
values; ``H == W == size``) and is called as ``model.apply(variables, x,
train=False)``. Policy models return move logits ``[B, size*size + 1]``
(float32, pass last, flat index ``row * size + col``); value models return
``[B]`` in ``[-1, 1]`` (tanh) from the point of view of whoever the planes
say is to move. Models with batch norm keep ``batch_stats``; train with
``model.apply(variables, x, train=True, mutable=["batch_stats"])``. Models
without batch norm accept ``train`` and ignore it, so callers need no special
case.

``dtype`` sets the computation dtype (e.g. ``jnp.bfloat16`` for inference);
parameters always stay float32 and outputs are cast back to float32.

Models (``make_model(name, size, num_planes, **opts)``):

==============  ==============================================================
name            network
==============  ==============================================================
``thesis``      Korenciak 2018: four 5x5 convs of ``filters`` (64; 50..64),
                a fifth 5x5 conv with one filter, one dense layer to
                ``size*size+1``; ReLU or leaky ReLU; optional batch norm.
``clark``       Clark & Storkey 2015: 64@7x7, 64@5x5 x2, 48@5x5 x2,
                32@5x5 x2, ReLU, zero padding, one dense layer.
``clark_tied``  the same with reflection-preserving weight tying (below).
``bNcM``        ResNet policy, N residual blocks of M channels (``PRESETS``
                lists the named ones, any ``b<int>c<int>`` works).
``bNcM_value``  ResNet value net: the same trunk, tanh head.
``bNcM_pv``     ResNet policy-value net (AlphaZero): one trunk, both heads;
                returns ``(logits [B, A], value [B])``.
``bNcM_aux_value`` ResNet value net with KataGo's auxiliary heads: final
                ownership of every point and final score (``ResNetValueAux``).
``bNcM_aux_pv`` the policy-value net with those heads too.
==============  ==============================================================

Weight tying (``clark_tied``). Let G be the 8 symmetries of the square
(rotations and reflections). Every conv kernel is built from one free
parameter per G-orbit of kernel offsets (a 5x5 kernel has 6 orbits, a 7x7
one 10), so it is invariant under G; with odd kernels, SAME zero padding and
per-channel biases, every conv layer then commutes with G acting on the
board. The final dense layer (``[H*W*C] -> [H*W + 1]``) keeps its global
receptive field, but its weight ``W[p, c, q]`` (input point p, channel c,
output point q) is one free parameter per orbit of the *pair* (p, q) under
the diagonal action ``(p, q) -> (g p, g q)`` (about 8x fewer weights), the
pass weights ``W[p, c, pass]`` one per orbit of p, the point biases one per
orbit of q, and the pass bias is free. Hence ``net(g x) == g net(x)`` for all
g, the pass logit invariant. (A 1x1 conv head with a symmetric position bias
would also be equivariant but would throw away the dense layer's global view;
averaging a full kernel over G would keep 8x the parameters.)

Helpers: ``masked_log_softmax`` / ``masked_cross_entropy`` (illegal points
removed before the softmax, Clark & Storkey), ``init_variables``,
``abstract_variables``, ``param_count``, ``model_param_count``, ``param_counts``.

Importing this module does no JAX device work; index tables are numpy arrays
built lazily (cached per size).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from alphalite.nn import convtune, winograd
from alphalite.nn.batchnorm import BatchNorm

Dtype = Any

# name -> (blocks, channels). Any ``b<int>c<int>`` name is accepted too.
PRESETS: dict[str, tuple[int, int]] = {
    "b2c16": (2, 16),  # tests, demos
    "b4c32": (4, 32),  # quick CPU runs
    "b6c64": (6, 64),  # the default CPU policy
    "b10c128": (10, 128),
    "b15c192": (15, 192),
    "b20c256": (20, 256),  # AlphaGo Zero's small net
}

CLARK_LAYERS: tuple[tuple[int, int], ...] = (  # (filters, kernel)
    (64, 7),
    (64, 5),
    (64, 5),
    (48, 5),
    (48, 5),
    (32, 5),
    (32, 5),
)

BN_MOMENTUM = 0.9  # = PyTorch's momentum 0.1
BN_EPSILON = 1e-5


# --------------------------------------------------------------------------
# symmetry tables (numpy, cached)


def dihedral_perms(size: int) -> np.ndarray:
    """[8, size*size] int: for each symmetry g, ``t[g, p]`` is the point whose
    value lands on point p when a board is transformed by g (g 0 = identity)."""
    idx = np.arange(size * size).reshape(size, size)
    out = []
    for flip in (False, True):
        for k in range(4):
            t = np.rot90(idx, k)
            if flip:
                t = np.fliplr(t)
            out.append(t.reshape(-1))
    return np.stack(out)


@functools.lru_cache(maxsize=None)
def kernel_orbits(k: int) -> tuple[np.ndarray, int]:
    """For an odd k x k kernel: ([k, k] orbit index of each offset, number of
    orbits) under the 8 symmetries of the square about its centre."""
    if k % 2 != 1:
        raise ValueError(f"tied kernels must have odd size, got {k}")
    perms = dihedral_perms(k)  # [8, k*k]
    canon = perms.min(axis=0)  # orbit of offset p = {t_g[p]}; canonical = min
    _, inverse = np.unique(canon, return_inverse=True)
    inverse = inverse.reshape(k, k).astype(np.int32)
    return inverse, int(inverse.max()) + 1


@functools.lru_cache(maxsize=None)
def point_orbits(size: int) -> tuple[np.ndarray, int]:
    """([size*size] orbit index of each point, number of orbits)."""
    perms = dihedral_perms(size)
    _, inverse = np.unique(perms.min(axis=0), return_inverse=True)
    inverse = inverse.astype(np.int32)
    return inverse, int(inverse.max()) + 1


@functools.lru_cache(maxsize=None)
def pair_orbits(size: int) -> tuple[np.ndarray, int]:
    """([N, N] orbit index of each point pair (p, q) under (p, q) -> (g p, g q),
    number of orbits), N = size*size."""
    n = size * size
    perms = dihedral_perms(size).astype(np.int64)  # [8, N]
    codes = perms[:, :, None] * n + perms[:, None, :]  # [8, N, N]
    _, inverse = np.unique(codes.min(axis=0), return_inverse=True)
    inverse = inverse.reshape(n, n).astype(np.int32)
    return inverse, int(inverse.max()) + 1


# --------------------------------------------------------------------------
# building blocks


def _fan_in_init(fan_in: int) -> Callable:
    """LeCun-normal (truncated) init with an explicit fan-in, for tied weights
    whose stored shape does not show the fan-in of the weight they build."""
    std = (1.0 / fan_in) ** 0.5 / 0.87962566103423978

    def init(key, shape, dtype=jnp.float32):
        return std * jax.random.truncated_normal(key, -2.0, 2.0, shape, dtype)

    return init


class TiedConv(nn.Module):
    """k x k SAME conv whose kernel is invariant under the 8 symmetries of the
    square: param ``kernel_orbits: [n_orbits, C_in, C_out]``, ``bias: [C_out]``."""

    features: int
    kernel_size: int
    use_bias: bool = True
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x):  # [B, H, W, C_in] -> [B, H, W, C_out]
        k = self.kernel_size
        index, n_orbits = kernel_orbits(k)
        cin = x.shape[-1]
        orbit_w = self.param(
            "kernel_orbits", _fan_in_init(k * k * cin), (n_orbits, cin, self.features), jnp.float32
        )
        kernel = orbit_w[jnp.asarray(index)]  # [k, k, C_in, C_out]
        y = jax.lax.conv_general_dilated(
            x.astype(self.dtype),
            kernel.astype(self.dtype),
            window_strides=(1, 1),
            padding="SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        )
        if self.use_bias:
            bias = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
            y = y + bias.astype(self.dtype)
        return y


class TiedDense(nn.Module):
    """Dense ``[B, H, W, C] -> [B, H*W + 1]`` (points, then pass) that commutes
    with the 8 board symmetries. Params: ``pair_w: [n_pair_orbits, C]``,
    ``pass_w: [n_point_orbits, C]``, ``point_bias: [n_point_orbits]``,
    ``pass_bias: []``."""

    size: int
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        b, h, w, c = x.shape
        n = self.size * self.size
        pair_idx, n_pair = pair_orbits(self.size)
        pt_idx, n_pt = point_orbits(self.size)
        init = _fan_in_init(n * c)
        pair_w = self.param("pair_w", init, (n_pair, c), jnp.float32)
        pass_w = self.param("pass_w", init, (n_pt, c), jnp.float32)
        point_bias = self.param("point_bias", nn.initializers.zeros, (n_pt,), jnp.float32)
        pass_bias = self.param("pass_bias", nn.initializers.zeros, (), jnp.float32)
        kernel = pair_w[jnp.asarray(pair_idx)]  # [N(p), N(q), C]
        kernel = jnp.transpose(kernel, (0, 2, 1)).reshape(n * c, n)  # [(p, c), q]
        kernel = jnp.concatenate([kernel, pass_w[jnp.asarray(pt_idx)].reshape(n * c, 1)], axis=1)
        bias = jnp.concatenate([point_bias[jnp.asarray(pt_idx)], pass_bias[None]])
        y = x.reshape(b, n * c).astype(self.dtype) @ kernel.astype(self.dtype)
        return y + bias.astype(self.dtype)


def _activation(name: str) -> Callable:
    if name == "relu":
        return nn.relu
    if name == "leaky_relu":
        return functools.partial(nn.leaky_relu, negative_slope=0.01)
    raise ValueError(f"unknown activation {name!r}; use 'relu' or 'leaky_relu'")


def _check_input(x, size: int, num_planes: int):
    if x.ndim != 4 or x.shape[1:] != (size, size, num_planes):
        raise ValueError(
            f"expected planes [B, {size}, {size}, {num_planes}], got shape {tuple(x.shape)}"
        )


def _batch_norm(train: bool, dtype: Dtype, name: str | None = None) -> BatchNorm:
    return BatchNorm(
        use_running_average=not train,
        momentum=BN_MOMENTUM,
        epsilon=BN_EPSILON,
        dtype=dtype,
        name=name,
    )


# --------------------------------------------------------------------------
# seed CNNs


class ThesisCNN(nn.Module):
    """Korenciak 2018: 4 x (5x5 conv, ``filters``) + 5x5 conv with 1 filter,
    then dense to ``size*size + 1``. Batch norm (if on) sits between each conv
    and its activation. ``last_activation`` applies the activation after the
    one-filter conv too (off by default: a single ReLU channel that dies would
    kill the whole net)."""

    size: int
    num_planes: int
    filters: int = 64
    num_layers: int = 5
    activation: str = "relu"
    batch_norm: bool = False
    last_activation: bool = False
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):  # [B, H, W, C] -> [B, H*W+1]
        _check_input(x, self.size, self.num_planes)
        act = _activation(self.activation)
        h = x.astype(self.dtype)
        for i in range(self.num_layers):
            last = i == self.num_layers - 1
            h = nn.Conv(
                1 if last else self.filters,
                (5, 5),
                padding="SAME",
                use_bias=not self.batch_norm,
                dtype=self.dtype,
                name=f"conv{i}",
            )(h)
            if self.batch_norm:
                h = _batch_norm(train, self.dtype, name=f"bn{i}")(h)
            if not last or self.last_activation:
                h = act(h)
        h = h.reshape(h.shape[0], -1)
        logits = nn.Dense(self.size * self.size + 1, dtype=self.dtype, name="dense")(h)
        return logits.astype(jnp.float32)


class ClarkStorkeyCNN(nn.Module):
    """Clark & Storkey 2015: 64@7x7, 64@5x5 x2, 48@5x5 x2, 32@5x5 x2, ReLU,
    zero padding, dense to ``size*size + 1``. ``tied=True``: reflection-
    preserving weight tying (module docstring); the output then commutes with
    the 8 board symmetries. ``edge_plane=True`` appends a plane of ones so the
    zero padding shows the first layer where the board ends (their edge
    encoding), for encoders that do not already carry one."""

    size: int
    num_planes: int
    tied: bool = False
    layers: Sequence[tuple[int, int]] = CLARK_LAYERS
    edge_plane: bool = False
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):  # [B, H, W, C] -> [B, H*W+1]
        _check_input(x, self.size, self.num_planes)
        h = x.astype(self.dtype)
        if self.edge_plane:
            h = jnp.concatenate([h, jnp.ones(h.shape[:3] + (1,), h.dtype)], axis=-1)
        for i, (filters, k) in enumerate(self.layers):
            if self.tied:
                conv = TiedConv(filters, k, dtype=self.dtype, name=f"conv{i}")
            else:
                conv = nn.Conv(filters, (k, k), padding="SAME", dtype=self.dtype, name=f"conv{i}")
            h = nn.relu(conv(h))
        if self.tied:
            logits = TiedDense(self.size, dtype=self.dtype, name="dense")(h)
        else:
            h = h.reshape(h.shape[0], -1)
            logits = nn.Dense(self.size * self.size + 1, dtype=self.dtype, name="dense")(h)
        return logits.astype(jnp.float32)


# --------------------------------------------------------------------------
# residual nets (AlphaGo Zero / GoGoGo layout)


CONV_IMPLS = ("auto", "xla", "winograd")


WINOGRAD_MIN_SIZE = 9  # smaller boards are test-sized: XLA, which compiles faster, untuned


def conv_method(impl: str, train: bool, x_shape: Sequence[int], features: int, dtype=jnp.float32) -> str:
    """``"xla"`` or ``"winograd"`` for a 3x3 conv of input ``x_shape``
    ``[B, H, W, C]`` to ``features`` channels. ``xla`` and ``winograd`` force
    a method. ``auto``: on the CPU, for boards of 9 and more, the faster one
    on this host as measured once and cached (alphalite/nn/convtune.py; the
    first use of a layer shape tunes it, a few seconds; inference batches are
    tuned at the next power of two); XLA's convolution on small boards, on
    accelerators (cuDNN, ...) and below float32 (Winograd's transforms lose
    about ten times XLA's accuracy in bfloat16)."""
    if impl not in CONV_IMPLS:
        raise ValueError(f"conv must be one of {', '.join(CONV_IMPLS)}, got {impl!r}")
    if impl != "auto":
        return impl
    b, h, w, c = (int(d) for d in x_shape)
    if min(h, w) < WINOGRAD_MIN_SIZE or jax.default_backend() != "cpu" or jnp.dtype(dtype) != jnp.float32:
        return "xla"
    if not train:  # the search's leaf batches vary: one tune per power of two
        b = 1 << (b - 1).bit_length()
    return convtune.choose(convtune.Shape(train, b, h, w, c, int(features), jnp.dtype(dtype).name))


class Conv3x3(nn.Module):
    """3x3 SAME conv without bias, the same parameter (``kernel [3, 3, C, K]``,
    LeCun normal) as ``nn.Conv``, so checkpoints do not depend on ``impl``:
    ``xla`` (lax.conv), ``winograd`` (alphalite.nn.winograd, F(4x4, 3x3)) or
    ``auto`` (see ``conv_method``)."""

    features: int
    impl: str = "auto"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):  # [B, H, W, C] -> [B, H, W, features]
        kernel = self.param(
            "kernel", nn.initializers.lecun_normal(), (3, 3, x.shape[-1], self.features), jnp.float32
        )
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
        # init only needs the shapes: no tune for its dummy batch
        impl = "xla" if self.is_initializing() and self.impl == "auto" else self.impl
        if conv_method(impl, train, x.shape, self.features, self.dtype) == "winograd":
            return winograd.conv3x3(x, kernel)
        return winograd.reference_conv3x3(x, kernel)


class Conv1x1(nn.Module):
    """1x1 conv without bias as a matrix product; the same parameter
    (``kernel [1, 1, C, K]``) as ``nn.Conv``. Why: XLA's CPU backend takes
    the weight gradient of a 1x1 ``nn.Conv`` as a board-sized convolution and
    fused the whole residual trunk into its input (84 ms of a 577 ms 19x19
    training step)."""

    features: int
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x):  # [B, H, W, C] -> [B, H, W, features]
        c = x.shape[-1]
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (1, 1, c, self.features), jnp.float32)
        y = x.astype(self.dtype).reshape(-1, c) @ kernel.reshape(c, self.features).astype(self.dtype)
        return y.reshape(x.shape[:-1] + (self.features,))


class ResBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, + skip, ReLU after the sum."""

    channels: int
    conv: str = "auto"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool):
        # Named as nn.Conv auto-names them, so older checkpoints still load.
        conv = functools.partial(Conv3x3, self.channels, self.conv, self.dtype)
        h = _batch_norm(train, self.dtype)(conv(name="Conv_0")(x, train), relu=True)
        return _batch_norm(train, self.dtype)(conv(name="Conv_1")(h, train), residual=x, relu=True)


class ResTrunk(nn.Module):
    """Stem conv (``stem_kernel`` 3 or 5) - BN - ReLU, then ``blocks`` ResBlocks."""

    blocks: int
    channels: int
    stem_kernel: int = 3
    conv: str = "auto"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool):  # [B, H, W, C] -> [B, H, W, channels]
        k = self.stem_kernel
        if k == 3:
            h = Conv3x3(self.channels, self.conv, self.dtype, name="stem")(x.astype(self.dtype), train)
        else:
            h = nn.Conv(
                self.channels, (k, k), padding="SAME", use_bias=False, dtype=self.dtype, name="stem"
            )(x.astype(self.dtype))
        h = _batch_norm(train, self.dtype, name="stem_bn")(h, relu=True)
        for i in range(self.blocks):
            h = ResBlock(self.channels, self.conv, dtype=self.dtype, name=f"block{i}")(h, train)
        return h


class ResNetPolicy(nn.Module):
    """ResNet trunk + policy head: 1x1 conv to 2 channels, BN, ReLU, dense to
    ``size*size + 1``."""

    size: int
    num_planes: int
    blocks: int = 6
    channels: int = 64
    stem_kernel: int = 3
    conv: str = "auto"  # 3x3 convs: auto | xla | winograd (see conv_method)
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):  # [B, H, W, C] -> [B, H*W+1]
        _check_input(x, self.size, self.num_planes)
        h = ResTrunk(self.blocks, self.channels, self.stem_kernel, self.conv, self.dtype, name="trunk")(
            x, train
        )
        return _policy_logits(self, h, train)


def _policy_logits(m: nn.Module, h, train: bool):
    """The ResNet policy head on trunk output ``h``, built inside ``m``'s
    compact call (its parameters are ``m``'s: policy_conv, policy_bn,
    policy_dense): 1x1 conv to 2, BN, ReLU, dense to H*W+1 logits."""
    h = Conv1x1(2, m.dtype, name="policy_conv")(h)
    h = _batch_norm(train, m.dtype, name="policy_bn")(h, relu=True)
    logits = nn.Dense(m.size * m.size + 1, dtype=m.dtype, name="policy_dense")(h.reshape(h.shape[0], -1))
    return logits.astype(jnp.float32)


def _value_hidden(m: nn.Module, h, train: bool):
    """The ResNet value head up to its hidden layer, inside ``m`` (value_conv,
    value_bn, value_hidden): 1x1 conv to 1, BN, ReLU, dense ``m.hidden``, ReLU."""
    h = Conv1x1(1, m.dtype, name="value_conv")(h)
    h = _batch_norm(train, m.dtype, name="value_bn")(h, relu=True)
    return nn.relu(nn.Dense(m.hidden, dtype=m.dtype, name="value_hidden")(h.reshape(h.shape[0], -1)))


class ResNetValue(nn.Module):
    """ResNet trunk + value head: 1x1 conv to 1 channel, BN, ReLU, dense
    ``hidden`` (256), ReLU, dense 1, tanh. Returns ``[B]`` in [-1, 1]."""

    size: int
    num_planes: int
    blocks: int = 6
    channels: int = 64
    stem_kernel: int = 3
    hidden: int = 256
    conv: str = "auto"  # 3x3 convs: auto | xla | winograd (see conv_method)
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):  # [B, H, W, C] -> [B]
        _check_input(x, self.size, self.num_planes)
        h = ResTrunk(self.blocks, self.channels, self.stem_kernel, self.conv, self.dtype, name="trunk")(
            x, train
        )
        v = nn.Dense(1, dtype=self.dtype, name="value_out")(_value_hidden(self, h, train))
        return jnp.tanh(v[:, 0].astype(jnp.float32))


class ResNetPolicyValue(nn.Module):
    """One ResNet trunk with the policy head of ``ResNetPolicy`` and the value
    head of ``ResNetValue`` (AlphaZero's net; what self-play's search calls
    once per leaf). Returns ``(logits [B, H*W+1], value [B])``.

    ``aux_heads`` (a ``bNcM_aux_pv`` model): also ``ResNetValueAux``'s
    ownership and score heads, trained on self-play's exact final positions;
    ``aux=True`` then returns ``(logits, dict)``, the dict as
    ``ResNetValueAux``'s."""

    size: int
    num_planes: int
    blocks: int = 6
    channels: int = 64
    stem_kernel: int = 3
    hidden: int = 256
    aux_heads: bool = False
    own_channels: int = 32
    conv: str = "auto"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False, aux: bool = False):  # [B, H, W, C] -> ([B, H*W+1], [B])
        _check_input(x, self.size, self.num_planes)
        h = ResTrunk(self.blocks, self.channels, self.stem_kernel, self.conv, self.dtype, name="trunk")(
            x, train
        )
        logits = _policy_logits(self, h, train)
        hidden = _value_hidden(self, h, train)
        z = nn.Dense(1, dtype=self.dtype, name="value_out")(hidden)[:, 0].astype(jnp.float32)
        if not self.aux_heads:
            if aux:
                raise ValueError("aux=True needs a net with ownership and score heads (a *_aux_pv model)")
            return logits, jnp.tanh(z)
        heads = _aux_heads(self, h, hidden, z, train)
        return (logits, heads) if aux else (logits, heads["value"])


SCORE_SCALE = 20.0  # the score head's output scale: KataGo's scoremean_multiplier


def _aux_heads(m: nn.Module, t, hidden, z, train: bool) -> dict:
    """KataGo's ownership and score heads inside ``m`` (own_conv, own_bn,
    own_out, score_out) on trunk output ``t`` and the value head's hidden
    layer; with the winner logit ``z``, the dict of ``aux=True``."""
    score = nn.Dense(1, dtype=m.dtype, name="score_out")(hidden)[:, 0].astype(jnp.float32) * SCORE_SCALE
    o = Conv1x1(m.own_channels, m.dtype, name="own_conv")(t)
    o = _batch_norm(train, m.dtype, name="own_bn")(o, relu=True)
    o = Conv1x1(1, m.dtype, name="own_out")(o)[..., 0].astype(jnp.float32)
    return {"value_logit": z, "value": jnp.tanh(z), "ownership_logit": o, "ownership": jnp.tanh(o), "score": score}


class ResNetValueAux(nn.Module):
    """ResNet trunk + three heads, all for the player to move (KataGo's
    outputs): the winner (``ResNetValue``'s head, ``v = tanh(z)``), the final
    ownership of each point (1x1 conv to ``own_channels``, BN, ReLU, 1x1 conv
    to 1, ``tanh``) and the final score (black-minus-white from the mover's
    side, komi included; a dense output from the value head's hidden layer
    times ``SCORE_SCALE``, KataGo's scoremean_multiplier).

    ``__call__(x)`` returns ``v [B]``, so the net drops in wherever a value
    net goes (search, arena); ``aux=True`` returns ``{"value_logit" [B] (z),
    "value" [B], "ownership_logit" [B, H, W] (pre-tanh), "ownership" [B, H, W],
    "score" [B]}``. Every head runs either way, so init creates them all.

    ``heads_only`` (training only): the trunk and the winner head run in
    inference mode behind ``stop_gradient``, so a step trains the ownership
    and score heads (``AUX_HEADS``) on a value net's fixed features and
    computes no gradient through the trunk. The weights, and every output
    at inference, are the same as without it."""

    AUX_HEADS = ("own_conv", "own_bn", "own_out", "score_out")

    size: int
    num_planes: int
    blocks: int = 6
    channels: int = 64
    stem_kernel: int = 3
    hidden: int = 256
    own_channels: int = 32
    conv: str = "auto"
    dtype: Dtype = jnp.float32
    heads_only: bool = False

    @nn.compact
    def __call__(self, x, train: bool = False, aux: bool = False):
        _check_input(x, self.size, self.num_planes)
        fixed = self.heads_only
        t = ResTrunk(self.blocks, self.channels, self.stem_kernel, self.conv, self.dtype, name="trunk")(
            x, train and not fixed
        )
        h = _value_hidden(self, t, train and not fixed)
        if fixed:
            t, h = jax.lax.stop_gradient(t), jax.lax.stop_gradient(h)
        z = nn.Dense(1, dtype=self.dtype, name="value_out")(h)[:, 0].astype(jnp.float32)
        heads = _aux_heads(self, t, h, z, train)
        return heads if aux else heads["value"]


def has_ownership(model) -> bool:
    """Whether a net has KataGo's ownership head (``*_aux_value``, ``*_aux_pv``)."""
    return isinstance(model, ResNetValueAux) or (isinstance(model, ResNetPolicyValue) and model.aux_heads)


def check_ownership(policy_model, value_model, ownership: bool) -> None:
    """ValueError when a network function is asked for the ownership head
    and the net that values positions (the value net, else the policy-value
    net) has none."""
    if ownership and not has_ownership(value_model if value_model is not None else policy_model):
        raise ValueError("ownership needs a net with an ownership head (a *_aux_value or *_aux_pv net)")


# --------------------------------------------------------------------------
# factory and parameter counts

_PRESET_RE = re.compile(r"^b(\d+)c(\d+)$")


def parse_preset(name: str) -> tuple[int, int]:
    """``"b6c64"`` -> (6, 64)."""
    if name in PRESETS:
        return PRESETS[name]
    m = _PRESET_RE.match(name)
    if not m or int(m.group(1)) < 0 or int(m.group(2)) < 1:
        raise ValueError(
            f"unknown model {name!r}; use 'thesis', 'clark', 'clark_tied', "
            f"a ResNet preset like {', '.join(PRESETS)} (or any b<blocks>c<channels>), "
            "optionally with the suffix '_value', '_aux_value', '_pv' or '_aux_pv'"
        )
    return int(m.group(1)), int(m.group(2))


def make_model(name: str, size: int, num_planes: int, **opts) -> nn.Module:
    """Build a model by name: ``"thesis"``, ``"clark"``, ``"clark_tied"``,
    ``"b6c64"`` (ResNet policy; any ``b<N>c<M>``), ``"b6c64_value"`` (ResNet
    value net), ``"b6c64_aux_value"`` (value net with ownership and score
    heads), ``"b6c64_pv"`` (both heads on one trunk) or ``"b6c64_aux_pv"``
    (with the ownership and score heads too). ``opts`` go to
    the module (e.g. ``dtype=jnp.bfloat16``, ``batch_norm=True``,
    ``activation="leaky_relu"``, ``filters=50``, ``stem_kernel=5``); unknown
    options raise TypeError."""
    if not isinstance(size, int) or not 2 <= size <= 25:
        raise ValueError(f"board size must be an integer in 2..25, got {size!r}")
    if not isinstance(num_planes, int) or num_planes < 1:
        raise ValueError(f"num_planes must be a positive integer, got {num_planes!r}")
    if name == "thesis":
        return ThesisCNN(size=size, num_planes=num_planes, **opts)
    if name in ("clark", "clark_tied"):
        if name == "clark_tied":
            opts = {**opts, "tied": True}
        return ClarkStorkeyCNN(size=size, num_planes=num_planes, **opts)
    if name.endswith("_aux_pv"):
        blocks, channels = parse_preset(name[: -len("_aux_pv")])
        return ResNetPolicyValue(size=size, num_planes=num_planes, blocks=blocks, channels=channels, aux_heads=True,
                                 **opts)
    if name.endswith("_pv"):
        blocks, channels = parse_preset(name[: -len("_pv")])
        return ResNetPolicyValue(size=size, num_planes=num_planes, blocks=blocks, channels=channels, **opts)
    if name.endswith("_aux_value"):
        blocks, channels = parse_preset(name[: -len("_aux_value")])
        return ResNetValueAux(size=size, num_planes=num_planes, blocks=blocks, channels=channels, **opts)
    if name.endswith("_value"):
        blocks, channels = parse_preset(name[: -len("_value")])
        return ResNetValue(size=size, num_planes=num_planes, blocks=blocks, channels=channels, **opts)
    blocks, channels = parse_preset(name)
    return ResNetPolicy(size=size, num_planes=num_planes, blocks=blocks, channels=channels, **opts)


def edge_map(from_size: int, to_size: int) -> np.ndarray:
    """int [to_size]: for each line of a ``to_size`` board, the line of a
    ``from_size`` board as far from the same edge (the nearer one), the
    middle lines of a larger board all taking the smaller one's middle."""
    half = (from_size - 1) // 2
    r = np.arange(to_size)
    near_top = r <= to_size - 1 - r
    return np.where(near_top, np.minimum(r, half), from_size - 1 - np.minimum(to_size - 1 - r, half))


def resize_policy(model: nn.Module, variables: dict, size: int) -> tuple[nn.Module, dict]:
    """A ResNet policy net (``make_model``'s ``bNcM``) moved to another board
    size. The trunk and the head's 1x1 convolution are size-free; the dense
    layer (points x 2 channels -> points + pass) is not (KataGo's heads are
    size-free, ours have this one layer). Each point q of the new board
    takes the logit of its image on the net's board, the point as far from
    the same edges (``edge_map``), and the weight from each point p is the
    one from the point at the same offset from that image (zero where that
    lies off the board): the layer stays as local as it learned to be, the
    corners and edges keep their own weights. The pass logit reads each
    point's image. ValueError for other nets."""
    if type(model) is not ResNetPolicy:
        raise ValueError(f"only a ResNet policy net moves to another board size, not {type(model).__name__}")
    n = model.size
    kernel = np.asarray(variables["params"]["policy_dense"]["kernel"]).reshape(n, n, 2, n * n + 1)
    bias = np.asarray(variables["params"]["policy_dense"]["bias"])
    lines = edge_map(n, size)
    r = np.arange(size)
    # source line of p seen from q: q's image plus p - q, per axis [q, p]
    src = lines[:, None] + r[None, :] - r[:, None]
    on = (src >= 0) & (src < n)
    src = np.clip(src, 0, n - 1)
    q_img = (lines[:, None] * n + lines[None, :]).reshape(-1)
    # new[pr, pc, ch, qr, qc] = kernel[src[qr, pr], src[qc, pc], ch, image(qr, qc)]
    qr, qc = np.divmod(np.arange(size * size), size)
    w = kernel[src[qr][:, :, None], src[qc][:, None, :], :, q_img[:, None, None]]  # [q, pr, pc, ch]
    w = w * (on[qr][:, :, None] & on[qc][:, None, :])[..., None]
    w = np.transpose(w, (1, 2, 3, 0)).reshape(size * size * 2, size * size)
    pass_w = kernel[lines[:, None], lines[None, :], :, n * n].reshape(size * size * 2, 1)
    params = {**variables["params"],
              "policy_dense": {"kernel": np.concatenate([w, pass_w], axis=1).astype(kernel.dtype),
                               "bias": np.concatenate([bias[q_img], bias[n * n:]])}}
    return model.clone(size=size), {**variables, "params": params}


def _dummy_input(model: nn.Module, batch: int = 1):
    return jnp.zeros((batch, model.size, model.size, model.num_planes), jnp.float32)


# A net's initialisation runs once, so its compile is what costs: XLA's CPU
# backend took 1.8 s to compile jax.random.uniform for one 3x3x8x8 kernel at
# its default optimisation level, and 4.3 s for a whole b1c8 init (6.7 s
# eagerly, one compile per initializer); at level 0, 1.0 s (2-core EPYC).
# The weights differ from the optimised program's in the last bit (5e-8).
# One jit for the process, the model static: equal models share a compile.
_init = jax.jit(lambda model, key, x: model.init(key, x, train=False), static_argnums=0,
                compiler_options={"xla_backend_optimization_level": 0})


def init_variables(model: nn.Module, key: jax.Array, batch: int = 1) -> dict:
    """``{"params": ..., ["batch_stats": ...]}`` for a model from make_model.
    A top-level jit with compiler options: not callable inside a JAX
    transformation (``jax.eval_shape``: use ``abstract_variables``)."""
    return _init(model, key, _dummy_input(model, batch))


def param_count(tree) -> int:
    """Number of scalars in a pytree of arrays (or ShapeDtypeStructs)."""
    return int(sum(np.prod(leaf.shape, dtype=np.int64) for leaf in jax.tree_util.tree_leaves(tree)))


def abstract_variables(model: nn.Module) -> dict:
    """``init_variables``'s shapes and dtypes (no device work)."""
    return jax.eval_shape(
        lambda k: model.init(k, _dummy_input(model), train=False), jax.random.key(0)
    )


def model_param_count(model: nn.Module) -> int:
    """Trainable parameters of a model (no device work: shapes only)."""
    return param_count(abstract_variables(model)["params"])


def param_counts(name: str, size: int, num_planes: int, **opts) -> dict[str, int]:
    """``{"total": trainable params, "batch_stats": BN running stats,
    <top-level submodule>: its params, ...}`` for ``make_model(name, ...)``."""
    variables = abstract_variables(make_model(name, size, num_planes, **opts))
    params = variables["params"]
    out = {"total": param_count(params), "batch_stats": param_count(variables.get("batch_stats", {}))}
    for key, sub in params.items():
        out[key] = param_count(sub)
    return out


# --------------------------------------------------------------------------
# masked softmax


def masked_log_softmax(logits: jax.Array, mask: jax.Array) -> jax.Array:
    """Log-probabilities over the legal actions only.

    logits: [B, A] float; mask: [B, A] bool, True = legal. Returns [B, A]
    float32 with ``-inf`` on illegal actions, the legal ones summing to 1 in
    probability. A row with no legal action (cannot happen in Go: pass is
    always legal) falls back to the plain log-softmax instead of NaN.
    Gradients are finite (illegal entries get zero gradient).
    """
    logits = logits.astype(jnp.float32)
    mask = jnp.asarray(mask, bool)
    mask = mask | ~jnp.any(mask, axis=-1, keepdims=True)
    top = jax.lax.stop_gradient(jnp.max(jnp.where(mask, logits, -jnp.inf), axis=-1, keepdims=True))
    shifted = jnp.where(mask, logits - top, 0.0)
    lse = jnp.log(jnp.sum(jnp.where(mask, jnp.exp(shifted), 0.0), axis=-1, keepdims=True))
    return jnp.where(mask, shifted - lse, -jnp.inf)


def masked_cross_entropy(logits: jax.Array, mask: jax.Array | None, targets: jax.Array) -> jax.Array:
    """Per-example cross-entropy ``[B]`` with illegal actions removed from the
    softmax (``mask=None``: plain softmax). targets: ``[B]`` int action indices
    (must be legal) or ``[B, A]`` probabilities (zero on illegal actions).
    NaN-free in value and gradient."""
    if mask is None:
        logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    else:
        logp = masked_log_softmax(logits, mask)
    if targets.ndim == logits.ndim - 1:
        return -jnp.take_along_axis(logp, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]
    targets = targets.astype(jnp.float32)
    return -jnp.sum(jnp.where(targets > 0, targets * logp, 0.0), axis=-1)
