"""Win rates, Bradley-Terry Elo, SPRT and the report, against known answers."""

import math

import numpy as np
import pytest

from alphalite.arena import ratings
from alphalite.arena.ratings import C, Sprt, fit_elo, wilson


def games(a, b, wins, losses, draws=0):
    return [(a, b, 1.0)] * wins + [(a, b, 0.0)] * losses + [(a, b, 0.5)] * draws


def test_wilson_known_values():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = wilson(0, 10)
    assert lo == 0 and hi == pytest.approx(0.2775, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)
    # a perfect score's interval reaches exactly 1 (an infinite Elo bound, not +6382)
    assert wilson(10, 10)[1] == 1.0 and ratings.elo_from_rate(wilson(10, 10)[1]) == math.inf
    assert wilson(0, 100)[0] == 0.0 and ratings.elo_from_rate(wilson(0, 100)[0]) == -math.inf


def test_two_player_mle_is_the_logit_of_the_win_rate():
    # 70 wins in 100: Elo difference 400 log10(0.7 / 0.3); standard error
    # 1 / (c sqrt(n p (1 - p))) with c = ln(10) / 400
    r = fit_elo(games("a", "b", 70, 30), anchor="b", prior=0)
    assert r["b"].elo == 0 and r["b"].se == 0
    assert r["a"].elo == pytest.approx(400 * math.log10(0.7 / 0.3), abs=1e-6)
    assert r["a"].se == pytest.approx(1 / (C * math.sqrt(100 * 0.7 * 0.3)), rel=1e-6)
    assert r["a"].lo < r["a"].elo < r["a"].hi
    # draws count half: 60 wins, 20 draws, 20 losses is a 70% score
    r2 = fit_elo(games("a", "b", 60, 20, 20), anchor="b", prior=0)
    assert r2["a"].elo == pytest.approx(r["a"].elo, abs=1e-6)
    # the anchor's rating shifts everything
    r3 = fit_elo(games("a", "b", 70, 30), anchor="b", anchor_elo=1500, prior=0)
    assert r3["a"].elo == pytest.approx(1500 + r["a"].elo)


def test_intervals_shrink_with_more_games():
    few = fit_elo(games("a", "b", 7, 3), anchor="b", prior=0)["a"]
    many = fit_elo(games("a", "b", 70, 30), anchor="b", prior=0)["a"]
    assert few.elo == pytest.approx(many.elo)
    assert many.hi - many.lo == pytest.approx((few.hi - few.lo) / math.sqrt(10), rel=1e-6)


def test_three_players_recover_true_ratings():
    rng = np.random.default_rng(0)
    true = {"a": 0.0, "b": 200.0, "c": -150.0}
    gs = []
    for x, y in (("a", "b"), ("a", "c"), ("b", "c")):
        p = ratings.rate_from_elo(true[x] - true[y])
        gs += [(x, y, float(rng.random() < p)) for _ in range(3000)]
    r = fit_elo(gs, anchor="a", prior=0)
    for name in ("b", "c"):
        assert abs(r[name].elo - true[name]) < 3 * r[name].se
        assert r[name].se < 20


def test_perfect_scores_need_a_prior():
    with pytest.raises(ratings.EloError):
        fit_elo(games("a", "b", 10, 0), anchor="b", prior=0)
    r = fit_elo(games("a", "b", 10, 0), anchor="b", prior=1)
    # one virtual draw: 10.5 / 11
    assert r["a"].elo == pytest.approx(400 * math.log10(10.5 / 0.5), abs=1e-6)


def test_unconnected_engines_are_left_out():
    r = fit_elo(games("a", "b", 3, 2) + games("c", "d", 1, 1), anchor="a", prior=0)
    assert set(r) == {"a", "b"}


def test_sprt_bounds_and_llr():
    s = Sprt.parse("elo0=0,elo1=35,alpha=0.05,beta=0.05")
    assert s.bounds == pytest.approx((math.log(0.05 / 0.95), math.log(0.95 / 0.05)))
    p1 = ratings.rate_from_elo(35)
    assert s.llr(3, 1) == pytest.approx(3 * math.log(p1 / 0.5) + math.log((1 - p1) / 0.5))
    assert s.llr(1, 1, 2) == pytest.approx(s.llr(2, 2))
    assert Sprt.parse("elo1=10") == Sprt(0.0, 10.0, 0.05, 0.05)
    for bad in ("elo0=10,elo1=5", "alpha=0.7", "foo=1", "elo1=x"):
        with pytest.raises(ValueError):
            Sprt.parse(bad)


