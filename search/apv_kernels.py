"""Compiled kernels of the asynchronous policy-value search (``search.apv``).

A simulation is three kernels, each over a few leaves at once so that no
Python runs per visit: ``descend_many`` (PUCT on the mixed value with
virtual loss, the path played on a scratch board, a new leaf expanded with
the pattern tree policy's priors, unseen positions queued for the network),
``rollout_many`` (one pattern rollout to the end from each leaf) and
``backup_many``. ``apply_net`` folds a returned network batch in: the
network's priors replace the tree policy's and its values are backed up
beside the rollouts.

Every kernel releases the GIL. Search threads share one tree: the tree
kernels run under one lock (``search.apv``), the rollouts, which take
nearly all the time, outside it; the network thread never touches the tree.

Statistics (AlphaGo, Methods "Search algorithm"): every edge keeps rollout
counts ``nr``/``wr`` and value-net counts ``nv``/``wv``, each sum from the
chooser's view; ``Q = (1 - lam) * wr/nr + lam * wv/nv`` (rollouts only
while ``nv == 0``). ``wr`` sums the rollouts' utilities (with a score term,
``utility``); ``wl`` beside it their wins and losses alone, so that the
winrates the engine reports stay winrates (``edge_winrate``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from alphalite.go import patterns
from alphalite.go.board import (M_NHIST, M_PASSES, M_SIZE, M_TOPLAY, area, board_at, borrow, borrowed,
                                clear_passes, copy_board, legal_mask, owners_into, play_flat, win_loss)
from alphalite.go.tactics import sensible
from alphalite.nn.features import encode_into
from alphalite.runtime.kernels import njit
from search.tree import subtree_nodes

NET_NONE, NET_QUEUED, NET_DONE = 0, 1, 2

# cfg slots (float64 array, so the kernels' signatures stay short)
C_PUCT, C_FPU, C_ROOT_FPU, C_LAM, C_KOMI, C_MAX_MOVES, C_MAX_DEPTH, C_PRESET, C_VL, \
    C_SCORE_W, C_SCORE_CENTER, C_SCORE_SCALE = range(12)
N_CFG = 12


class ApvTree(NamedTuple):
    """The tree as arrays, root at node 0 (``N`` nodes, ``A`` actions)."""

    children_index: np.ndarray  # int32 [N, A], -1: no node yet
    children_prior: np.ndarray  # float32 [N, A], masked and normalised
    children_legal: np.ndarray  # bool [N, A]
    children_nr: np.ndarray  # int32 [N, A] rollouts through the edge
    children_wr: np.ndarray  # float64 [N, A] their results (utilities), chooser's view
    children_wl: np.ndarray  # float64 [N, A] their wins (+1), losses (-1) and draws (0), chooser's view
    children_nv: np.ndarray  # int32 [N, A] network values through the edge
    children_wv: np.ndarray  # float64 [N, A]
    children_vl: np.ndarray  # int32 [N, A] descents in flight through the edge (virtual losses)
    node_nr: np.ndarray  # int32 [N]
    node_wr: np.ndarray  # float64 [N], node's player to move's view
    node_wl: np.ndarray  # float64 [N]
    node_nv: np.ndarray  # int32 [N]
    node_wv: np.ndarray  # float64 [N]
    node_vl: np.ndarray  # int32 [N] descents in flight through the node
    parents: np.ndarray  # int32 [N], -1 at the root
    action: np.ndarray  # int32 [N], the move from the parent
    to_play: np.ndarray  # int8 [N]
    terminal: np.ndarray  # bool [N]: two passes, scored exactly
    expanded: np.ndarray  # bool [N]
    net_state: np.ndarray  # int8 [N]: NET_NONE, NET_QUEUED, NET_DONE
    counter: np.ndarray  # int64 [1]: nodes in use


@njit(cache=True, inline="always")
def _borrowed(t):
    # The tree with every array borrowed (board.borrow): the kernels hand it
    # to small helpers at every level of a descent, and Numba would count
    # references to its 22 arrays around each call (atomic instructions).
    return ApvTree(borrow(t.children_index), borrow(t.children_prior), borrow(t.children_legal),
                   borrow(t.children_nr), borrow(t.children_wr), borrow(t.children_wl), borrow(t.children_nv),
                   borrow(t.children_wv), borrow(t.children_vl), borrow(t.node_nr), borrow(t.node_wr),
                   borrow(t.node_wl), borrow(t.node_nv), borrow(t.node_wv), borrow(t.node_vl), borrow(t.parents),
                   borrow(t.action), borrow(t.to_play), borrow(t.terminal), borrow(t.expanded), borrow(t.net_state),
                   borrow(t.counter))


_DTYPES = dict(children_index=np.int32, children_prior=np.float32, children_legal=np.bool_,
               children_nr=np.int32, children_wr=np.float64, children_wl=np.float64, children_nv=np.int32,
               children_wv=np.float64, children_vl=np.int32, node_nr=np.int32, node_wr=np.float64,
               node_wl=np.float64, node_nv=np.int32, node_wv=np.float64, node_vl=np.int32, parents=np.int32,
               action=np.int32, to_play=np.int8, terminal=np.bool_, expanded=np.bool_, net_state=np.int8,
               counter=np.int64)
_FILL = dict(children_index=-1, parents=-1, action=-1)


def new_tree(capacity: int, num_actions: int, to_play: int) -> ApvTree:
    N, A = max(int(capacity), 2), int(num_actions)
    arrays = []
    for name in ApvTree._fields:
        shape = (1,) if name == "counter" else ((N, A) if name.startswith("children_") else (N,))
        arrays.append(np.full(shape, _FILL.get(name, 0), _DTYPES[name]))
    t = ApvTree(*arrays)
    t.counter[0] = 1
    t.to_play[0] = to_play
    return t


def grown(t: ApvTree, need: int) -> ApvTree:
    """``t`` itself if ``need`` nodes fit, else a copy with doubled capacity."""
    cap = t.parents.shape[0]
    if need <= cap:
        return t
    new = max(need, 2 * cap)
    out = []
    for name, a in zip(ApvTree._fields, t):
        if name == "counter":
            out.append(a.copy())  # old views keep their own count
            continue
        b = np.full((new,) + a.shape[1:], _FILL.get(name, 0), a.dtype)
        b[:cap] = a
        out.append(b)
    return ApvTree(*out)


def advance(t: ApvTree, action: int) -> ApvTree | None:
    """The subtree under the root's child ``action``, re-rooted at 0 with its
    statistics (None if that child was never expanded). Positions queued
    for the network whose answer has not come are queued again later."""
    if not t.expanded[0]:
        return None
    child = int(t.children_index[0, action])
    if child < 0 or not t.expanded[child]:
        return None
    nodes = subtree_nodes(t.children_index, child)
    k = nodes.size
    cap = t.parents.shape[0]
    new = new_tree(max(2 * k, 1024), t.children_prior.shape[1], int(t.to_play[child]))
    remap = np.full(cap + 1, -1, np.int64)  # index -1 maps to remap[-1] == -1
    remap[nodes] = np.arange(k)
    for name in ApvTree._fields:
        if name == "counter":
            continue
        dst, src = getattr(new, name), getattr(t, name)
        if name == "children_index":
            ci = src[nodes]
            dst[:k] = np.where(ci >= 0, remap[ci], -1)
        elif name == "parents":
            dst[:k] = remap[src[nodes]]
        else:
            dst[:k] = src[nodes]
    new.parents[0] = -1
    new.action[0] = -1
    new.counter[0] = k
    ns = new.net_state[:k]
    ns[ns == NET_QUEUED] = NET_NONE
    return new


class Queue(NamedTuple):
    """Positions waiting for the network: planes, legal masks, node ids."""

    planes: np.ndarray  # float32 [Q, n, n, C]
    legal: np.ndarray  # bool [Q, A]
    node: np.ndarray  # int64 [Q]
    count: np.ndarray  # int64 [1]


class Policies(NamedTuple):
    """The pattern tables (``alphalite.go.patterns``): tree and rollout."""

    tree_tab: np.ndarray
    tree_w: np.ndarray
    tree_row: int
    roll: patterns.RolloutTables


@njit(cache=True, inline="always")
def edge_q(t, node, a, lam):
    """Mixed Q of edge ``(node, a)`` from the chooser's view (needs ``nr > 0``)."""
    q = t.children_wr[node, a] / t.children_nr[node, a]
    nv = t.children_nv[node, a]
    if nv > 0 and lam > 0.0:
        q = (1.0 - lam) * q + lam * t.children_wv[node, a] / nv
    return q


