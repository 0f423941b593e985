"""Tactical facts about a move, for AlphaGo's input planes (Extended Data
Table 2) and for anything else that wants them (rollouts, search).

All kernels take a board tuple and padded points, like :mod:`board`.
``move_facts`` plays the move on a scratch copy, so every count is what the
rules make of it (captures, merges, ko) rather than a guess from neighbours.

The ladder reader is a depth-bounded search of atari chases, as in
KataGo's ``Board::searchIsLadderCaptured``: the runner (a group in atari, to
move) may capture any adjacent chaser group in atari (counted as an escape,
without reading further) or extend at its liberty; with three or more
liberties it is out; with two, the chaser tries each liberty as an atari
and wins if some atari leaves a runner that cannot escape. A read that
passes ``LADDER_DEPTH`` ataris counts as an escape, the cautious side.
"""

from __future__ import annotations

import numpy as np

from alphalite.go.board import (
    EMPTY,
    LEGAL,
    M_CAPB,
    M_CAPW,
    M_HASH,
    M_KO,
    M_SIZE,
    M_SUPERKO,
    BLACK,
    WALL,
    Board,
    copy_board,
    is_eye,
    maybe_seen,
    play_flat,
    zobrist_index,
)
from alphalite.runtime.kernels import njit

LADDER_DEPTH = 100  # chaser ataris; a 19x19 corner-to-corner ladder needs about 36


@njit(cache=True)
def clone(B):
    """A fresh copy of board tuple ``B`` (the Zobrist table is shared)."""
    return Board(B.color.copy(), B.head.copy(), B.nxt.copy(), B.libs.copy(), B.gsize.copy(), B.mark.copy(),
                 B.empt.copy(), B.epos.copy(), B.meta.copy(), B.hist.copy(), B.bloom.copy(), B.zob)


