"""Go rules on flat arrays, in Numba.

The board is a padded flat ``int8`` array of ``(n+2)**2`` points with a wall
border (values: +1 black, -1 white, 0 empty, 2 wall). Groups are circular
linked lists of stones (``nxt``) with a representative stone (``head``); the
head holds the group's exact liberty count and size. Everything mutable lives
in one named tuple of arrays, the *board tuple* ``B`` (``Board``: ``B.color``,
``B.meta``, ...), changed only by the kernels below; the public
``play(state, move)`` copies and returns a new ``GoState``.

Rules: captures; no suicide unless ``suicide=True`` (Tromp-Taylor: the
suicided group is removed); positional superko by 64-bit Zobrist hashes
(``superko=False`` gives simple ko); two consecutive passes end the game;
Tromp-Taylor area scoring with komi.

Kernels that other modules (features, dataset, search) call from inside
Numba take ``B`` and padded points; ``to_padded``/``from_padded`` in
``coords`` convert.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from alphalite.go import coords
from alphalite.runtime.kernels import njit

EMPTY, BLACK, WHITE, WALL = 0, 1, -1, 2

# Slots of the int64 ``meta`` array.
M_SIZE = 0
M_TOPLAY = 1
M_KO = 2  # padded point the player to move may not take back, or -1
M_MOVES = 3
M_PASSES = 4  # consecutive passes
M_CAPB = 5  # prisoners taken by black
M_CAPW = 6
M_NEMPTY = 7
M_HASH = 8
M_GEN = 9  # generation counter for the ``mark`` scratch array
M_NHIST = 10
M_SUPERKO = 11
M_SUICIDE = 12
M_LAST = 16  # M_LAST + k: flat index of the move k plies ago, -1 if none
N_LAST = 8
N_META = M_LAST + N_LAST

BLOOM_WORDS = 256  # 16384-bit filter in front of the superko history scan

# Reasons a move is illegal (0 = legal).
LEGAL, OCCUPIED, SUICIDE, KO, SUPERKO, GAME_OVER, OFF_BOARD = range(7)
REASONS = ("legal", "occupied", "suicide", "ko", "superko", "game over", "off board")



class Board(NamedTuple):
    """The board tuple ``B``: every array of one position, as Numba takes it.

    Padded points number ``P = (n+2)**2``; a group's liberty count and size
    live at its head stone. Inside Numba ``B.meta`` compiles to the same code
    as a plain tuple's ``B[8]``; a call from Python costs about 1 to 2 us more
    per named-tuple argument (the dispatcher spells out its class and field
    names), so loops over many boards run inside one kernel (``stacked``,
    ``board_at``)."""

    color: np.ndarray  # int8 [P]: +1 black, -1 white, 0 empty, 2 wall
    head: np.ndarray  # int16 [P]: the group's representative stone
    nxt: np.ndarray  # int16 [P]: next stone of the group (a circular list)
    libs: np.ndarray  # int16 [P]: the group's liberties, at its head
    gsize: np.ndarray  # int16 [P]: the group's stones, at its head
    mark: np.ndarray  # int32 [P]: scratch marks, fresh per ``meta[M_GEN]``
    empt: np.ndarray  # int16 [n*n]: the empty points, ``meta[M_NEMPTY]`` of them
    epos: np.ndarray  # int16 [P]: where an empty point sits in ``empt``, -1 if not empty
    meta: np.ndarray  # int64 [N_META]: side to move, ko, counters (the M_* slots)
    hist: np.ndarray  # int64 [cap]: position hashes so far (superko), ``meta[M_NHIST]`` of them
    bloom: np.ndarray  # int64 [BLOOM_WORDS]: Bloom filter over ``hist``
    zob: np.ndarray  # int64 [2, 27*27]: the Zobrist keys, shared by every board


class IllegalMove(ValueError):
    """A move that the rules forbid; ``reason`` is one of REASONS."""

    def __init__(self, move: int, size: int, reason: str):
        self.move = move
        self.reason = reason
        try:
            where = coords.to_gtp(move, size)
        except coords.CoordError:
            where = str(move)
        super().__init__(f"illegal move {where}: {reason}")


@functools.cache
def zobrist_table() -> np.ndarray:
    """[2, 27*27] int64 keys, black row 0, white row 1; fixed for every size."""
    rng = np.random.default_rng(0x60D0)
    return rng.integers(-(2**63), 2**63 - 1, size=(2, 27 * 27), dtype=np.int64)


# ---------------------------------------------------------------- kernels
#
# The hot helpers take the arrays one by one rather than the tuple ``B``:
# taking an array out of a tuple costs Numba a reference-count update, and
# doing that on every call of a per-move kernel was most of its time. The
# public kernels unpack ``B`` once and call these. The loops (playout,
# replay, legal_mask) also pass the arrays through ``_borrow`` and the
# per-move helpers are inlined: together these take every reference count
# out of the per-move path.


@intrinsic
def _borrow(typingctx, arr):
    """The same array without reference counting (a NULL meminfo).

    Numba increments and decrements an array's count (atomic instructions,
    through a call) around every call of a helper taking it, inlined or not,
    and its pruning pass did not remove them from the per-move kernels: about
    40 such calls a move in a playout. With a NULL meminfo visible in the
    same function LLVM drops them. Only for use inside a kernel while the
    board tuple it came from is alive; never return or store the result."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, value=args[0])
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        return ary._getvalue()

    return arr(arr), codegen


@njit(cache=True, inline="always")
def _borrowed(B):
    """Board tuple ``B`` with every array borrowed (``_borrow``): for a
    kernel that hands the board to many small helpers. The same rules."""
    return Board(_borrow(B.color), _borrow(B.head), _borrow(B.nxt), _borrow(B.libs), _borrow(B.gsize),
                 _borrow(B.mark), _borrow(B.empt), _borrow(B.epos), _borrow(B.meta), _borrow(B.hist),
                 _borrow(B.bloom), _borrow(B.zob))


@njit(cache=True, inline="always")
def _nb(p, W, i):
    if i == 0:
        return p - W
    if i == 1:
        return p - 1
    if i == 2:
        return p + 1
    return p + W


