"""Tournament statistics: win rates, Elo, SPRT, plot and report.

* **Win rates** per pairing with 95% Wilson score intervals (a draw counts
  half a win).
* **Elo** (``fit_elo``): maximum likelihood Bradley-Terry over all games,
  ``P(i beats j) = 1 / (1 + 10 ** ((r_j - r_i) / 400))``, one engine anchored
  at a fixed rating, draws as half a win and half a loss, fitted by Newton's
  method. ``prior`` virtual draws are added to every pairing that played (as
  BayesElo's prior does) so that a 10-0 pairing gets a finite rating; with
  ``prior=0`` it is the plain MLE (two players: ``400 * log10(p / (1 - p))``).
  Intervals: ``r_i +- 1.96 * se_i`` with the standard errors from the inverse
  of the observed Fisher information (minus the Hessian of the
  log-likelihood at the maximum, virtual draws included) over the free
  ratings; they are intervals relative to the anchor, which has none.
  For this logistic model the observed and expected information coincide.
* **SPRT** (``Sprt``): Wald's sequential test of H0: Elo = elo0 against
  H1: Elo = elo1 for a candidate against the current best, in the logistic
  model (the score rate of Elo ``e`` is ``1 / (1 + 10 ** (-e / 400))``),
  with the exact Bernoulli log-likelihood ratio
  ``LLR = W' ln(p1/p0) + L' ln((1-p1)/(1-p0))``, ``W' = W + D/2``,
  ``L' = L + D/2``; stop and accept H1 when ``LLR >= ln((1-beta)/alpha)``,
  accept H0 when ``LLR <= ln(beta/(1-alpha))``. (Go with half-point komi
  has no draws, so the draw model of cutechess's BayesElo variant is not
  needed; fishtest's bounds are the same.)
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from alphalite.runtime import files

Z95 = 1.959963984540054
C = math.log(10) / 400  # Elo -> natural-log odds


class EloError(ValueError):
    """No finite maximum-likelihood rating (see fit_elo)."""


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    # exact at the ends: a perfect score's interval reaches 1 (an infinite Elo), not 1 - 1e-16
    return (0.0 if k <= 0 else max(0.0, mid - half)), (1.0 if k >= n else min(1.0, mid + half))


def elo_from_rate(p: float) -> float:
    """Elo difference of a score rate (+-inf at 1 and 0)."""
    if p <= 0:
        return -math.inf
    if p >= 1:
        return math.inf
    return 400 * math.log10(p / (1 - p))


def rate_from_elo(elo: float) -> float:
    return 1 / (1 + 10 ** (-elo / 400))


# ------------------------------------------------------------------ games


def game_scores(results) -> list[tuple[str, str, float]]:
    """Finished games as (black, white, score of black: 1, 0.5 or 0)."""
    out = []
    for r in results:
        if r.get("status") != "done":
            continue
        wc = r.get("winner_colour")
        out.append((r["black"], r["white"], 1.0 if wc == "B" else 0.0 if wc == "W" else 0.5))
    return out


@dataclasses.dataclass(frozen=True)
class PairRow:
    a: str
    b: str
    games: int
    a_wins: int
    b_wins: int
    draws: int
    a_black_wins: int  # a's wins with Black
    a_black_games: int
    black_wins: int

    @property
    def rate(self) -> float:
        return (self.a_wins + self.draws / 2) / self.games if self.games else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.a_wins + self.draws / 2, self.games)


def pair_table(results, pairings=None) -> list[PairRow]:
    """One row per pairing (in ``pairings`` order if given)."""
    acc: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * 7)
    order = list(pairings or [])
    for r in results:
        if r.get("status") != "done":
            continue
        pair = tuple(r.get("pairing") or (r["black"], r["white"]))
        if pair not in acc and pair not in order:
            order.append(pair)
        a, b = pair
        row = acc[pair]
        row[0] += 1
        wc = r.get("winner_colour")
        winner = r["black"] if wc == "B" else r["white"] if wc == "W" else None
        if winner == a:
            row[1] += 1
        elif winner == b:
            row[2] += 1
        else:
            row[3] += 1
        if r["black"] == a:
            row[5] += 1
            row[4] += winner == a
        row[6] += wc == "B"
    return [PairRow(a, b, *acc[(a, b)]) for a, b in order if acc[(a, b)][0]]


# ------------------------------------------------------------------ Elo


@dataclasses.dataclass(frozen=True)
class Rating:
    name: str
    elo: float
    se: float  # 0 for the anchor
    games: int
    score: float  # points (draw = 0.5)

    @property
    def lo(self) -> float:
        return self.elo - Z95 * self.se

    @property
    def hi(self) -> float:
        return self.elo + Z95 * self.se


def fit_elo(games, anchor: str, anchor_elo: float = 0.0, prior: float = 1.0,
            max_iter: int = 200) -> dict[str, Rating]:
    """Bradley-Terry MLE from (a, b, score of a) triples; see the module
    docstring. Engines with no chain of games to the anchor are left out.
    Raises EloError when the maximum is at infinity (prior 0 and an engine
    that won or lost every game)."""
    games = list(games)
    adj = defaultdict(set)
    stats = defaultdict(lambda: [0, 0.0])
    for a, b, s in games:
        adj[a].add(b)
        adj[b].add(a)
        stats[a][0] += 1
        stats[a][1] += s
        stats[b][0] += 1
        stats[b][1] += 1 - s
    if anchor not in adj:
        return {}
    seen, todo = {anchor}, [anchor]
    while todo:
        for m in adj[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    names = [anchor] + sorted(seen - {anchor})
    idx = {n: i for i, n in enumerate(names)}
    pairs: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0])  # n, score of the first
    for a, b, s in games:
        if a not in idx:
            continue
        i, j = idx[a], idx[b]
        if i > j:
            i, j, s = j, i, 1 - s
        pairs[(i, j)][0] += 1
        pairs[(i, j)][1] += s
    pi = np.array([k[0] for k in pairs], np.int64)
    pj = np.array([k[1] for k in pairs], np.int64)
    n = np.array([v[0] for v in pairs.values()]) + prior
    s = np.array([v[1] for v in pairs.values()]) + prior / 2
    k = len(names)
    r = np.zeros(k)

    def info_and_grad(r):
        p = 1 / (1 + np.exp(-C * (r[pi] - r[pj])))
        g = np.zeros(k)
        np.add.at(g, pi, C * (s - n * p))
        np.add.at(g, pj, -C * (s - n * p))
        w = C * C * n * p * (1 - p)
        F = np.zeros((k, k))
        np.add.at(F, (pi, pi), w)
        np.add.at(F, (pj, pj), w)
        np.add.at(F, (pi, pj), -w)
        np.add.at(F, (pj, pi), -w)
        return F[1:, 1:], g[1:]

    converged = k == 1
    for _ in range(max_iter if k > 1 else 0):
        F, g = info_and_grad(r)
        try:
            step = np.linalg.solve(F, g)
        except np.linalg.LinAlgError:
            break
        big = np.abs(step).max()
        if big > 400:  # far from the maximum the quadratic model overshoots
            step *= 400 / big
        r[1:] += step
        if big < 1e-7:
            converged = True
            break
        if np.abs(r).max() > 20000:
            break
    if not converged:
        raise EloError("no finite maximum-likelihood Elo: an engine won or lost all its games "
                       "(use prior > 0)")
    se = np.zeros(k)
    if k > 1:
        F, _ = info_and_grad(r)
        cov = np.linalg.inv(F)
        se[1:] = np.sqrt(np.clip(np.diag(cov), 0, None))
    return {nm: Rating(nm, float(r[i] + anchor_elo), float(se[i]), stats[nm][0], stats[nm][1])
            for nm, i in idx.items()}


# ------------------------------------------------------------------ SPRT


@dataclasses.dataclass(frozen=True)
class Sprt:
    elo0: float = 0.0
    elo1: float = 35.0
    alpha: float = 0.05
    beta: float = 0.05

    @classmethod
    def parse(cls, text: str) -> "Sprt":
        """``elo0=0,elo1=35,alpha=0.05,beta=0.05`` (any subset; the rest default)."""
        kw = {}
        for part in filter(None, (x.strip() for x in text.split(","))):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in ("elo0", "elo1", "alpha", "beta"):
                raise ValueError(f"SPRT settings are elo0=,elo1=,alpha=,beta=; got {part!r}")
            try:
                kw[key] = float(value)
            except ValueError:
                raise ValueError(f"SPRT {key} must be a number, got {value!r}") from None
        t = cls(**kw)
        if not t.elo1 > t.elo0:
            raise ValueError("SPRT needs elo1 > elo0")
        if not (0 < t.alpha < 0.5 and 0 < t.beta < 0.5):
            raise ValueError("SPRT alpha and beta must be in (0, 0.5)")
        return t

    @property
    def bounds(self) -> tuple[float, float]:
        return math.log(self.beta / (1 - self.alpha)), math.log((1 - self.beta) / self.alpha)

    def llr(self, wins: float, losses: float, draws: float = 0) -> float:
        p0, p1 = rate_from_elo(self.elo0), rate_from_elo(self.elo1)
        w, l = wins + draws / 2, losses + draws / 2
        return w * math.log(p1 / p0) + l * math.log((1 - p1) / (1 - p0))

    def state(self, wins: int, losses: int, draws: int = 0) -> dict:
        lo, hi = self.bounds
        llr = self.llr(wins, losses, draws)
        decision = "accept H1" if llr >= hi else "accept H0" if llr <= lo else "continue"
        return {"decision": decision, "llr": llr, "lower": lo, "upper": hi, "wins": wins, "losses": losses,
                "draws": draws, "elo0": self.elo0, "elo1": self.elo1, "alpha": self.alpha, "beta": self.beta}

    def decide(self, results, candidate: str) -> dict:
        """``state`` of ``candidate``'s finished games in the order they
        finished, stopped at the first crossing of a bound: games that were
        still running when it decided (``--jobs`` > 1) cannot undo it
        (``overshoot`` counts them)."""
        scores = [s if b == candidate else 1 - s for b, w, s in game_scores(results) if candidate in (b, w)]
        wld = [0, 0, 0]
        for k, mine in enumerate(scores, 1):
            wld[0 if mine == 1 else 1 if mine == 0 else 2] += 1
            st = self.state(*wld)
            if st["decision"] != "continue":
                return {**st, "overshoot": len(scores) - k}
        return {**self.state(*wld), "overshoot": 0}


# ------------------------------------------------------------------ plot and report


def plot_ratings(ratings: dict[str, Rating], path, title: str = "Elo (95% interval)") -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(ratings.values(), key=lambda x: x.elo)
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.45 * len(rows)))
    y = np.arange(len(rows))
    ax.errorbar([x.elo for x in rows], y, xerr=[Z95 * x.se for x in rows], fmt="o", capsize=4)
    ax.set_yticks(y, [x.name for x in rows])
    ax.set_xlabel("Elo")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return str(path)


def _elo(v: float) -> str:
    if math.isinf(v):
        return "-inf" if v < 0 else "+inf"
    s = f"{v:.0f}"
    return "0" if s == "-0" else s


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def write_report(out, results, *, anchor: str, anchor_elo: float = 0.0, sprt: Sprt | None = None,
                 candidate: str | None = None, settings: dict | None = None, prior: float = 1.0) -> dict:
    """report.md, ratings.png and ratings.json in ``out``; returns the paths,
    the ratings and a plain-text table for the terminal."""

    out = Path(out)
    done = [r for r in results if r.get("status") == "done"]
    voids = [r for r in results if r.get("status") == "void"]
    stopped = [r for r in results if r.get("status") == "stopped"]
    rows = pair_table(done)
    try:
        ratings = fit_elo(game_scores(done), anchor, anchor_elo, prior=prior)
        elo_note = ""
    except EloError as e:
        ratings, elo_note = {}, str(e)

    text = []
    width = max([len(x) for r in rows for x in (r.a, r.b)] + [6])
    text.append(f"{'pairing':<{2 * width + 4}} {'games':>5} {'wins':>9} {'win rate (95%)':>24} {'black wins':>10}")
    for r in rows:
        lo, hi = r.interval
        text.append(f"{r.a:<{width}} vs {r.b:<{width}} {r.games:>5} {r.a_wins:>4}-{r.b_wins:<4} "
                    f"{_pct(r.rate):>7} [{_pct(lo)}, {_pct(hi)}] {r.black_wins:>10}")
    if ratings:
        text.append("")
        text.append(f"{'engine':<{width}} {'games':>5} {'score':>7} {'Elo':>7} {'95% interval':>18}")
        for x in sorted(ratings.values(), key=lambda x: -x.elo):
            iv = "(anchor)" if x.name == anchor else f"[{_elo(x.lo)}, {_elo(x.hi)}]"
            text.append(f"{x.name:<{width}} {x.games:>5} {_pct(x.score / max(x.games, 1)):>7} "
                        f"{_elo(x.elo):>7} {iv:>18}")
    elif elo_note:
        text.append(elo_note)
    sprt_state = None
    if sprt is not None and candidate:
        sprt_state = sprt.decide(done, candidate)
        n = sprt_state["wins"] + sprt_state["losses"] + sprt_state["draws"]
        text.append(f"SPRT {candidate}: {sprt_state['decision']}, LLR {sprt_state['llr']:.2f} in "
                    f"[{sprt_state['lower']:.2f}, {sprt_state['upper']:.2f}] after {n} games"
                    + (f" ({sprt_state['overshoot']} more were in play when it decided)"
                       if sprt_state["overshoot"] else ""))
    if voids or stopped:
        text.append(f"{len(voids)} void games (replayed); " + (
            "stopped pairings: " + "; ".join(f"{' vs '.join(s['pairing'])} ({s.get('error')})" for s in stopped)
            if stopped else "no pairing stopped"))

    plot = None
    if ratings:
        plot = plot_ratings(ratings, out / "ratings.png")

    md = ["# Arena report", ""]
    if settings:
        md.append(f"Board {settings.get('size')}x{settings.get('size')}, komi {settings.get('komi')}, "
                  f"handicap {settings.get('handicap')}, referee `{settings.get('referee')}`, "
                  f"{'gauntlet of ' + settings['gauntlet'] if settings.get('gauntlet') else 'round-robin'}, "
                  f"{settings.get('games')} games per pairing.")
        md.append("")
        md.append("| engine | command | time settings |")
        md.append("| --- | --- | --- |")
        for e in settings.get("engines", []):
            md.append(f"| {e['name']} | `{e['command']}` | {e.get('time') or '-'} |")
        md.append("")
    md.append(f"{len(done)} finished games, {len(voids)} void (replayed).")
    md.append("")
    md.append("## Pairings")
    md.append("")
    md.append("| A | B | games | A wins | B wins | draws | A win rate | 95% interval (Wilson) | "
              "A - B in Elo (same interval) | A wins as Black | Black wins |")
    md.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |")
    for r in rows:
        lo, hi = r.interval
        md.append(f"| {r.a} | {r.b} | {r.games} | {r.a_wins} | {r.b_wins} | {r.draws} | {_pct(r.rate)} | "
                  f"{_pct(lo)} - {_pct(hi)} | {_elo(elo_from_rate(lo))} to {_elo(elo_from_rate(hi))} | "
                  f"{r.a_black_wins}/{r.a_black_games} | {r.black_wins} |")
    md.append("")
    md.append("## Elo")
    md.append("")
    if ratings:
        md.append(f"Bradley-Terry maximum likelihood over all games, `{anchor}` anchored at {anchor_elo:g}, "
                  f"{prior:g} virtual draw(s) per pairing; 95% intervals from the observed Fisher information "
                  "(relative to the anchor). With few games, or an engine that won or lost every game, the "
                  "virtual draws pull ratings towards each other: read the Wilson intervals above then.")
        md.append("")
        md.append("| engine | games | score | Elo | 95% interval |")
        md.append("| --- | ---: | ---: | ---: | --- |")
        for x in sorted(ratings.values(), key=lambda x: -x.elo):
            iv = "anchor" if x.name == anchor else f"{_elo(x.lo)} to {_elo(x.hi)}"
            md.append(f"| {x.name} | {x.games} | {_pct(x.score / max(x.games, 1))} | {_elo(x.elo)} | {iv} |")
        md.append("")
        md.append("![ratings](ratings.png)")
    else:
        md.append(elo_note or "No games connect to the anchor yet.")
    md.append("")
    if sprt_state:
        md.append("## SPRT")
        md.append("")
        md.append(f"`{candidate}` against the other engine: H0 Elo = {sprt.elo0:g}, H1 Elo = {sprt.elo1:g}, "
                  f"alpha {sprt.alpha:g}, beta {sprt.beta:g} (logistic model). W/L/D "
                  f"{sprt_state['wins']}/{sprt_state['losses']}/{sprt_state['draws']}, LLR "
                  f"{sprt_state['llr']:.3f}, bounds [{sprt_state['lower']:.3f}, {sprt_state['upper']:.3f}]: "
                  f"**{sprt_state['decision']}**.")
        md.append("")
    md.append("## Games")
    md.append("")
    ends = defaultdict(int)
    disagree = defaultdict(int)
    cpu = defaultdict(list)
    think = defaultdict(list)
    for r in done:
        ends[r.get("end", "?")] += 1
        for nm in r.get("disagree") or []:
            disagree[nm] += 1
        for nm, v in (r.get("cpu") or {}).items():
            if v is not None:
                cpu[nm].append(v)
        for nm, v in (r.get("think") or {}).items():
            think[nm].append(v / max(r.get("moves", 1) / 2, 1))
    md.append("Endings: " + (", ".join(f"{k} {v}" for k, v in sorted(ends.items())) or "none") + ".")
    md.append("")
    unrefereed = [r["game"] for r in done if r.get("referee_error")]
    if unrefereed:  # counted as the board stood: the referee failed on them
        md.append(f"Referee failed, counted as the board stood: {', '.join(unrefereed)}.")
        md.append("")
    md.append("Engines' own `final_score` disagreeing with the arena's result (games scored after passes): "
              + (", ".join(f"{k} {v}" for k, v in sorted(disagree.items())) or "none") + ".")
    md.append("")
    if cpu:
        md.append("| engine | mean CPU s per game | mean wall s per move |")
        md.append("| --- | ---: | ---: |")
        for nm in sorted(cpu):
            md.append(f"| {nm} | {np.mean(cpu[nm]):.1f} | {np.mean(think[nm]) if think[nm] else 0:.2f} |")
        md.append("")
    if voids or stopped:
        md.append("## Voids")
        md.append("")
        for r in voids:
            md.append(f"- {r['game']} attempt {r.get('attempt')}: {r.get('error')}")
        for s in stopped:
            md.append(f"- pairing {' vs '.join(s['pairing'])} stopped after two voids in a row: {s.get('error')}")
        md.append("")
    md_path = out / "report.md"
    tmp = md_path.with_name(".report.md.tmp")
    tmp.write_text("\n".join(md))
    tmp.replace(md_path)
    files.write_json_atomic(out / "ratings.json", {
        "anchor": anchor, "anchor_elo": anchor_elo, "prior": prior,
        "ratings": {k: {"elo": v.elo, "se": v.se, "lo": v.lo, "hi": v.hi, "games": v.games, "score": v.score}
                    for k, v in ratings.items()},
        "pairings": [dict(dataclasses.asdict(r), rate=r.rate, interval=list(r.interval)) for r in rows],
        "sprt": sprt_state})
    return {"text": "\n".join(text), "markdown": str(md_path), "plot": plot, "ratings": ratings,
            "sprt": sprt_state}
