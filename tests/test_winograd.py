"""Winograd F(4x4, 3x3) convolution against XLA's, values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from alphalite import nets, winograd


def _inputs(b, h, w, c, k, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((b, h, w, c)), jnp.float32)
    kern = jnp.asarray(rng.standard_normal((3, 3, c, k)) * 0.2, jnp.float32)
    return x, kern


@pytest.mark.parametrize("h,w", [(1, 1), (2, 3), (7, 9), (19, 19)])
def test_values_match_xla(h, w):
    x, kern = _inputs(2, h, w, 5, 6)
    got = winograd.conv3x3(x, kern)
    want = winograd.reference_conv3x3(x, kern)
    assert got.shape == want.shape == (2, h, w, 6)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(jnp.abs(want).max()))


@pytest.mark.parametrize("size", [5, 19])
def test_gradients_match_xla(size):
    x, kern = _inputs(3, size, size, 4, 7, seed=size)
    target = jnp.asarray(np.random.default_rng(1).standard_normal((3, size, size, 7)), jnp.float32)

    def loss(conv):
        return lambda x, k: jnp.sum(jnp.tanh(conv(x, k)) * target)

    gx, gk = jax.grad(loss(winograd.conv3x3), argnums=(0, 1))(x, kern)
    rx, rk = jax.grad(loss(winograd.reference_conv3x3), argnums=(0, 1))(x, kern)
    np.testing.assert_allclose(gx, rx, rtol=1e-4, atol=1e-4 * float(jnp.abs(rx).max()))
    np.testing.assert_allclose(gk, rk, rtol=1e-4, atol=1e-4 * float(jnp.abs(rk).max()))


def test_transposes_are_adjoints():
    """<T x, y> == <x, T^T y> for the output and filter transforms."""
    rng = np.random.default_rng(2)
    n, h, w, k = 2, 9, 7, 3
    tiles = 36 * n * ((h + 3) // 4) * ((w + 3) // 4) // 36
    m = jnp.asarray(rng.standard_normal((36, tiles, k)), jnp.float32)
    dy = jnp.asarray(rng.standard_normal((n, h, w, k)), jnp.float32)
    lhs = jnp.vdot(winograd.output_transform(m, n, h, w), dy)
    rhs = jnp.vdot(m, winograd.output_transform_t(dy))
    assert float(lhs) == pytest.approx(float(rhs), rel=1e-4)
    g = jnp.asarray(rng.standard_normal((3, 3, 4, k)), jnp.float32)
    du = jnp.asarray(rng.standard_normal((36, 4, k)), jnp.float32)
    assert float(jnp.vdot(winograd.filter_transform(g), du)) == pytest.approx(
        float(jnp.vdot(g, winograd.filter_transform_t(du))), rel=1e-4)


@pytest.mark.parametrize("name", ["b2c16", "b2c16_value"])
def test_resnet_conv_impls_share_parameters_and_outputs(name):
    """conv=xla and conv=winograd build the same parameter tree (so any
    checkpoint loads under either) and compute the same function."""
    xla = nets.make_model(name, 7, 17, conv="xla")
    wino = nets.make_model(name, 7, 17, conv="winograd")
    variables = nets.init_variables(xla, jax.random.key(0))
    assert jax.tree_util.tree_structure(variables) == jax.tree_util.tree_structure(
        nets.init_variables(wino, jax.random.key(0)))
    x = jnp.asarray(np.random.default_rng(3).random((4, 7, 7, 17)) < 0.3, jnp.float32)
    np.testing.assert_allclose(wino.apply(variables, x), xla.apply(variables, x), rtol=1e-4, atol=1e-4)
    # auto: Winograd in training steps on the CPU, XLA's conv for inference
    assert nets._use_winograd("auto", train=True, size=19) == (jax.default_backend() == "cpu")
    assert not nets._use_winograd("auto", train=True, size=9)
    assert not nets._use_winograd("auto", train=False, size=19)
    assert nets._use_winograd("winograd", train=False, size=5)


def test_unknown_conv_impl_is_rejected():
    model = nets.make_model("b2c16", 5, 3, conv="fft")
    with pytest.raises(ValueError, match="conv must be one of"):
        nets.init_variables(model, jax.random.key(0))
