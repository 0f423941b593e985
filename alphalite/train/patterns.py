"""Training and evaluation of the pattern softmax policies
(``alphalite.go.patterns``) on a built dataset, replayed in Numba.

Both policies learn in the same pass over the games, by Adagrad on the
softmax cross-entropy of the expert move against every legal point. A
checkpoint (``state.npz`` in the work folder, rewritten atomically) holds
the table, the accumulators and the next game, so ``train`` resumes.
Exported folders (``export``) hold ``model.json`` and ``weights.npz`` with
the keys seen at least ``min_count`` times.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from alphalite.go import board, patterns as pt
from alphalite.runtime.kernels import njit



@njit(cache=True)
def _start(size, zob, setup_off, setup_pts, setup_cols, g, hist_cap):
    B = board.init_board(size, True, False, zob, hist_cap)
    s0, s1 = setup_off[g], setup_off[g + 1]
    if s1 > s0:
        board.set_up(B, setup_pts[s0:s1], setup_cols[s0:s1])
    return B


@njit(cache=True)
def _games(size, zob, move_off, moves, colors, setup_off, setup_pts, setup_cols, order, tab, w, acc, counts,
           lr, max_keys, kcount, train, stats, out_logits, out_moves):
    """Replay games ``order``; at each non-pass expert move score every legal
    point with both policies. ``train``: Adagrad step (new keys added while
    the table holds fewer than ``max_keys``, counted in ``kcount[0]``). ``stats`` [2, 2] += (positions,
    top-1 hits) per policy. With one game and ``out_logits`` [n, 2, A] the
    logits are stored (pass rows skipped; ``out_moves`` gets the expert
    move, -1 for passes). Returns positions scored."""
    W = size + 2
    A = size * size + 1
    keys = np.zeros((A, pt.MAX_KEYS), np.int64)
    slots = np.full((A, pt.MAX_KEYS), -1, np.int64)
    nk = np.zeros(A, np.int64)
    cand = np.zeros(A, np.int64)
    sc = np.zeros((2, A), np.float64)
    grad = np.zeros((2, tab.shape[0]), np.float32)
    touched = np.zeros(A * pt.MAX_KEYS, np.int64)
    done = 0
    for gi in range(order.shape[0]):
        g = order[gi]
        a, b = move_off[g], move_off[g + 1]
        B = _start(size, zob, setup_off, setup_pts, setup_cols, g, 2 * (b - a) + 64)
        S = pt.new_state(B)
        meta = B.meta
        color = B.color
        for i in range(a, b):
            stone = colors[i]
            board.set_to_play(B, stone)
            mv = moves[i]
            if out_moves.shape[0] > 0:
                out_moves[i - a] = -1
            if mv == size * size:
                pt.play(B, S, -1, stone)
                continue
            r = mv // size
            ep = (r + 1) * W + (mv - r * size) + 1
            if board.legal_code(color, B.head, B.nxt, B.libs, meta, B.hist, B.bloom, B.zob, ep, stone) != board.LEGAL:
                break
            nak = pt.nakade_point(S, W)
            n = 0
            expert = -1
            for r2 in range(size):
                for c2 in range(size):
                    p = (r2 + 1) * W + c2 + 1
                    if color[p] != board.EMPTY:
                        continue
                    if board.legal_code(color, B.head, B.nxt, B.libs, meta, B.hist, B.bloom, B.zob, p,
                                        stone) != board.LEGAL:
                        continue
                    if p == ep:
                        expert = n
                    cand[n] = r2 * size + c2
                    k = pt.features(B, S, p, stone, True, nak, keys[n])
                    nk[n] = k
                    for j in range(k):
                        s = pt.lookup(tab, keys[n, j])
                        if s < 0 and train and kcount[0] < max_keys:
                            s = pt.insert(tab, keys[n, j])
                            kcount[0] += 1
                        slots[n, j] = s
                    for m in range(2):
                        t = 0.0
                        for j in range(k):
                            s = slots[n, j]
                            if s >= 0 and (m == pt.TREE or (keys[n, j] >> pt.TYPE_SHIFT) <= pt.T_NAKADE):
                                t += w[m, s]
                        sc[m, n] = t
                    n += 1
            for m in range(2):
                best = 0
                for c in range(n):
                    if sc[m, c] > sc[m, best]:
                        best = c
                stats[m, 0] += 1
                if best == expert:
                    stats[m, 1] += 1
            done += 1
            if out_logits.shape[0] > 0:
                out_moves[i - a] = mv
                for m in range(2):
                    for c in range(A):
                        out_logits[i - a, m, c] = pt.NEG
                    for c in range(n):
                        out_logits[i - a, m, cand[c]] = sc[m, c]
            if train:
                nt = 0
                for m in range(2):
                    mx = sc[m, 0]
                    for c in range(n):
                        mx = max(mx, sc[m, c])
                    z = 0.0
                    for c in range(n):
                        z += np.exp(sc[m, c] - mx)
                    for c in range(n):
                        gc = np.exp(sc[m, c] - mx) / z - (1.0 if c == expert else 0.0)
                        for j in range(nk[c]):
                            s = slots[c, j]
                            if s < 0 or (m == pt.ROLLOUT and (keys[c, j] >> pt.TYPE_SHIFT) > pt.T_NAKADE):
                                continue
                            if grad[0, s] == 0 and grad[1, s] == 0:
                                touched[nt] = s
                                nt += 1
                            grad[m, s] += gc
                for t in range(nt):
                    s = touched[t]
                    counts[s] += 1
                    for m in range(2):
                        gs = grad[m, s]
                        acc[m, s] += gs * gs
                        w[m, s] -= lr * gs / np.sqrt(acc[m, s] + 1e-6)
                        grad[m, s] = 0.0
            pt.play(B, S, ep, stone)
    return done


def _load_split(data_dir, split, size):
    from alphalite.data import dataset

    games = dataset.load_games(data_dir, split, size)
    a = games.arrays
    return (a["move_offsets"], a["moves"].astype(np.int64), a["colors"].astype(np.int64), a["setup_offsets"],
            a["setup_points"].astype(np.int64), a["setup_colors"].astype(np.int8)), len(games)


EMPTY_LOGITS = np.zeros((0, 2, 1), np.float32)
EMPTY_MOVES = np.zeros(0, np.int64)


@njit(cache=True)
def _rehash(tab, w, acc, counts):
    """The table and its per-slot rows laid out again by ``patterns.insert``."""
    t2, w2, a2, c2 = np.zeros_like(tab), np.zeros_like(w), np.zeros_like(acc), np.zeros_like(counts)
    for j in range(tab.shape[0]):
        if tab[j] != 0:
            s = pt.insert(t2, tab[j])
            w2[:, s] = w[:, j]
            a2[:, s] = acc[:, j]
            c2[s] = counts[j]
    return t2, w2, a2, c2


def _save_state(path: Path, st: dict) -> None:
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **st)
    os.replace(tmp, path)


def train(data_dir, workdir, *, size: int = 19, games: int = 0, lr: float = 0.05, capacity_log2: int = 23,
          seed: int = 0, chunk: int = 200, save_every_s: float = 300.0, log=print) -> dict:
    """Train both policies on the train split (``games`` of them, 0 = all,
    in a seeded order), resuming from ``workdir/state.npz``."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    arrs, total = _load_split(data_dir, "train", size)
    order = np.random.default_rng(seed).permutation(total)
    if games:
        order = order[:games]
    ck = workdir / "state.npz"
    if ck.exists():
        with np.load(ck) as z:
            st = {k: z[k] for k in z.files}
        # the slots follow the key hash of the version that saved the state
        st["tab"], st["w"], st["acc"], st["counts"] = _rehash(st["tab"], st["w"], st["acc"], st["counts"])
        log(f"resuming at game {int(st['next'])} of {len(order)}")
    else:
        cap = 1 << capacity_log2
        st = {"tab": np.zeros(cap, np.int64), "w": np.zeros((2, cap), np.float32),
              "acc": np.zeros((2, cap), np.float32), "counts": np.zeros(cap, np.int64),
              "kcount": np.zeros(1, np.int64), "next": np.array(0), "stats": np.zeros((2, 2), np.int64),
              "positions": np.array(0)}
    zob = board.zobrist_table()
    max_keys = int(0.7 * st["tab"].shape[0])
    last_save = time.time()
    t0 = time.time()
    pos0 = int(st["positions"])
    while int(st["next"]) < len(order):
        a = int(st["next"])
        part = order[a:a + chunk]
        stats = np.zeros((2, 2), np.int64)
        n = _games(size, zob, *arrs, part, st["tab"], st["w"], st["acc"], st["counts"], lr, max_keys,
                   st["kcount"], True, stats, EMPTY_LOGITS, EMPTY_MOVES)
        st["next"] = np.array(a + len(part))
        st["positions"] = np.array(int(st["positions"]) + n)
        st["stats"] = stats
        rate = (int(st["positions"]) - pos0) / max(time.time() - t0, 1e-9)
        log(json.dumps({"games": int(st["next"]), "positions": int(st["positions"]), "keys": int(st["kcount"][0]),
                        "train_top1_rollout": round(stats[0, 1] / max(stats[0, 0], 1), 4),
                        "train_top1_tree": round(stats[1, 1] / max(stats[1, 0], 1), 4),
                        "positions_per_s": round(rate, 1)}))
        if time.time() - last_save > save_every_s:
            _save_state(ck, st)
            last_save = time.time()
    _save_state(ck, st)
    return {"games": int(st["next"]), "positions": int(st["positions"]), "keys": int(st["kcount"][0])}


