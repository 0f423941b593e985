"""The ONNX export of the ResNet nets computes what the Flax nets compute
(batch norm folded, layouts converted), for the shipped nets and a net with
non-trivial batch statistics, at any batch size."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from alphalite.nn import checkpoint, nets, onnx_export


@pytest.mark.parametrize("name,kind", [("policy9", "policy"), ("value9", "value"), ("policy19", "policy")])
def test_shipped_nets_agree_with_jax(name, kind):
    _, model, variables = checkpoint.load_model(name, kind)
    sess = onnx_export.session(model, variables, threads=1)
    rng = np.random.default_rng(1)
    for batch in (1, 5):
        x = (rng.random((batch, model.size, model.size, model.num_planes)) < 0.3).astype(np.float32)
        want = np.asarray(model.apply(variables, x, train=False))
        got = sess.run(None, {"planes": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_batch_statistics_are_folded_not_dropped():
    model = nets.make_model("b2c16", 7, 4)
    variables = nets.init_variables(model, jax.random.key(0))
    rng = np.random.default_rng(0)
    stats = jax.tree_util.tree_map(lambda a: rng.uniform(0.5, 2.0, a.shape).astype(np.float32),
                                   variables["batch_stats"])
    variables = {**variables, "batch_stats": stats}
    x = (rng.random((3, 7, 7, 4)) < 0.5).astype(np.float32)
    want = np.asarray(model.apply(variables, x, train=False))
    got = onnx_export.session(model, variables, threads=1).run(None, {"planes": x})[0]
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    plain = np.asarray(model.apply(nets.init_variables(model, jax.random.key(0)), x, train=False))
    assert np.abs(plain - want).max() > 1e-2  # the statistics matter, so the check above means something


def test_an_aux_value_net_exports_its_winner_head():
    """The search calls a value net with ownership and score heads for the
    winner only, so that is what its graph computes: the same v as JAX."""
    model = nets.make_model("b2c16_aux_value", 9, 17)
    variables = nets.init_variables(model, jax.random.key(3))
    rng = np.random.default_rng(2)
    x = (rng.random((4, 9, 9, 17)) < 0.3).astype(np.float32)
    want = np.asarray(model.apply(variables, x, train=False))
    sess = onnx_export.session(model, variables, threads=1)
    assert [o.name for o in sess.get_outputs()] == ["out"]
    got = sess.run(None, {"planes": x})[0]
    assert got.shape == (4,) and np.abs(want).max() > 1e-3
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_other_nets_are_refused():
    model = nets.make_model("thesis", 9, 3)
    with pytest.raises(ValueError, match="ResNet"):
        onnx_export.to_onnx(model, nets.init_variables(model, jax.random.key(0)))


def test_engine_nets_give_the_same_priors_and_values_on_either_runtime():
    from alphalite.engine import players
    from alphalite.go import board

    on_jax = players.load_net("policy9", "value9", inference="jax")
    on_ort = players.load_net("policy9", "value9", inference="onnx")
    assert (on_jax.inference, on_ort.inference) == ("jax", "onnx")
    st = board.new_game(9, 7.0)
    for m in (40, 30, 50, 22):
        st = board.play(st, m)
        (pj, vj), (po, vo) = on_jax.evaluate(st), on_ort.evaluate(st)
        np.testing.assert_allclose(po, pj, atol=1e-5)
        assert abs(vo - vj) < 1e-5 and po[m] == 0.0  # an occupied point gets no prior


def test_residual_adds_run_in_ort_blocked_layout(tmp_path):
    """A 17-plane stem is padded to a whole channel block, so ORT's blocked
    layout (NCHWc) runs the whole trunk: no plain Add, Relu or layout
    reorder is left between the residual blocks."""
    import onnx
    import onnxruntime as ort

    model = nets.make_model("b2c16_pv", 9, 17)
    variables = nets.init_variables(model, jax.random.key(0))
    proto = onnx_export.to_onnx(model, variables)
    stem = next(n for n in proto.graph.node if n.op_type == "Conv")
    w = next(t for t in proto.graph.initializer if t.name == stem.input[1])
    assert w.dims[1] % onnx_export.CHANNEL_BLOCK == 0
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ops = [(n.domain, n.op_type) for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
    if not any(d == "com.microsoft.nchwc" for d, _ in ops):
        pytest.skip("ONNX Runtime uses no blocked layout on this CPU")
    assert ("", "Add") not in ops and ("", "Relu") not in ops
    assert ops.count(("com.microsoft.nchwc", "ReorderInput")) == 1  # the input, once