def edge_winrate(t, node, a, lam):
    """Mixed win/loss value of edge ``(node, a)`` in [-1, 1], chooser's view
    (``edge_q`` without the rollouts' score term; needs ``nr > 0``)."""
    return mixed(t.children_wl[node, a] / t.children_nr[node, a], t.children_wv[node, a], t.children_nv[node, a],
                 lam)


def node_winrate(t, node, lam):
    """Mixed win/loss value of ``node`` in [-1, 1], its player to move's view."""
    n = t.node_nr[node]
    return mixed(t.node_wl[node] / n if n > 0 else 0.0, t.node_wv[node], t.node_nv[node], lam)


@njit(cache=True, inline="always")
def node_q(t, node, lam):
    """Mixed value of ``node`` from its player to move's view."""
    n = t.node_nr[node]
    return mixed(t.node_wr[node] / n if n > 0 else 0.0, t.node_wv[node], t.node_nv[node], lam)


@njit(cache=True, inline="always")
def mixed(q_rollouts, wv, nv, lam):
    """``(1 - lam) * q_rollouts + lam * wv / nv``; the rollouts alone while
    the network has valued nothing (``nv`` 0)."""
    if nv > 0 and lam > 0.0:
        return (1.0 - lam) * q_rollouts + lam * wv / nv
    return q_rollouts