@njit(cache=True, inline="always")
def zobrist_index(stone):
    return 0 if stone == 1 else 1


@njit(cache=True)
def init_board(size, superko, suicide, zob, hist_cap):
    W = size + 2
    P = W * W
    color = np.full(P, WALL, np.int8)
    head = np.zeros(P, np.int16)
    nxt = np.zeros(P, np.int16)
    libs = np.zeros(P, np.int16)
    gsize = np.zeros(P, np.int16)
    mark = np.zeros(P, np.int32)
    empt = np.zeros(size * size, np.int16)
    epos = np.full(P, -1, np.int16)
    meta = np.zeros(N_META, np.int64)
    hist = np.zeros(max(hist_cap, 1), np.int64)
    bloom = np.zeros(BLOOM_WORDS, np.int64)
    k = 0
    for r in range(size):
        for c in range(size):
            p = (r + 1) * W + c + 1
            color[p] = EMPTY
            empt[k] = p
            epos[p] = k
            k += 1
    meta[M_SIZE] = size
    meta[M_TOPLAY] = BLACK
    meta[M_KO] = -1
    meta[M_NEMPTY] = k
    meta[M_SUPERKO] = 1 if superko else 0
    meta[M_SUICIDE] = 1 if suicide else 0
    for i in range(N_LAST):
        meta[M_LAST + i] = -1
    _remember(meta, hist, bloom, 0)
    return Board(color, head, nxt, libs, gsize, mark, empt, epos, meta, hist, bloom, zob)


@njit(cache=True, inline="always")
def _copy(dst, src, n):
    # A plain loop: LLVM turns it into a block copy, where Numba's slice
    # assignment ``dst[:] = src`` walks element by element.
    for i in range(n):
        dst[i] = src[i]


@njit(cache=True)
def copy_board(dst, src):
    """Copy board tuple ``src`` into ``dst`` of the same size, without
    allocating (playout loops reset a scratch board this way). ``dst``'s
    history must be at least as long as ``src``'s recorded part."""
    P = src.color.shape[0]
    _copy(_borrow(dst.color), _borrow(src.color), P)
    _copy(_borrow(dst.head), _borrow(src.head), P)
    _copy(_borrow(dst.nxt), _borrow(src.nxt), P)
    _copy(_borrow(dst.libs), _borrow(src.libs), P)
    _copy(_borrow(dst.gsize), _borrow(src.gsize), P)
    # mark goes with meta's M_GEN, so scratch marks stay consistent
    _copy(_borrow(dst.mark), _borrow(src.mark), P)
    _copy(_borrow(dst.empt), _borrow(src.empt), src.empt.shape[0])
    _copy(_borrow(dst.epos), _borrow(src.epos), P)
    _copy(_borrow(dst.meta), _borrow(src.meta), N_META)
    _copy(_borrow(dst.bloom), _borrow(src.bloom), BLOOM_WORDS)
    _copy(_borrow(dst.hist), _borrow(src.hist), src.meta[M_NHIST])


def stacked(B, k: int, hist_cap: int) -> Board:
    """``k`` zeroed boards shaped like ``B`` in one ``Board`` whose arrays
    have a leading slot axis, each slot's history ``hist_cap`` long; the
    Zobrist table is shared, not stacked. A search's scratch boards:
    ``board_at`` takes slot ``k`` out."""

    def slots(a, n=None):
        return np.zeros((k, a.shape[0] if n is None else n), a.dtype)

    return Board(slots(B.color), slots(B.head), slots(B.nxt), slots(B.libs), slots(B.gsize), slots(B.mark),
                 slots(B.empt), slots(B.epos), slots(B.meta), slots(B.hist, hist_cap), slots(B.bloom), B.zob)


@njit(cache=True, inline="always")
def board_at(S, k):
    """Slot ``k`` of the stacked boards ``S`` (``stacked``): views, no copy."""
    return Board(S.color[k], S.head[k], S.nxt[k], S.libs[k], S.gsize[k], S.mark[k], S.empt[k], S.epos[k],
                 S.meta[k], S.hist[k], S.bloom[k], S.zob)


@njit(cache=True, inline="always")
def _remember(meta, hist, bloom, h):
    n = meta[M_NHIST]
    if n < hist.shape[0]:
        hist[n] = h
        meta[M_NHIST] = n + 1
    idx = h & (BLOOM_WORDS * 64 - 1)
    bloom[idx >> 6] |= np.int64(1) << (idx & 63)


@njit(cache=True, inline="always")
def maybe_seen(bloom, h):
    """False when position hash ``h`` is certainly not in the superko history
    (the Bloom filter misses); True means: scan the history to be sure."""
    idx = h & (BLOOM_WORDS * 64 - 1)
    return (bloom[idx >> 6] >> (idx & 63)) & 1 != 0


@njit(cache=True, inline="always")
def _seen(meta, hist, bloom, h):
    if not maybe_seen(bloom, h):
        return False
    for i in range(meta[M_NHIST]):
        if hist[i] == h:
            return True
    return False


@njit(cache=True, inline="always")
def _met_before(color, head, p, W, i, c, g):
    """Whether one of the first ``i`` neighbours of ``p`` is a stone of
    colour ``c`` in group ``g`` (so group ``g`` is already counted)."""
    for j in range(i):
        m = _nb(p, W, j)
        if color[m] == c and head[m] == g:
            return True
    return False


@njit(cache=True, inline="always")
def _new_neighbour_group(color, head, libs, p, W, i, c, in_atari_only):
    """The head of the group of colour ``c`` at ``p``'s ``i``-th neighbour
    when it is one not met at an earlier neighbour (and has one liberty,
    if ``in_atari_only``), else -1: the groups the walks below visit."""
    n = _nb(p, W, i)
    if color[n] != c:
        return -1
    g = head[n]
    if (in_atari_only and libs[g] != 1) or _met_before(color, head, p, W, i, c, g):
        return -1
    return g


@njit(cache=True, inline="always")
def _neighbour_stones(color, head, nxt, libs, p, W, c, in_atari_only, out, k):
    """The stones of every distinct group of colour ``c`` next to ``p``
    (only those with one liberty if ``in_atari_only``) written into ``out``
    from index ``k``; returns the index after them."""
    for i in range(4):
        g = _new_neighbour_group(color, head, libs, p, W, i, c, in_atari_only)
        if g < 0:
            continue
        q = g
        while True:
            out[k] = q
            k += 1
            q = nxt[q]
            if q == g:
                break
    return k