def test_sprt_decision_is_the_first_crossing():
    """Games still in play when the SPRT decided (--jobs > 1) cannot undo it."""
    s = Sprt()

    def results(outcomes):  # "a" Black throughout: 1 a win, 0 a loss, in the order they finished
        return [{"status": "done", "black": "a", "white": "b", "winner_colour": "B" if x else "W"}
                for x in outcomes]

    assert s.state(53, 20)["decision"] == "accept H1" and s.state(53, 21)["decision"] == "continue"
    late = s.decide(results([1] * 53 + [0] * 20 + [0]), "a")  # decided at 31-0; the rest came after
    assert late["decision"] == "accept H1" and (late["wins"], late["losses"]) == (31, 0) and late["overshoot"] == 43
    mixed = s.decide(results([1, 0] * 30), "b")  # never crosses: the whole record, as state gives it
    assert mixed == {**s.state(30, 30), "overshoot": 0}


@pytest.mark.parametrize("true_elo,expect", [(150, "accept H1"), (-100, "accept H0")])
def test_sprt_decides_on_synthetic_streams(true_elo, expect):
    s = Sprt(0, 50, 0.05, 0.05)
    rng = np.random.default_rng(1)
    p = ratings.rate_from_elo(true_elo)
    w = l = 0
    for n in range(1, 5000):
        if rng.random() < p:
            w += 1
        else:
            l += 1
        st = s.state(w, l)
        if st["decision"] != "continue":
            break
    assert st["decision"] == expect
    assert n < 1000


def test_sprt_error_rates_roughly_hold():
    """Under H0 (Elo = elo0) the test should accept H1 in about alpha of runs."""
    s = Sprt(0, 100, 0.1, 0.1)
    rng = np.random.default_rng(2)
    wrong = 0
    for _ in range(200):
        w = l = 0
        while True:
            if rng.random() < 0.5:
                w += 1
            else:
                l += 1
            d = s.state(w, l)["decision"]
            if d != "continue":
                wrong += d == "accept H1"
                break
    assert wrong / 200 < 0.2


def test_report_table_and_plot(tmp_path):
    res = []
    for i in range(10):
        res.append({"status": "done", "game": f"x-{i}", "pairing": ["new", "gnugo"],
                    "black": "new" if i % 2 == 0 else "gnugo", "white": "gnugo" if i % 2 == 0 else "new",
                    "winner_colour": "B" if i < 7 else "W", "end": "resign", "moves": 60,
                    "cpu": {"new": 3.0, "gnugo": 1.0}, "think": {"new": 2.0, "gnugo": 0.5}})
    res.append({"status": "void", "game": "x-10", "attempt": 0, "error": "new: exited"})
    rows = ratings.pair_table(res)
    (row,) = rows
    # games 0,2,4,6 new as Black wins; 1,3,5 gnugo as Black wins; 7,9 new as White wins; 8 gnugo wins
    assert (row.a_wins, row.b_wins, row.black_wins, row.a_black_wins, row.a_black_games) == (6, 4, 7, 4, 5)
    out = ratings.write_report(tmp_path, res, anchor="gnugo", sprt=Sprt(0, 35), candidate="new",
                               settings={"size": 9, "komi": 7, "handicap": 0, "referee": "auto", "games": 10,
                                         "gauntlet": None, "engines": [{"name": "new", "command": "x", "time": ""},
                                                                       {"name": "gnugo", "command": "y"}]})
    md = (tmp_path / "report.md").read_text()
    assert "| new | gnugo | 10 | 6 | 4 |" in md and "1 void" in md and "SPRT" in md
    assert (tmp_path / "ratings.png").read_bytes()[:4] == b"\x89PNG"
    assert out["ratings"]["new"].elo == pytest.approx(400 * math.log10(6.5 / 4.5), abs=1e-6)
    assert "new" in out["text"] and "continue" in out["text"]
