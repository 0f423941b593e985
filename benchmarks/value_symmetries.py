"""Winner accuracy of a value net at moves 30/80/130/180, its plain output
against the mean over the 8 board symmetries, on the same test positions.

Prints one JSON line: ``identity`` is what ``alphalite eval-value`` reports
for the net (same games, same buckets), ``mean8`` the averaged value. Winner
head only (the value is the same on every image of a position); about 8
minutes for b12c96 on the 2,221 Tygem test games on two cores.

    python benchmarks/value_symmetries.py data/tygem --checkpoint checkpoints/value19b12
"""

import argparse
import json
import time

import numpy as np

from alphalite import runtime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a dataset folder (alphalite data build)")
    ap.add_argument("--checkpoint", default="checkpoints/value19b12")
    ap.add_argument("--split", default="test")
    ap.add_argument("--max-games", type=int, default=0, help="0 = all")
    args = ap.parse_args()
    runtime.setup()
    from alphalite.data import dataset
    from alphalite.nn import checkpoint as ckpt, features
    from alphalite.train import metrics, value

    moves = value.SNAPSHOT_MOVES
    info, model, variables = ckpt.load_model(args.checkpoint, "value")
    predict = value.make_predict(model)
    tests = dataset.iterate_eval(args.data, split=args.split, preset=info["preset"], board_size=int(info["board_size"]),
                                 max_games=args.max_games, batch_size=256, decided_only=True, move_numbers=moves)
    one, mean8 = metrics.WinnerStats(), metrics.WinnerStats()
    games = set()
    t = time.time()
    for b in tests:
        vs = [np.asarray(predict(variables, features.transform_planes(b["planes"], g))) for g in range(8)]
        value.update(one, None, vs[0], b)  # as eval-value counts it
        value.update(mean8, None, np.mean(vs, axis=0), b)
        games.update(b["game"].tolist())
    print(json.dumps({"checkpoint": args.checkpoint, "games": len(games), "positions": one.n,
                      "seconds": round(time.time() - t, 1), "identity": value._summary(one.result(), moves),
                      "mean8": value._summary(mean8.result(), moves)}))


if __name__ == "__main__":
    main()