@njit(cache=True, inline="always")
def _xor_neighbour_groups(color, head, nxt, libs, zob, h, p, W, c, zi, in_atari_only):
    """``h`` with the stones of every distinct group of colour ``c`` next to
    ``p`` (only those with one liberty if ``in_atari_only``) hashed out."""
    for i in range(4):
        g = _new_neighbour_group(color, head, libs, p, W, i, c, in_atari_only)
        if g < 0:
            continue
        q = g
        while True:
            h ^= zob[zi, q]
            q = nxt[q]
            if q == g:
                break
    return h


@njit(cache=True, inline="always")
def _legal(color, head, nxt, libs, meta, hist, bloom, zob, p, stone):
    if color[p] != EMPTY:
        return OCCUPIED
    if p == meta[M_KO]:
        return KO
    W = meta[M_SIZE] + 2
    opp = -stone
    has_lib = False
    safe_friend = False
    captures = False
    for i in range(4):
        n = _nb(p, W, i)
        c = color[n]
        if c == EMPTY:
            has_lib = True
        elif c == stone:
            if libs[head[n]] > 1:
                safe_friend = True
        elif c == opp:
            if libs[head[n]] == 1:
                captures = True
    suicide = not (has_lib or safe_friend or captures)
    if suicide and meta[M_SUICIDE] == 0:
        return SUICIDE
    if meta[M_SUPERKO] == 0:
        return LEGAL
    si = zobrist_index(stone)
    h = meta[M_HASH] ^ zob[si, p]
    if captures:  # the opponent's groups in atari come off
        h = _xor_neighbour_groups(color, head, nxt, libs, zob, h, p, W, opp, 1 - si, True)
    if suicide:  # the stone and its own groups come off
        h = _xor_neighbour_groups(color, head, nxt, libs, zob, h ^ zob[si, p], p, W, stone, si, False)
    if _seen(meta, hist, bloom, h):
        return SUPERKO
    return LEGAL


@njit(cache=True)
def legal_reason(B, p, stone):
    """Why ``stone`` may not play at padded point ``p`` (LEGAL if it may)."""
    return _legal(B.color, B.head, B.nxt, B.libs, B.meta, B.hist, B.bloom, B.zob,
                  p, stone)


@njit(cache=True, inline="always")
def _remove_empty(empt, epos, meta, p):
    n = meta[M_NEMPTY] - 1
    k = epos[p]
    last = empt[n]
    empt[k] = last
    epos[last] = k
    epos[p] = -1
    meta[M_NEMPTY] = n


@njit(cache=True, inline="always")
def _add_empty(empt, epos, meta, p):
    n = meta[M_NEMPTY]
    empt[n] = p
    epos[p] = n
    meta[M_NEMPTY] = n + 1


@njit(cache=True, inline="always")
def _remove_group(color, head, nxt, libs, empt, epos, meta, zob, g, W):
    """Take group ``g`` off the board; its neighbours gain liberties.

    Returns (stones removed, hash delta)."""
    who = color[g]
    zi = zobrist_index(who)
    h = np.int64(0)
    count = 0
    q = g
    while True:
        color[q] = EMPTY
        _add_empty(empt, epos, meta, q)
        h ^= zob[zi, q]
        count += 1
        for i in range(4):
            n = _nb(q, W, i)
            c = color[n]
            if c == -who and not _met_before(color, head, q, W, i, -who, head[n]):
                libs[head[n]] += 1
        q = nxt[q]
        if q == g:
            break
    return count, h


@njit(cache=True)
def _count_libs(color, nxt, mark, meta, g, W):
    meta[M_GEN] += 1
    gen = meta[M_GEN]
    count = 0
    q = g
    while True:
        for i in range(4):
            n = _nb(q, W, i)
            if color[n] == EMPTY and mark[n] != gen:
                mark[n] = gen
                count += 1
        q = nxt[q]
        if q == g:
            break
    return count


@njit(cache=True, inline="always")
def _push_last(meta, move):
    for i in range(N_LAST - 1, 0, -1):
        meta[M_LAST + i] = meta[M_LAST + i - 1]
    meta[M_LAST] = move


@njit(cache=True)
def do_pass(B):
    meta = B.meta
    size = meta[M_SIZE]
    meta[M_TOPLAY] = -meta[M_TOPLAY]
    meta[M_KO] = -1
    meta[M_MOVES] += 1
    meta[M_PASSES] += 1
    _push_last(meta, size * size)


@njit(cache=True, inline="always")
def _group_at(color, head, n):
    c = color[n]
    return head[n] if c == BLACK or c == WHITE else -1


@njit(cache=True, inline="always")
def _touch(color, libs, gsize, g, stone, nfriends, base):
    # Group g has lost a liberty; a friendly one may become the merge base.
    libs[g] -= 1
    if color[g] == stone:
        nfriends += 1
        if base < 0 or gsize[g] > gsize[base]:
            base = g
    return nfriends, base


