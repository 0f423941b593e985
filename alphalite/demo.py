"""`make demo`: the whole pipeline on the embedded default (the SGF sample
shipped in tests/data), each stage printing what it made, in about 15
minutes on 2 CPU cores.

Stages:
1. build a dataset from the sample (200 Tygem 9-dan games);
2. train a small 19x19 policy (b4c32) for about two minutes;
3. evaluate it on the held-out games;
4. a few policy-gradient self-play iterations from it (``selfplay.rl``);
5. a value net on self-play positions (the policy's trunk, a tanh head);
6. our MCTS with both new nets plays a few moves through a real GTP pipe;
7. a short 19x19 match of that MCTS engine against GNU Go, and a few 9x9
   games of the rollout MCTS against GNU Go (issue 5's quick strength check);
   both skipped with a message where GNU Go is not installed;
8. two rounds of AlphaZero training on a local Ray (9x9, from the shipped
   policy9 + value9 arrays: self-play actors, a learner, SPRT gating;
   ``alphalite.zero.run.demo_zero``);
9. a markdown report with the plots: ``runs/demo/report.md``.

Everything goes under ``runs/demo`` (ignored by git); a rerun resumes where it
stopped (each stage keeps its own run folder), and Ctrl-C stops cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from alphalite.runtime import files

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
    from alphalite.train import supervised as train

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
    from alphalite.train import supervised as train

    _banner("3. evaluation on the held-out test games")
    res = train.evaluate_checkpoint(str(workdir), [str(data)], split="test",
                                    plot_dir=str(workdir / "plots"))
    print(json.dumps({k: res[k] for k in ("positions", "top1", "top5", "mean_rank", "mean_prob",
                                          "last_two_moves", "passes_excluded")}))
    return res


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def stage_rl(sl: Path, workdir: Path) -> dict:
    from selfplay import rl

    _banner(f"4. policy-gradient self-play from the new policy -> {_rel(workdir)}")
    res = rl.demo_rl(str(sl), workdir, iterations=2, games=8, eval_games=8)
    if res.get("stopped") == "interrupted":
        raise KeyboardInterrupt
    for e in res["evals"]:
        print(f"after iteration {e.get('step')}: win rate vs the SL start {e.get('winrate_vs_sl')} "
              f"({e.get('eval_games')} games)")
    return res


def value_stage(policy_checkpoint: str, workdir, minutes: float = 1.0, *, games: int = 32,
               rl_checkpoint: str | None = None, data_minutes: float = 1.5, seed: int = 0,
               progress: bool = True) -> dict:
    """The demo's value stage: ``games`` self-play games under the value-data
    protocol with ``policy_checkpoint`` (also standing in for the RL policy
    unless ``rl_checkpoint``), at most ``data_minutes`` of play, then a value
    net (the policy's trunk, a fresh tanh head) trained for ``minutes``.
    A handful of games give too few one-per-game positions for a batch, so
    the demo trains on up to 16 positions of every game (the full protocol,
    ``--marked-only``, is for real runs). Reruns resume. Returns metrics."""
    from alphalite.nn import nets
    from alphalite.train import supervised as train
    from selfplay import valuedata

    workdir = Path(workdir)
    pol = valuedata.load_policy(policy_checkpoint)
    size = pol["size"]
    t0 = time.time()
    gen = valuedata.generate(workdir / "valuedata", policy_checkpoint, rl_checkpoint=rl_checkpoint or policy_checkpoint,
                             games=games, batch=games, seed=seed, val_frac=0.2, test_frac=0.0,
                             max_seconds=60 * data_minutes, progress=progress, max_moves=size * size + 2 * size)
    data_seconds = time.time() - t0
    name = type(pol["model"]).__name__
    if name == "ResNetPolicy":
        model, trunk = f"b{pol['model'].blocks}c{pol['model'].channels}_value", str(policy_checkpoint)
    else:
        model, trunk = "b2c16_value", ""
    nets.parse_preset(model[: -len("_value")])
    cfg = train.SLConfig(data=str(workdir / "valuedata"), task="value", model=model, preset=pol["preset"],
                         board_size=size, batch_size=32, optimizer="adam", learning_rate=1e-3, schedule="constant",
                         warmup_steps=20, total_steps=100_000, max_minutes=minutes, eval_every=100,
                         eval_positions=1024, checkpoint_every=50, log_every=10, per_game=16, init_trunk=trunk,
                         seed=seed)
    res = train.train_and_evaluate(cfg, workdir / "run", progress=progress)
    return {"games": gen["games"], "games_per_hour": gen["games_per_hour"], "data_seconds": data_seconds,
            "model": model, "init_trunk": trunk, "step": res["step"], "stopped": res["stopped"],
            "val_mse": res.get("val_mse"), "val_accuracy": res.get("val_accuracy"),
            "positions_per_s": res.get("positions_per_s"), "train_seconds": res.get("seconds"),
            "run": str(workdir / "run")}


def stage_value(sl: Path, rl_model: Path | None, workdir: Path) -> dict:
    _banner(f"5. value net on self-play positions -> {_rel(workdir)}")
    res = value_stage(str(sl), workdir, minutes=1.0, games=32, data_minutes=1.0,
                           rl_checkpoint=str(rl_model) if rl_model else None)
    if res.get("stopped") == "interrupted":
        raise KeyboardInterrupt
    return res


def mcts_args(policy: Path, value_net: Path | None, visits: int) -> list[str]:
    args = ["--engine", "mcts", "--checkpoint", str(policy), "--visits", str(visits)]
    if value_net is not None:
        args += ["--value-checkpoint", str(value_net), "--lambda", "0.5"]
    return args


def stage_gtp(engine_args: list[str], label: str, moves: int = 12) -> str:
    """Our engine over a real GTP pipe, as a GUI drives it."""
    from alphalite.go.gtpclient import GtpClient

    _banner(f"6. GTP: {label} plays {moves} moves over a GTP pipe")
    argv = [sys.executable, "-m", "alphalite.cli", "gtp", *engine_args]
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


def stage_match(policy: Path, value_net: Path | None, out: Path) -> dict:
    """Our MCTS with the demo's nets against GNU Go level 1 on 19x19 (a move
    cap keeps it short), then issue 5's quick 9x9 rollout-MCTS match."""
    from alphalite.arena import tournament as arena
    from alphalite.go.gtpclient import find_gnugo

    _banner("7. matches against GNU Go")
    if find_gnugo() is None:
        print("matches skipped: GNU Go is not installed (apt-get install gnugo, or brew install gnu-go)")
        return {"skipped": "gnugo not installed"}
    ours = "@alphalite " + " ".join(mcts_args(policy, value_net, 48)) + " --size 19 --seed {seed}"
    t = arena.Tournament(engines=(arena.EngineSpec("alphalite-mcts-demo", ours),
                                  arena.EngineSpec("gnugo-l1", "@gnugo --level 1 --seed {seed}")),
                         games=2, size=19, komi=7.5, max_moves=240, timeout=120.0, anchor="gnugo-l1")
    print("19x19: 2 games, our MCTS (48 visits, the demo's policy + value net) vs GNU Go level 1, "
          "240-move cap (then scored as it stands)", flush=True)
    t0 = time.time()
    res19 = arena.run_tournament(t, out / "match19", jobs=2, progress=False)
    print(res19["report"]["text"])
    print(f"19x19 match: {time.time() - t0:.0f} s")
    res9 = arena.demo_match(out / "match9", games=4, jobs=2)
    return {"19x19": res19, "9x9": res9}


