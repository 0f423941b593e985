"""Does a net keep its accuracy in int8? On the positions of held-out games
(the test split of a built dataset, every position once), the policy's
top-1 against the game's move for the fp32 net and for the same net
quantized as the engine does it (``--inference int8``: calibrated on the
net's own self-play, alphalite/nn/int8.py), and how often the two name the
same move. Prints one JSON line.

    python benchmarks/int8_accuracy.py data/tygem [--checkpoint policy19] [--games 300] [--reduce-range on]
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a built dataset (alphalite data build)")
    ap.add_argument("--checkpoint", default="policy19", help="a policy or policy-value net (name or folder)")
    ap.add_argument("--games", type=int, default=300, help="test games used (0: all)")
    ap.add_argument("--reduce-range", choices=("on", "off"), default="off",
                    help="7-bit weights (ORT's advice for hosts without VNNI; the engine uses 8)")
    args = ap.parse_args(argv)

    from alphalite.data import dataset
    from alphalite.nn import checkpoint, int8, onnx_export

    info, model, variables = checkpoint.load_model(checkpoint.resolve(args.checkpoint), ("policy", "policy_value"))
    preset, n = info.get("preset", "default"), int(info["board_size"])
    proto = onnx_export.to_onnx(model, variables).SerializeToString()
    fp32 = onnx_export.session_of(proto)
    calib = int8.self_play_planes(lambda x: fp32.run(None, {"planes": x})[0], n, preset)
    reduce = args.reduce_range == "on"
    q8 = onnx_export.session_of(int8.quantize(proto, calib[0::2], reduce))
    hits = {"fp32": 0, "int8": 0, "agree": 0}
    total = 0
    for b in dataset.iterate_eval(args.data, preset=preset, batch_size=256, board_size=n, max_games=args.games):
        top = {}
        for k, s in (("fp32", fp32), ("int8", q8)):
            top[k] = np.where(b["legal"], s.run(None, {"planes": b["planes"]})[0], -np.inf).argmax(axis=1)
            hits[k] += int((top[k] == b["moves"]).sum())
        hits["agree"] += int((top["fp32"] == top["int8"]).sum())
        total += len(b["moves"])
    print(json.dumps({"benchmark": "int8_accuracy", "checkpoint": args.checkpoint, "positions": total,
                      "top1_fp32": round(hits["fp32"] / total, 4), "top1_int8": round(hits["int8"] / total, 4),
                      "agree": round(hits["agree"] / total, 4), "reduce_range": reduce,
                      "vnni": int8.has_vnni()}))
    return 0


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
