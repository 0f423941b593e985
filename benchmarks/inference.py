"""Search-time inference speed of the policy net on the CPU: JAX (jitted,
``--conv auto``: the 3x3 convolution tuned on this host, see
alphalite/nn/convtune.py; ``jax_conv`` names the residual blocks' choice;
``jax_xla`` forces XLA's convolution), ONNX Runtime (the net exported by
alphalite.nn.onnx_export, batch norm folded) and PyTorch (eager,
inference_mode; the same ResNet as benchmarks/sl_train.py), at 19x19 for
b4c32 and b6c64 and batches 1/8/32, fp32, and ORT with the net quantized
to int8 (alphalite/nn/int8.py, calibrated on the net's own self-play; its
accuracy on real positions: benchmarks/int8_accuracy.py), timed
round-robin in one run (best of rounds). Also the largest difference of
ORT's logits from JAX's.
Prints one JSON line naming the host's CPU.

    python benchmarks/inference.py [--presets b4c32,b6c64] [--batches 1,8,32] [--seconds 4]

PyTorch is optional (``pip install torch==2.13.0``, the CPU build); without
it the torch fields are replaced by ``"torch_skipped"``.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from sl_train import _time_interleaved, import_torch, torch_resnet


def cpu_name() -> str:
    """The host's CPU model and the ISA extensions that decide our speeds (``runtime.cpu``)."""
    from alphalite.runtime import cpu

    isa = [f for f in ("avx512f", "avx512_bf16", "amx_tile", "avx2") if f in cpu.flags()]
    return f"{cpu.name()} ({', '.join(isa)})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="b4c32,b6c64")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--size", type=int, default=19)
    ap.add_argument("--seconds", type=float, default=4.0, help="timed seconds per engine and case")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)

    import jax
    import onnxruntime

    from alphalite.nn import features, int8, nets, onnx_export

    torch, skipped = import_torch(args.no_torch)
    planes = features.num_planes("default")
    n = args.size
    result = {"benchmark": "inference", "cpu": cpu_name(), "cpu_count": os.cpu_count(), "size": n,
              "jax": jax.__version__, "onnxruntime": onnxruntime.__version__,
              "torch": torch.__version__ if torch else None}
    if skipped:
        result["torch_skipped"] = skipped
    rng = np.random.default_rng(0)
    for preset in args.presets.split(","):
        model = nets.make_model(preset, n, planes)
        variables = nets.init_variables(model, jax.random.key(0))
        # Non-trivial batch statistics, so that folding them is exercised.
        variables = jax.tree_util.tree_map_with_path(
            lambda path, a: (np.abs(rng.normal(1, 0.2, a.shape)) if "var" in str(path[-1])
                             else rng.normal(0, 0.1, a.shape)).astype(np.float32)
            if "batch_stats" in str(path[0]) else a, variables)
        apply = jax.jit(lambda v, x: model.apply(v, x, train=False))
        xla_model = nets.make_model(preset, n, planes, conv="xla")
        apply_xla = jax.jit(lambda v, x: xla_model.apply(v, x, train=False))
        channels = nets.parse_preset(preset)[1]
        proto = onnx_export.to_onnx(model, variables).SerializeToString()
        sess = onnx_export.session_of(proto)
        calib = int8.self_play_planes(lambda x: sess.run(None, {"planes": x})[0], n, "default", games=8)
        sess8 = onnx_export.session_of(int8.quantize(proto, calib))
        if torch is not None:
            blocks, channels = nets.parse_preset(preset)
            tnet = torch_resnet(blocks, channels, n, planes).eval()
        for batch in map(int, args.batches.split(",")):
            x = (rng.random((batch, n, n, planes)) < 0.3).astype(np.float32)
            fns = {"jax": lambda: np.asarray(apply(variables, x)),
                   "jax_xla": lambda: np.asarray(apply_xla(variables, x)),
                   "onnxruntime": lambda: sess.run(None, {"planes": x})[0],
                   "onnxruntime_int8": lambda: sess8.run(None, {"planes": x})[0]}
            if torch is not None:
                xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))

                def run_torch():
                    with torch.inference_mode():
                        return tnet(xt)

                fns["torch"] = run_torch
            diff = float(np.abs(fns["jax"]() - fns["onnxruntime"]()).max())
            best = _time_interleaved(fns, seconds=args.seconds)
            row = {f"{k}_evals_per_s": round(batch / s, 1) for k, s in best.items()}
            row["ort_max_abs_diff"] = diff
            row["jax_conv"] = nets.conv_method("auto", False, (batch, n, n, channels), channels)
            if torch is not None:
                row["ort_vs_torch"] = round(best["torch"] / best["onnxruntime"], 2)
                row["ort_int8_vs_torch"] = round(best["torch"] / best["onnxruntime_int8"], 2)
                row["jax_vs_torch"] = round(best["torch"] / best["jax"], 2)
                row["jax_xla_vs_torch"] = round(best["torch"] / best["jax_xla"], 2)
            row["ort_vs_jax"] = round(best["jax"] / best["onnxruntime"], 2)
            row["ort_int8_vs_ort"] = round(best["onnxruntime"] / best["onnxruntime_int8"], 2)
            result[f"{preset}_batch{batch}"] = row
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