def stage_zero(workdir: Path) -> dict:
    from alphalite.zero import run as zero
    from alphalite.zero.store import Store

    _banner(f"8. AlphaZero on a local Ray: 9x9 self-play actors, a learner, SPRT gating -> {_rel(workdir)}")
    t0 = time.time()
    res = zero.demo_zero(workdir, iterations=2)
    if res.get("stopped") == "interrupted":
        raise KeyboardInterrupt
    res["gates"] = [m for m in Store(workdir).read_metrics() if m["kind"] == "gate"]
    print(f"AlphaZero stage: {res['iteration']} iterations, {res['games']} games, best net step "
          f"{(res.get('best') or {}).get('step')}, {time.time() - t0:.0f} s")
    return res


def write_report(out: Path, parts: dict) -> Path:
    """runs/demo/report.md: what each stage made, with its plots."""
    def link(p):
        p = Path(p)
        return f"![{p.stem}]({p.resolve().relative_to(out.resolve())})" if p.exists() else ""

    ev, rl_res, val, match = (parts.get(k) or {} for k in ("eval", "rl", "value", "match"))
    lines = ["# alphalite demo report", "",
             f"Made by `make demo` in {parts.get('seconds', 0):.0f} s on {os.cpu_count()} CPU cores. "
             "Tiny budgets throughout: this shows the pipeline working end to end, not strength.", ""]
    lines += ["## Supervised policy (b4c32, 19x19, the bundled 200-game sample)", ""]
    if ev:
        lines += [f"Test positions: {ev.get('positions')}; top-1 {ev.get('top1', 0):.3f}, "
                  f"top-5 {ev.get('top5', 0):.3f}, mean rank {ev.get('mean_rank', 0):.1f}, "
                  f"mean probability of the expert move {ev.get('mean_prob', 0):.3f}.", ""]
    for name in ("accuracy.png", "loss.png", "topk.png"):
        lines.append(link(out / "sl" / "plots" / name))
    lines += ["", "## Policy-gradient self-play", ""]
    for e in rl_res.get("evals", []):
        lines.append(f"- after iteration {e.get('step')}: win rate vs the SL start {e.get('winrate_vs_sl')} "
                     f"({e.get('eval_games', '?')} games)")
    lines += [link(p) for p in rl_res.get("plots", [])]
    lines += ["", "## Value net", ""]
    if val:
        shown = {k: v for k, v in val.items() if isinstance(v, (int, float, str))}
        lines += ["```", json.dumps(shown, sort_keys=True), "```"]
    lines += [link(p) for p in sorted((out / "value").rglob("*.png"))]
    lines += ["", "## Matches against GNU Go", ""]
    if match.get("skipped"):
        lines.append(f"Skipped: {match['skipped']}.")
    for key in ("19x19", "9x9"):
        res = match.get(key) or {}
        rep = res.get("report") or {}
        if rep.get("text"):
            lines += [f"### {key}", "", "```", rep["text"], "```"]
        if rep.get("plot"):
            lines.append(link(rep["plot"]))
    zero = parts.get("zero") or {}
    if zero:
        lines += ["", "## AlphaZero on Ray (9x9)", "",
                  f"{zero.get('iteration')} iterations, {zero.get('games')} self-play games, "
                  f"{zero.get('actors')} self-play actor(s); best net: step "
                  f"{(zero.get('best') or {}).get('step')}.", ""]
        for g in zero.get("gates", []):
            lines.append(f"- iteration {g['iteration']}: new net (step {g['new_step']}) vs best (step "
                         f"{g['best_step']}): score {g.get('score', 0):.2f} over {g.get('games')} games, "
                         f"LLR {g.get('llr', 0):.2f} -> {'accepted' if g['accepted'] else 'rejected'}")
    path = out / "report.md"
    files.write_atomic(path, lambda f: f.write(("\n".join(lines) + "\n").encode()))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="alphalite-demo", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "runs" / "demo"), help="demo folder")
    p.add_argument("--minutes", type=float, default=2.0, help="supervised training time")
    args = p.parse_args(argv)
    from alphalite import runtime

    runtime.setup()
    out = Path(args.out)
    t0 = time.time()
    parts: dict = {}
    try:
        data = stage_data(out / "data")
        stage_sl(data, out / "sl", args.minutes)
        parts["eval"] = stage_eval(out / "sl", data)
        parts["rl"] = stage_rl(out / "sl", out / "rl")
        rl_model = out / "rl" / "best_model"
        policy = rl_model if (rl_model / "model.json").exists() else out / "sl"
        parts["value"] = stage_value(out / "sl", rl_model if policy == rl_model else None, out / "value")
        value_net = Path(parts["value"]["run"])
        stage_gtp(mcts_args(policy, value_net, 48), "our MCTS (the demo's policy + value net, 48 visits)")
        parts["match"] = stage_match(policy, value_net, out / "arena")
        parts["zero"] = stage_zero(out / "zero")
    except KeyboardInterrupt:
        print("\ndemo interrupted; rerun `make demo` to resume", file=sys.stderr)
        return 130
    parts["seconds"] = time.time() - t0
    report = write_report(out, parts)
    _banner(f"demo done in {parts['seconds']:.0f} s; report: {_rel(report)}; everything is under {_rel(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
