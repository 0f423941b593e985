"""AlphaGo's rollout and tree policies: linear softmax over local features,
kept up to date incrementally in Numba (Methods, Extended Data Table 4).

Features of a candidate empty point ``p`` for the player to move, each a
64-bit key (type in the top byte):

- ``T_PAT3``: the 3x3 pattern around ``p``: each of the 8 neighbours empty,
  wall, own or opponent with 1/2/3+ liberties (3 bits each), canonical (the
  least code) under the 8 symmetries;
- ``T_SAVE``: ``p`` is the last liberty of an own group and playing it gives
  that group two or more liberties (save-atari);
- ``T_NBR``: ``p`` is 8-connected to the previous move;
- ``T_RESP``: the 12-point diamond around the previous move with ``p``'s
  place in it, canonical under the 8 symmetries (the response pattern);
- ``T_NAKADE``: the previous move captured 3-6 stones and ``p`` is the
  vital point (most neighbours inside) of the space they left;
- tree policy only: ``T_SELFATARI`` and ``T_DIST1``/``T_DIST2``, the
  Manhattan distance to the previous two moves (capped at ``DIST_CAP``).

The raw (unreduced) 3x3 codes of every empty point, for both colours to move, live in
``codes[2, P]`` of a *pattern tuple* ``S`` beside the board tuple; ``play``
updates them only where a move changed something: around the move, around
captured stones, and where a group's liberty bucket changed, the one cell
that shows each of its stones in the codes of the empty points beside it.

Weights: one open-addressing table of keys with two weight rows (rollout,
tree); unknown keys weigh 0. Training uses canonical keys; ``save`` stores
those seen in training (npz, float16 weights) and ``load`` adds each
pattern's 8 symmetric images, so the search looks raw codes up directly.
``rollout_tables`` lays the rollout row out again for ``rollout`` (3x3
gammas in a small table, response gammas grouped by diamond).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from alphalite.go.board import (
    EMPTY, LEGAL, M_NEMPTY, M_PASSES, M_SIZE,
    M_TOPLAY, M_LAST, WALL, borrow, borrowed, do_pass, is_eye, is_self_atari, lcg_rand, legal_code, neighbour,
    neighbour_stones, place)
from alphalite.go.tactics import bad_self_atari, touching
from alphalite.runtime.kernels import njit

T_PAT3, T_SAVE, T_NBR, T_RESP, T_NAKADE, T_SELFATARI, T_DIST1, T_DIST2 = 1, 2, 3, 4, 5, 6, 7, 8
TYPE_SHIFT = 56
ROLLOUT, TREE = 0, 1
MAX_KEYS = 8
DIST_CAP = 12
NEG = -1e30

# 8 neighbours (row-major 3x3 without the centre) and the 12-point diamond.
OFF8 = np.array([(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)], np.int64)
OFF12 = np.array([(-2, 0), (-1, -1), (-1, 0), (-1, 1), (0, -2), (0, -1), (0, 1), (0, 2), (1, -1), (1, 0),
                  (1, 1), (2, 0)], np.int64)


def _sym(r, c, s):
    if s & 4:
        r, c = c, r
    if s & 1:
        r = -r
    if s & 2:
        c = -c
    return r, c


def _perm(offs):
    idx = {tuple(o): i for i, o in enumerate(offs.tolist())}
    return np.array([[idx[_sym(r, c, s)] for r, c in offs.tolist()] for s in range(8)], np.int64)


PERM8 = _perm(OFF8)  # PERM8[s, i]: where neighbour i goes under symmetry s
PERM12 = _perm(OFF12)

# ---------------------------------------------------------------- state


@njit(cache=True)
def new_state(B):
    """The pattern tuple for board tuple ``B``: (codes [2, P] int64, caps
    [P] int16, pm int64[4] = (captures of the last move, previous move,
    the one before, update generation), mark [P], ver [P]: the generation
    each point's code was last refreshed at). Codes are computed in
    full here; ``play`` keeps them current."""
    P = B.color.shape[0]
    pm = np.zeros(4, np.int64)
    pm[1] = -1
    pm[2] = -1
    S = (np.full((2, P), -1, np.int64), np.zeros(P, np.int16), pm, np.zeros(P, np.int64), np.zeros(P, np.int64))
    recompute(B, S)
    return S


@njit(cache=True)
def state_for(B):
    """``new_state(B)`` with the previous two moves taken from the board's
    record (the captures of the last move are not known there, so no nakade
    feature on the first move)."""
    S = new_state(B)
    meta = B.meta
    size = meta[M_SIZE]
    for k in range(2):
        m = meta[M_LAST + k]
        S[2][1 + k] = -1 if m < 0 or m >= size * size else (m // size + 1) * (size + 2) + m % size + 1
    return S


@njit(cache=True)
def copy_state(dst, src):
    dst[0][:] = src[0]
    dst[1][:] = src[1]
    dst[2][:] = src[2]
    dst[3][:] = src[3]
    dst[4][:] = src[4]


@njit(cache=True, inline="always")
def _cell(color, head, libs, q, stone):
    c = color[q]
    if c == EMPTY:
        return 0
    if c == WALL:
        return 1
    n = libs[head[q]]
    k = 2 if n <= 1 else (3 if n == 2 else 4)
    return k if c == stone else k + 3


@njit(cache=True, inline="always")
def raw3(color, head, libs, p, stone, W):
    """The 3x3 code of ``p`` for ``stone`` to move, as the board lies."""
    code = np.int64(0)
    for i in range(8):
        code |= np.int64(_cell(color, head, libs, p + OFF8[i, 0] * W + OFF8[i, 1], stone)) << (3 * i)
    return code


@njit(cache=True)
def sym3(raw, s):
    """``raw`` 3x3 code under symmetry ``s``."""
    code = np.int64(0)
    for i in range(8):
        code |= ((raw >> (3 * i)) & 7) << (3 * PERM8[s, i])
    return code


@njit(cache=True)
def canon3(raw):
    """The least code of ``raw``'s 8 symmetric images."""
    best = raw
    for s in range(1, 8):
        c = sym3(raw, s)
        if c < best:
            best = c
    return best


@njit(cache=True)
def pat3(color, head, libs, p, stone, W):
    """Canonical 3x3 code of empty ``p`` for ``stone`` to move."""
    return canon3(raw3(color, head, libs, p, stone, W))


@njit(cache=True, inline="always")
def _refresh(color, head, libs, codes, ver, stamp, q, W):
    if ver[q] == stamp:  # already brought up to date by this move
        return
    ver[q] = stamp
    if color[q] == EMPTY:
        # both colours' codes in one pass: a stone is own for one, the opponent's for the other
        black = np.int64(0)
        white = np.int64(0)
        for i in range(8):
            n = q + OFF8[i, 0] * W + OFF8[i, 1]
            c = color[n]
            if c == EMPTY:
                continue
            if c == WALL:
                black |= np.int64(1) << (3 * i)
                white |= np.int64(1) << (3 * i)
                continue
            k = _bucket(libs[head[n]]) + 1
            black |= np.int64(k if c == 1 else k + 3) << (3 * i)
            white |= np.int64(k + 3 if c == 1 else k) << (3 * i)
        codes[0, q] = black
        codes[1, q] = white
    elif color[q] != WALL:
        codes[0, q] = -1
        codes[1, q] = -1


@njit(cache=True)
def recompute(B, S):
    """All codes from scratch (the reference ``play``'s update is tested against)."""
    color, head, libs = B.color, B.head, B.libs
    W = B.meta[M_SIZE] + 2
    S[2][3] += 1
    for q in range(color.shape[0]):
        if color[q] != WALL:
            _refresh(color, head, libs, S[0], S[4], S[2][3], q, W)


@njit(cache=True, inline="always")
def _refresh_around(color, head, libs, codes, ver, stamp, p, W):
    _refresh(color, head, libs, codes, ver, stamp, p, W)
    for i in range(8):
        q = p + OFF8[i, 0] * W + OFF8[i, 1]
        if color[q] != WALL:
            _refresh(color, head, libs, codes, ver, stamp, q, W)


@njit(cache=True)
def _patch_group(color, head, nxt, libs, codes, mark, gen, g, W):
    # Group g's liberty bucket changed: only the cells that show its stones
    # change in the codes of the empty points around it (8-neighbour i of a
    # point sees it as neighbour 7 - i).
    if mark[g] == gen:
        return
    mark[g] = gen
    k = np.int64(_bucket(libs[g]) + 1)
    vb = k if color[g] == 1 else k + 3
    vw = k + 3 if color[g] == 1 else k
    q = g
    while True:
        for j in range(8):
            e = q + OFF8[j, 0] * W + OFF8[j, 1]
            if color[e] == EMPTY:
                sh = 3 * (7 - j)
                keep = ~(np.int64(7) << sh)
                codes[0, e] = (codes[0, e] & keep) | (vb << sh)
                codes[1, e] = (codes[1, e] & keep) | (vw << sh)
        q = nxt[q]
        if q == g:
            break


@njit(cache=True)
def play(B, S, p, stone):
    """Play legal ``stone`` at padded ``p`` (-1: pass) on ``B`` and bring
    the pattern tuple ``S`` up to date."""
    B = borrowed(B)  # no reference counting in the many small calls below
    pm = borrow(S[2])
    pm[2] = pm[1]
    pm[1] = p
    pm[0] = 0
    if p < 0:
        do_pass(B)
        return
    color, head, nxt, libs = B.color, B.head, B.nxt, B.libs
    W = B.meta[M_SIZE] + 2
    caps = borrow(S[1])
    n = neighbour_stones(color, head, nxt, libs, p, W, -stone, True, caps, 0)  # what it captures, before they go
    # liberty buckets (1, 2, 3+) of the four neighbours' groups before the move:
    # a group whose bucket stays the same changes no code away from p
    before = 0  # 2 bits a neighbour (no allocation: play runs every rollout move)
    for i in range(4):
        q = neighbour(p, W, i)
        if color[q] == 1 or color[q] == -1:
            before |= _bucket(libs[head[q]]) << (2 * i)
    place(B, p, stone)
    pm[0] = n
    codes, mark, ver = borrow(S[0]), borrow(S[3]), borrow(S[4])
    pm[3] += 1
    gen = pm[3]
    _refresh_around(color, head, libs, codes, ver, gen, p, W)
    for i in range(4):
        q = neighbour(p, W, i)
        if (color[q] == 1 or color[q] == -1) and _bucket(libs[head[q]]) != (before >> (2 * i)) & 3:
            _patch_group(color, head, nxt, libs, codes, mark, gen, head[q], W)
    for j in range(n):
        c = caps[j]
        _refresh_around(color, head, libs, codes, ver, gen, c, W)
        for i in range(4):
            q = neighbour(c, W, i)
            if color[q] == 1 or color[q] == -1:
                _patch_group(color, head, nxt, libs, codes, mark, gen, head[q], W)


@njit(cache=True, inline="always")
def _bucket(n):
    return 1 if n <= 1 else (2 if n == 2 else 3)


# ---------------------------------------------------------------- features


@njit(cache=True, inline="always")
def save_atari(B, p, stone):
    """``p`` is the last liberty of an own group, and playing there leaves
    the group two or more liberties (captures counted)."""
    color, head, libs = B.color, B.head, B.libs
    W = B.meta[M_SIZE] + 2
    for i in range(4):
        q = neighbour(p, W, i)
        if color[q] == stone and libs[head[q]] == 1:
            return not is_self_atari(B, p, stone, False)
    return False


@njit(cache=True, inline="always")
def response(color, head, libs, m, p, stone, W, canon=True):
    """Code of the diamond around previous move ``m`` with ``p``'s place in
    it (canonical, or raw as the board lies), or -1 if ``p`` is not in it."""
    # one division per point (this runs for every candidate of every position)
    mr, mc = m // W, m % W
    return _response(color, head, libs, mr, mc, p // W - mr, p % W - mc, stone, W, canon)


@njit(cache=True, inline="always")
def _response(color, head, libs, mr, mc, dr, dc, stone, W, canon):
    if abs(dr) + abs(dc) > 2 or (dr == 0 and dc == 0):
        return np.int64(-1)
    k = 0
    for i in range(12):
        if OFF12[i, 0] == dr and OFF12[i, 1] == dc:
            k = i
    raw = np.int64(k) << 36
    for i in range(12):
        r = mr + OFF12[i, 0]
        c = mc + OFF12[i, 1]
        v = 1 if (r < 0 or c < 0 or r >= W or c >= W) else _cell(color, head, libs, r * W + c, stone)
        raw |= np.int64(v) << (3 * i)
    return canon12(raw) if canon else raw


@njit(cache=True)
def sym12(raw, s):
    code = PERM12[s, (raw >> 36) & 15] << 36
    for i in range(12):
        code |= ((raw >> (3 * i)) & 7) << (3 * PERM12[s, i])
    return code


@njit(cache=True)
def canon12(raw):
    best = raw
    for s in range(1, 8):
        c = sym12(raw, s)
        if c < best:
            best = c
    return best


@njit(cache=True, inline="always")
def nakade_point(S, W):
    """The vital point of the space the last move's 3-6 captured stones
    left (most 4-neighbours inside it, if unique), or -1."""
    n = S[2][0]
    if n < 3 or n > 6:
        return -1
    caps = S[1]
    best = -1
    best_k = -1
    tie = False
    for a in range(n):
        k = touching(caps, n, a, W)
        if k > best_k:
            best, best_k, tie = caps[a], k, False
        elif k == best_k:
            tie = True
    return -1 if tie else best


@njit(cache=True, inline="always")
def _key(t, code):
    return (np.int64(t) << TYPE_SHIFT) | code


@njit(cache=True, inline="always")
def _dist(a, pr, pc, W):
    if a < 0:
        return DIST_CAP
    d = abs(a // W - pr) + abs(a % W - pc)
    return d if d < DIST_CAP else DIST_CAP


@njit(cache=True, inline="always")
def features(B, S, p, stone, tree, nak, keys, raw=False):
    """The keys of candidate empty ``p`` for ``stone`` into ``keys``; returns
    how many. ``nak``: ``nakade_point(S, W)``, computed once a position.
    ``raw``: pattern keys as the board lies (for a table from ``load``)."""
    color, head, libs = B.color, B.head, B.libs
    W = B.meta[M_SIZE] + 2
    pr, pc = p // W, p % W
    n = 0
    code = S[0][0 if stone == 1 else 1, p]
    keys[n] = _key(T_PAT3, code if raw else canon3(code))
    n += 1
    if save_atari(B, p, stone):
        keys[n] = _key(T_SAVE, 0)
        n += 1
    m = S[2][1]
    if m >= 0:
        mr, mc = m // W, m % W
        if abs(pr - mr) <= 1 and abs(pc - mc) <= 1:
            keys[n] = _key(T_NBR, 0)
            n += 1
        r = _response(color, head, libs, mr, mc, pr - mr, pc - mc, stone, W, not raw)
        if r >= 0:
            keys[n] = _key(T_RESP, r)
            n += 1
    if p == nak:
        keys[n] = _key(T_NAKADE, 0)
        n += 1
    if tree:
        if is_self_atari(B, p, stone, False):
            keys[n] = _key(T_SELFATARI, 0)
            n += 1
        keys[n] = _key(T_DIST1, _dist(m, pr, pc, W))
        n += 1
        keys[n] = _key(T_DIST2, _dist(S[2][2], pr, pc, W))
        n += 1
    return n


# ---------------------------------------------------------------- weights


@njit(cache=True, inline="always")
def _slot0(key, mask):
    # Unsigned: Numba multiplies signed integers with LLVM's no-signed-wrap
    # flag, so an overflowing product is undefined, and where LLVM knew
    # something of the key (a _key(...) built in the same kernel) it hashed
    # the key to another slot than the table's own inserts had.
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)) & mask


@njit(cache=True, inline="always")
def lookup(tab, key):
    """Slot of ``key`` in key table ``tab`` (0 = free slot), or -1."""
    mask = tab.shape[0] - 1
    s = _slot0(key, mask)
    while True:
        k = tab[s]
        if k == key:
            return s
        if k == 0:
            return -1
        s = (s + 1) & mask


@njit(cache=True)
def insert(tab, key):
    """Slot of ``key``, added if new; -1 when the table is full."""
    mask = tab.shape[0] - 1
    s = _slot0(key, mask)
    for _ in range(tab.shape[0]):
        k = tab[s]
        if k == key:
            return s
        if k == 0:
            tab[s] = key
            return s
        s = (s + 1) & mask
    return -1


def table_from(keys: np.ndarray, weights: np.ndarray, expand: bool = True):
    """(tab, w [2, C] float32) holding ``keys`` with their ``weights`` [2, n]
    and, with ``expand``, every symmetric image of each pattern key."""
    cap = 1 << max(10, int(2 * (8 if expand else 1) * len(keys) - 1).bit_length())
    tab = np.zeros(cap, np.int64)
    w = np.zeros((2, cap), np.float32)
    _fill(tab, w, np.asarray(keys, np.int64), np.asarray(weights, np.float32), expand)
    return tab, w


@njit(cache=True)
def _fill(tab, w, keys, weights, expand):
    mask = (np.int64(1) << TYPE_SHIFT) - 1
    for i in range(keys.shape[0]):
        t = keys[i] >> TYPE_SHIFT
        for s in range(8 if expand and (t == T_PAT3 or t == T_RESP) else 1):
            code = keys[i] & mask
            k = _key(t, sym3(code, s) if t == T_PAT3 else (sym12(code, s) if t == T_RESP else code))
            slot = insert(tab, k)
            w[0, slot] = weights[0, i]
            w[1, slot] = weights[1, i]


def save(path, tab, w, counts, min_count: int = 1, info: dict | None = None) -> int:
    """Write keys seen at least ``min_count`` times in training; returns how many."""
    import json

    keep = (tab != 0) & (counts >= min_count)
    np.savez_compressed(path, keys=tab[keep], weights=w[:, keep].astype(np.float16),
                        info=np.array(json.dumps(info or {})))
    return int(keep.sum())


POLICIES = {"rollout": ROLLOUT, "tree": TREE}


def load_policy(model_dir, info: dict):
    """(tab, w, row) of an exported pattern policy folder whose
    ``model.json`` is ``info``; ValueError for an unknown policy."""
    import os

    if info.get("policy") not in POLICIES:
        raise ValueError(f"{model_dir}: unknown pattern policy {info.get('policy')!r} (one of {', '.join(POLICIES)})")
    tab, w, _ = load(os.path.join(model_dir, info.get("weights", "weights.npz")))
    return tab, w, POLICIES[info["policy"]]


def load(path):
    """(tab, w, info) from a file written by ``save``."""
    import json

    with np.load(path, allow_pickle=False) as z:
        tab, w = table_from(z["keys"], z["weights"])
        info = json.loads(str(z["info"]))
    return tab, w, info


@njit(cache=True, inline="always")
def score(tab, w, model, keys, n):
    t = 0.0
    for i in range(n):
        s = lookup(tab, keys[i])
        if s >= 0:
            t += w[model, s]
    return t


@njit(cache=True)
def logits(B, S, tab, w, model, out):
    """With a table from ``load``/``table_from`` (symmetric images added):
    logits of every flat move for the player to move into ``out``
    [size*size+1]: illegal points and pass at -1e30 (the policies never
    pass while a legal point is left)."""
    B = borrowed(B)
    tab = borrow(tab)
    w = borrow(w)
    S = (borrow(S[0]), borrow(S[1]), borrow(S[2]), borrow(S[3]), borrow(S[4]))
    meta = B.meta
    size = meta[M_SIZE]
    W = size + 2
    stone = meta[M_TOPLAY]
    keys = np.empty(MAX_KEYS, np.int64)
    nak = nakade_point(S, W)
    out[:] = NEG
    color = B.color
    for r in range(size):
        for c in range(size):
            p = (r + 1) * W + c + 1
            if color[p] != EMPTY:
                continue
            if legal_code(color, B.head, B.nxt, B.libs, meta, B.hist, B.bloom, B.zob, p, stone) != LEGAL:
                continue
            n = features(B, S, p, stone, model == TREE, nak, keys, True)  # raw: the table holds every image
            out[r * size + c] = score(tab, w, model, keys, n)


@njit(cache=True)
def probabilities(B, S, tab, w, model, out):
    """Softmax of ``logits`` into ``out`` [size*size+1] (0 for illegal
    points; all on pass when no point is legal): the tree policy's priors."""
    logits(B, S, tab, w, model, out)
    mx = out.max()
    if mx <= NEG / 2:
        out[:] = 0.0
        out[-1] = 1.0
        return
    z = 0.0
    for i in range(out.shape[0]):
        out[i] = 0.0 if out[i] <= NEG / 2 else np.exp(out[i] - mx)
        z += out[i]
    out /= z


# ---------------------------------------------------------------- rollouts


# Rollouts look weights up in the table of ``load``, which holds every
# symmetric image of ~150K patterns (tens of MB): there each lookup is a cache
# miss. So ``rollout_tables`` lays the rollout row out again: the 3x3 patterns
# in a table of their own (code and gamma, exp of the weight, side by side),
# the response patterns grouped by diamond (one row of 12 gammas per diamond
# as the board lies: one lookup a move, not one per point of it).
RESP_MASK = (np.int64(1) << 36) - 1
# diamond points inside the previous move's 3x3 (the neighbour feature)
NEAR12 = np.array([abs(r) <= 1 and abs(c) <= 1 for r, c in OFF12.tolist()], np.bool_)


class RolloutTables(NamedTuple):
    """A pattern table laid out for ``rollout`` (``rollout_tables``)."""

    tab: np.ndarray  # int64 [C]: the key table of ``load``/``table_from`` (symmetric images added)
    w: np.ndarray  # float32 [2, C]: its weights (rollouts use row ROLLOUT)
    pat: np.ndarray  # float64 [R, 2]: raw 3x3 code + 1 (0: free slot) and its gamma
    resp_keys: np.ndarray  # int64 [R2]: _key(T_RESP, diamond cells) of each row (0: free slot)
    resp_gamma: np.ndarray  # float32 [R2, 12]: each diamond point's gamma there, the neighbour's included
    gammas: np.ndarray  # float64 [3]: the gammas of save-atari, neighbour (a diamond without a row), nakade


def _cap(n):
    return 1 << max(4, int(2 * n - 1).bit_length())


def rollout_tables(tab, w) -> RolloutTables:
    """``tab``/``w``'s rollout row laid out for sampling."""
    types = tab >> TYPE_SHIFT
    pat = np.zeros((_cap(int((types == T_PAT3).sum())), 2), np.float64)
    keys = np.zeros(_cap(len(np.unique(tab[types == T_RESP] & RESP_MASK))), np.int64)
    gamma = np.zeros((len(keys), 12), np.float32)
    gammas = np.ones(3, np.float64)
    if len(tab):
        for i, t in enumerate((T_SAVE, T_NBR, T_NAKADE)):
            s = lookup(tab, _key(t, 0))
            gammas[i] = np.exp(min(float(w[ROLLOUT, s]), 30.0)) if s >= 0 else 1.0
        _fill_rollout(tab, w, gammas[1], pat, keys, gamma)
    return RolloutTables(tab, w, pat, keys, gamma, gammas)


@njit(cache=True)
def _pat_slot(pat, code):
    """Slot of raw 3x3 ``code`` in ``pat`` (its free slot if absent)."""
    mask = pat.shape[0] - 1
    s = _slot0(code, mask)
    while pat[s, 0] != 0.0 and pat[s, 0] != code + 1:
        s = (s + 1) & mask
    return s


@njit(cache=True)
def _fill_rollout(tab, w, g_nbr, pat, keys, gamma):
    for j in range(tab.shape[0]):
        k = tab[j]
        t = k >> TYPE_SHIFT
        g = np.exp(min(w[ROLLOUT, j], 30.0))
        if t == T_PAT3:
            code = k & ((np.int64(1) << TYPE_SHIFT) - 1)
            s = _pat_slot(pat, code)
            pat[s, 0] = code + 1
            pat[s, 1] = g
        elif t == T_RESP:
            r = lookup(keys, _key(T_RESP, k & RESP_MASK))
            if r < 0:
                r = insert(keys, _key(T_RESP, k & RESP_MASK))
                for i in range(12):
                    gamma[r, i] = g_nbr if NEAR12[i] else 1.0
            gamma[r, (k >> 36) & 15] *= g


@njit(cache=True, inline="always")
def _pat_gamma(pat, code):
    s = _pat_slot(pat, code)
    return pat[s, 1] if pat[s, 0] != 0.0 else 1.0


@njit(cache=True, inline="always")
def _own_atari(code):
    # a 4-neighbour is an own group with one liberty (cell value 2)
    return ((code >> 3) & 7) == 2 or ((code >> 9) & 7) == 2 or ((code >> 12) & 7) == 2 or ((code >> 18) & 7) == 2


@njit(cache=True)
def rollout(B, S, rt, rng, max_moves):
    """With tables ``rt`` from ``rollout_tables``: play the rollout policy
    to the end of the game on ``B``/``S``
    (sampling the softmax, never filling an own eye nor giving stones away
    by a bad self-atari (``tactics.bad_self_atari``: what keeps a seki
    standing), passing only when no other move is left). Returns the moves
    played."""
    B = borrowed(B)  # no reference counting in the many small calls below
    S = (borrow(S[0]), borrow(S[1]), borrow(S[2]), borrow(S[3]), borrow(S[4]))
    meta = B.meta
    W = meta[M_SIZE] + 2
    color = B.color
    empt = B.empt
    codes = S[0]
    pat = rt.pat
    resp_keys = borrow(rt.resp_keys)
    resp_gamma = rt.resp_gamma
    P = color.shape[0]
    gam2 = np.zeros((2, P), np.float64)  # each point's gamma from its 3x3 pattern and save-atari
    made = np.full((2, P), -1, np.int64)  # the 3x3 code each was made from
    dyn = np.zeros(P, np.float64)
    dmark = np.zeros(P, np.int32)
    skip = np.zeros(P, np.int32)
    g_save, g_nbr, g_nak = rt.gammas[0], rt.gammas[1], rt.gammas[2]
    played = 0
    turn = 0
    while played < max_moves and meta[M_PASSES] < 2:
        turn += 1
        stone = meta[M_TOPLAY]
        v = 0 if stone == 1 else 1
        gam = gam2[v]
        n = meta[M_NEMPTY]
        total = 0.0
        for k in range(n):
            p = empt[k]
            code = codes[v, p]
            # the gamma changes only with the code, or where save-atari may have
            if code != made[v, p] or _own_atari(code):
                g = _pat_gamma(pat, code)  # raw: the table holds every image
                if _own_atari(code) and save_atari(B, p, stone):
                    g *= g_save
                gam[p] = g
                made[v, p] = code
            total += gam[p]
        # the previous move's neighbourhood: response and neighbour weights on
        # top of the static ones (the diamond's cells read once), nakade
        m = S[2][1]
        nak = nakade_point(S, W)
        if m >= 0:
            base = np.int64(0)
            mr, mc = m // W, m % W
            for i in range(12):
                r = mr + OFF12[i, 0]
                c = mc + OFF12[i, 1]
                x = 1 if (r < 0 or c < 0 or r >= W or c >= W) else _cell(color, B.head, B.libs, r * W + c, stone)
                base |= np.int64(x) << (3 * i)
            row = lookup(resp_keys, _key(T_RESP, base))
            for i in range(12):
                q = m + OFF12[i, 0] * W + OFF12[i, 1]
                if q < 0 or q >= P or color[q] != EMPTY:
                    continue
                g = resp_gamma[row, i] if row >= 0 else (g_nbr if NEAR12[i] else 1.0)
                dmark[q] = turn
                dyn[q] = gam[q] * g
                total += dyn[q] - gam[q]
        if nak >= 0 and color[nak] == EMPTY:
            old = dyn[nak] if dmark[nak] == turn else gam[nak]
            dmark[nak] = turn
            dyn[nak] = old * g_nak
            total += dyn[nak] - old
        done = False
        for _ in range(n):
            if total <= 1e-12:
                break
            x = (lcg_rand(rng) / 2147483648.0) * total
            pick = -1
            acc = 0.0
            for k in range(n):
                p = empt[k]
                if skip[p] == turn:
                    continue
                acc += dyn[p] if dmark[p] == turn else gam[p]
                pick = p
                if acc > x:
                    break
            if pick < 0:
                break
            if is_eye(color, pick, stone, W) or legal_code(color, B.head, B.nxt, B.libs, meta, B.hist,
                                                        B.bloom, B.zob, pick, stone) != LEGAL \
                    or bad_self_atari(B, pick, stone):
                skip[pick] = turn
                total -= dyn[pick] if dmark[pick] == turn else gam[pick]
                continue
            play(B, S, pick, stone)
            done = True
            break
        if not done:
            play(B, S, -1, stone)
        played += 1
    return played