@njit(cache=True)
def pick(t, node, c_puct, fpu_reduction, lam, vl_weight=1.0):
    """The PUCT choice at ``node``: ``Q + c_puct * P * sqrt(N) / (1 + n)``,
    first-play urgency ``Q(node) - fpu_reduction * sqrt(visited prior
    mass)`` (never below -1) for unvisited moves; ties to the higher prior.
    Each descent in flight through an edge counts as ``vl_weight`` more
    rollouts, lost (virtual loss, ``SearchParams.virtual_loss``): ``n`` and
    ``N`` include them."""
    A = t.children_prior.shape[1]
    n_parent = t.node_nr[node] + vl_weight * t.node_vl[node]
    sq = math.sqrt(n_parent) if n_parent > 0 else 0.0
    mass = 0.0
    for a in range(A):
        if t.children_nr[node, a] + t.children_vl[node, a] > 0:
            mass += t.children_prior[node, a]
    fpu = max(node_q(t, node, lam) - fpu_reduction * math.sqrt(mass), -1.0)
    best = -1e300
    best_a = -1
    for a in range(A):
        if not t.children_legal[node, a]:
            continue
        nr = t.children_nr[node, a]
        vl = vl_weight * t.children_vl[node, a]
        n = nr + vl
        if n > 0:
            q = (t.children_wr[node, a] - vl) / n
            nv = t.children_nv[node, a]
            if nv > 0 and lam > 0.0:
                q = (1.0 - lam) * q + lam * t.children_wv[node, a] / nv
        else:
            q = fpu
        p = t.children_prior[node, a]
        s = q + c_puct * p * sq / (1.0 + n)
        if s > best or (s == best and p > t.children_prior[node, best_a]):
            best = s
            best_a = a
    return best_a


