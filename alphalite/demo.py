"""`make demo`: the pipeline on the embedded default (the SGF sample shipped
in tests/data), each stage printing what it made.

Stages: build a dataset from the sample; train a small 19x19 policy for about
two minutes; evaluate it on the held-out games; let a policy (the shipped
checkpoints/policy19 when present, else the one just trained) play a few
moves through a real GTP exchange and print the board. Everything goes under
``runs/demo`` (ignored by git); a rerun resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "tygem-sample.tar.gz"


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def stage_data(out: Path) -> Path:
    from alphalite import cli

    _banner(f"1. dataset: {SAMPLE.relative_to(ROOT)} -> {out}")
    code = cli.main(["data", "build", str(SAMPLE), "--out", str(out), "--val-frac", "0.1",
                     "--test-frac", "0.1"])
    if code:
        raise SystemExit(code)
    return out


def stage_sl(data: Path, workdir: Path, minutes: float) -> dict:
    from alphalite import train

    _banner(f"2. supervised policy: {minutes:g} minutes of training -> {workdir}")
    cfg = train.SLConfig(data=str(data), model="b4c32", preset="default", board_size=19, batch_size=64,
                         optimizer="adam", learning_rate=2e-3, weight_decay=1e-4, schedule="constant",
                         warmup_steps=50, total_steps=100_000, max_minutes=minutes, eval_every=200,
                         eval_positions=2048, checkpoint_every=200, log_every=20)
    res = train.train_and_evaluate(cfg, workdir)
    if res["stopped"] == "interrupted":  # Ctrl-C is handled between steps; stop the demo too
        raise KeyboardInterrupt
    return res


def stage_eval(workdir: Path, data: Path) -> dict:
    from alphalite import train

    _banner("3. evaluation on the held-out test games")
    res = train.evaluate_checkpoint(str(workdir), [str(data)], split="test",
                                    plot_dir=str(workdir / "plots"))
    print(json.dumps({k: res[k] for k in ("positions", "top1", "top5", "mean_rank", "mean_prob",
                                          "last_two_moves", "passes_excluded")}))
    return res


def stage_gtp(checkpoint: Path, moves: int = 12) -> str:
    """Our engine over a real GTP pipe, as a GUI drives it."""
    from alphalite.gtpclient import GtpClient

    _banner(f"4. GTP: the policy ({checkpoint.relative_to(ROOT) if checkpoint.is_relative_to(ROOT) else checkpoint}) "
            f"plays {moves} moves over a GTP pipe")
    argv = [sys.executable, "-m", "alphalite.cli", "gtp", "--engine", "policy", "--checkpoint", str(checkpoint)]
    with GtpClient(argv, timeout=120, stderr=subprocess.DEVNULL) as gtp:
        print(f"name: {gtp.send('name')}  protocol_version: {gtp.send('protocol_version')}")
        gtp.send("boardsize 19")
        gtp.send("clear_board")
        gtp.send("komi 6.5")
        played = []
        for i in range(moves):
            colour = "b" if i % 2 == 0 else "w"
            played.append(f"{colour.upper()} {gtp.send(f'genmove {colour}')}")
        print("moves:", ", ".join(played))
        board = gtp.send("showboard")
        print(board)
        return board


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="alphalite-demo", description=__doc__)
    p.add_argument("--out", default=str(ROOT / "runs" / "demo"), help="demo folder")
    p.add_argument("--minutes", type=float, default=2.0, help="supervised training time")
    args = p.parse_args(argv)
    out = Path(args.out)
    t0 = time.time()
    try:
        data = stage_data(out / "data")
        stage_sl(data, out / "sl", args.minutes)
        stage_eval(out / "sl", data)
        shipped = ROOT / "checkpoints" / "policy19"
        stage_gtp(shipped if (shipped / "model.json").exists() else out / "sl")
    except KeyboardInterrupt:
        print("\ndemo interrupted; rerun `make demo` to resume", file=sys.stderr)
        return 130
    _banner(f"demo done in {time.time() - t0:.0f} s; everything is under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
