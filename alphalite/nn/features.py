"""Input planes for the nets (named presets) and the 8 board symmetries.

Every encoder writes channels-last ``float32 [H, W, C]`` planes (``H == W ==
size``; row 0 is the top line, as in :mod:`alphalite.go.coords`), values 0/1.
Unless a preset says otherwise, "own" means the player to move and "opp" the
other colour. Liberty counts come from the board's incremental group data
(``libs[head[p]]``), so encoding is O(board points); the legality planes
(``default`` 9, ``book11`` 10) decide most empty points from the neighbours
and the superko Bloom filter and call ``board.legal_reason`` only for
captures, possible suicides and filter hits. Plane 9 of ``default`` is the
complement of ``board.legal_mask`` on the points (before the game is over).

Presets (``PRESETS`` maps name -> id; ``num_planes(name)`` gives C):

=========  ==  ==========================================================
preset     C   planes, in order
=========  ==  ==========================================================
thesis3    3   0 own stones; 1 opp stones; 2 empty (Korenciak's thesis)
clark7     7   0-2 own stones whose group has 1, 2, >=3 liberties;
               3-5 opp stones with 1, 2, >=3 liberties;
               6 simple-ko point (Clark & Storkey 2015)
book11     11  0-3 *black* stones with 1, 2, 3, >=4 liberties;
               4-7 *white* stones with 1, 2, 3, >=4 liberties;
               8 black to move (all ones); 9 white to move (all ones);
               10 empty points the mover may not take because of ko or
               superko (Pumperla & Ferguson's ``SimpleEncoder``; like the
               book it uses absolute colours, the side to move is in 8/9)
default    17  0-3 own stones with 1, 2, 3, >=4 liberties;
               4-7 opp stones with 1, 2, 3, >=4 liberties;
               8 empty;
               9 points illegal for the mover (occupied, suicide, ko,
               superko: ``legal_reason != LEGAL``);
               10 simple-ko point;
               11 side to move (all ones when black is to move);
               12 ones (zero padding then shows the board edge);
               13-16 history: the point of the move played 1, 2, 3, 4
               plies ago (one-hot; all zero for a pass or before the game)
alphago48  48  AlphaGo's policy planes (Extended Data Table 2):
               0 own stones; 1 opp stones; 2 empty; 3 ones;
               4-11 turns since: stones played 1..7 plies ago, 11 the
               rest (the board keeps the last 8 moves; setup stones count
               as old); 12-19 stones whose group has 1..>=8 liberties;
               on empty points where the mover's move is legal (from
               ``tactics.move_facts``): 20-27 opp stones it captures, 0..>=7;
               28-35 self-atari size: own stones left in atari, 1..>=8;
               36-43 liberties of the new group, 1..>=8; 44 ladder capture;
               45 ladder escape; 46 sensible (legal, not an own eye);
               47 zeros
alphago40  40  alphago48 without the turns-since planes 4-11 (the others
               move down by 8): the Clark & Storkey history question
=========  ==  ==========================================================

A pair ``"a+b"`` of two presets (``pair(a, b)``) is the planes of ``a``
followed by those of ``b`` (C = C_a + C_b): what a search encodes for a
policy net and a value net that learned from different planes, each net
reading its own channels (``split``).

The simple-ko point is ``meta[M_KO]``: the point the player to move may not
retake right now (it is set under both ``superko=False`` and ``superko=True``).

Symmetries. ``k`` in 0..7 names an element of the dihedral group D4; the
transform of an array is ``rot90(fliplr(x) if k >= 4 else x, k % 4)`` over
the (H, W) axes, i.e. an optional left-right mirror followed by ``k % 4``
counter-clockwise quarter turns (numpy ``rot90`` direction). ``k = 0`` is the
identity; 1..3 are rotations; 4..7 are the four reflections (involutions).

Conventions, for planes and moves alike::

    transform(transform(x, a), b) == transform(x, compose(a, b))
    transform(transform(x, k), inverse(k)) == x
    move table ``T = sym_move_table(size)``: a stone on move m lands on T[k, m]
    (pass -> pass); ``inverse_move_table(size)[k] == T[inverse(k)]``.

A policy predicted on ``transform_planes(x, k)`` maps back to the original
board with ``untransform_policy(p, k)`` (``p[..., T[k]]``).

Numba-callable from other ``njit`` code: ``encode_into``,
``transform_planes_into``, ``transform_move``, ``transform_moves_into``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from alphalite.go.board import (
    BLACK,
    EMPTY,
    KO,
    LEGAL,
    M_HASH,
    M_KO,
    M_LAST,
    M_SIZE,
    M_SUPERKO,
    M_TOPLAY,
    OCCUPIED,
    SUPERKO,
    WHITE,
    board_at,
    zobrist_index,
    legal_reason,
    maybe_seen,
)
from alphalite.go.tactics import clone, move_facts, sensible
from alphalite.runtime.kernels import njit

THESIS3, CLARK7, BOOK11, DEFAULT, ALPHAGO48, ALPHAGO40 = 0, 1, 2, 3, 4, 5
PRESETS: dict[str, int] = {"thesis3": THESIS3, "clark7": CLARK7, "book11": BOOK11, "default": DEFAULT,
                           "alphago48": ALPHAGO48, "alphago40": ALPHAGO40}
_NPLANES = (3, 7, 11, 17, 48, 40)  # indexed by preset id
N_BASE = len(_NPLANES)  # ids from N_BASE on are pairs: N_BASE + a * N_BASE + b
N_HISTORY = 4  # history planes in ``default``
NUM_SYMMETRIES = 8


def _base_id(name: str) -> int:
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(PRESETS))
        raise ValueError(f"unknown feature preset {name!r}; known presets: {known}") from None


def preset_id(name: str) -> int:
    """The id of a preset name or of a pair ``"a+b"``; ValueError listing
    the known names otherwise."""
    parts = name.split("+") if isinstance(name, str) else [name]
    if len(parts) == 2 and parts[0] != parts[1]:
        return N_BASE + _base_id(parts[0]) * N_BASE + _base_id(parts[1])
    if len(parts) != 1:
        raise ValueError(f"a preset pair is two different presets 'a+b', got {name!r}")
    return _base_id(name)


def pair(first: str, second: str) -> str:
    """The preset of ``first``'s planes followed by ``second``'s; ``first``
    itself when they are the same."""
    preset_id(first), preset_id(second)
    return first if first == second else f"{first}+{second}"


def split(preset: str) -> int | None:
    """Channels of the first preset of a pair (the rest are the second's);
    None for a single preset."""
    parts = preset.split("+")
    return num_planes(parts[0]) if len(parts) == 2 else None


def split_planes(planes, split: int | None):
    """(the policy's planes, the value net's) of a batch ``[..., C]`` encoded
    for a preset pair whose first preset has ``split`` channels (numpy or
    JAX); both the whole batch for a single preset (``split`` None)."""
    if split is None:
        return planes, planes
    return planes[..., :split], planes[..., split:]


@njit(cache=True, inline="always")
def _planes_of(pid):
    if pid < N_BASE:
        return _NPLANES[pid]
    return _NPLANES[(pid - N_BASE) // N_BASE] + _NPLANES[(pid - N_BASE) % N_BASE]


def num_planes(preset: str) -> int:
    """Number of channels C of a preset (or pair)."""
    return _planes_of(preset_id(preset))


# ---------------------------------------------------------------- encoding


@njit(cache=True, inline="always")
def _lib_plane(n, cap):
    # 1..cap-1 -> 0..cap-2; >= cap -> cap-1
    return (n if n < cap else cap) - 1


@njit(cache=True, inline="always")
def _quick_reason(color, head, libs, zob, bloom, p, me, W, ko, superko, h0):
    """``board.legal_reason(B, p, me)`` for the common cases, or -1.

    A call per point that passes the 12-array board tuple costs several times
    the check itself, so the caller asks ``legal_reason`` only when this
    returns -1: a capture, a possible suicide, or a superko Bloom-filter hit
    (``board.maybe_seen``; a miss means the position was never seen)."""
    if color[p] != EMPTY:
        return OCCUPIED
    if p == ko:
        return KO
    ok = False
    captures = False
    for n in (p - W, p - 1, p + 1, p + W):
        c = color[n]
        if c == EMPTY:
            ok = True
        elif c == me:
            if libs[head[n]] > 1:
                ok = True
        elif c == -me:
            if libs[head[n]] == 1:
                captures = True
    if captures or not ok:
        return -1
    if not superko:
        return LEGAL
    if not maybe_seen(bloom, h0 ^ zob[zobrist_index(me), p]):
        return LEGAL
    return -1


@njit(cache=True)
def encode_into(B, preset_id, out):
    """Fill ``out`` (float32 [size, size, C], C = planes of ``preset_id``)
    with the planes of board tuple ``B`` for its player to move; a pair's
    first preset in the first channels, its second in the rest."""
    if preset_id < 0 or preset_id >= N_BASE * (N_BASE + 1):
        raise ValueError("encode_into: unknown preset id")
    if out.shape[2] != _planes_of(preset_id):
        raise ValueError("encode_into: out must have shape [size, size, num_planes(preset)]")
    if preset_id < N_BASE:
        _encode_one(B, preset_id, out)
    else:
        a = (preset_id - N_BASE) // N_BASE
        _encode_one(B, a, out[:, :, :_NPLANES[a]])
        _encode_one(B, (preset_id - N_BASE) % N_BASE, out[:, :, _NPLANES[a]:])


@njit(cache=True)
def _encode_one(B, preset_id, out):
    color = B.color
    head = B.head
    libs = B.libs
    meta = B.meta
    size = meta[M_SIZE]
    W = size + 2
    me = meta[M_TOPLAY]
    if out.shape[0] != size or out.shape[1] != size:
        raise ValueError("encode_into: out must have shape [size, size, num_planes(preset)]")
    out[:] = 0.0
    zob = B.zob
    bloom = B.bloom
    superko = meta[M_SUPERKO] != 0
    h0 = meta[M_HASH]
    ko = meta[M_KO]
    kr = -1
    kc = -1
    if ko >= 0:
        kr = ko // W - 1
        kc = ko - (kr + 1) * W - 1

    if preset_id == THESIS3:
        for r in range(size):
            p = (r + 1) * W + 1
            for c in range(size):
                s = color[p + c]
                if s == EMPTY:
                    out[r, c, 2] = 1.0
                elif s == me:
                    out[r, c, 0] = 1.0
                else:
                    out[r, c, 1] = 1.0
    elif preset_id == CLARK7:
        for r in range(size):
            p = (r + 1) * W + 1
            for c in range(size):
                q = p + c
                s = color[q]
                if s != EMPTY:
                    ch = _lib_plane(libs[head[q]], 3)
                    if s != me:
                        ch += 3
                    out[r, c, ch] = 1.0
        if kr >= 0:
            out[kr, kc, 6] = 1.0
    elif preset_id == BOOK11:
        side = 8 if me == BLACK else 9
        for r in range(size):
            p = (r + 1) * W + 1
            for c in range(size):
                q = p + c
                s = color[q]
                out[r, c, side] = 1.0
                if s == EMPTY:
                    why = _quick_reason(color, head, libs, zob, bloom, q, me, W, ko, superko, h0)
                    if why < 0:
                        why = legal_reason(B, q, me)
                    if why == KO or why == SUPERKO:
                        out[r, c, 10] = 1.0
                else:
                    ch = _lib_plane(libs[head[q]], 4)
                    if s == WHITE:
                        ch += 4
                    out[r, c, ch] = 1.0
    elif preset_id == ALPHAGO48 or preset_id == ALPHAGO40:
        _encode_alphago(B, preset_id == ALPHAGO48, out)
    else:  # DEFAULT
        black = 1.0 if me == BLACK else 0.0
        for r in range(size):
            p = (r + 1) * W + 1
            for c in range(size):
                q = p + c
                s = color[q]
                if s == EMPTY:
                    out[r, c, 8] = 1.0
                    why = _quick_reason(color, head, libs, zob, bloom, q, me, W, ko, superko, h0)
                    if why < 0:
                        why = legal_reason(B, q, me)
                    if why != LEGAL:
                        out[r, c, 9] = 1.0
                else:
                    ch = _lib_plane(libs[head[q]], 4)
                    if s != me:
                        ch += 4
                    out[r, c, ch] = 1.0
                    out[r, c, 9] = 1.0
                out[r, c, 11] = black
                out[r, c, 12] = 1.0
        if kr >= 0:
            out[kr, kc, 10] = 1.0
        npts = size * size
        for i in range(N_HISTORY):
            m = meta[M_LAST + i]
            if 0 <= m < npts:
                out[m // size, m % size, 13 + i] = 1.0


@njit(cache=True)
def encode_stacked_into(S, n, preset_id, out):
    """``encode_into`` of the first ``n`` boards of the stacked boards ``S``
    (``board.stacked``) into ``out[:n]``: a batch of leaves in one call
    rather than one call (and one board crossing into Numba) per leaf."""
    for k in range(n):
        encode_into(board_at(S, k), preset_id, out[k])


@njit(cache=True)
def _encode_alphago(B, history, out):
    color = B.color
    head = B.head
    libs = B.libs
    meta = B.meta
    size = meta[M_SIZE]
    W = size + 2
    me = meta[M_TOPLAY]
    npts = size * size
    age = np.full(npts, 7, np.int64)
    for i in range(7, -1, -1):  # most recent last, so it wins a retaken point
        m = meta[M_LAST + i]
        if 0 <= m < npts:
            age[m] = i
    o = 8 if history else 0  # planes after the turns-since block move by o
    scratch = clone(B)
    facts = np.zeros(6, np.int64)
    for r in range(size):
        for c in range(size):
            q = (r + 1) * W + 1 + c
            s = color[q]
            out[r, c, 3] = 1.0
            if s == EMPTY:
                out[r, c, 2] = 1.0
                legal = move_facts(B, scratch, q, me, facts) == 1
                if legal:
                    out[r, c, o + 12 + min(facts[1], 7)] = 1.0
                    if facts[2] <= 1:  # self-atari, or a suicide (rules that allow it): the stones lost
                        out[r, c, o + 20 + _lib_plane(facts[3], 8)] = 1.0
                    if facts[2] >= 1:
                        out[r, c, o + 28 + _lib_plane(facts[2], 8)] = 1.0
                    out[r, c, o + 36] = facts[4]
                    out[r, c, o + 37] = facts[5]
                if sensible(B, q, me, legal):
                    out[r, c, o + 38] = 1.0
            else:
                out[r, c, 0 if s == me else 1] = 1.0
                if history:
                    out[r, c, 4 + age[r * size + c]] = 1.0
                out[r, c, o + 4 + _lib_plane(libs[head[q]], 8)] = 1.0


def encode(state, preset: str = "default") -> np.ndarray:
    """Planes of a ``board.GoState`` for its player to move: float32 [H, W, C]."""
    pid = preset_id(preset)
    out = np.zeros((state.size, state.size, _planes_of(pid)), np.float32)
    encode_into(state.board_tuple, pid, out)
    return out


# ---------------------------------------------------------------- symmetries


def _check_k(k) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not 0 <= k < NUM_SYMMETRIES:
        raise ValueError(f"symmetry index must be an integer in 0..7, got {k!r}")
    return int(k)


def inverse(k: int) -> int:
    """The symmetry that undoes ``k``: rotations invert, reflections are their own inverse."""
    k = _check_k(k)
    return (4 - k) % 4 if k < 4 else k


def compose(a: int, b: int) -> int:
    """The single symmetry equal to applying ``a`` first, then ``b``."""
    a, b = _check_k(a), _check_k(b)
    # As maps: g_k = R^(k%4) F^(k//4), with F R = R^-1 F.
    ra, fa = a % 4, a // 4
    rb, fb = b % 4, b // 4
    r = (rb - ra) % 4 if fb else (rb + ra) % 4
    return r + 4 * ((fa + fb) % 2)


def transform_planes(planes: np.ndarray, k: int) -> np.ndarray:
    """Apply symmetry ``k`` to an array whose last three axes are [..., H, W, C]
    (H == W). Returns a new C-contiguous array."""
    k = _check_k(k)
    x = np.asarray(planes)
    if x.ndim < 3 or x.shape[-3] != x.shape[-2]:
        raise ValueError(f"planes must be [..., H, W, C] with H == W, got shape {x.shape}")
    if k >= 4:
        x = np.flip(x, axis=-2)
    return np.ascontiguousarray(np.rot90(x, k % 4, axes=(-3, -2)))


@njit(cache=True, inline="always")
def _sym_rc(r, c, n, k):
    """Where the point (r, c) of an n x n board goes under symmetry k."""
    if k >= 4:
        c = n - 1 - c
    for _ in range(k & 3):
        t = r
        r = n - 1 - c
        c = t
    return r, c


@njit(cache=True)
def transform_planes_into(src, k, dst):
    """``dst`` [H, W, C] = symmetry ``k`` of ``src`` [H, W, C] (distinct arrays)."""
    n = src.shape[0]
    for r in range(n):
        for c in range(n):
            r2, c2 = _sym_rc(r, c, n, k)
            for ch in range(src.shape[2]):
                dst[r2, c2, ch] = src[r, c, ch]


@njit(cache=True)
def transform_move(move, size, k):
    """Flat move under symmetry ``k`` (pass = size*size maps to itself)."""
    if move == size * size:
        return move
    r2, c2 = _sym_rc(move // size, move % size, size, k)
    return r2 * size + c2


@njit(cache=True)
def transform_moves_into(src, size, k, dst):
    """``dst[transform_move(m)] = src[m]`` for a per-move vector [size*size+1]
    (a legal mask or a policy target); pass stays last."""
    npts = size * size
    for m in range(npts):
        r2, c2 = _sym_rc(m // size, m % size, size, k)
        dst[r2 * size + c2] = src[m]
    dst[npts] = src[npts]


@functools.lru_cache(maxsize=32)
def _move_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    n = size
    r, c = np.divmod(np.arange(n * n, dtype=np.int64), n)
    fwd = np.empty((NUM_SYMMETRIES, n * n + 1), np.int32)
    for k in range(NUM_SYMMETRIES):
        rr, cc = r.copy(), (n - 1 - c) if k >= 4 else c.copy()
        for _ in range(k % 4):
            rr, cc = n - 1 - cc, rr
        fwd[k, : n * n] = rr * n + cc
        fwd[k, n * n] = n * n
    inv = fwd[[inverse(k) for k in range(NUM_SYMMETRIES)]]
    fwd.flags.writeable = False
    inv.flags.writeable = False
    return fwd, inv


def sym_move_table(size: int) -> np.ndarray:
    """int32 [8, size*size+1]: ``T[k, m]`` is where move m goes under k; pass -> pass."""
    return _move_tables(int(size))[0].copy()


def inverse_move_table(size: int) -> np.ndarray:
    """int32 [8, size*size+1]: ``I[k, m2]`` is the move m with ``T[k, m] == m2``
    (maps a move chosen on a transformed board back to the real board)."""
    return _move_tables(int(size))[1].copy()


def untransform_policy(policy: np.ndarray, k: int) -> np.ndarray:
    """Map per-move values [..., A] predicted on a board transformed by ``k``
    back to the original board (A = size*size+1, pass last)."""
    k = _check_k(k)
    policy = np.asarray(policy)
    a = policy.shape[-1]
    size = math.isqrt(a - 1)
    if size * size + 1 != a:
        raise ValueError(f"last axis must be size*size+1, got {a}")
    return policy[..., _move_tables(size)[0][k]]


def check_symmetries(symmetries) -> int:
    """How many symmetric images to average (1..8), else ValueError."""
    k = int(symmetries)
    if not 1 <= k <= NUM_SYMMETRIES:
        raise ValueError(f"symmetries must be in 1..{NUM_SYMMETRIES}, got {symmetries!r}")
    return k


def symmetry_images(planes: np.ndarray, legal: np.ndarray, symmetries: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``symmetries`` images (the identity first) of positions,
    for one network call: planes [..., H, W, C] -> [k, ..., H, W, C], legal
    masks [..., A] -> [k, ..., A]. ``mean_of_images`` takes the net's
    per-move output back to the board and averages it."""
    k = check_symmetries(symmetries)
    legal = np.asarray(legal)
    inv = _move_tables(math.isqrt(legal.shape[-1] - 1))[1]
    return (np.stack([transform_planes(planes, g) for g in range(k)]),
            np.stack([legal[..., inv[g]] for g in range(k)]))


def mean_of_images(p: np.ndarray, symmetries: int) -> np.ndarray:
    """Per-move output [k, ..., A] of ``symmetry_images`` -> [..., A]: each
    image's mapped back to the board, averaged."""
    return np.mean([untransform_policy(p[g], g) for g in range(check_symmetries(symmetries))], axis=0)