@njit(cache=True, inline="always")
def _place(color, head, nxt, libs, gsize, mark, empt, epos, meta, hist, bloom, zob, p, stone):
    size = meta[M_SIZE]
    W = size + 2
    opp = -stone
    si = zobrist_index(stone)

    _remove_empty(empt, epos, meta, p)
    color[p] = stone
    head[p] = p
    nxt[p] = p
    gsize[p] = 1
    h = meta[M_HASH] ^ zob[si, p]

    # p was one liberty of each distinct neighbouring group.
    # A head is a stone of its own group, so two stone neighbours belong to
    # the same group exactly when their heads are equal: load the four heads
    # once (-1 for empty and wall) and compare those.
    g0 = _group_at(color, head, p - W)
    g1 = _group_at(color, head, p - 1)
    g2 = _group_at(color, head, p + 1)
    g3 = _group_at(color, head, p + W)
    nfriends = 0
    base = -1
    if g0 >= 0:
        nfriends, base = _touch(color, libs, gsize, g0, stone, nfriends, base)
    if g1 >= 0 and g1 != g0:
        nfriends, base = _touch(color, libs, gsize, g1, stone, nfriends, base)
    if g2 >= 0 and g2 != g0 and g2 != g1:
        nfriends, base = _touch(color, libs, gsize, g2, stone, nfriends, base)
    if g3 >= 0 and g3 != g0 and g3 != g1 and g3 != g2:
        nfriends, base = _touch(color, libs, gsize, g3, stone, nfriends, base)

    if nfriends == 0:
        nl = 0
        for i in range(4):
            if color[_nb(p, W, i)] == EMPTY:
                nl += 1
        libs[p] = nl
    elif nfriends == 1:
        # New liberties: empty neighbours of p not already next to the group.
        nl = libs[base]
        for i in range(4):
            e = _nb(p, W, i)
            if color[e] != EMPTY:
                continue
            seen = False
            for j in range(4):
                f = _nb(e, W, j)
                if f != p and color[f] == stone and head[f] == base:
                    seen = True
            if not seen:
                nl += 1
        head[p] = base
        nxt[p] = nxt[base]
        nxt[base] = p
        gsize[base] += 1
        libs[base] = nl
    else:
        for i in range(4):
            n = _nb(p, W, i)
            if color[n] != stone:
                continue
            g = head[n]
            if g == base:
                continue
            q = g
            while True:
                head[q] = base
                q = nxt[q]
                if q == g:
                    break
            t = nxt[base]
            nxt[base] = nxt[g]
            nxt[g] = t
            gsize[base] += gsize[g]
        head[p] = base
        nxt[p] = nxt[base]
        nxt[base] = p
        gsize[base] += 1
        libs[base] = _count_libs(color, nxt, mark, meta, base, W)

    # Captures.
    captured = 0
    last_cap = -1
    for i in range(4):
        n = _nb(p, W, i)
        if color[n] == opp and libs[head[n]] == 0:
            cnt, dh = _remove_group(color, head, nxt, libs, empt, epos, meta, zob, head[n], W)
            captured += cnt
            last_cap = n
            h ^= dh
    g = head[p]
    if captured == 1 and gsize[g] == 1 and libs[g] == 1:
        meta[M_KO] = last_cap
    else:
        meta[M_KO] = -1
    if stone == BLACK:
        meta[M_CAPB] += captured
    else:
        meta[M_CAPW] += captured

    # Suicide (only reached when the rules allow it).
    if libs[g] == 0:
        cnt, dh = _remove_group(color, head, nxt, libs, empt, epos, meta, zob, g, W)
        h ^= dh
        if stone == BLACK:
            meta[M_CAPW] += cnt
        else:
            meta[M_CAPB] += cnt

    meta[M_HASH] = h
    if meta[M_SUPERKO] != 0:
        _remember(meta, hist, bloom, h)
    meta[M_TOPLAY] = opp
    meta[M_MOVES] += 1
    meta[M_PASSES] = 0
    r = p // W - 1
    _push_last(meta, r * size + (p - (r + 1) * W - 1))


@njit(cache=True)
def place(B, p, stone):
    """Play ``stone`` at padded point ``p``; the caller has checked legality."""
    _place(B.color, B.head, B.nxt, B.libs, B.gsize, B.mark, B.empt, B.epos,
           B.meta, B.hist, B.bloom, B.zob, p, stone)


@njit(cache=True)
def rebuild(B):
    """Recompute groups, liberties, empties and hash from the colours alone.

    Returns the number of groups left without liberties (an invalid setup)."""
    color = B.color
    head = B.head
    nxt = B.nxt
    libs = B.libs
    gsize = B.gsize
    mark = B.mark
    empt = B.empt
    epos = B.epos
    meta = B.meta
    zob = B.zob
    size = meta[M_SIZE]
    W = size + 2
    P = W * W
    meta[M_NEMPTY] = 0
    h = np.int64(0)
    for p in range(P):
        head[p] = -1
        epos[p] = -1
    stack = np.empty(P, np.int64)
    dead = 0
    for p in range(P):
        c = color[p]
        if c == EMPTY:
            _add_empty(empt, epos, meta, p)
        elif c == BLACK or c == WHITE:
            h ^= zob[zobrist_index(c), p]
            if head[p] != -1:
                continue
            head[p] = p
            nxt[p] = p
            gsize[p] = 1
            stack[0] = p
            top = 1
            while top > 0:
                top -= 1
                q = stack[top]
                for i in range(4):
                    n = _nb(q, W, i)
                    if color[n] == c and head[n] == -1:
                        head[n] = p
                        nxt[n] = nxt[p]
                        nxt[p] = n
                        gsize[p] += 1
                        stack[top] = n
                        top += 1
            libs[p] = _count_libs(color, nxt, mark, meta, p, W)
            if libs[p] == 0:
                dead += 1
    for p in range(P):
        if head[p] == -1:
            head[p] = 0
    meta[M_HASH] = h
    meta[M_KO] = -1
    if meta[M_SUPERKO] != 0:
        _remember(meta, B.hist, B.bloom, h)
    return dead


@njit(cache=True)
def set_up(B, points, colors):
    """Put ``colors[i]`` (+1, -1, 0) on flat point ``points[i]`` of a fresh
    board (SGF AB/AW, handicap): the setup starts the position, so the
    superko history restarts from it. Returns ``rebuild``'s count of groups
    without liberties (0: a valid setup)."""
    color = B.color
    size = B.meta[M_SIZE]
    W = size + 2
    for i in range(points.shape[0]):
        m = points[i]
        r = m // size
        color[(r + 1) * W + (m - r * size) + 1] = colors[i]
    B.meta[M_NHIST] = 0
    B.bloom[:] = 0
    return rebuild(B)


@njit(cache=True)
def restore(B, color, meta):
    """Make ``B`` the position stored as ``color`` and ``meta`` (a snapshot
    of those two arrays of a board of the same size): groups rebuilt from
    the colours; side to move, ko, passes, captures and last moves from the
    snapshot; no superko history (superko off)."""
    B.color[:] = color
    m = B.meta
    m[M_NHIST] = 0
    rebuild(B)
    gen = m[M_GEN]
    nempty = m[M_NEMPTY]
    m[:] = meta
    m[M_GEN] = gen
    m[M_NEMPTY] = nempty
    m[M_SUPERKO] = 0
    m[M_NHIST] = 0