@njit(cache=True)
def set_priors(t, node, priors):
    """Masked, normalised ``priors`` (any non-negative weights; NaN counts
    as 0; all zero gives uniform) for ``node``'s legal moves."""
    A = t.children_prior.shape[1]
    total = 0.0
    nlegal = 0
    for a in range(A):
        if t.children_legal[node, a]:
            nlegal += 1
            x = priors[a]
            if x > 0.0:
                total += x
    for a in range(A):
        if not t.children_legal[node, a]:
            t.children_prior[node, a] = 0.0
        elif total > 0.0:
            x = priors[a]
            t.children_prior[node, a] = x / total if x > 0.0 else 0.0
        else:
            t.children_prior[node, a] = 1.0 / max(nlegal, 1)


@njit(cache=True)
def tree_moves(S, out):
    """bool ``out[A]``: the moves a node searches: the legal ones but the
    mover's own true eyes (``tactics.sensible``: AlphaGo's sensibleness, the
    rule of the rollouts and of every player's candidates). Filling one
    never captures and only gives liberties away, yet near the end of a
    game, one of the few moves left, it took visits from priors that did
    not rule it out (the tree policy's), and the lines under it read a
    living group dead."""
    legal_mask(S, out)
    me = S.meta[M_TOPLAY]
    n = S.meta[M_SIZE]
    for r in range(n):
        for c in range(n):
            out[r * n + c] = sensible(S, (r + 1) * (n + 2) + c + 1, me, out[r * n + c])


@njit(cache=True)
def expand(t, node, S, pol, prior_buf):
    """``node`` (position ``S``) expanded: its ``tree_moves``, the tree policy's priors."""
    tree_moves(S, t.children_legal[node])
    patterns.probabilities(S, patterns.state_for(S), pol.tree_tab, pol.tree_w, pol.tree_row, prior_buf)
    set_priors(t, node, prior_buf)
    t.expanded[node] = True


@njit(cache=True)
def restrict_root(t, allowed):
    """Only the ``allowed`` moves at the (expanded, unsearched) root, their
    priors normalised again (GTP analysis's ``avoid``/``allow``)."""
    t = _borrowed(t)
    for a in range(allowed.shape[0]):
        if not allowed[a]:
            t.children_legal[0, a] = False
    set_priors(t, 0, t.children_prior[0].astype(np.float64))


@njit(cache=True)
def _backup(t, node, z, wl, rollout, vl):
    """Add result ``z`` (from ``node``'s player to move's view) to ``node``
    and every ancestor: rollout counts (``wl``: the rollout's win/loss, the
    same view) or value-net counts. ``vl``: also take back the virtual loss
    the path was given on the way down."""
    me = t.to_play[node]
    if rollout:
        t.node_nr[node] += 1
        t.node_wr[node] += z
        t.node_wl[node] += wl
    else:
        t.node_nv[node] += 1
        t.node_wv[node] += z
    n = node
    while t.parents[n] >= 0:
        p = t.parents[n]
        a = t.action[n]
        s = z if t.to_play[p] == me else -z
        sl = wl if t.to_play[p] == me else -wl
        if vl:
            t.children_vl[p, a] -= 1
            t.node_vl[p] -= 1
        if rollout:
            t.children_nr[p, a] += 1
            t.children_wr[p, a] += s
            t.children_wl[p, a] += sl
            t.node_nr[p] += 1
            t.node_wr[p] += s
            t.node_wl[p] += sl
        else:
            t.children_nv[p, a] += 1
            t.children_wv[p, a] += s
            t.node_nv[p] += 1
            t.node_wv[p] += s
        n = p


LEAF_ROLLOUT, LEAF_TERMINAL = 0, 1


@njit(cache=True, inline="always")
def utility(margin, stone, cfg):
    """A finished game's value for ``stone``: its ``win_loss`` blended with
    weight ``cfg[C_SCORE_W]`` with KataGo's score utility, (2/pi)
    atan((margin - centre) / scale) in ``stone``'s view, so that of two wins
    the search prefers the larger (docs/strength.md)."""
    r = win_loss(margin, stone)
    w = cfg[C_SCORE_W]
    if w == 0.0:
        return r
    s = stone * (margin - cfg[C_SCORE_CENTER]) / cfg[C_SCORE_SCALE]
    return (1.0 - w) * r + w * (2.0 / math.pi) * math.atan(s)