def export(workdir, out_dir, *, policy: str, size: int = 19, min_count: int = 20) -> int:
    """Write ``out_dir/model.json`` and ``weights.npz`` from a training state."""
    with np.load(Path(workdir) / "state.npz") as z:
        tab, w, counts, positions = z["tab"], z["w"], z["counts"], int(z["positions"])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = pt.save(out / "weights.npz", tab, w, counts, min_count)
    info = {"model": "patterns", "kind": "policy", "policy": policy, "board_size": size,
            "weights": "weights.npz", "keys": n, "min_count": min_count, "trained_positions": positions}
    (out / "model.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return n


def evaluate(model_dir, info: dict, data_dir, split: str, max_games: int = 0) -> dict:
    """The eval-policy metrics (``train.metrics.MovePredictionStats``) of an
    exported pattern policy on a dataset split, replayed game by game so the
    previous moves and captures are known."""
    from alphalite.train import metrics

    size = int(info["board_size"])
    tab, w, row = pt.load_policy(model_dir, info)
    arrs, total = _load_split(data_dir, split, size)
    zob = board.zobrist_table()
    A = size * size + 1
    stats = metrics.MovePredictionStats(A)
    move_off = arrs[0]
    n_games = min(total, max_games) if max_games else total
    for g in range(n_games):
        nmov = int(move_off[g + 1] - move_off[g])
        out = np.zeros((nmov, 2, A), np.float32)
        mv = np.full(nmov, -1, np.int64)
        _games(size, zob, *arrs, np.array([g]), tab, w, w, np.zeros(0, np.int64), 0.0, 0, np.zeros(1, np.int64),
               False, np.zeros((2, 2), np.int64), out, mv)
        keep = mv >= 0
        if not keep.any():
            continue
        lg = out[keep, row].astype(np.float64)
        lg = lg - lg.max(axis=1, keepdims=True)
        logp = lg - np.log(np.exp(lg).sum(axis=1, keepdims=True))
        logp[out[keep, row] <= pt.NEG / 2] = -np.inf
        idx = np.flatnonzero(keep)
        stats.update(logp, mv[keep], idx, nmov - 1 - idx)
    return {"model": "patterns", "policy": info["policy"], "board_size": size, "split": split,
            "games": n_games, **stats.result()}


