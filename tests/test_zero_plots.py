"""The AlphaZero run's plot: the rating chain of its gates, and the PNG
that ``alphalite rl-plot`` redraws from a metrics.jsonl."""

from __future__ import annotations

import json

import pytest

from alphalite.arena.ratings import elo_from_rate
from alphalite.zero import plots

RECORDS = [
    {"kind": "start", "iteration": 0, "net": "n0"},
    {"kind": "train", "iteration": 0, "step": 100, "loss": 2.6, "policy_loss": 2.0, "value_loss": 0.6},
    {"kind": "gate", "iteration": 0, "new_step": 100, "games": 40, "wins": 25, "draws": 0, "losses": 15,
     "accepted": True},
    {"kind": "train", "iteration": 1, "step": 200, "loss": 2.5, "policy_loss": 2.0, "value_loss": 0.5},
    {"kind": "gate", "iteration": 1, "new_step": 200, "games": 40, "wins": 19, "draws": 0, "losses": 21,
     "accepted": False},
    {"kind": "train", "iteration": 2, "step": 300, "loss": 2.4, "policy_loss": 1.9, "value_loss": 0.5},
    {"kind": "gate", "iteration": 2, "new_step": 300, "games": 10, "wins": 6, "draws": 2, "losses": 2,
     "accepted": True},
    {"kind": "anchor", "iteration": 3, "step": 300, "games": 40, "wins": 24, "draws": 0, "losses": 16,
     "score": 0.6},
]


def test_anchor_elo_reads_the_matches_against_the_start():
    (a,) = plots.anchor_elo(RECORDS)
    assert (a["iteration"], a["step"]) == (3, 300)
    assert a["elo"] == pytest.approx(elo_from_rate(0.6))
    assert a["low"] < 0 < a["elo"] < a["high"]  # 24 of 40: not yet distinguishable from the start


def test_rating_chain_adds_the_accepted_gates_only():
    chain = plots.rating_chain(RECORDS)
    assert [c["iteration"] for c in chain] == [0, 1, 2, 3]
    assert [c["step"] for c in chain] == [0, 100, 100, 300]
    first, second = elo_from_rate(25 / 40), elo_from_rate(7 / 10)  # draws count half
    assert chain[1]["elo"] == pytest.approx(first)
    assert chain[2]["elo"] == chain[1]["elo"]  # rejected: the best net stays
    assert chain[3]["elo"] == pytest.approx(first + second)
    for c in chain[1:]:
        assert c["low"] < c["elo"] < c["high"]
    assert chain[1]["high"] - chain[1]["low"] < chain[3]["high"] - chain[3]["low"]  # the band grows


def test_a_clean_sweep_has_a_finite_rating():
    chain = plots.rating_chain([{"kind": "gate", "iteration": 0, "new_step": 5, "games": 8, "wins": 8,
                                 "accepted": True}])
    assert chain[-1]["elo"] == pytest.approx(elo_from_rate(1 - 0.5 / 8))  # 7.5 of 8
    assert chain[-1]["low"] < chain[-1]["elo"] <= chain[-1]["high"]


@pytest.mark.slow
def test_rl_plot_redraws_a_run(tmp_path, capsys):
    from alphalite import cli

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert cli.main(["rl-plot", str(run)]) == 0
    png = run / "plots" / "zero.png"
    assert capsys.readouterr().out.strip() == str(png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 2 * height  # three panels side by side
    out = tmp_path / "elsewhere.png"
    assert cli.main(["rl-plot", str(run), "--out", str(out)]) == 0 and out.read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (run / "plots").iterdir()) == ["zero.png"]  # nothing half-written left


def _drawn(records, tmp_path, monkeypatch):
    """The figure plot_run draws of ``records``: (gate panel's texts, rating panel's legend labels)."""
    import matplotlib.pyplot as plt

    figs = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig) or close(fig))
    plots.plot_run(records, tmp_path / "zero.png")
    (fig,) = figs
    _, ax_gate, ax_elo = fig.axes
    legend = ax_elo.get_legend()
    return [t.get_text() for t in ax_gate.texts], [t.get_text() for t in legend.get_texts()] if legend else []


def test_a_run_without_gating_says_so_and_draws_no_gate_chain(tmp_path, monkeypatch):
    texts, labels = _drawn(RECORDS, tmp_path, monkeypatch)
    assert texts == [] and "chain of accepted gates (reads high)" in labels
    ungated = [dict(r, games=0, wins=0, draws=0, losses=0, accepted=True) if r["kind"] == "gate" else r
               for r in RECORDS]
    texts, labels = _drawn(ungated, tmp_path, monkeypatch)
    assert texts == ["no gating games:\nevery new net accepted"]
    assert labels == ["best net vs the start"]  # the anchor match, no flat chain beside it


def test_rl_plot_of_a_folder_without_metrics_is_one_line(tmp_path, capsys):
    from alphalite import cli

    assert cli.main(["rl-plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "metrics.jsonl: no such file" in err
