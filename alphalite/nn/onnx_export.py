"""Our ResNet policy and value nets as ONNX graphs, for CPU inference with
ONNX Runtime (``benchmarks/inference.py`` measures it against JAX and
PyTorch).

The graph computes what ``ResNetPolicy`` / ``ResNetValue`` compute in
inference mode, from the same input (planes ``[B, H, W, C]`` float32):
batch norm is folded into the convolution before it (``W * s``, ``b - m * s``
with ``s = scale / sqrt(var + eps)``), the trunk runs channels-first (what
ONNX's Conv takes), the input planes padded with zero planes (and zero stem
weights) to a whole ``CHANNEL_BLOCK``, and the heads flatten in our channels-last order so the
dense weights are used as they are. Outputs: policy logits ``[B, H*W+1]``,
or the value ``[B]`` in [-1, 1], or both (``ResNetPolicyValue``: outputs
``logits`` and ``value``). A value net with ownership and score heads
(``ResNetValueAux``) exports the value ``[B]`` and the ownership ``[B,
H*W]`` (output ``ownership``, tanh, the mover's view, row-major): what the
search takes from it (no score head). The batch dimension is free."""

from __future__ import annotations

import numpy as np

from alphalite.nn import nets
from alphalite.runtime import cpu


# ONNX Runtime runs convolutions in a blocked channel layout (NCHWc, 16
# channels a block with AVX-512, 8 with AVX2) only where the input channels
# are a multiple of the block (or fewer than one block). With a 17-plane
# stem left in plain NCHW, every residual Add fell back to NCHW too: a
# reorder out and in, an unfused Add and Relu in each block.
CHANNEL_BLOCK = 16


def _fold(kernel, bn_params, bn_stats, eps: float):
    """(ONNX conv weight [K, C, kh, kw], bias [K]) of conv-then-BN."""
    s = np.asarray(bn_params["scale"]) / np.sqrt(np.asarray(bn_stats["var"]) + eps)
    w = np.asarray(kernel, np.float32) * s  # [kh, kw, C, K] * [K]
    b = np.asarray(bn_params["bias"]) - np.asarray(bn_stats["mean"]) * s
    return np.ascontiguousarray(w.transpose(3, 2, 0, 1)).astype(np.float32), b.astype(np.float32)


