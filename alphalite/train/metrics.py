"""Move-prediction metrics (the seed papers' figures) and plots.

All functions take host numpy arrays. ``logp`` is masked log-probability
[B, A] (illegal points at -inf), ``moves`` the expert move [B].
"""

from __future__ import annotations

import os

import numpy as np

from alphalite.runtime import files

TOPK_MAX = 20
BUCKET = 25  # move-number bucket width for the accuracy-by-move-number table


def expert_rank(logp: np.ndarray, moves: np.ndarray) -> np.ndarray:
    """The expert move's rank [B], 1 = best, every tie ranked ahead of it:
    a policy that scores many moves alike (the pattern policies' unseen
    patterns, a blank net) must not be credited with them (counted in its
    favour, an all-zero policy would score 100% top-1)."""
    expert = logp[np.arange(len(moves)), moves]
    return (logp >= expert[:, None]).sum(axis=1)


class MovePredictionStats:
    """Accumulates top-k accuracy, mean rank, mean expert probability,
    accuracy by move-number bucket and on the last two moves of games.

    Positions whose expert move is a pass are counted but excluded from every
    accuracy figure, as Clark & Storkey do."""

    def __init__(self, num_actions: int):
        self.pass_move = num_actions - 1
        self.n = 0
        self.passes = 0
        self.topk_hits = np.zeros(TOPK_MAX, np.int64)
        self.rank_sum = 0.0
        self.prob_sum = 0.0
        self.nll_sum = 0.0
        self.illegal_top1 = 0
        self.bucket_hits: dict[int, int] = {}
        self.bucket_n: dict[int, int] = {}
        self.last2_hits = 0
        self.last2_n = 0

    def update(self, logp, moves, move_number, moves_left, legal=None):
        logp = np.asarray(logp, np.float64)
        moves = np.asarray(moves)
        keep = moves != self.pass_move
        self.passes += int((~keep).sum())
        if not keep.any():
            return
        logp, moves = logp[keep], moves[keep]
        move_number = np.asarray(move_number)[keep]
        moves_left = np.asarray(moves_left)[keep]
        rank = expert_rank(logp, moves)
        self.n += len(moves)
        for k in range(TOPK_MAX):
            self.topk_hits[k] += int((rank <= k + 1).sum())
        self.rank_sum += float(rank.sum())
        lp = logp[np.arange(len(moves)), moves]
        self.prob_sum += float(np.exp(lp).sum())
        self.nll_sum += float(-np.maximum(lp, -30.0).sum())
        top1 = logp.argmax(axis=1)
        if legal is not None:
            legal = np.asarray(legal)[keep]
            self.illegal_top1 += int((~legal[np.arange(len(top1)), top1]).sum())
        hit = rank == 1
        for b, h in zip(move_number // BUCKET, hit):
            b = int(b)
            self.bucket_n[b] = self.bucket_n.get(b, 0) + 1
            self.bucket_hits[b] = self.bucket_hits.get(b, 0) + int(h)
        last2 = moves_left < 2  # 0 = the record's last move
        self.last2_n += int(last2.sum())
        self.last2_hits += int(hit[last2].sum())

    def result(self) -> dict:
        n = max(self.n, 1)
        return {
            "positions": self.n,
            "passes_excluded": self.passes,
            "top1": self.topk_hits[0] / n,
            "top5": self.topk_hits[4] / n,
            "topk_curve": [float(x) / n for x in self.topk_hits],
            "mean_rank": self.rank_sum / n,
            "mean_prob": self.prob_sum / n,
            "nll": self.nll_sum / n,
            "illegal_top1": self.illegal_top1,
            "by_move_number": {
                f"{b * BUCKET + 1}-{(b + 1) * BUCKET}": {"n": self.bucket_n[b],
                                                        "top1": self.bucket_hits[b] / self.bucket_n[b]}
                for b in sorted(self.bucket_n)
            },
            "last_two_moves": {"n": self.last2_n, "top1": self.last2_hits / max(self.last2_n, 1)},
            "note": "accuracy over non-pass expert moves (as Clark & Storkey); "
                    "predictions restricted to legal moves",
        }


class WinnerStats:
    """MSE and winner-prediction accuracy, overall and per move number.

    ``update(v_black, winner, move_number)``: v_black [B] the predicted
    outcome for black in [-1, 1] (or a probability-like score centred on 0),
    winner [B] +1/-1."""

    def __init__(self):
        self.n = 0
        self.sq = 0.0
        self.hits = 0
        self.by_move: dict[int, list] = {}

    def update(self, v_black, winner, move_number):
        v = np.asarray(v_black, np.float64)
        w = np.asarray(winner, np.float64)
        hit = (v > 0) == (w > 0)
        sq = (v - w) ** 2
        self.n += len(v)
        self.sq += float(sq.sum())
        self.hits += int(hit.sum())
        for m, h, e in zip(np.asarray(move_number), hit, sq):
            b = self.by_move.setdefault(int(m), [0, 0, 0.0])
            b[0] += 1
            b[1] += int(h)
            b[2] += float(e)

    def result(self) -> dict:
        n = max(self.n, 1)
        return {"positions": self.n, "mse": self.sq / n, "accuracy": self.hits / n,
                "by_move": {str(m): {"n": b[0], "accuracy": b[1] / b[0], "mse": b[2] / b[0]}
                            for m, b in sorted(self.by_move.items())}}


class OwnershipScoreStats:
    """Final-ownership and final-score error of games with known targets,
    overall and per move number.

    ``update(own_pred, own_true, score_pred, score_true, move_number)``:
    own_* [B, H, W] from one side (pred in [-1, 1], true +1/-1/0), score_*
    [B] from the same side; rows with a NaN ``score_true`` (unknown) are
    skipped. Ownership accuracy: sign agreement over the points with an
    owner (neutral points left out); score error: mean absolute error."""

    def __init__(self):
        self.by_move: dict[int, list] = {}  # move -> [positions, points, hits, abs error]

    def update(self, own_pred, own_true, score_pred, score_true, move_number):
        known = np.isfinite(np.asarray(score_true, np.float64))
        op, ot = np.asarray(own_pred)[known], np.asarray(own_true)[known]
        err = np.abs(np.asarray(score_pred, np.float64)[known] - np.asarray(score_true, np.float64)[known])
        owned = ot != 0
        hits = ((op > 0) == (ot > 0)) & owned
        for m, pts, h, e in zip(np.asarray(move_number)[known], owned.sum((1, 2)), hits.sum((1, 2)), err):
            b = self.by_move.setdefault(int(m), [0, 0, 0, 0.0])
            b[0] += 1
            b[1] += int(pts)
            b[2] += int(h)
            b[3] += float(e)

    def result(self) -> dict:
        tot = np.sum(list(self.by_move.values()) or [[0, 0, 0, 0.0]], axis=0)
        return {"positions": int(tot[0]), "ownership_accuracy": tot[2] / max(tot[1], 1),
                "score_mae": tot[3] / max(tot[0], 1),
                "by_move": {str(m): {"n": b[0], "ownership_accuracy": b[2] / max(b[1], 1), "score_mae": b[3] / b[0]}
                            for m, b in sorted(self.by_move.items())}}


def _savefig_atomic(fig, path: str | os.PathLike) -> None:
    files.write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=100, bbox_inches="tight"))


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_topk(curve: list[float], path: str | os.PathLike, title: str = "top-k accuracy") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ks = np.arange(1, len(curve) + 1)
    ax.plot(ks, curve, marker="o")
    ax.set_xlabel("k")
    ax.set_ylabel("expert move in top k")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    _savefig_atomic(fig, path)
    plt.close(fig)


def plot_by_move_number(table: dict, path: str | os.PathLike) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = list(table)
    ax.bar(range(len(labels)), [table[k]["top1"] for k in labels])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, fontsize=7)
    ax.set_xlabel("move number")
    ax.set_ylabel("top-1 accuracy")
    ax.grid(alpha=0.3, axis="y")
    _savefig_atomic(fig, path)
    plt.close(fig)


def plot_curves(records: list[dict], path: str | os.PathLike, keys: list[str], ylabel: str) -> None:
    """Line plot of metrics.jsonl records: one line per key present."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key in keys:
        pts = [(r["step"], r[key]) for r in records if key in r and "step" in r]
        if pts:
            x, y = zip(*pts)
            ax.plot(x, y, label=key, marker="." if len(pts) < 50 else None)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    _savefig_atomic(fig, path)
    plt.close(fig)