@njit(cache=True, inline="always")
def _flat(p, W):
    return (p // W - 1) * (W - 2) + (p % W - 1)


@njit(cache=True)
def _liberty_of(B, g):
    """The one liberty of the group at ``g`` (the caller knows it has one)."""
    color = B.color
    head = B.head
    W = B.meta[M_SIZE] + 2
    h = head[g]
    n = color.shape[0]
    for q in range(n):
        if color[q] != EMPTY:
            continue
        for d in (-W, -1, 1, W):
            m = q + d
            if color[m] != EMPTY and color[m] != WALL and head[m] == h:
                return q
    return -1


@njit(cache=True)
def _liberties2(B, g):
    """The two liberties of the group at ``g`` (the caller knows it has two)."""
    color = B.color
    head = B.head
    W = B.meta[M_SIZE] + 2
    h = head[g]
    a = -1
    for q in range(color.shape[0]):
        if color[q] != EMPTY:
            continue
        for d in (-W, -1, 1, W):
            m = q + d
            if color[m] != EMPTY and color[m] != WALL and head[m] == h:
                if a < 0:
                    a = q
                else:
                    return a, q
                break
    return a, -1


@njit(cache=True)
def _can_capture_neighbour(B, g):
    """True if a chaser group next to the runner group at ``g`` is in atari."""
    color = B.color
    head = B.head
    libs = B.libs
    W = B.meta[M_SIZE] + 2
    runner = color[g]
    h = head[g]
    for q in range(color.shape[0]):
        if color[q] != runner or head[q] != h:
            continue
        for d in (-W, -1, 1, W):
            m = q + d
            if color[m] == -runner and libs[head[m]] == 1:
                return True
    return False


@njit(cache=True)
def runner_escapes(B, g):
    """Runner group at ``g`` has one liberty and is to move: can it get out?"""
    if _can_capture_neighbour(B, g):
        return True
    W = B.meta[M_SIZE] + 2
    S = clone(B)
    if play_flat(S, _flat(_liberty_of(B, g), W), B.color[g]) != LEGAL:
        return False
    n = S.libs[S.head[g]]
    if n != 2:
        return n >= 3
    return not chaser_captures(S, g)


@njit(cache=True)
def chaser_captures(B, g):
    """Runner group at ``g`` has two liberties, chaser to move: does some atari
    lead to a capture?

    The runner's reply is forced, so the tree is an OR over the chaser's two
    ataris per level: any capture anywhere wins for the chaser, and a level
    whose ataris both fail sends the search back to the next atari one level
    up. It runs on an explicit stack (Numba's cache mishandles recursion);
    level d's board is the root's replayed with the d (atari, extension)
    pairs in ``seq``."""
    runner = B.color[g]
    W = B.meta[M_SIZE] + 2
    seq = np.empty((LADDER_DEPTH, 2), np.int64)
    opt = np.zeros(LADDER_DEPTH, np.int64)
    work = clone(B)
    d = 0
    while True:
        if opt[d] == 2:
            if d == 0:
                return False
            d -= 1
            opt[d] += 1
            continue
        copy_board(work, B)
        for i in range(d):
            play_flat(work, seq[i, 0], -runner)
            play_flat(work, seq[i, 1], runner)
        p = _liberties2(work, g)[opt[d]]
        if p < 0 or play_flat(work, _flat(p, W), -runner) != LEGAL or work.libs[work.head[g]] != 1:
            opt[d] += 1
            continue
        if _can_capture_neighbour(work, g):
            opt[d] += 1
            continue
        lib = _liberty_of(work, g)
        if play_flat(work, _flat(lib, W), runner) != LEGAL:
            return True
        n = work.libs[work.head[g]]
        if n <= 1:
            return True
        if n >= 3 or d + 1 >= LADDER_DEPTH:
            opt[d] += 1
            continue
        seq[d, 0] = _flat(p, W)
        seq[d, 1] = _flat(lib, W)
        d += 1
        opt[d] = 0


@njit(cache=True)
def ladder_captured(B, g):
    """Whether the group at ``g`` is lost to a ladder. In atari: its side is to
    move and runs. With two liberties: the other side is to move and chases.
    Any other liberty count: False."""
    n = B.libs[B.head[g]]
    if n == 1:
        return not runner_escapes(B, g)
    if n == 2:
        return chaser_captures(B, g)
    return False


@njit(cache=True)
def move_facts(B, scratch, p, me, out):
    """Play ``me`` at empty padded ``p`` on ``scratch`` (a copy of ``B``).

    ``out`` (int64 [6]) gets: 0 legal (0/1); 1 opponent stones captured;
    2 liberties of the new group; 3 size of the new group;
    4 ladder capture (the move ataris an opponent group that then cannot
    escape); 5 ladder escape (the move saves an own group that was in atari
    and the chaser cannot ladder it). Returns ``out[0]``."""
    for i in range(6):
        out[i] = 0
    meta = B.meta
    W = meta[M_SIZE] + 2
    color = B.color
    # Fast path, most empty points: no stone next to p, so no capture, merge
    # or ladder; legal unless it repeats a position (Bloom filter says no).
    lone = 0
    for d in (-W, -1, 1, W):
        c = color[p + d]
        if c == EMPTY:
            lone += 1
        elif c != WALL:
            lone = -1
            break
    if lone > 0 and p != meta[M_KO] and (meta[M_SUPERKO] == 0 or not maybe_seen(
            B.bloom, meta[M_HASH] ^ B.zob[zobrist_index(me), p])):
        out[0] = 1
        out[2] = lone
        out[3] = 1
        return 1
    copy_board(scratch, B)
    capk = M_CAPB if me == BLACK else M_CAPW
    before = scratch.meta[capk]
    if play_flat(scratch, _flat(p, W), me) != LEGAL:
        return 0
    out[0] = 1
    out[1] = scratch.meta[capk] - before
    h = scratch.head[p]
    out[2] = scratch.libs[h]
    out[3] = scratch.gsize[h]
    libs = B.libs
    head = B.head
    for d in (-W, -1, 1, W):
        n = p + d
        c = scratch.color[n]
        if c == -me and scratch.libs[scratch.head[n]] == 1 and libs[head[n]] == 2:
            if out[4] == 0 and not runner_escapes(scratch, n):
                out[4] = 1
        if color[n] == me and libs[head[n]] == 1 and out[5] == 0:
            m = scratch.libs[h]
            if m >= 3 or (m == 2 and not chaser_captures(scratch, p)):
                out[5] = 1
    return 1


@njit(cache=True)
def sensible(B, p, me, legal):
    """AlphaGo's sensibleness: legal and not filling one of the mover's own eyes."""
    return legal and not is_eye(B.color, p, me, B.meta[M_SIZE] + 2)