def to_onnx(model, variables: dict):
    """An ``onnx.ModelProto`` of a ResNet policy or value net (from
    ``nets.make_model``) with its variables. ValueError for other nets."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if not exportable(model):
        raise ValueError(f"ONNX export covers the ResNet nets, not {type(model).__name__}")
    p, st, eps = variables["params"], variables.get("batch_stats", {}), nets.BN_EPSILON
    n, planes = model.size, model.num_planes
    nodes, inits = [], []
    count = [0]

    def name(prefix):
        count[0] += 1
        return f"{prefix}_{count[0]}"

    def const(arr, prefix):
        t = numpy_helper.from_array(np.asarray(arr), name(prefix))
        inits.append(t)
        return t.name

    def node(op, inputs, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))  # named: int8 excludes the stem by name
        return out

    def conv_bn(x, kernel, bn_p, bn_s):
        w, b = _fold(kernel, bn_p, bn_s, eps)
        k = w.shape[-1]
        return node("Conv", [x, const(w, "w"), const(b, "b")], kernel_shape=[k, k], pads=[k // 2] * 4)

    trunk, trunk_s = p["trunk"], st["trunk"]
    x = "planes"
    stem = np.asarray(trunk["stem"]["kernel"], np.float32)  # [kh, kw, C, K]
    extra = -planes % CHANNEL_BLOCK
    if extra:  # zero planes with zero weights: the same sums, a stem ORT's blocked layout takes
        x = node("Pad", [x, const(np.array([0, 0, 0, 0, 0, 0, 0, extra], np.int64), "pads")])
        stem = np.concatenate([stem, np.zeros(stem.shape[:2] + (extra, stem.shape[3]), np.float32)], axis=2)
    x = node("Transpose", [x], perm=[0, 3, 1, 2])  # ORT folds it into its reorder to the blocked layout
    h = node("Relu", [conv_bn(x, stem, trunk["stem_bn"], trunk_s["stem_bn"])])
    for i in range(model.blocks):
        blk, blk_s = trunk[f"block{i}"], trunk_s[f"block{i}"]
        a = node("Relu", [conv_bn(h, blk["Conv_0"]["kernel"], blk["BatchNorm_0"], blk_s["BatchNorm_0"])])
        a = conv_bn(a, blk["Conv_1"]["kernel"], blk["BatchNorm_1"], blk_s["BatchNorm_1"])
        h = node("Relu", [node("Add", [a, h])])

    def head(prefix):
        y = node("Relu", [conv_bn(h, p[f"{prefix}_conv"]["kernel"], p[f"{prefix}_bn"], st[f"{prefix}_bn"])])
        y = node("Transpose", [y], perm=[0, 2, 3, 1])  # flatten as JAX does: (row, col, channel)
        return node("Flatten", [y], axis=1)

    def dense(x, d):
        return node("Gemm", [x, const(np.asarray(d["kernel"], np.float32), "w"),
                             const(np.asarray(d["bias"], np.float32), "b")])

    def policy_head(out_name):
        dense(head("policy"), p["policy_dense"])
        nodes[-1].output[0] = out_name
        return helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["batch", n * n + 1])

    def value_head(out_name):
        v = dense(node("Relu", [dense(head("value"), p["value_hidden"])]), p["value_out"])
        out = node("Tanh", [node("Flatten", [v], axis=0)])
        node("Reshape", [out, const(np.array([-1], np.int64), "shape")])
        nodes[-1].output[0] = out_name
        return helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["batch"])

    def ownership_head(out_name):
        y = node("Relu", [conv_bn(h, p["own_conv"]["kernel"], p["own_bn"], st["own_bn"])])
        w = np.ascontiguousarray(np.asarray(p["own_out"]["kernel"], np.float32).transpose(3, 2, 0, 1))
        y = node("Tanh", [node("Conv", [y, const(w, "w"), const(np.zeros(1, np.float32), "b")], kernel_shape=[1, 1])])
        node("Reshape", [y, const(np.array([-1, n * n], np.int64), "shape")])
        nodes[-1].output[0] = out_name
        return helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["batch", n * n])

    if isinstance(model, nets.ResNetPolicy):
        outs = [policy_head("out")]
    elif isinstance(model, nets.ResNetValueAux):
        outs = [value_head("out"), ownership_head("ownership")]
    elif isinstance(model, nets.ResNetValue):
        outs = [value_head("out")]
    elif model.aux_heads:
        outs = [policy_head("logits"), value_head("value"), ownership_head("ownership")]
    else:
        outs = [policy_head("logits"), value_head("value")]
    graph = helper.make_graph(nodes, type(model).__name__,
                              [helper.make_tensor_value_info("planes", TensorProto.FLOAT, ["batch", n, n, planes])],
                              outs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="alphalite")
    onnx.checker.check_model(proto)
    return proto


def session(model, variables: dict, threads: int = 0, spinning: bool = False, proto: bytes | None = None):
    """An ONNX Runtime inference session of the net (``threads`` 0: ORT's
    default, one per core). Call ``sess.run(None, {"planes": x})[0]``.
    ``spinning``: ORT's workers spin after each call (its default), taking
    the cores from the search's own work between calls; off unless asked."""
    return session_of(to_onnx(model, variables).SerializeToString() if proto is None else proto, threads, spinning)


