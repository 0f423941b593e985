"""Tests for alphalite.nn.nets: shapes, parameter counts, symmetry, batch norm,
masked softmax. Tiny batches; the whole file runs in well under a minute."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from alphalite.nn import nets

# --------------------------------------------------------------------------
# the 8 symmetries, written here independently of alphalite (numpy rot90/flip)


def transform_planes(x: np.ndarray, g: int) -> np.ndarray:
    """x: [B, H, W, C]; g in 0..7 -> rotate by 90*(g % 4), then flip if g >= 4."""
    y = np.rot90(x, g % 4, axes=(1, 2))
    if g >= 4:
        y = np.flip(y, axis=2)
    return np.ascontiguousarray(y)


def transform_logits(logits: np.ndarray, size: int, g: int) -> np.ndarray:
    """logits: [B, size*size + 1]; points move like the board, pass stays last."""
    b = logits.shape[0]
    points = logits[:, :-1].reshape(b, size, size, 1)
    points = transform_planes(points, g).reshape(b, size * size)
    return np.concatenate([points, logits[:, -1:]], axis=1)


def test_local_transforms_are_the_eight_distinct_symmetries():
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    images = {transform_planes(x, g).tobytes() for g in range(8)}
    assert len(images) == 8
    logits = np.arange(10, dtype=np.float32)[None]
    for g in range(8):
        assert np.array_equal(
            transform_logits(logits, 3, g)[:, :-1], transform_planes(x, g).reshape(1, 9)
        )
        assert transform_logits(logits, 3, g)[0, -1] == 9


# --------------------------------------------------------------------------
# shapes

POLICY_NAMES = ["thesis", "clark", "clark_tied", "b2c16"]


@pytest.mark.slow
@pytest.mark.parametrize("size", [5, 9, 19])
@pytest.mark.parametrize("name", POLICY_NAMES + ["b2c16_value"])
def test_output_shapes(name, size):
    planes = 4
    model = nets.make_model(name, size, planes)
    variables = nets.init_variables(model, jax.random.key(0))
    x = jax.random.uniform(jax.random.key(1), (2, size, size, planes))
    out = jax.jit(model.apply)(variables, x)  # one compile, not one per op
    if name.endswith("_value"):
        assert out.shape == (2,)
        assert np.all(np.abs(np.asarray(out)) <= 1.0)
    else:
        assert out.shape == (2, size * size + 1)
    assert out.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(out)))


@pytest.mark.slow
def test_wrong_input_shape_is_rejected():
    model = nets.make_model("b2c16", 9, 4)
    variables = nets.init_variables(model, jax.random.key(0))
    with pytest.raises(ValueError, match=r"\[B, 9, 9, 4\]"):
        model.apply(variables, jnp.zeros((1, 19, 19, 4)))
    with pytest.raises(ValueError, match=r"\[B, 9, 9, 4\]"):
        model.apply(variables, jnp.zeros((1, 9, 9, 3)))


def test_unknown_names_and_options_are_rejected():
    with pytest.raises(ValueError, match="unknown model"):
        nets.make_model("resnet", 9, 4)
    with pytest.raises(TypeError):
        nets.make_model("thesis", 9, 4, no_such_option=1)
    with pytest.raises(ValueError, match="board size"):
        nets.make_model("thesis", 1, 4)


def test_presets_parse_to_blocks_and_channels():
    assert nets.PRESETS["b6c64"] == (6, 64)
    for name in ("b4c32", "b10c128", "b20c256"):
        assert name in nets.PRESETS
    model = nets.make_model("b3c24", 9, 4)
    assert (model.blocks, model.channels) == (3, 24)
    value = nets.make_model("b6c64_value", 9, 4)
    assert isinstance(value, nets.ResNetValue) and value.blocks == 6


# --------------------------------------------------------------------------
# parameter counts, by hand


def conv(k, cin, cout, bias=True):
    return k * k * cin * cout + (cout if bias else 0)


def dense(nin, nout):
    return nin * nout + nout


def test_thesis_param_count_by_hand():
    size, planes, f = 19, 3, 64
    expected = (
        conv(5, planes, f) + 3 * conv(5, f, f) + conv(5, f, 1) + dense(size * size, size * size + 1)
    )
    assert expected == 444901
    assert nets.model_param_count(nets.make_model("thesis", size, planes)) == expected
    # 50 filters with batch norm: convs lose their bias, BN adds scale + shift
    bn = (
        conv(5, planes, 50, False) + 2 * 50
        + 3 * (conv(5, 50, 50, False) + 2 * 50)
        + conv(5, 50, 1, False) + 2
        + dense(size * size, size * size + 1)
    )
    model = nets.make_model("thesis", size, planes, filters=50, batch_norm=True)
    assert nets.model_param_count(model) == bn


def test_small_resnet_param_count_by_hand():
    size, planes, blocks, c = 9, 5, 2, 16
    bn = 2 * c
    expected = (
        conv(3, planes, c, False) + bn  # stem
        + blocks * 2 * (conv(3, c, c, False) + bn)  # residual blocks
        + conv(1, c, 2, False) + 4  # policy 1x1 conv + BN
        + dense(2 * size * size, size * size + 1)
    )
    counts = nets.param_counts("b2c16", size, planes)
    assert counts["total"] == expected
    # running mean + var for every BN channel
    assert counts["batch_stats"] == 2 * (c + blocks * 2 * c + 2)
    value_expected = (
        expected - (conv(1, c, 2, False) + 4 + dense(2 * size * size, size * size + 1))
        + conv(1, c, 1, False) + 2 + dense(size * size, 256) + dense(256, 1)
    )
    assert nets.param_counts("b2c16_value", size, planes)["total"] == value_expected


def test_b6c64_param_count_by_hand():
    size, planes, c = 19, 18, 64
    expected = (
        conv(3, planes, c, False) + 2 * c
        + 6 * 2 * (conv(3, c, c, False) + 2 * c)
        + conv(1, c, 2, False) + 4
        + dense(2 * size * size, size * size + 1)
    )
    assert nets.model_param_count(nets.make_model("b6c64", size, planes)) == expected


def test_clark_param_counts_and_tying_savings():
    size, planes = 19, 7
    layers = [(planes, 64, 7), (64, 64, 5), (64, 64, 5), (64, 48, 5), (48, 48, 5), (48, 32, 5),
              (32, 32, 5)]
    untied = sum(conv(k, i, o) for i, o, k in layers) + dense(size * size * 32, size * size + 1)
    assert nets.model_param_count(nets.make_model("clark", size, planes)) == untied
    # tied: a 7x7 kernel has 10 orbits of offsets, a 5x5 one has 6
    tied_convs = sum((10 if k == 7 else 6) * i * o + o for i, o, k in layers)
    counts = nets.param_counts("clark_tied", size, planes)
    assert counts["total"] - counts["dense"] == tied_convs
    # small kernels have many offsets on a symmetry axis: 25 -> 6 and 49 -> 10
    # is about 4x; the dense layer (most of the weights) saves about 8x
    conv_untied = sum(conv(k, i, o) for i, o, k in layers)
    assert 4.0 < conv_untied / tied_convs < 4.5
    _, n_pairs = nets.pair_orbits(size)
    _, n_pts = nets.point_orbits(size)
    assert counts["dense"] == n_pairs * 32 + n_pts * 32 + n_pts + 1
    assert 7.5 < dense(size * size * 32, size * size + 1) / counts["dense"] < 8.0
    assert 7.0 < untied / counts["total"] < 7.5


def test_orbit_tables():
    index, n = nets.kernel_orbits(5)
    assert n == 6
    for g in range(8):
        assert np.array_equal(transform_planes(index[None, :, :, None], g)[0, :, :, 0], index)
    _, n_pts = nets.point_orbits(19)
    assert n_pts == 55  # 10 * 11 / 2: the triangle 0 <= col <= row <= 9
    pairs, n_pairs = nets.pair_orbits(5)
    # Burnside: (1/8) * sum over g of fixed pairs = fixed points squared
    fixed = [25, 1, 1, 1, 5, 5, 5, 5]  # identity, 3 rotations, 4 reflections
    assert n_pairs == sum(f * f for f in fixed) // 8


# --------------------------------------------------------------------------
# symmetry


def _logits(name, size, planes, x, seed=0):
    model = nets.make_model(name, size, planes)
    variables = nets.init_variables(model, jax.random.key(seed))
    # untied conv biases start at zero; give every parameter some random noise
    # so that tying, not the initialisation, is what makes the net symmetric
    # (numpy's generator: eager jax.random compiles a program per leaf shape)
    leaves, tree = jax.tree_util.tree_flatten(variables["params"])
    rng = np.random.default_rng(seed + 1)
    leaves = [np.asarray(p) + np.float32(0.1) * rng.standard_normal(p.shape, np.float32) for p in leaves]
    variables = {**variables, "params": jax.tree_util.tree_unflatten(tree, leaves)}
    apply = jax.jit(lambda v, x: model.apply(v, x))
    return lambda x: np.asarray(apply(variables, jnp.asarray(x)))


@pytest.mark.slow
@pytest.mark.parametrize("size", [5, 9])
def test_tied_clark_commutes_with_all_8_symmetries(size):
    planes = 3
    x = np.random.default_rng(0).random((2, size, size, planes), dtype=np.float32)
    net = _logits("clark_tied", size, planes, x)
    base = net(x)
    scale = np.abs(base).max()
    assert scale > 1e-3
    for g in range(8):
        np.testing.assert_allclose(
            net(transform_planes(x, g)), transform_logits(base, size, g), rtol=1e-4, atol=1e-4 * scale
        )


@pytest.mark.slow
def test_untied_clark_does_not_commute():
    size, planes = 5, 3
    x = np.random.default_rng(0).random((2, size, size, planes), dtype=np.float32)
    net = _logits("clark", size, planes, x)
    base = net(x)
    scale = np.abs(base).max()
    for g in range(1, 8):
        diff = np.abs(net(transform_planes(x, g)) - transform_logits(base, size, g)).max()
        assert diff > 1e-2 * scale, g


@pytest.mark.slow
def test_tied_kernels_are_symmetric():
    model = nets.make_model("clark_tied", 5, 2)
    variables = nets.init_variables(model, jax.random.key(3))
    orbit_w = np.asarray(variables["params"]["conv0"]["kernel_orbits"])
    index, _ = nets.kernel_orbits(7)
    kernel = orbit_w[index]  # [7, 7, C_in, C_out]
    for g in range(8):
        np.testing.assert_array_equal(transform_planes(kernel[None], g)[0], kernel)


# --------------------------------------------------------------------------
# batch norm, dtype


@pytest.mark.slow
def test_batch_norm_train_and_eval_modes():
    size, planes = 5, 3
    model = nets.make_model("b2c16", size, planes)
    variables = nets.init_variables(model, jax.random.key(0))
    assert "batch_stats" in variables
    x = 3.0 + 2.0 * jax.random.normal(jax.random.key(1), (4, size, size, planes))
    out, updates = model.apply(variables, x, train=True, mutable=["batch_stats"])
    assert out.shape == (4, size * size + 1)
    old = variables["batch_stats"]["trunk"]["stem_bn"]
    new = updates["batch_stats"]["trunk"]["stem_bn"]
    assert not np.allclose(old["mean"], new["mean"])
    assert not np.allclose(old["var"], new["var"])
    # eval mode uses running statistics: a per-example function of the input
    eval_out = model.apply(variables, x)
    single = model.apply(variables, x[:1])
    np.testing.assert_allclose(eval_out[:1], single, rtol=1e-5, atol=1e-5)
    # train mode normalises over the batch: the same example differs by batch
    train_single, _ = model.apply(variables, x[:1], train=True, mutable=["batch_stats"])
    assert not np.allclose(out[:1], train_single, atol=1e-3)
    # without mutable, train mode must refuse to silently drop the update
    from flax.errors import ModifyScopeVariableError

    with pytest.raises(ModifyScopeVariableError, match="batch_stats"):
        model.apply(variables, x, train=True)


@pytest.mark.slow
def test_thesis_batch_norm_and_leaky_relu_options():
    model = nets.make_model("thesis", 5, 3, batch_norm=True, activation="leaky_relu", filters=8)
    variables = nets.init_variables(model, jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (3, 5, 5, 3))
    out, updates = model.apply(variables, x, train=True, mutable=["batch_stats"])
    assert out.shape == (3, 26) and "bn0" in updates["batch_stats"]
    with pytest.raises(ValueError, match="activation"):
        nets.make_model("thesis", 5, 3, activation="tanh").init(jax.random.key(0), x)


def test_bfloat16_inference_keeps_float32_params_and_outputs():
    size, planes = 9, 4
    f32 = nets.make_model("b2c16", size, planes)
    bf16 = nets.make_model("b2c16", size, planes, dtype=jnp.bfloat16)
    variables = nets.init_variables(f32, jax.random.key(0))
    assert all(p.dtype == jnp.float32 for p in jax.tree_util.tree_leaves(nets.init_variables(bf16, jax.random.key(0))))
    x = jax.random.uniform(jax.random.key(1), (2, size, size, planes))
    a = f32.apply(variables, x)
    b = bf16.apply(variables, x)
    assert b.dtype == jnp.float32
    assert "bf16" in str(jax.make_jaxpr(lambda v, x: bf16.apply(v, x))(variables, x))  # it computes in bfloat16
    assert not np.array_equal(a, b)
    np.testing.assert_allclose(a, b, atol=0.1 * float(jnp.abs(a).max()) + 0.05)


# --------------------------------------------------------------------------
# masked softmax


def test_masked_log_softmax():
    logits = jnp.array([[1.0, 2.0, 3.0, 4.0], [1000.0, -1000.0, 5.0, 0.0]])
    mask = jnp.array([[True, False, True, False], [False, True, True, True]])
    logp = np.asarray(nets.masked_log_softmax(logits, mask))
    assert np.all(np.isneginf(logp[~np.asarray(mask)]))
    probs = np.exp(logp)
    assert np.all(probs[~np.asarray(mask)] == 0.0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)
    # renormalised over the legal entries only
    np.testing.assert_allclose(probs[0, [0, 2]], np.exp([1, 3]) / np.exp([1, 3]).sum(), rtol=1e-6)
    # a huge illegal logit does not leak in; the legal ones stay finite
    assert np.all(np.isfinite(logp[1, 1:]))


def test_masked_cross_entropy_gradients_are_finite():
    logits = jax.random.normal(jax.random.key(0), (3, 10)) * 50
    mask = jax.random.bernoulli(jax.random.key(1), 0.5, (3, 10)).at[:, -1].set(True)
    targets = jnp.array([9, 9, 9])
    loss = lambda l: nets.masked_cross_entropy(l, mask, targets).mean()
    value, grad = jax.value_and_grad(loss)(logits)
    assert np.isfinite(value)
    assert np.all(np.isfinite(grad))
    assert np.all(np.asarray(grad)[~np.asarray(mask)] == 0.0)
    # soft targets: zero weight on illegal actions must not make NaN
    soft = jax.nn.one_hot(targets, 10)
    np.testing.assert_allclose(nets.masked_cross_entropy(logits, mask, soft), nets.masked_cross_entropy(logits, mask, targets), rtol=1e-6)
    # a row with no legal action falls back to the plain softmax
    none = nets.masked_log_softmax(logits, jnp.zeros((3, 10), bool))
    np.testing.assert_allclose(none, jax.nn.log_softmax(logits), rtol=1e-5)


@pytest.mark.subprocess
def test_import_does_no_device_work():
    import subprocess
    import sys

    code = (
        "import alphalite.nn.nets\n"
        "from jax._src import xla_bridge\n"
        "print(len(xla_bridge._backends))\n"  # no backend initialised yet
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


# --------------------------------------------------------------------------
# a policy net on another board size


def test_edge_map_keeps_each_line_as_far_from_its_edge():
    assert nets.edge_map(19, 13).tolist() == [0, 1, 2, 3, 4, 5, 6, 13, 14, 15, 16, 17, 18]
    assert nets.edge_map(19, 19).tolist() == list(range(19))
    assert nets.edge_map(9, 13).tolist() == [0, 1, 2, 3, 4, 4, 4, 4, 4, 5, 6, 7, 8]


def test_a_resized_policy_keeps_its_local_weights():
    """A dense head that reads only each point's own features (point q's
    logit = its channel 0 times 2 + its own bias) does the same on any board:
    the weights follow the offset from each point's image, not the images
    of both ends, which on 19 -> 13 would tear the middle apart."""
    n = 9
    model = nets.make_model("b1c8", n, 4)
    variables = nets.init_variables(model, jax.random.key(0))
    variables = jax.tree_util.tree_map(np.asarray, variables)
    kernel = np.zeros((n * n * 2, n * n + 1), np.float32)
    kernel[2 * np.arange(n * n), np.arange(n * n)] = 2.0  # channel 0 of q -> logit q
    kernel[1::2, n * n] = 0.5  # channel 1 of every point -> pass
    bias = np.arange(n * n + 1, dtype=np.float32)
    variables["params"]["policy_dense"] = {"kernel": kernel, "bias": bias}
    same_model, same = nets.resize_policy(model, variables, n)
    assert same_model.size == n and np.array_equal(same["params"]["policy_dense"]["kernel"], kernel)
    for size, lines in ((7, [0, 1, 2, 3, 6, 7, 8]), (13, [0, 1, 2, 3, 4, 4, 4, 4, 4, 5, 6, 7, 8])):
        m2, v2 = nets.resize_policy(model, variables, size)
        k, b = v2["params"]["policy_dense"]["kernel"], v2["params"]["policy_dense"]["bias"]
        a = size * size
        assert m2.size == size and k.shape == (2 * a, a + 1) and b.shape == (a + 1,)
        assert np.array_equal(k[2 * np.arange(a), np.arange(a)], np.full(a, 2.0))  # each point its own
        assert np.count_nonzero(k[:, :a]) == a  # and nothing across the middle
        assert np.array_equal(k[1::2, a], np.full(a, 0.5)) and not k[0::2, a].any()
        images = (np.array(lines)[:, None] * n + np.array(lines)[None, :]).reshape(-1)
        assert np.array_equal(b, np.concatenate([images, [n * n]]).astype(np.float32))
        # the model built for the new size runs on its planes with these weights
        x = np.zeros((1, size, size, 4), np.float32)
        assert m2.apply(v2, x).shape == (1, a + 1)
    with pytest.raises(ValueError, match="only a ResNet policy net"):
        nets.resize_policy(nets.make_model("b1c8_value", n, 4), variables, 13)