@njit(cache=True)
def set_to_play(B, stone):
    """Make ``stone`` the player to move (GTP and SGF let either side move).
    A ko ban binds only the player who was next, so a change of side lifts
    it; the superko history stays."""
    meta = B.meta
    if meta[M_TOPLAY] != stone:
        meta[M_TOPLAY] = stone
        meta[M_KO] = -1


@njit(cache=True)
def clear_passes(B):
    """Forget the consecutive passes, so that play goes on after two (GUIs
    continue games after a dispute)."""
    B.meta[M_PASSES] = 0


@njit(cache=True)
def play_flat(B, move, stone):
    """Check and play a flat move (pass = size*size); returns the reason code."""
    meta = B.meta
    size = meta[M_SIZE]
    if move == size * size:
        do_pass(B)
        return LEGAL
    if move < 0 or move > size * size:
        return OFF_BOARD
    r = move // size
    p = (r + 1) * (size + 2) + (move - r * size) + 1
    color = B.color
    head = B.head
    nxt = B.nxt
    libs = B.libs
    hist = B.hist
    bloom = B.bloom
    zob = B.zob
    why = _legal(color, head, nxt, libs, meta, hist, bloom, zob, p, stone)
    if why == LEGAL:
        _place(color, head, nxt, libs, B.gsize, B.mark, B.empt, B.epos, meta, hist, bloom, zob,
               p, stone)
    return why


@njit(cache=True)
def replay(B, moves, n):
    """Play flat ``moves[:n]`` in turn order with full legality checks.

    Returns how many were played: ``n``, or the index of the first illegal
    move (the board then holds the position before it). One call for a whole
    game, so the board tuple is unpacked once rather than per move."""
    color = _borrow(B.color)
    head = _borrow(B.head)
    nxt = _borrow(B.nxt)
    libs = _borrow(B.libs)
    gsize = _borrow(B.gsize)
    mark = _borrow(B.mark)
    empt = _borrow(B.empt)
    epos = _borrow(B.epos)
    meta = _borrow(B.meta)
    hist = _borrow(B.hist)
    bloom = _borrow(B.bloom)
    zob = _borrow(B.zob)
    size = meta[M_SIZE]
    W = size + 2
    for i in range(n):
        move = moves[i]
        if meta[M_PASSES] >= 2 or move < 0 or move > size * size:
            return i
        if move == size * size:
            do_pass(B)
            continue
        r = move // size
        p = (r + 1) * W + (move - r * size) + 1
        stone = meta[M_TOPLAY]
        if _legal(color, head, nxt, libs, meta, hist, bloom, zob, p, stone) != LEGAL:
            return i
        _place(color, head, nxt, libs, gsize, mark, empt, epos, meta, hist, bloom, zob, p, stone)
    return n


@njit(cache=True)
def legal_mask(B, out):
    """Fill bool ``out[size*size+1]`` for the player to move (pass last)."""
    color = _borrow(B.color)
    head = _borrow(B.head)
    nxt = _borrow(B.nxt)
    libs = _borrow(B.libs)
    meta = _borrow(B.meta)
    hist = _borrow(B.hist)
    bloom = _borrow(B.bloom)
    zob = _borrow(B.zob)
    size = meta[M_SIZE]
    W = size + 2
    stone = meta[M_TOPLAY]
    over = meta[M_PASSES] >= 2
    for r in range(size):
        for c in range(size):
            p = (r + 1) * W + c + 1
            out[r * size + c] = (not over) and color[p] == EMPTY and \
                _legal(color, head, nxt, libs, meta, hist, bloom, zob, p, stone) == LEGAL
    out[size * size] = not over


