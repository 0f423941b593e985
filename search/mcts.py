"""PUCT Monte Carlo tree search over array trees, with batched leaf evaluation.

::

    out = run_mcts(params, rng, state, evaluate_fn, num_simulations=800,
                   search_params=SearchParams(c_puct=1.5, batch_size=8))
    out.action, out.visit_probs, out.root_value, out.tree
    tree = advance(out.tree, out.action)          # reuse: our move ...
    tree = advance(tree, opponent_move)           # ... then theirs
    out = run_mcts(params, rng, next_state, evaluate_fn, num_simulations=800, tree=tree)

The evaluate_fn contract
------------------------
``evaluate_fn(params, leaves: Leaves) -> (priors, values)``

* ``leaves.boards``: list of ``B`` board tuples (``alphalite.go.board``), the
  positions to evaluate, each reached by really playing the path from the
  root (history, ko and superko are exact). They are the search's scratch
  buffers: read them, copy before mutating (``board.copy_board`` into your
  own scratch, or ``leaves.states()`` for ``GoState`` copies); they are
  overwritten after the call returns. ``leaves.stack``: the same boards as
  slots ``0..B-1`` of stacked boards (``board.stacked``), or None: a kernel
  that loops over them inside Numba takes it in one call (a board crosses
  into Numba in about 2 us, as long as a small kernel runs).
* ``leaves.legal``: bool ``[B, A]`` legal moves of the player to move (pass
  last). ``leaves.to_play``: int8 ``[B]``. ``leaves.size``, ``leaves.komi``,
  ``leaves.superko``, ``leaves.suicide``.
* ``leaves.seeds``: int64 ``[B]`` drawn from ``run_mcts``'s ``rng``, for
  stochastic evaluators (rollouts), so a search is deterministic for a fixed
  ``rng``.
* returns ``priors``: ``[B, A]`` non-negative weights or probabilities
  (numpy or JAX). The search masks them with ``legal`` and renormalises, so a
  plain softmax over all moves is fine; all-zero (or NaN) rows become uniform
  over the legal moves. ``values``: ``[B]`` in ``[-1, 1]`` from the point of
  view of the player to move at each leaf (+1 = that player wins).
* ``B`` varies from call to call (1..``batch_size``); an evaluator built on a
  jitted network pads to a fixed batch (see ``search.evaluators``) so JAX
  compiles once. The network call is the only JAX work; everything else here
  is numpy/Numba on the host.

Evaluators (``search.evaluators``): ``uniform_evaluator`` (tests, speed),
``value_evaluator`` (a Python value function of a ``GoState``, tests),
``rollout_evaluator`` (uniform or given priors + Numba random rollouts scored
Tromp-Taylor with komi: the search works before any value net exists),
``mix_rollouts`` (AlphaGo's ``lam * value_net + (1 - lam) * rollout``) and
``network_evaluator`` / ``policy_value_fn`` (features -> jitted net -> masked
softmax priors and value).

Selection
---------
At node ``s``, among legal actions only, maximise::

    Q(s, a) + c_puct * P(s, a) * sqrt(N(s)) / (1 + N(s, a))

``N(s)`` is the node's visit count (its own evaluation included) plus the
virtual visits in flight; ``Q`` is from the chooser's view. Virtual loss: each
in-flight path through an edge counts as ``virtual_loss`` (1) extra visits
with value -1, so ``Q = (W - VL) / (N + VL)``. First-play urgency for an edge with no visits
(Leela Zero / KataGo style): ``Q_fpu = Q(s) - fpu_reduction *
sqrt(sum of the priors of the visited children)``, ``Q(s)`` the node's mean
value, never below -1 (an untried move is no worse than a certain loss);
``root_fpu_reduction`` applies at the root (Leela Zero uses 0 there
when it adds noise). Ties go to the higher prior, then the lower index.

Batches, collisions
-------------------
Each round selects up to ``batch_size`` leaves one after another, virtual
loss staying on every path until the round's backup, then evaluates all new
leaves in one ``evaluate_fn`` call, expands them and backs up. A selection
that ends on a node created earlier in the same round (not yet evaluated) is
a *collision*: it is dropped (its virtual loss removed, nothing backed up);
a round makes at most ``2 * want`` attempts and the search keeps going until
exactly ``num_simulations`` visits were backed up. Terminal nodes (two
passes) are scored exactly (``+1``/``-1``/``0`` for the player to move,
Tromp-Taylor area with komi), never expanded, and may be visited by several
paths of a round.

Root, noise, temperature
------------------------
A fresh root is evaluated first (one call with ``B = 1``); it is not counted
in ``num_simulations``. With ``tree=`` from ``advance`` (same position, same
history, same komi) the subtree is kept and ``num_simulations`` *more*
visits are added; otherwise a fresh tree is built. ``dirichlet_alpha`` mixes
``(1 - dirichlet_fraction) * P + dirichlet_fraction * Dir(alpha)`` into the
root priors over the legal moves (fresh noise on each call; the clean priors
stay in ``tree.raw_root_prior``). ``visit_probs`` is the root visit
distribution (sums to 1). ``action``: temperature 0 takes the most visited
move (ties: higher raw prior, then lower index); temperature ``T > 0``
samples with probability proportional to ``N ** (1 / T)``.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple

import numpy as np

from alphalite.go import board as _board
from alphalite.go.board import (
    M_NHIST,
    M_PASSES,
    M_TOPLAY,
    Board,
    GoState,
    board_at,
    copy_board,
    legal_mask,
    play_flat,
    result_for,
    stacked,
)
from alphalite.runtime.kernels import njit
from search.params import SearchParams, mix_root_noise
from search.tree import Tree, TreeArrays, advance, choose_move

__all__ = ["Leaves", "SearchOutput", "run_mcts", "advance", "Tree"]

LEAF_NEW, LEAF_TERMINAL, LEAF_COLLIDE = 0, 1, 2
DEFAULT_PARAMS = SearchParams()


class SearchOutput(NamedTuple):
    action: int  # chosen move (flat, pass = size*size)
    visit_probs: np.ndarray  # float32 [A]: root visit distribution, sums to 1
    root_value: float  # mean root value, [-1, 1], root player to move's view
    tree: Tree  # the search tree (pass to advance() for reuse)


class Leaves:
    """The batch handed to ``evaluate_fn`` (see the module docstring)."""

    __leaf_slots_ = ("boards", "legal", "to_play", "seeds", "size", "komi", "superko", "suicide", "stack")

    def __init__(self, boards, legal, to_play, seeds, size, komi, superko, suicide, stack=None):
        self.boards = boards  # list of B board tuples (read-only scratch)
        self.stack = stack  # None, or stacked boards (board.stacked) whose first len(boards) slots are boards
        self.legal = legal  # bool [B, A]
        self.to_play = to_play  # int8 [B]
        self.seeds = seeds  # int64 [B]
        self.size = size
        self.komi = komi
        self.superko = superko
        self.suicide = suicide

    def __len__(self):
        return len(self.boards)

    def state(self, i: int) -> GoState:
        """A ``GoState`` copy of leaf ``i`` (slow path, for tests and simple evaluators)."""
        b = self.boards[i]
        nh = int(b.meta[M_NHIST])
        hist = np.zeros(max(nh + 1, 2 * self.size * self.size + 16), np.int64)
        hist[:nh] = b.hist[:nh]
        tup = Board(*(a.copy() for a in b))._replace(hist=hist, zob=b.zob)
        return GoState(self.size, self.komi, self.superko, self.suicide, tup)

    def states(self) -> list[GoState]:
        return [self.state(i) for i in range(len(self))]


# ---------------------------------------------------------------- kernels


class LeafSlots(NamedTuple):
    """One round's selections, filled by ``_select`` and read by ``_backup``
    (``M = 2 * batch_size`` attempts, ``B = batch_size`` board slots)."""

    node: np.ndarray  # int64 [M]  the node each attempt ended on
    kind: np.ndarray  # int64 [M]  LEAF_NEW, LEAF_TERMINAL or LEAF_COLLIDE
    slot: np.ndarray  # int64 [M]  scratch slot of a new leaf, else -1
    legal: np.ndarray  # bool [B, A]  a new leaf's legal moves, by slot


@njit(cache=True)
def puct_pick(T, node, c_puct, fpu_reduction, vl_weight=1.0):
    cp, cl, cv, cw, cvl = T.children_prior, T.children_legal, T.children_visits, T.children_value_sum, \
        T.children_virtual
    nv, nw, nvl = T.node_visits, T.node_value_sum, T.node_virtual
    A = cp.shape[1]
    n_parent = nv[node] + vl_weight * nvl[node]
    sq = math.sqrt(n_parent) if n_parent > 0 else 0.0
    parent_q = nw[node] / nv[node] if nv[node] > 0 else 0.0
    mass = 0.0
    for a in range(A):
        if cv[node, a] > 0:
            mass += cp[node, a]
    fpu = max(parent_q - fpu_reduction * math.sqrt(mass), -1.0)
    best = -1e300
    best_a = -1
    for a in range(A):
        if not cl[node, a]:
            continue
        vl = vl_weight * cvl[node, a]
        n = cv[node, a] + vl
        if n > 0:
            q = (cw[node, a] - vl) / n
        else:
            q = fpu
        s = q + c_puct * cp[node, a] * sq / (1.0 + n)
        if s > best or (s == best and cp[node, a] > cp[node, best_a]):
            best = s
            best_a = a
    return best_a


# The two kernels called from Python once a round take the tree, the leaf
# slots and the boards (``board.Board``) as plain tuples and name them inside:
# a plain tuple crosses into Numba about 1.5 us faster a call than a named
# tuple (the dispatcher's fingerprint of a named tuple spells out its class
# and field names), which is 4% of a round on 19x19 with a free evaluator,
# per named tuple.


@njit(cache=True)
def _select(tree, root, scratch, want, max_attempts, c_puct, fpu_reduction, root_fpu_reduction, vl_weight, komi,
            leaves):
    """Select up to ``want`` leaves (new or terminal) of ``tree``
    (``tuple(TreeArrays)``) with virtual loss, replaying each path on a board
    of ``scratch`` (``tuple(board.stacked(...))``, one slot per new leaf) from
    ``root`` (``tuple(Board)``). Returns (attempts made, new leaves) and fills
    ``leaves`` (``tuple(LeafSlots)``): new leaf ``k``'s board is scratch slot
    ``k`` with its legal mask in ``legal[k]``."""
    T = TreeArrays(*tree)
    L = LeafSlots(*leaves)
    root = Board(*root)
    scratch = Board(*scratch)
    ci, cvl, nvl, par, act = T.children_index, T.children_virtual, T.node_virtual, T.parents, T.action_from_parent
    ntp, nterm, nexp, nval, counter = T.node_to_play, T.node_terminal, T.node_expanded, T.node_value, T.counter
    m = 0
    got = 0
    n_new = 0
    while got < want and m < max_attempts:
        k = n_new
        S = board_at(scratch, k)
        copy_board(S, root)
        node = 0
        kind = LEAF_COLLIDE
        while True:
            if nterm[node]:
                kind = LEAF_TERMINAL
                break
            if not nexp[node]:
                kind = LEAF_COLLIDE
                break
            red = root_fpu_reduction if node == 0 else fpu_reduction
            a = puct_pick(T, node, c_puct, red, vl_weight)
            if a < 0:
                raise RuntimeError("search: a non-terminal node has no legal move")
            cvl[node, a] += 1
            nvl[node] += 1
            why = play_flat(S, a, ntp[node])
            if why != 0:
                raise RuntimeError("search: a move marked legal was refused by the board")
            c = ci[node, a]
            if c < 0:
                c = counter[0]
                if c >= ci.shape[0]:
                    raise RuntimeError("search: tree capacity exceeded")
                counter[0] = c + 1
                ci[node, a] = c
                par[c] = node
                act[c] = a
                meta = S.meta
                ntp[c] = meta[M_TOPLAY]
                node = c
                if meta[M_PASSES] >= 2:
                    nterm[c] = True
                    nval[c] = result_for(S, komi, ntp[c])
                    kind = LEAF_TERMINAL
                else:
                    legal_mask(S, L.legal[k])
                    kind = LEAF_NEW
                break
            node = c
        L.node[m] = node
        L.kind[m] = kind
        L.slot[m] = -1
        if kind == LEAF_NEW:
            L.slot[m] = k
            n_new += 1
        if kind != LEAF_COLLIDE:
            got += 1
        m += 1
    return m, n_new


@njit(cache=True)
def _backup(tree, m, leaves, priors, values):
    """Expand the first ``m`` selections of ``leaves`` (``tuple(LeafSlots)``)
    that are new leaves with their priors, back up values, remove virtual
    loss in ``tree`` (``tuple(TreeArrays)``). Returns the visits backed up."""
    T = TreeArrays(*tree)
    L = LeafSlots(*leaves)
    cp, cl, cv, cw, cvl = T.children_prior, T.children_legal, T.children_visits, T.children_value_sum, \
        T.children_virtual
    nv, nw, nval, nvl = T.node_visits, T.node_value_sum, T.node_value, T.node_virtual
    par, act, ntp, nexp = T.parents, T.action_from_parent, T.node_to_play, T.node_expanded
    leaf_legal = L.legal
    A = cp.shape[1]
    done = 0
    for j in range(m):
        node = L.node[j]
        kind = L.kind[j]
        v = 0.0
        if kind == LEAF_NEW:
            k = L.slot[j]
            total = 0.0
            nlegal = 0
            for a in range(A):
                if leaf_legal[k, a]:
                    nlegal += 1
                    x = priors[k, a]
                    if x > 0.0:  # NaN and negatives count as 0
                        total += x
            for a in range(A):
                lg = leaf_legal[k, a]
                cl[node, a] = lg
                if not lg:
                    cp[node, a] = 0.0
                elif total > 0.0:
                    x = priors[k, a]
                    cp[node, a] = x / total if x > 0.0 else 0.0
                else:
                    cp[node, a] = 1.0 / nlegal
            v = values[k]
            if not (v == v):
                v = 0.0
            v = min(1.0, max(-1.0, v))
            nval[node] = v
            nexp[node] = True
        elif kind == LEAF_TERMINAL:
            v = nval[node]
        me = ntp[node]
        if kind != LEAF_COLLIDE:
            nv[node] += 1
            nw[node] += v
            done += 1
        n = node
        while par[n] >= 0:
            p = par[n]
            a = act[n]
            cvl[p, a] -= 1
            nvl[p] -= 1
            if kind != LEAF_COLLIDE:
                s = v if ntp[p] == me else -v
                cv[p, a] += 1
                cw[p, a] += s
                nv[p] += 1
                nw[p] += s
            n = p
    return done


# ---------------------------------------------------------------- host side


class _Scratch:
    """``slots`` stacked board tuples for the leaves of one round."""

    def __init__(self, root_board, slots: int, hist_cap: int):
        self.slots = slots
        self.hist_cap = hist_cap
        self.arrays = stacked(root_board, slots, hist_cap)
        self.plain = tuple(self.arrays)  # as _select takes it
        self.views = [board_at(self.arrays, k) for k in range(slots)]


def _as_generator(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)):
        return np.random.default_rng(int(rng))
    try:  # a JAX key (raw uint32 or typed)
        import jax

        data = jax.random.key_data(rng) if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key) else rng
        return np.random.default_rng(np.asarray(data).astype(np.uint32).ravel())
    except Exception as e:  # noqa: BLE001 - re-raised as a clear TypeError
        raise TypeError(f"rng must be a numpy Generator, an int seed or a JAX key, got {type(rng)}") from e


def _same_position(a: GoState, b: GoState) -> bool:
    if a is b:
        return True
    if (a.size, a.komi, a.superko, a.suicide) != (b.size, b.komi, b.superko, b.suicide):
        return False
    ma, mb = a.board_tuple.meta, b.board_tuple.meta
    if not np.array_equal(ma, mb):
        # generation counters may differ; compare the rules-relevant slots
        keep = [_board.M_TOPLAY, _board.M_KO, _board.M_PASSES, _board.M_HASH, M_NHIST]
        if not np.array_equal(ma[keep], mb[keep]):
            return False
    nh = int(ma[M_NHIST])
    return (np.array_equal(a.board_tuple.hist[:nh], b.board_tuple.hist[:nh])
            and np.array_equal(a.board_tuple.color, b.board_tuple.color))


def _evaluate(evaluate_fn, params, leaves: Leaves, A: int):
    priors, values = evaluate_fn(params, leaves)
    priors = np.asarray(priors, np.float32)
    values = np.asarray(values, np.float32).reshape(-1)
    B = len(leaves)
    if priors.ndim != 2 or priors.shape[0] < B or priors.shape[1] != A or values.shape[0] < B:
        raise ValueError(f"evaluate_fn must return priors [{B}, {A}] and values [{B}], "
                         f"got {priors.shape} and {values.shape}")
    return np.ascontiguousarray(priors[:B]), np.ascontiguousarray(values[:B])


def run_mcts(
    params: Any,
    rng,
    root_state: GoState,
    evaluate_fn: Callable[[Any, Leaves], tuple[Any, Any]],
    *,
    num_simulations: int,
    search_params: SearchParams = DEFAULT_PARAMS,
    tree: Tree | None = None,
    max_seconds: float | None = None,
    callback: Callable[[Tree, int], bool] | None = None,
    new_noise: bool = True,
    allowed: np.ndarray | None = None,
) -> SearchOutput:
    """PUCT search from ``root_state``; see the module docstring.

    ``params`` is passed through to ``evaluate_fn``. ``rng``: numpy Generator
    (or int seed, or JAX key). ``num_simulations`` leaf visits are added (the
    root's own evaluation not counted). ``search_params``
    (``search.params.SearchParams``): ``c_puct``, the FPU reductions,
    ``batch_size`` (leaves per ``evaluate_fn`` call), root Dirichlet noise
    (``dirichlet_alpha`` 0: none; e.g. 0.03 for 19x19, 0.1-0.3 on small
    boards in self-play) and the move choice's temperature (``temperature_at``
    the root's move number); its ``lam`` is the evaluator's business
    (``search.evaluators.net_evaluator``). ``tree``: a tree from
    ``advance`` to reuse. ``max_seconds``: stop after the round in which this
    much wall time has passed (at least one round runs). ``callback(tree,
    visits_done)`` is called after every round (progress, ``lz-analyze``
    output, pondering); returning True stops the search. Stopping early
    leaves fewer than ``num_simulations`` visits; the tree stays
    consistent. ``new_noise`` False: a call that goes on with the same move's
    search keeps the root noise it has (AlphaZero draws it once a move).
    ``allowed`` (bool [A]): the only root moves searched, set when the root
    is expanded (a fresh tree; GTP analysis's ``avoid``/``allow``).
    Raises ValueError if the game is over."""
    if root_state.is_over:
        raise ValueError("run_mcts: the game is over (two passes)")
    if num_simulations < 0:
        raise ValueError("run_mcts: num_simulations must be >= 0")
    sp = search_params
    batch_size = sp.batch_size
    gen = _as_generator(rng)
    size = root_state.size
    A = size * size + 1
    root_board = root_state.board_tuple
    komi = float(root_state.komi)

    if tree is None or not _same_position(tree.root_state, root_state):
        tree = Tree(root_state, num_simulations + 1 + 2 * batch_size)
    else:
        tree.root_state = root_state

    def leaves_for(scr, n, legal):
        seeds = gen.integers(0, 2**62, size=n, dtype=np.int64)
        return Leaves(scr.views[:n], legal[:n], scr.arrays.meta[:n, M_TOPLAY].astype(np.int8), seeds,
                      size, komi, root_state.superko, root_state.suicide, scr.arrays)

    root_nhist = int(root_board.meta[M_NHIST])
    slots = max(1, batch_size)
    scratch = None
    max_attempts = 2 * batch_size
    L = LeafSlots(np.zeros(max_attempts, np.int64), np.zeros(max_attempts, np.int64),
                  np.zeros(max_attempts, np.int64), np.zeros((slots, A), np.bool_))

    def make_scratch():
        # a path is never longer than the number of nodes
        return _Scratch(root_board, slots, root_nhist + tree.capacity + 8)

    scratch = make_scratch()

    # Root evaluation.
    if not tree.node_expanded[0]:
        S = scratch.views[0]
        copy_board(S, root_board)
        legal_mask(S, L.legal[0])
        L.node[0] = 0
        L.kind[0] = LEAF_NEW
        L.slot[0] = 0
        priors, values = _evaluate(evaluate_fn, params, leaves_for(scratch, 1, L.legal), A)
        _backup(tuple(tree.arrays), 1, tuple(L), priors, values)
        if allowed is not None:
            keep = tree.children_legal[0] & allowed
            tree.children_legal[0] = keep
            p = np.where(keep, tree.children_prior[0], 0.0)
            tree.children_prior[0] = p / p.sum() if p.sum() > 0 else keep / max(keep.sum(), 1)
    elif allowed is not None:
        raise ValueError("run_mcts: root moves are restricted in a fresh tree only")

    # Root noise: fresh for each move's search, on the clean priors.
    if new_noise and tree.raw_root_prior is not None:
        tree.children_prior[0] = tree.raw_root_prior
        tree.raw_root_prior = None
    if new_noise and sp.root_noise:
        idx = np.flatnonzero(tree.children_legal[0])
        tree.raw_root_prior = tree.children_prior[0].copy()
        tree.children_prior[0, idx] = mix_root_noise(tree.raw_root_prior[idx], sp, gen)

    t_end = None if max_seconds is None else time.perf_counter() + float(max_seconds)
    done = 0
    empty_priors = np.zeros((1, A), np.float32)
    empty_values = np.zeros(1, np.float32)
    arrays = None  # tuple(tree.arrays), made again when the tree grows
    leaf_slots = tuple(L)
    root_plain = tuple(root_board)
    while done < num_simulations:
        want = min(batch_size, num_simulations - done)
        if tree.ensure_capacity(tree.num_nodes + max_attempts):
            scratch = make_scratch()
            arrays = None
        if arrays is None:
            arrays = tuple(tree.arrays)
        m, n_new = _select(arrays, root_plain, scratch.plain, want, max_attempts,
                           float(sp.c_puct_at(size)), float(sp.fpu_reduction), float(sp.root_fpu), float(sp.virtual_loss),
                           komi, leaf_slots)
        if n_new:
            priors, values = _evaluate(evaluate_fn, params, leaves_for(scratch, n_new, L.legal), A)
        else:
            priors, values = empty_priors, empty_values
        done += _backup(arrays, m, leaf_slots, priors, values)
        if callback is not None and callback(tree, done):
            break
        if t_end is not None and time.perf_counter() >= t_end:
            break

    visits = tree.children_visits[0].astype(np.float64)
    total = visits.sum()
    prior = tree.clean_root_prior
    if total > 0:
        visit_probs = (visits / total).astype(np.float32)
    else:
        visit_probs = prior.astype(np.float32) / max(float(prior.sum()), 1e-30)
    action = choose_move(visits, prior, tree.children_legal[0], sp.temperature_at(root_state.move_number), gen)
    return SearchOutput(action, visit_probs, tree.value(0), tree)