def session_of(proto: bytes, threads: int = 0, spinning: bool = False):
    """An ONNX Runtime session of a serialized graph (``session``'s options)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return ort.InferenceSession(proto, opts, providers=["CPUExecutionProvider"])


def split_runner(sessions):
    """Run a batch as ``len(sessions)`` slices at once, one session per slice
    on its own thread (ORT lets go of the GIL while it runs): data parallel
    over the cores, with no synchronisation inside a layer. Returns
    ``run(x) -> outputs`` (the slices' outputs concatenated)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(len(sessions) - 1)
    n = len(sessions)

    def run(x):
        cuts = np.linspace(0, len(x), n + 1).astype(int)
        futures = [pool.submit(s.run, None, {"planes": x[a:b]})
                   for s, a, b in zip(sessions[1:], cuts[1:-1], cuts[2:])]
        first = sessions[0].run(None, {"planes": x[: cuts[1]]})
        parts = [first] + [f.result() for f in futures]
        return [np.concatenate([p[i] for p in parts]) for i in range(len(first))]

    return run


def fastest_runner(model, variables: dict, batch: int, rounds: int = 3, proto: bytes | None = None):
    """The fastest way here and now to run back-to-back batches of ``batch``
    rows: one thread; all cores, with and without spinning; one single-thread
    session per core, each on a slice (``split_runner``). Timed in
    interleaved rounds, best of ``rounds``, so a busy host picks what is
    fastest on it. Returns (``run(x) -> outputs``, label)."""
    import time

    proto = to_onnx(model, variables).SerializeToString() if proto is None else proto
    cores = cpu.cores()
    runners = {"1 thread": session(model, variables, 1, False, proto)}
    if cores > 1:
        runners[f"{cores} threads"] = session(model, variables, cores, False, proto)
        runners[f"{cores} threads spinning"] = session(model, variables, cores, True, proto)
    runners = {k: (lambda x, s=s: s.run(None, {"planes": x})) for k, s in runners.items()}
    if cores > 1 and batch >= 2 * cores:
        runners[f"{cores} sessions x 1 thread"] = split_runner(
            [session(model, variables, 1, False, proto) for _ in range(cores)])
    x = np.zeros((batch, model.size, model.size, model.num_planes), np.float32)
    best = {k: float("inf") for k in runners}
    for _ in range(rounds):
        for k, run in runners.items():
            run(x)
            t = time.perf_counter()
            run(x)
            run(x)
            best[k] = min(best[k], time.perf_counter() - t)
    label = min(best, key=best.get)
    return runners[label], label


def exportable(model) -> bool:
    return isinstance(model, (nets.ResNetPolicy, nets.ResNetValue, nets.ResNetPolicyValue, nets.ResNetValueAux))


def policy_value_fn(policy_model, policy_variables: dict, value_model=None, value_variables: dict | None = None,
                    threads: int = 0, protos: list[bytes] | None = None, split: int | None = None,
                    ownership: bool = False):
    """The search's network function on ONNX Runtime, with the contract of
    ``search.evaluators.policy_value_fn``: ``net_fn(params, planes, legal) ->
    (priors [B, A], values [B])`` as numpy float32, priors a softmax over the
    legal moves. ``params`` is ignored: the weights are in the sessions. A
    policy-value net (``nets.ResNetPolicyValue``) as ``policy_model`` gives
    both from its one session run (``pv_fn``). ``protos``: the graphs to
    run instead of the exported ones (the policy's, then the value net's;
    ``alphalite.nn.int8``). ``split``: the planes are a preset pair, the
    policy reads channels ``[:split]``, the value net the rest. ``ownership``:
    a third output, the ownership head ``[B, H*W]`` (mover's view) of the
    value net or the policy-value net."""
    nets.check_ownership(policy_model, value_model, ownership)
    protos = list(protos or []) + [None, None]
    if isinstance(policy_model, nets.ResNetPolicyValue):
        if value_model is not None:
            raise ValueError("a policy-value net has its own value head: no value net beside it")
        return pv_fn(policy_model, policy_variables, threads, proto=protos[0], ownership=ownership)
    policy = session(policy_model, policy_variables, threads, proto=protos[0])
    value = None if value_model is None else session(value_model, value_variables, threads, proto=protos[1])
    from alphalite.nn import features

    def net_fn(params, planes, legal):
        x, vx = (np.ascontiguousarray(p, np.float32) for p in features.split_planes(planes, split))
        logits = np.where(legal, policy.run(None, {"planes": x})[0], -np.inf)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        priors = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        if value is None:
            return priors, np.zeros(len(x), np.float32)
        out = value.run(None, {"planes": vx})
        return (priors, out[0], out[1]) if ownership else (priors, out[0])

    return net_fn


def pv_fn(model, variables: dict, threads: int = 0, tune_batch: int = 0, proto: bytes | None = None,
          ownership: bool = False):
    """A policy-value net (``nets.ResNetPolicyValue``) on ONNX Runtime with
    the contract of ``policy_value_fn``: ``net_fn(params, planes, legal) ->
    (priors [B, A], values [B])``, one session run for both heads (and with
    ``ownership``, a ``*_aux_pv`` net's ownership ``[B, H*W]`` third).
    ``tune_batch`` > 0: run as ``fastest_runner`` finds fastest at that
    batch (``net_fn.setting`` names how)."""
    nets.check_ownership(model, None, ownership)
    if tune_batch > 0:
        run, setting = fastest_runner(model, variables, tune_batch, proto=proto)
    else:
        sess = session(model, variables, threads, proto=proto)
        run, setting = (lambda x: sess.run(None, {"planes": x})), f"{threads or 'default'} threads"

    def net_fn(params, planes, legal):
        out = run(np.ascontiguousarray(planes, np.float32))
        logits = np.where(legal, out[0], -np.inf)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        priors = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        return (priors, out[1], out[2]) if ownership else (priors, out[1])

    net_fn.setting = setting
    return net_fn