@njit(cache=True)
def _descend(t, root, S, pol, q, cfg, prior_buf):
    """One descent with virtual loss (one rollout's worth on every edge
    taken) on scratch board ``S``: queue unseen positions for the network,
    expand a new leaf with the tree policy. Returns (leaf node, kind, and
    for a terminal leaf its utility and win/loss)."""
    c_puct, fpu, root_fpu, lam = cfg[C_PUCT], cfg[C_FPU], cfg[C_ROOT_FPU], cfg[C_LAM]
    max_depth = int(cfg[C_MAX_DEPTH])
    qcap = q.node.shape[0]
    copy_board(S, root)
    node = 0
    depth = 0
    while True:
        if t.terminal[node]:
            black, white = area(S)
            margin = black - white - cfg[C_KOMI]
            return node, LEAF_TERMINAL, utility(margin, t.to_play[node], cfg), win_loss(margin, t.to_play[node])
        if t.net_state[node] == NET_NONE and q.count[0] < qcap:
            k = q.count[0]
            encode_into(S, int(cfg[C_PRESET]), q.planes[k])
            tree_moves(S, q.legal[k])
            q.node[k] = node
            q.count[0] = k + 1
            t.net_state[node] = NET_QUEUED
        if not t.expanded[node]:
            expand(t, node, S, pol, prior_buf)
            return node, LEAF_ROLLOUT, 0.0, 0.0
        if depth >= max_depth:
            return node, LEAF_ROLLOUT, 0.0, 0.0
        a = pick(t, node, c_puct, root_fpu if node == 0 else fpu, lam, cfg[C_VL])
        if a < 0:
            raise RuntimeError("apv: a non-terminal node has no legal move")
        if play_flat(S, a, t.to_play[node]) != 0:
            raise RuntimeError("apv: a move marked legal was refused by the board")
        t.children_vl[node, a] += 1  # virtual loss, taken back by the backup
        t.node_vl[node] += 1
        depth += 1
        c = t.children_index[node, a]
        if c < 0:
            c = t.counter[0]
            t.counter[0] = c + 1
            t.children_index[node, a] = c
            t.parents[c] = node
            t.action[c] = a
            t.to_play[c] = S.meta[M_TOPLAY]
            t.terminal[c] = S.meta[M_PASSES] >= 2
        node = c


@njit(cache=True, nogil=True)
def descend_many(t, root, scr, pol, q, cfg, prior_buf, m, leaf_node, leaf_kind, leaf_value):
    """``m`` descents from board tuple ``root``, one after another (virtual
    loss keeps them apart), leaf ``k`` on scratch board ``k`` of the stacked
    boards ``scr`` (each with history room for a path and a rollout).
    Positions on the paths that the network has not seen are added to queue
    ``q`` while it has room. ``leaf_value[k]``: a terminal leaf's utility
    and win/loss. Returns the descents made (fewer only when the tree is
    full)."""
    t = _borrowed(t)
    root = borrowed(root)
    q = Queue(borrow(q.planes), borrow(q.legal), borrow(q.node), borrow(q.count))
    cfg = borrow(cfg)
    prior_buf = borrow(prior_buf)
    cap = t.parents.shape[0]
    for k in range(m):
        if t.counter[0] + 1 >= cap:
            return k
        leaf_node[k], leaf_kind[k], leaf_value[k, 0], leaf_value[k, 1] = _descend(t, root, borrowed(board_at(scr, k)),
                                                                                  pol, q, cfg, prior_buf)
    return m


