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


def test_an_aux_value_net_exports_its_winner_and_ownership_heads():
    """The search takes the winner and the ownership of every point from a
    value net with auxiliary heads: the same v and ownership as JAX (batch
    statistics made non-trivial, so the ownership head's folding counts)."""
    model = nets.make_model("b2c16_aux_value", 9, 17)
    variables = nets.init_variables(model, jax.random.key(3))
    rng = np.random.default_rng(2)
    stats = jax.tree_util.tree_map_with_path(  # variances 0.5-2, means -0.3-0.3
        lambda path, a: rng.uniform(*((0.5, 2.0) if "var" in str(path[-1]) else (-0.3, 0.3)),
                                    a.shape).astype(np.float32), variables["batch_stats"])
    variables = {**variables, "batch_stats": stats}
    x = (rng.random((4, 9, 9, 17)) < 0.3).astype(np.float32)
    want = model.apply(variables, x, train=False, aux=True)
    sess = onnx_export.session(model, variables, threads=1)
    assert [o.name for o in sess.get_outputs()] == ["out", "ownership"]
    v, own = sess.run(None, {"planes": x})
    assert v.shape == (4,) and own.shape == (4, 81) and np.abs(np.asarray(want["ownership"])).max() > 1e-2
    np.testing.assert_allclose(v, np.asarray(want["value"]), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(own, np.asarray(want["ownership"]).reshape(4, 81), atol=1e-4, rtol=1e-4)


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


@pytest.mark.parametrize("kind", ["aux_value", "aux_pv"])
def test_the_search_takes_the_ownership_head_on_either_runtime(tmp_path, kind):
    """With a *_aux_value net beside the policy, or a *_aux_pv net alone, the
    search's network function gives a third output, the ownership head, the
    same on JAX and ONNX Runtime; the apv player folds it into its ownership."""
    from alphalite.engine import players
    from search.evaluators import policy_value_fn
    from search.rollout import PatternPolicy

    name = f"b1c4_{kind}"
    model = nets.make_model(name, 9, 17)
    variables = jax.tree_util.tree_map(np.asarray, nets.init_variables(model, jax.random.key(7)))
    net_kind = "value" if kind == "aux_value" else "policy_value"
    aux = checkpoint.export_model(tmp_path / "aux", variables, {"model": name, "board_size": 9,
                                                                "preset": "default", "kind": net_kind})
    nets_of = ("policy9", str(aux)) if kind == "aux_value" else (str(aux),)
    on_jax = players.load_net(*nets_of, inference="jax")
    on_ort = players.load_net(*nets_of, inference="onnx")
    assert on_jax.has_ownership and on_ort.has_ownership
    assert not players.load_net("policy9", "value9", inference="jax").has_ownership
    assert not players.load_net("az9", inference="jax").has_ownership
    x = (np.random.default_rng(3).random((5, 9, 9, 17)) < 0.3).astype(np.float32)
    legal = np.ones((5, 82), bool)
    pj, vj, oj = policy_value_fn(on_jax.model, on_jax.value_model, ownership=True)(on_jax.params, x, legal)
    po, vo, oo = onnx_export.policy_value_fn(on_ort.model, on_ort.variables, on_ort.value_model,
                                             on_ort.value_variables, threads=1, ownership=True)(None, x, legal)
    assert oo.shape == (5, 81) and np.abs(oo).max() > 1e-3
    np.testing.assert_allclose(oo, np.asarray(oj), atol=1e-4)
    np.testing.assert_allclose(vo, np.asarray(vj), atol=1e-4)
    np.testing.assert_allclose(po, np.asarray(pj), atol=1e-5)
    p2, v2 = on_ort.net_fn(None, x, legal)  # without ownership: the two outputs, the same
    np.testing.assert_allclose(v2, vo, atol=1e-6)
    with pytest.raises(ValueError, match="ownership head"):
        policy_value_fn(players.load_net("az9", inference="jax").model, None, ownership=True)
    with pytest.raises(ValueError, match="ownership head"):
        onnx_export.policy_value_fn(on_ort.model, on_ort.variables, threads=1, ownership=True) \
            if kind == "aux_value" else onnx_export.pv_fn(nets.make_model("b1c4_pv", 9, 17), variables, 1,
                                                           ownership=True)
    tp, rp = PatternPolicy.load("tree19"), PatternPolicy.load("rollout19")
    for net in (on_jax, on_ort):
        p = players.ApvPlayer(net, tp, rp, visits=64)
        try:
            from alphalite.go import board

            st = board.play(board.new_game(9, 7.0), 40)
            p.genmove(st, players.candidate_moves(st), None, None)
            assert p.last.net_ownership == p.last.net_evals > 0
        finally:
            p.close()