@njit(cache=True)
def owners_into(B, out):
    """Fill int8 ``out[size*size]`` with the Tromp-Taylor owner of each point:
    +1/-1 for stones and for empty regions that reach only that colour, 0 for
    empty points that reach both (or neither)."""
    color = B.color
    mark = B.mark
    meta = B.meta
    size = meta[M_SIZE]
    W = size + 2
    meta[M_GEN] += 1
    gen = meta[M_GEN]
    stack = np.empty(2 * W * W, np.int64)  # flood stack, then the region's members
    for r in range(size):
        for c in range(size):
            p = (r + 1) * W + c + 1
            col = color[p]
            if col != EMPTY:
                out[r * size + c] = col
                continue
            if mark[p] == gen:
                continue
            mark[p] = gen
            stack[0] = p
            top = 1
            members = 0
            rb = False
            rw = False
            while top > 0:
                top -= 1
                q = stack[top]
                stack[W * W + members] = q
                members += 1
                for i in range(4):
                    n = _nb(q, W, i)
                    cn = color[n]
                    if cn == EMPTY:
                        if mark[n] != gen:
                            mark[n] = gen
                            stack[top] = n
                            top += 1
                    elif cn == BLACK:
                        rb = True
                    elif cn == WHITE:
                        rw = True
            owner = 0
            if rb and not rw:
                owner = BLACK
            elif rw and not rb:
                owner = WHITE
            for i in range(members):
                q = stack[W * W + i]
                out[(q // W - 1) * size + q % W - 1] = owner


@njit(cache=True)
def area(B):
    """Tromp-Taylor (black points, white points): stones plus empty regions
    that reach only that colour."""
    size = B.meta[M_SIZE]
    own = np.empty(size * size, np.int8)
    owners_into(B, own)
    black = 0
    white = 0
    for v in own:
        if v == BLACK:
            black += 1
        elif v == WHITE:
            white += 1
    return black, white


@njit(cache=True)
def result_for(B, komi, stone):
    """The Tromp-Taylor result with ``komi`` for ``stone``: +1 a win, -1 a
    loss, 0 a draw (rollouts and finished games in the searches)."""
    black, white = area(B)
    return win_loss(black - white - komi, stone)


@njit(cache=True, inline="always")
def win_loss(margin, stone):
    """+1 a win, -1 a loss, 0 a draw for ``stone`` (+1 black) from a final
    area margin (black minus white minus komi)."""
    if margin > 0:
        return float(stone)
    if margin < 0:
        return float(-stone)
    return 0.0


@njit(cache=True, inline="always")
def _rand(rng):
    # 64-bit LCG (Knuth MMIX), high bits used; state passed in as int64[1].
    rng[0] = rng[0] * 6364136223846793005 + 1442695040888963407
    return (rng[0] >> 33) & 0x7FFFFFFF


@njit(cache=True, inline="always")
def is_eye(color, p, stone, W):
    """True if empty ``p`` is a one-point eye of ``stone`` (not a false eye)."""
    for i in range(4):
        c = color[_nb(p, W, i)]
        if c != stone and c != WALL:
            return False
    bad = 0
    edge = 0
    for d in (-W - 1, -W + 1, W - 1, W + 1):
        c = color[p + d]
        if c == WALL:
            edge = 1
        elif c == -stone:
            bad += 1
    return bad + edge < 2


@njit(cache=True)
def joined_size(B, p, stone):
    """Stones of the group ``stone`` at empty padded ``p`` would make, before
    any capture: p and each distinct friendly neighbour group."""
    head = B.head
    W = B.meta[M_SIZE] + 2
    size = 1
    for i in range(4):
        n = _nb(p, W, i)
        if B.color[n] != stone:
            continue
        h = head[n]
        for j in range(i):  # a group next to p twice counts once
            m = _nb(p, W, j)
            if B.color[m] == stone and head[m] == h:
                h = -1
                break
        if h != -1:
            size += B.gsize[h]
    return size


@njit(cache=True)
def is_self_atari(B, p, stone, lone_ok):
    """True if ``stone`` at empty padded ``p`` leaves its group with one
    liberty (or none), counting the points of the stones it captures, so a
    ko capture counts, and so does a capture of two stones that the
    opponent takes back with more (a snapback). A capture of two or more
    stones that puts no more stones at risk than it takes does not count,
    nor does capturing two groups (each leaves a liberty). ``lone_ok``: a
    lone stone (a throw-in or ko capture) is not counted."""
    color = B.color
    head = B.head
    nxt = B.nxt
    libs = B.libs
    gsize = B.gsize
    W = B.meta[M_SIZE] + 2
    cap = -1  # the head of the one group p captures (two groups return early)
    friend = False
    for i in range(4):
        n = _nb(p, W, i)
        c = color[n]
        if c == stone:
            friend = True
            if libs[head[n]] >= 3:  # two liberties besides p
                return False
        elif c == -stone and libs[head[n]] == 1:
            if cap != -1 and head[n] != cap:
                return False
            cap = head[n]
    if cap != -1 and gsize[cap] >= 2 and gsize[cap] >= joined_size(B, p, stone):
        return False
    lib = -1  # the one liberty found so far
    q = p  # walk p, then the stones of each friendly neighbour group
    for i in range(5):
        if i > 0:
            n = _nb(p, W, i - 1)
            if color[n] != stone:
                continue
            q = head[n]
        g = q
        while True:
            for j in range(4):
                m = _nb(q, W, j)
                c = color[m]
                if m == p or not (c == EMPTY or (c == -stone and head[m] == cap)):
                    continue
                if lib == -1:
                    lib = m
                elif m != lib:
                    return False
            if i == 0:
                break
            q = nxt[q]
            if q == g:
                break
    return not (lone_ok and not friend)


@njit(cache=True)
def candidates_into(B, own, out, allow_pass, no_self_atari=False, own_area=False):
    """Fill bool ``out[size*size+1]`` with the moves the player to move may
    choose (the rule of every player: GTP, self-play, value data): legal, not
    a true one-point eye of its own (``is_eye``) and, once the opponent has a
    stone on the board, not inside its own Tromp-Taylor territory unless it
    saves an own group in atari (a self-play game passed with four stones in
    atari whose liberty lay inside). Pass only when nothing else is, or with
    ``allow_pass``. ``no_self_atari`` also leaves out moves that leave the
    mover's group one liberty (``is_self_atari``). ``own_area``: the inside
    of own territory stays open while any other move is left (a net trained
    on games without it never learns to defend its area, open on 9x9 long
    before it is safe); the game still ends when nothing else is. ``own`` is
    int8 [size*size] scratch; ``B``'s scratch marks are touched
    (``owners_into``)."""
    legal_mask(B, out)
    meta = B.meta
    color = B.color
    size = meta[M_SIZE]
    n2 = size * size
    if meta[M_PASSES] >= 2:
        return
    W = size + 2
    stone = meta[M_TOPLAY]
    has_opp = False
    for r in range(size):
        for c in range(size):
            if color[(r + 1) * W + c + 1] == -stone:
                has_opp = True
                break
        if has_opp:
            break
    if has_opp:
        owners_into(B, own)
    some = False
    for r in range(size):
        for c in range(size):
            m = r * size + c
            if not out[m]:
                continue
            p = (r + 1) * W + c + 1
            if is_eye(color, p, stone, W) or (no_self_atari and is_self_atari(B, p, stone, False)):
                out[m] = False
            elif has_opp and color[p] == EMPTY and own[m] == stone and not _saves(B, p, stone, W):
                out[m] = False
                own[m] = 2  # own territory, open again below with own_area
            else:
                some = True
    out[n2] = allow_pass or not some
    if own_area and some and has_opp:  # own[] is only filled with an opponent on the board
        for m in range(n2):
            if own[m] == 2:
                out[m] = True


@njit(cache=True, inline="always")
def _saves(B, p, stone, W):
    """Whether ``stone`` at ``p`` saves a group of its in atari (the group
    then has more than one liberty): a point of one's own territory that
    must not be left out."""
    color, head, libs = B.color, B.head, B.libs
    for q in (p - W, p + W, p - 1, p + 1):
        if color[q] == stone and libs[head[q]] == 1:
            return not is_self_atari(B, p, stone, False)
    return False


def candidates(state: GoState, allow_pass: bool = False, no_self_atari: bool = False,
               own_area: bool = False) -> np.ndarray:
    """bool [A] of ``candidates_into`` for a GoState."""
    out = np.zeros(state.size * state.size + 1, np.bool_)
    own = np.zeros(state.size * state.size, np.int8)
    b = state.copy_tuple()  # owners_into touches the scratch marks
    candidates_into(b, own, out, allow_pass, no_self_atari, own_area)
    return out



@njit(cache=True)
def playout(B, rng, max_moves):
    """Random play to the end: uniform over legal moves that do not fill the
    mover's own eyes; pass only when there is none. Returns moves played
    (passes included). ``rng`` is an int64[1] LCG state, advanced in place.

    The rules are the board's own (superko, suicide). With superko on, the
    history must have room for ``max_moves`` more positions."""
    color = _borrow(B.color)
    head = _borrow(B.head)
    nxt = _borrow(B.nxt)
    libs = _borrow(B.libs)
    gsize = _borrow(B.gsize)
    mark = _borrow(B.mark)
    empt = _borrow(B.empt)
    epos = _borrow(B.epos)
    meta = _borrow(B.meta)
    hist = _borrow(B.hist)
    bloom = _borrow(B.bloom)
    zob = _borrow(B.zob)
    W = meta[M_SIZE] + 2
    light = meta[M_SUPERKO] == 0
    played = 0
    while played < max_moves and meta[M_PASSES] < 2:
        stone = meta[M_TOPLAY]
        n = meta[M_NEMPTY]
        done = False
        if n > 0:
            k = _rand(rng) % n
            for _ in range(n):
                p = empt[k]
                k += 1
                if k == n:
                    k = 0
                if light and p != meta[M_KO] and (color[p - W] == EMPTY or color[p - 1] == EMPTY
                                                  or color[p + 1] == EMPTY or color[p + W] == EMPTY):
                    pass  # an empty neighbour: not an eye, and legal without superko
                elif is_eye(color, p, stone, W):
                    continue
                elif _legal(color, head, nxt, libs, meta, hist, bloom, zob, p, stone) != LEGAL:
                    continue
                _place(color, head, nxt, libs, gsize, mark, empt, epos, meta, hist, bloom, zob, p, stone)
                done = True
                break
        if not done:
            do_pass(B)
        played += 1
    return played


# Inline kernels that other go-layer kernels (patterns, tactics) build on: the
# four neighbours, the stones of the groups beside a point, the rollout LCG, a
# borrowed (uncounted) array view, and the legality code of a move on unpacked
# arrays.
neighbour = _nb
neighbour_stones = _neighbour_stones
lcg_rand = _rand
borrow = _borrow
borrowed = _borrowed
legal_code = _legal


# ---------------------------------------------------------------- GoState


class GoState:
    """An immutable Go position with its history (for superko).

    Attributes: ``size``, ``komi``, ``superko``, ``suicide``; properties
    ``to_play`` (+1 black, -1 white), ``move_number``, ``stones_placed``,
    ``captures`` (prisoners taken by black, by white), ``is_over``,
    ``ko_point`` (flat or None), ``last_moves``, ``hash``.
    """

    __slots__ = ("size", "komi", "superko", "suicide", "_b")

    def __init__(self, size, komi, superko, suicide, b):
        self.size = size
        self.komi = float(komi)
        self.superko = superko
        self.suicide = suicide
        self._b = b

    @property
    def board_tuple(self):
        """The Numba board tuple; treat as read-only (copy before mutating)."""
        return self._b

    @property
    def to_play(self) -> int:
        return int(self._b.meta[M_TOPLAY])

    @property
    def move_number(self) -> int:
        return int(self._b.meta[M_MOVES])

    @property
    def captures(self) -> tuple[int, int]:
        m = self._b.meta
        return int(m[M_CAPB]), int(m[M_CAPW])

    @property
    def stones_placed(self) -> int:
        """Stones put on the board so far, setup and handicap stones
        included: those on it plus the prisoners."""
        m = self._b.meta
        return self.size * self.size - int(m[M_NEMPTY]) + int(m[M_CAPB]) + int(m[M_CAPW])

    @property
    def passes(self) -> int:
        return int(self._b.meta[M_PASSES])

    @property
    def is_over(self) -> bool:
        return self.passes >= 2

    @property
    def ko_point(self) -> int | None:
        k = int(self._b.meta[M_KO])
        return None if k < 0 else coords.from_padded(k, self.size)

    @property
    def last_moves(self) -> list[int]:
        """Most recent first; pass is size*size."""
        m = self._b.meta
        return [int(x) for x in m[M_LAST : M_LAST + N_LAST] if x >= 0]

    @property
    def hash(self) -> int:
        return int(self._b.meta[M_HASH])

    def copy_tuple(self, extra_history: int = 0):
        b = self._b
        meta = b.meta
        hist = b.hist
        need = int(meta[M_NHIST]) + extra_history
        if need > hist.shape[0]:
            new = np.zeros(max(need, 2 * hist.shape[0]), np.int64)
            new[: hist.shape[0]] = hist
            hist = new
        else:
            hist = hist.copy()
        return Board(b.color.copy(), b.head.copy(), b.nxt.copy(), b.libs.copy(), b.gsize.copy(), b.mark.copy(),
                     b.empt.copy(), b.epos.copy(), meta.copy(), hist, b.bloom.copy(), b.zob)

    def __repr__(self):
        return f"GoState(size={self.size}, komi={self.komi}, to_play={self.to_play}, move={self.move_number})"

    def __str__(self):
        return render(self)


def default_max_moves(size: int) -> int:
    """Moves a game or a playout may last before it is scored as it stands
    (self-play, rollouts, ownership playouts): a random playout with no eye
    filling ends well before it, a superko cycle does not end at all."""
    return 3 * size * size + 20


def new_game(size: int = 19, komi: float = 7.5, *, superko: bool = True, suicide: bool = False) -> GoState:
    coords.check_size(size)
    b = init_board(size, superko, suicide, zobrist_table(), 2 * size * size + 16)
    return GoState(size, komi, superko, suicide, b)


def _check_move(state: GoState, move) -> int:
    if isinstance(move, (bool, np.bool_)) or not isinstance(move, (int, np.integer)):
        raise IllegalMove(-1, state.size, f"not a move index: {move!r}")
    move = int(move)
    if not 0 <= move <= state.size * state.size:
        raise IllegalMove(move, state.size, REASONS[OFF_BOARD])
    return move


def play(state: GoState, move: int, color: int | None = None) -> GoState:
    """The position after ``move`` (flat index, pass = size*size).

    ``color`` (+1/-1) plays out of turn, as GTP and SGF allow; the other
    colour is to play afterwards. Raises IllegalMove; ``state`` is untouched.
    """
    move = _check_move(state, move)
    if state.is_over:
        raise IllegalMove(move, state.size, REASONS[GAME_OVER])
    stone = state.to_play if color is None else int(color)
    if stone not in (BLACK, WHITE):
        raise ValueError(f"color must be +1 or -1, got {color!r}")
    b = state.copy_tuple(extra_history=1)
    if stone != state.to_play:
        b.meta[M_TOPLAY] = stone
        b.meta[M_KO] = -1  # a ko ban binds only the player who is next
    why = play_flat(b, move, stone)
    if why != LEGAL:
        raise IllegalMove(move, state.size, REASONS[why])
    return GoState(state.size, state.komi, state.superko, state.suicide, b)


def is_legal(state: GoState, move: int) -> bool:
    return legal_moves(state)[_check_move(state, move)]


def legal_moves(state: GoState) -> np.ndarray:
    """bool [size*size+1] for the player to move, pass last; all False once over."""
    out = np.zeros(state.size * state.size + 1, np.bool_)
    legal_mask(state._b, out)
    return out


def stones(state: GoState) -> np.ndarray:
    """int8 [size, size]: +1 black, -1 white, 0 empty; row 0 is the top line."""
    n = state.size
    return state._b.color.reshape(n + 2, n + 2)[1:-1, 1:-1].copy()


def liberties(state: GoState) -> np.ndarray:
    """int16 [size, size]: liberties of the group on each point, 0 where empty."""
    n = state.size
    b = state._b
    libs = b.libs[b.head.astype(np.int64)]
    libs = np.where(b.color == EMPTY, 0, libs)
    libs = np.where(b.color == WALL, 0, libs)
    return libs.reshape(n + 2, n + 2)[1:-1, 1:-1].astype(np.int16)


def area_counts(state: GoState) -> tuple[int, int]:
    # area() bumps the scratch generation, which nothing reads across calls.
    black, white = area(state._b)
    return int(black), int(white)


def area_score(state: GoState) -> float:
    """Tromp-Taylor: black area minus white area minus komi."""
    black, white = area_counts(state)
    return black - white - state.komi


def from_stones(board, *, komi: float = 7.5, to_play: int = BLACK, superko: bool = True,
                suicide: bool = False) -> GoState:
    """A position set up from an int8 [size, size] array (SGF AB/AW, tests).

    Raises ValueError if a group has no liberties."""
    board = np.asarray(board)
    if board.ndim != 2 or board.shape[0] != board.shape[1]:
        raise ValueError(f"board must be square, got shape {board.shape}")
    size = coords.check_size(int(board.shape[0]))
    if not np.isin(board, (EMPTY, BLACK, WHITE)).all():
        raise ValueError("board values must be +1, -1 or 0")
    b = init_board(size, superko, suicide, zobrist_table(), 2 * size * size + 16)
    flat = board.astype(np.int8).ravel()
    if set_up(b, np.arange(size * size, dtype=np.int64), flat):
        raise ValueError("setup leaves a group without liberties")
    set_to_play(b, to_play)
    return GoState(size, komi, superko, suicide, b)


def setup(state: GoState, black=(), white=(), empty=()) -> GoState:
    """Add/remove stones without captures (SGF AB/AW/AE); flat indices.

    The superko history is kept. Raises ValueError if a group is left
    without liberties."""
    b = state.copy_tuple(extra_history=1)
    color = b.color
    for pts, value in ((black, BLACK), (white, WHITE), (empty, EMPTY)):
        for m in pts:
            if not 0 <= m < state.size * state.size:
                raise ValueError(f"setup point {m} is off the board")
            color[coords.to_padded(int(m), state.size)] = value
    if rebuild(b):
        raise ValueError("setup leaves a group without liberties")
    return GoState(state.size, state.komi, state.superko, state.suicide, b)


def with_komi(state: GoState, komi: float) -> GoState:
    return GoState(state.size, komi, state.superko, state.suicide, state._b)


def with_to_play(state: GoState, color: int) -> GoState:
    """The same position with ``color`` to move (GTP and SGF let either side
    move). A ko ban binds only the player who was next, so a change of side
    lifts it; the superko history stays."""
    if state.to_play == color:
        return state
    b = state.copy_tuple()
    set_to_play(b, color)
    return GoState(state.size, state.komi, state.superko, state.suicide, b)


def render(state: GoState, marks: dict[int, str] | None = None) -> str:
    """ASCII diagram: X black, O white, . empty, GTP coordinates around."""
    n = state.size
    s = stones(state)
    cols = coords.GTP_COLUMNS[:n]
    lines = ["   " + " ".join(cols)]
    for r in range(n):
        row = []
        for c in range(n):
            m = r * n + c
            if marks and m in marks:
                row.append(marks[m])
            else:
                row.append({1: "X", -1: "O", 0: "."}[int(s[r, c])])
        lines.append(f"{n - r:2d} " + " ".join(row) + f" {n - r}")
    lines.append("   " + " ".join(cols))
    capb, capw = state.captures
    who = "Black" if state.to_play == BLACK else "White"
    lines.append(f"{who} to play; captures B {capb} W {capw}; komi {state.komi}")
    return "\n".join(lines)


def parse_diagram(text: str, *, komi: float = 7.5, to_play: int = BLACK, superko: bool = True,
                  suicide: bool = False) -> GoState:
    """Board from rows of X (black), O (white), . or + (empty); spaces ignored."""
    rows = [ln.replace(" ", "") for ln in text.strip().splitlines() if ln.strip()]
    table = {"X": BLACK, "O": WHITE, ".": EMPTY, "+": EMPTY}
    try:
        board = np.array([[table[ch] for ch in row] for row in rows], np.int8)
    except (KeyError, ValueError) as e:
        raise ValueError(f"bad diagram: {e}") from None
    return from_stones(board, komi=komi, to_play=to_play, superko=superko, suicide=suicide)
