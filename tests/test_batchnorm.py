"""alphalite.nn.batchnorm.BatchNorm against flax's nn.BatchNorm + ReLU."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from alphalite.nn.batchnorm import BatchNorm


def _data(seed=0, shape=(6, 5, 5, 8)):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal(shape) * 3 + 1, jnp.float32)
    res = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    w = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    params = {"scale": jnp.asarray(rng.uniform(0.5, 2, shape[-1]), jnp.float32),
              "bias": jnp.asarray(rng.uniform(-1, 1, shape[-1]), jnp.float32)}
    stats = {"mean": jnp.asarray(rng.standard_normal(shape[-1]), jnp.float32),
             "var": jnp.asarray(rng.uniform(0.5, 2, shape[-1]), jnp.float32)}
    return x, res, w, params, stats


@pytest.mark.slow
@pytest.mark.parametrize("residual,relu", [(False, False), (False, True), (True, True)])
@pytest.mark.parametrize("train", [True, False])
def test_matches_flax_values_gradients_and_running_stats(residual, relu, train):
    x, res, w, params, stats = _data()
    ref = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)
    new = BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)
    assert (jax.tree_util.tree_structure(ref.init(jax.random.key(0), x))
            == jax.tree_util.tree_structure(new.init(jax.random.key(0), x)))
    r = res if residual else None

    def loss_ref(p, x, r):
        y, upd = ref.apply({"params": p, "batch_stats": stats}, x, mutable=["batch_stats"])
        y = y + r if r is not None else y
        return jnp.sum((jax.nn.relu(y) if relu else y) * w), upd

    def loss_new(p, x, r):
        y, upd = new.apply({"params": p, "batch_stats": stats}, x, residual=r, relu=relu,
                           mutable=["batch_stats"])
        return jnp.sum(y * w), upd

    argnums = (0, 1, 2) if residual else (0, 1)
    (a, ua), ga = jax.value_and_grad(loss_ref, argnums=argnums, has_aux=True)(params, x, r)
    (b, ub), gb = jax.value_and_grad(loss_new, argnums=argnums, has_aux=True)(params, x, r)
    assert float(b) == pytest.approx(float(a), rel=1e-5, abs=1e-4)
    for u, v in zip(jax.tree_util.tree_leaves((ga, ua)), jax.tree_util.tree_leaves((gb, ub))):
        np.testing.assert_allclose(v, u, rtol=1e-4, atol=1e-4 * float(jnp.abs(u).max() + 1e-6))
    if train:  # the running averages moved toward this batch's statistics
        assert not np.allclose(ub["batch_stats"]["mean"], stats["mean"])


def test_batch_statistics_gradients_are_exact():
    """The batch mean and variance it returns carry gradients too (checked
    against autodiff of the plain formula)."""
    from alphalite.nn.batchnorm import batch_norm_train
    x, _, _, params, _ = _data(1, (40, 3))

    def plain(x):
        mean = x.mean(0)
        var = (x * x).mean(0) - mean ** 2
        return jnp.sum(mean * jnp.arange(3.0)) + jnp.sum(var * jnp.arange(1.0, 4.0))

    def ours(x):
        _, mean, var = batch_norm_train(x, params["scale"], params["bias"], None, True, 1e-5)
        return jnp.sum(mean * jnp.arange(3.0)) + jnp.sum(var * jnp.arange(1.0, 4.0))

    np.testing.assert_allclose(jax.grad(ours)(x), jax.grad(plain)(x), rtol=1e-4, atol=1e-5)
