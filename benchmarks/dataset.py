"""Dataset speed, one JSON line: loader positions/s on one core (preset
``default``, 19x19, batch 256, random symmetries, chunk expansion included)
and the build rate of ``data build`` (games/s, one worker process).

Usage: python benchmarks/dataset.py [--data DIR] [--src ARCHIVE] [--batches N]
By default the loader reads data/tygem when it exists (else a dataset built
from the shipped sample) and the build reads ../shared/data's first archive
when it exists (else the sample), both into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "tygem-sample.tar.gz"
SHARED = ROOT.parent / "shared" / "data" / "tygem-2011-01.tar.gz"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default=str(ROOT / "data" / "tygem"), help="built dataset folder for the loader")
    p.add_argument("--src", default=str(SHARED if SHARED.exists() else SAMPLE), help="SGF source for the build")
    p.add_argument("--build-games", type=int, default=2000, help="games to build (0 = all)")
    p.add_argument("--batches", type=int, default=400, help="loader batches to time")
    p.add_argument("--batch-size", type=int, default=256)
    args = p.parse_args()

    from alphalite.data import dataset

    with tempfile.TemporaryDirectory(prefix="alphalite-bench-") as tmp:
        # build rate (one worker, so it is per core)
        dataset.build([SAMPLE], Path(tmp) / "warm", jobs=1, max_games=10, progress=False)  # JIT warm-up
        t = time.perf_counter()
        s = dataset.build([args.src], Path(tmp) / "build", jobs=1, max_games=args.build_games, progress=False)
        build_s = time.perf_counter() - t

        data = Path(args.data)
        if not (data / "index.json").exists():
            data = Path(tmp) / "build"
        it = dataset.iterate_batches(data, batch_size=args.batch_size, seed=0, symmetries=True,
                                     preset="default", board_size=19)
        next(it)  # compile / cache load and the first chunk
        t = time.perf_counter()
        for _ in range(args.batches):
            next(it)
        load_s = time.perf_counter() - t

    print(json.dumps({
        "loader_positions_per_s": round(args.batches * args.batch_size / load_s, 1),
        "loader_batches": args.batches, "batch_size": args.batch_size, "preset": "default",
        "symmetries": True, "loader_data": str(data),
        "build_games_per_s": round(s["games"] / build_s, 1), "build_games": s["games"],
        "build_positions": s["positions"], "build_jobs": 1, "build_src": str(args.src),
    }))


if __name__ == "__main__":
    from alphalite import runtime

    runtime.setup()
    main()
