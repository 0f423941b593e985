"""Tactical facts about a move, for AlphaGo's input planes (Extended Data
Table 2) and for anything else that wants them (rollouts, search).

All kernels take a board tuple and padded points, like :mod:`board`.
``move_facts`` plays the move on a scratch copy, so every count is what the
rules make of it (captures, merges, ko) rather than a guess from neighbours.

The ladder reader is a depth-bounded search of atari chases, as in
KataGo's ``Board::searchIsLadderCaptured``: the runner (a group in atari, to
move) may extend at its liberty or capture any adjacent chaser group in
atari, and the read goes on after either; with three or more liberties it
is out; with two, the chaser tries each liberty as an atari and wins if
some atari leaves a runner none of whose replies escapes (so a capture
that leaves the runner laddered, or a snapback, is read as such). A read
that passes ``LADDER_DEPTH`` ataris or ``LADDER_NODES`` positions counts
as an escape, the cautious side.
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
    is_self_atari,
    joined_size,
    legal_code,
    maybe_seen,
    neighbour,
    neighbour_stones,
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


@njit(cache=True, inline="always")
def _add_once(out, k, p):
    """``p`` appended to ``out[:k]`` unless it is -1 or there already; the new count."""
    if p < 0:
        return k
    for i in range(k):
        if out[i] == p:
            return k
    out[k] = p
    return k + 1


@njit(cache=True)
def _runner_moves(B, g, out):
    """The runner's replies in atari (group at ``g``, one liberty): take an
    adjacent chaser group in atari at that group's liberty (first: such a
    capture mostly gets out at once, with no chase to read), or extend at
    its liberty (always kept: the captures leave it the last slot). Fills
    ``out``; returns how many."""
    color = B.color
    head = B.head
    libs = B.libs
    W = B.meta[M_SIZE] + 2
    runner = color[g]
    h = head[g]
    k = 0
    for q in range(color.shape[0]):
        if color[q] != runner or head[q] != h:
            continue
        for d in (-W, -1, 1, W):
            m = q + d
            if color[m] == -runner and libs[head[m]] == 1 and k < out.shape[0] - 1:
                k = _add_once(out, k, _liberty_of(B, m))
    return _add_once(out, k, _liberty_of(B, g))


CHASER, RUNNER = 0, 1
MAX_REPLIES = 8  # the runner's replies read at one level: its liberty and the chaser groups it can take
LADDER_NODES = 20000  # positions one read may look at; past it the runner counts as escaping


@njit(cache=True)
def _chaser_wins(B, g, root_kind):
    """The ladder read, as KataGo's ``searchIsLadderCaptured``: an AND/OR
    search over the chaser's two ataris and every runner reply (extend, or
    take an adjacent chaser group in atari), reading on after a capture
    too. ``root_kind``: CHASER (runner with two liberties, chaser to move)
    or RUNNER (runner in atari, to move). True if the chaser captures.

    On an explicit stack (Numba's cache mishandles recursion): level k's
    board is the root's replayed with the moves ``path[:k]``; levels
    alternate between the chaser's options and the runner's."""
    runner = B.color[g]
    W = B.meta[M_SIZE] + 2
    plies = 2 * LADDER_DEPTH + 1
    path = np.empty(plies, np.int64)
    opts = np.empty((plies, MAX_REPLIES), np.int64)
    nopt = np.zeros(plies, np.int64)
    idx = np.zeros(plies, np.int64)
    kind = np.empty(plies, np.int64)
    work = clone(B)
    nodes = 0

    k = 0
    kind[0] = root_kind
    if root_kind == CHASER:
        a, b = _liberties2(B, g)
        opts[0, 0], opts[0, 1] = a, b
        nopt[0] = 2
    else:
        nopt[0] = _runner_moves(B, g, opts[0])
    idx[0] = 0
    result = False
    pending = False  # a child's result waits to be taken by level k
    while True:
        if pending:
            pending = False
            if kind[k] == CHASER:
                if result:  # some atari wins: the chaser wins here
                    if k == 0:
                        return True
                    k -= 1
                    pending = True
                    continue
            else:
                if not result:  # some reply escapes: the chaser fails here
                    if k == 0:
                        return False
                    k -= 1
                    pending = True
                    continue
            idx[k] += 1
        if idx[k] >= nopt[k]:
            # every option tried: a chaser level without a winning atari
            # fails, a runner level without an escape is captured
            result = kind[k] == RUNNER
            if k == 0:
                return result
            k -= 1
            pending = True
            continue
        m = opts[k, idx[k]]
        nodes += 1
        if m < 0 or nodes > LADDER_NODES:
            if nodes > LADDER_NODES:  # out of budget: the cautious side
                return False
            idx[k] += 1
            continue
        copy_board(work, B)
        for i in range(k):
            play_flat(work, path[i], -runner if kind[i] == CHASER else runner)
        if kind[k] == CHASER:
            if play_flat(work, _flat(m, W), -runner) != LEGAL or work.libs[work.head[g]] != 1:
                idx[k] += 1
                continue
            if k + 1 >= plies:
                idx[k] += 1
                continue
            path[k] = _flat(m, W)
            k += 1
            kind[k] = RUNNER
            nopt[k] = _runner_moves(work, g, opts[k])
            idx[k] = 0
        else:
            if play_flat(work, _flat(m, W), runner) != LEGAL:
                idx[k] += 1
                continue
            n = work.libs[work.head[g]]
            if n >= 3 or (n == 2 and k + 2 >= plies):  # out, or read too deep: the cautious side
                result = False
                if k == 0:
                    return False
                k -= 1
                pending = True
                continue
            if n <= 1:
                idx[k] += 1
                continue
            path[k] = _flat(m, W)
            k += 1
            kind[k] = CHASER
            a, b = _liberties2(work, g)
            opts[k, 0], opts[k, 1] = a, b
            nopt[k] = 2
            idx[k] = 0


@njit(cache=True)
def runner_escapes(B, g):
    """Runner group at ``g`` has one liberty and is to move: can it get out?"""
    return not _chaser_wins(B, g, RUNNER)


@njit(cache=True)
def chaser_captures(B, g):
    """Runner group at ``g`` has two liberties, chaser to move: does some
    atari lead to a capture, whatever the runner replies?"""
    return _chaser_wins(B, g, CHASER)


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
    2 liberties of the new group; 3 size of the new group (a suicide, where
    the rules allow it: 0 liberties, the stones it loses);
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
    libs = B.libs
    head = B.head
    if scratch.color[p] == EMPTY:  # a suicide (rules that allow it): no liberty, the group's stones lost
        out[3] = joined_size(B, p, me)
        return 1
    h = scratch.head[p]
    out[2] = scratch.libs[h]
    out[3] = scratch.gsize[h]
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


# ---------------------------------------------------------------- bad self-atari

NAKADE_MAX = 6  # the largest dead eye shape (rabbity six)


@njit(cache=True, inline="always")
def touching(pts, n, a, W):
    """How many of the first ``n`` padded points ``pts`` are 4-neighbours of ``pts[a]``."""
    k = 0
    for b in range(n):
        d = pts[a] - pts[b]
        if d == 1 or d == -1 or d == W or d == -W:
            k += 1
    return k


@njit(cache=True)
def dead_shape(pts, n, W):
    """The ``n`` padded points ``pts`` (a connected space) are a dead eye
    shape: who owns it cannot make two eyes there if the other side plays
    first (three points or fewer, square and pyramid four, bulky and cross
    five, rabbity six), read from how many of the others each point touches."""
    if n <= 3:
        return True
    if n > NAKADE_MAX:
        return False
    by = np.zeros(5, np.int64)  # points by neighbours inside
    for a in range(n):
        by[touching(pts, n, a, W)] += 1
    if n == 4:
        return by[2] == 4 or by[3] == 1
    if n == 5:
        return by[4] == 1 or (by[3] == 1 and by[2] == 3 and by[1] == 1)
    return by[4] == 1 and by[2] == 3 and by[1] == 2


@njit(cache=True)
def bad_self_atari(B, p, stone):
    """``stone`` at empty padded ``p`` puts its own group of two or more
    stones in atari and captures nothing, and it is no nakade: a nakade
    leaves, once captured, a dead eye shape (``dead_shape``) to opponent
    groups that have no liberty but ``p`` and the group's last one. Such a
    move only gives stones away. Pachi's playouts refuse these
    (``is_bad_selfatari``), which is what keeps a seki standing to the end
    of a rollout; this is a simpler rule of the same kind: captures and
    lone stones (throw-ins) always allowed, and a nakade only when the
    groups around are down to their eye space, not while they keep an
    outside liberty, an eye or territory (Pachi's finer escape, throw-in
    and would-it-live readings left out)."""
    color = B.color
    head = B.head
    nxt = B.nxt
    libs = B.libs
    W = B.meta[M_SIZE] + 2
    # rollouts ask at every move: most moves are settled by their four neighbours
    empties = 0
    friend = False
    for i in range(4):
        q = neighbour(p, W, i)
        c = color[q]
        if c == EMPTY:
            empties += 1
        elif c == stone:
            if libs[head[q]] >= 3:
                return False
            friend = True
        elif c == -stone and libs[head[q]] == 1:
            return False  # a capture
    if not friend or empties >= 2 or not is_self_atari(B, p, stone, True):
        return False
    n = joined_size(B, p, stone)
    if n < 2:
        return False
    if n > NAKADE_MAX:
        return True
    pts = np.empty(NAKADE_MAX, np.int64)
    pts[0] = p
    neighbour_stones(color, head, nxt, libs, p, W, stone, False, pts, 1)
    if not dead_shape(pts, n, W):
        return True
    last = -1  # the group's one liberty
    for a in range(n):
        for i in range(4):
            e = neighbour(pts[a], W, i)
            if color[e] == EMPTY and e != p:
                last = e
    if last < 0:
        return True  # two or more stones' suicide, where the rules allow it
    # a nakade only once the groups around have no liberty but p and the last one: with one more
    # (outside, an eye, territory) they live or win the race anyway, and the stones are given away
    done = np.full(4 * NAKADE_MAX, -1, np.int64)
    nd = 0
    for a in range(n):
        for i in range(4):
            q = neighbour(pts[a], W, i)
            if color[q] != -stone:
                continue
            g = head[q]
            seen = False
            for j in range(nd):
                if done[j] == g:
                    seen = True
            if seen:
                continue
            done[nd] = g
            nd += 1
            s = g
            while True:
                for j in range(4):
                    e = neighbour(s, W, j)
                    if color[e] == EMPTY and e != p and e != last:
                        return True
                s = nxt[s]
                if s == g:
                    break
    return False


@njit(cache=True)
def in_seki(B, g):
    """The chain at padded ``g`` is in seki by a static reading of the end
    of a game: it has two or more liberties, at each of them neither
    colour may play but by a bad self-atari (``bad_self_atari``) or not at
    all, so filling any gives stones away and no one does, and at one at
    least the opponent may play (a shared liberty: two eyes and nothing
    else is life, not seki). Two chains with two shared liberties, as
    test_board.SEKI; an eye each and one shared.
    The judge keeps such a chain on the board when the ownership calls it
    dead (``players.dead_points``): a search whose tree fills the shared
    liberty in the losing side's lines reads it as dead. A chain that can
    still make a liberty, or whose neighbour can fill one safely, is left
    to the ownership."""
    color = B.color
    head = B.head
    nxt = B.nxt
    meta = B.meta
    W = meta[M_SIZE] + 2
    stone = np.int64(color[g])
    h = head[g]
    if (stone != BLACK and stone != -BLACK) or B.libs[h] < 2:
        return False
    shared = False
    s = h
    while True:
        for j in range(4):
            e = neighbour(s, W, j)
            if color[e] != EMPTY:
                continue
            for k in range(2):
                c = stone if k == 0 else -stone
                if legal_code(color, head, nxt, B.libs, meta, B.hist, B.bloom, B.zob, e, c) == LEGAL:
                    if not bad_self_atari(B, e, c):
                        return False
                    shared |= k == 1
        s = nxt[s]
        if s == h:
            break
    return shared
