"""The plot of an AlphaZero run, from its metrics.jsonl: ``plots/zero.png``
in the run folder (redrawn atomically after every iteration;
``alphalite rl-plot RUN`` redraws it from an existing run).

Three panels:

* training loss (total, policy, value) over learner steps;
* the gating score of each iteration's new net against the best, with its
  95% Wilson interval, accepted (green) or rejected (red);
* the best net's rating over the iterations: the anchor matches (every
  ``anchor_every`` rounds the best net plays the start net, ``anchor_elo``)
  with their 95% intervals, and, dashed, the chain of accepted gates
  (``rating_chain``): 0 Elo at the start, each accepted gate adds the Elo
  of its score. Only gates that scored well are accepted, so the chain
  reads high (the winner's curse: on the first 9x9 run it read +1,135 Elo
  where the match against the start scored 60% in 80 games); the anchors
  are the measure.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from alphalite.arena.ratings import elo_from_rate, wilson
from alphalite.runtime import files


def gate_score(rec: dict) -> tuple[float, float, float]:
    """(score, 95% low, 95% high) of a gate record: draws count half."""
    n = rec.get("games", 0)
    k = rec.get("wins", 0) + 0.5 * rec.get("draws", 0)
    lo, hi = wilson(k, n)
    return (k / n if n else 0.5), lo, hi


def _elo(rate: float, n: int) -> float:
    """Elo of a score rate, kept finite: a clean sweep counts as n - 1/2 of n."""
    edge = 0.5 / max(n, 1)
    return elo_from_rate(min(max(rate, edge), 1.0 - edge))


def rating_chain(records: list[dict]) -> list[dict]:
    """The best net's rating after each gate: ``{"iteration", "step", "elo",
    "low", "high"}``, starting with iteration 0 at 0 Elo. An accepted gate
    adds the Elo of its score (games against the best of the time); a
    rejected one (or one of no games) leaves the rating as it is."""
    elo, var_lo, var_hi, step = 0.0, 0.0, 0.0, 0
    out = [{"iteration": 0, "step": 0, "elo": 0.0, "low": 0.0, "high": 0.0}]
    for r in records:
        if r.get("kind") != "gate":
            continue
        if r.get("accepted") and r.get("games", 0) > 0:
            n = int(r["games"])
            s, lo, hi = gate_score(r)
            e = _elo(s, n)
            elo += e
            var_lo += (e - _elo(lo, n)) ** 2
            var_hi += (_elo(hi, n) - e) ** 2
            step = int(r.get("new_step", step))
        elif r.get("accepted"):
            step = int(r.get("new_step", step))
        out.append({"iteration": int(r["iteration"]) + 1, "step": step, "elo": elo,
                    "low": elo - math.sqrt(var_lo), "high": elo + math.sqrt(var_hi)})
    return out


def anchor_elo(records: list[dict]) -> list[dict]:
    """The anchor matches (best net against the start): ``{"iteration",
    "step", "elo", "low", "high"}``, the 95% Wilson interval in Elo."""
    out = []
    for r in records:
        if r.get("kind") == "anchor" and r.get("games", 0) > 0:
            n = int(r["games"])
            s, lo, hi = gate_score(r)
            out.append({"iteration": int(r["iteration"]), "step": int(r.get("step", 0)), "elo": _elo(s, n),
                        "low": _elo(lo, n), "high": _elo(hi, n)})
    return out


def plot_run(records: list[dict], path: str | os.PathLike) -> Path:
    """Draw the three panels of ``records`` (metrics.jsonl) into the PNG
    ``path``, atomically. Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_gate, ax_elo) = plt.subplots(1, 3, figsize=(15, 4))
    trains = [r for r in records if r.get("kind") == "train" and "step" in r]
    for key in ("loss", "policy_loss", "value_loss"):
        pts = [(r["step"], r[key]) for r in trains if key in r]
        if pts:
            x, y = zip(*pts)
            ax_loss.plot(x, y, label=key, marker="." if len(pts) < 50 else None)
    ax_loss.set(xlabel="learner step", ylabel="loss", title="training loss")
    if trains:
        ax_loss.legend()

    gates = [r for r in records if r.get("kind") == "gate" and r.get("games", 0) > 0]
    for accepted, colour, marker, label in ((True, "tab:green", "o", "accepted"),
                                            (False, "tab:red", "x", "rejected")):
        rows = [r for r in gates if bool(r.get("accepted")) == accepted]
        if rows:
            scores = [gate_score(r) for r in rows]
            ax_gate.errorbar([r["iteration"] for r in rows], [s for s, _, _ in scores],
                             yerr=[[s - lo for s, lo, _ in scores], [hi - s for s, _, hi in scores]],
                             fmt=marker, color=colour, capsize=3, label=label)
    ax_gate.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax_gate.set(xlabel="iteration", ylabel="score of the new net vs the best", ylim=(0, 1),
                title="gating (95% interval)")
    if gates:
        ax_gate.legend()
    elif any(r.get("kind") == "gate" for r in records):  # --gate-games 0: AlphaZero's way
        ax_gate.text(0.5, 0.75, "no gating games:\nevery new net accepted", ha="center", va="center",
                     transform=ax_gate.transAxes)

    chain = rating_chain(records)
    if gates:  # without gating games the chain is a flat line that measured nothing
        ax_elo.step([c["iteration"] for c in chain], [c["elo"] for c in chain], where="post", color="grey",
                    ls="--", lw=1, label="chain of accepted gates (reads high)")
    anchors = anchor_elo(records)
    if anchors:
        a = anchors[-1]
        ax_elo.errorbar([c["iteration"] for c in anchors], [c["elo"] for c in anchors],
                        yerr=[[c["elo"] - c["low"] for c in anchors], [c["high"] - c["elo"] for c in anchors]],
                        fmt="o", color="tab:blue", capsize=3, label="best net vs the start")
        title = f"best net (step {a['step']}) vs the start: {a['elo']:+.0f} [{a['low']:+.0f}, {a['high']:+.0f}]"
    else:
        title = f"best net (step {chain[-1]['step']}): no anchor match yet"
    ax_elo.axhline(0, color="grey", lw=0.8)
    ax_elo.set(xlabel="iteration", ylabel="Elo over the start net (95% interval)", title=title)
    if gates or anchors:
        ax_elo.legend(fontsize=8)
    for ax in (ax_loss, ax_gate, ax_elo):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    files.write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=100))
    plt.close(fig)
    return Path(path)


def plot_workdir(workdir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Redraw an AlphaZero run's plot from its metrics.jsonl (into ``out``,
    default ``<workdir>/plots/zero.png``). FileNotFoundError without one."""
    from alphalite.zero.store import Store

    store = Store(workdir)
    if not store.metrics.is_file():
        raise FileNotFoundError(f"{store.metrics}: no such file (not an AlphaZero run folder?)")
    return plot_run(store.read_metrics(), store.plot_path if out is None else out)