@njit(cache=True, nogil=True)
def rollout_many(scr, pol, cfg, rng, m, leaf_kind, leaf_value, own, own_buf, margins):
    """One pattern rollout from each of the first ``m`` scratch boards: a
    rollout leaf's ``utility`` and win/loss for its player to move into
    ``leaf_value[k]``; each point's final owner (black +1) added to ``own``
    (the search's ownership estimate), its final area margin (black minus
    white minus komi), its square and black's win/loss (+1, -1, 0) to
    ``margins[0]``, ``margins[1]`` and ``margins[2]``. A terminal leaf (two
    passes in the tree) keeps its Tromp-Taylor value but is played out too,
    its passes forgotten, for the estimate: the lines that end the game are
    often the best ones, and an estimate without them rested on the others
    alone (from a finished 9x9 game, lines where the mover filled an eye of
    its only group: a group with two eyes read dead). Touches no tree: runs
    outside the tree lock. Returns the rollouts played."""
    max_moves = int(cfg[C_MAX_MOVES])
    komi = cfg[C_KOMI]
    for k in range(m):
        S = board_at(scr, k)
        terminal = leaf_kind[k] == LEAF_TERMINAL
        if terminal:
            clear_passes(S)
        me = S.meta[M_TOPLAY]
        patterns.rollout(S, patterns.state_for(S), pol.roll, rng, max_moves)
        owners_into(S, own_buf)
        margin = -komi
        for i in range(own_buf.shape[0]):
            own[i] += own_buf[i]
            margin += own_buf[i]
        if not terminal:
            leaf_value[k, 0] = utility(margin, me, cfg)
            leaf_value[k, 1] = win_loss(margin, me)
        margins[0] += margin
        margins[1] += margin * margin
        margins[2] += win_loss(margin, 1)
    return m


@njit(cache=True, nogil=True)
def backup_many(t, m, leaf_node, leaf_value):
    """Back the first ``m`` leaves' results up, taking back their virtual loss."""
    t = _borrowed(t)
    for k in range(m):
        _backup(t, leaf_node[k], leaf_value[k, 0], leaf_value[k, 1], True, True)


@njit(cache=True, nogil=True)
def apply_net(t, nodes, priors, values, n, lam):
    """Fold in the network's answers for ``nodes[:n]``: priors replace the
    tree policy's; values (player to move's view) are backed up when
    ``lam > 0``."""
    t = _borrowed(t)
    for i in range(n):
        node = nodes[i]
        if t.net_state[node] != NET_QUEUED:
            continue
        set_priors(t, node, priors[i])
        t.net_state[node] = NET_DONE
        if lam > 0.0:
            v = values[i]
            if v == v:
                _backup(t, node, min(1.0, max(-1.0, float(v))), 0.0, False, False)


def hist_room(root_board, max_moves: int, max_depth: int) -> int:
    """History length a scratch board needs for a path and a rollout."""
    return int(root_board.meta[M_NHIST]) + max_depth + max_moves + 16


def check(t: ApvTree) -> None:
    """Assert the bookkeeping invariants at rest (tests; O(nodes * A)): no
    virtual loss left, nothing left queued for the network, every edge's
    counts equal its child's, an expanded
    node's rollouts are its own plus its children's."""
    n = int(t.counter[0])
    assert not t.children_vl[:n].any() and not t.node_vl[:n].any(), "virtual loss left"
    assert not (t.net_state[:n] == NET_QUEUED).any(), "a node left queued for the network"
    for node in range(n):
        kids = t.children_index[node]
        for a in np.flatnonzero(kids >= 0):
            c = kids[a]
            assert t.parents[c] == node and t.action[c] == a
            assert t.children_nr[node, a] == t.node_nr[c], (node, a)
            assert t.children_nv[node, a] == t.node_nv[c], (node, a)
            sign = 1.0 if t.to_play[node] == t.to_play[c] else -1.0
            assert np.isclose(t.children_wr[node, a], sign * t.node_wr[c])
            assert np.isclose(t.children_wl[node, a], sign * t.node_wl[c])
            assert np.isclose(t.children_wv[node, a], sign * t.node_wv[c])
            assert t.children_legal[node, a]
        if t.expanded[node] and not t.terminal[node]:
            own = t.node_nr[node] - t.children_nr[node].sum()  # rollouts from the node itself
            assert own >= (0 if node == 0 else 1), (node, own)
            assert np.isclose(t.children_prior[node].sum(), 1.0, atol=1e-4)
            assert not t.children_prior[node][~t.children_legal[node]].any()
