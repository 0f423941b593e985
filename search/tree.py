"""The search tree as preallocated arrays (mctx style), root at node 0:
``TreeArrays``, a named tuple of arrays that the Numba kernels of
``search.mcts`` take as one argument, held by ``Tree`` with the root state.

``N`` is the node capacity, ``A = size*size + 1`` the number of actions (pass
last). Node 0 is the root; ``parents[0] == -1``.

Perspective. ``node_value_sum[n]`` and ``node_value[n]`` are from the point
of view of the player to move *at* node ``n`` (``node_to_play[n]``).
``children_value_sum[n, a]`` is from the point of view of the player to move
at ``n`` (the one choosing ``a``), so ``Q(n, a) = children_value_sum[n, a] /
children_visits[n, a]`` is what PUCT maximises at ``n``; with alternating
turns ``children_value_sum[n, a] == -node_value_sum[children_index[n, a]]``
and ``children_visits[n, a] == node_visits[children_index[n, a]]``.

Visits. A non-terminal node is evaluated once (its expansion), so for an
expanded node ``node_visits[n] == 1 + children_visits[n].sum()``; a terminal
node (two passes) is never expanded and counts each visit, with the exact
Tromp-Taylor value each time. After ``run_mcts`` on a fresh tree the root has
``num_simulations + 1`` visits.

Boards are not stored: a node's position is replayed from ``root_state``
along the real path (``parents``/``action_from_parent``), so legality,
ko and superko always come from the node's true history.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from alphalite.go import board as _board


class TreeArrays(NamedTuple):
    """The tree's arrays, one value the Numba kernels take whole (``N`` nodes
    of capacity, ``A`` actions)."""

    children_index: np.ndarray  # int32 [N, A]  child node, -1 = not created
    children_prior: np.ndarray  # float32 [N, A]  masked, normalised prior (0 if illegal)
    children_legal: np.ndarray  # bool [N, A]  legal at that node (real path, superko)
    children_visits: np.ndarray  # int32 [N, A]
    children_value_sum: np.ndarray  # float64 [N, A]  from the chooser's (node's) view
    children_virtual: np.ndarray  # int32 [N, A]  virtual losses in flight (0 at rest)
    node_visits: np.ndarray  # int32 [N]
    node_value_sum: np.ndarray  # float64 [N]  from node_to_play's view
    node_value: np.ndarray  # float32 [N]  the evaluation (or exact terminal value)
    node_virtual: np.ndarray  # int32 [N]  paths in flight through the node
    parents: np.ndarray  # int32 [N]  -1 for the root
    action_from_parent: np.ndarray  # int32 [N]  -1 for the root
    node_to_play: np.ndarray  # int8 [N]  +1 black, -1 white
    node_terminal: np.ndarray  # bool [N]  two passes: scored exactly, never expanded
    node_expanded: np.ndarray  # bool [N]  priors and legality set
    counter: np.ndarray  # int64 [1]  nodes in use (``num_nodes``)


# dtype and fill of each array; [N, A] for the children_*, [N] for the node
# arrays, [1] for counter
_LAYOUT = {"children_index": (np.int32, -1), "children_prior": (np.float32, 0),
           "children_legal": (np.bool_, 0), "children_visits": (np.int32, 0),
           "children_value_sum": (np.float64, 0), "children_virtual": (np.int32, 0),
           "node_visits": (np.int32, 0), "node_value_sum": (np.float64, 0), "node_value": (np.float32, 0),
           "node_virtual": (np.int32, 0), "parents": (np.int32, -1), "action_from_parent": (np.int32, -1),
           "node_to_play": (np.int8, 0), "node_terminal": (np.bool_, 0), "node_expanded": (np.bool_, 0)}


def tree_arrays(capacity: int, num_actions: int) -> TreeArrays:
    """Empty arrays for ``capacity`` nodes (counter 0)."""
    arrays = [np.full((capacity, num_actions) if name.startswith("children_") else capacity, fill, dtype)
              for name, (dtype, fill) in _LAYOUT.items()]
    return TreeArrays(*arrays, np.zeros(1, np.int64))


class Tree:
    """Array-based PUCT tree: ``arrays`` (``TreeArrays``, whose fields are
    also read as attributes: ``tree.children_visits``), ``root_state`` the
    ``GoState`` at node 0, ``raw_root_prior`` the root priors before
    Dirichlet noise (None when no noise was applied).
    """

    def __init__(self, root_state, capacity: int):
        self.root_state = root_state
        self.num_actions = root_state.size * root_state.size + 1
        self.raw_root_prior = None
        self.arrays = tree_arrays(max(int(capacity), 1), self.num_actions)
        # The root exists from the start (not yet expanded).
        self.counter[0] = 1
        self.node_to_play[0] = root_state.to_play
        self.node_terminal[0] = root_state.is_over

    # ------------------------------------------------------------ size

    @property
    def capacity(self) -> int:
        return self.node_visits.shape[0]

    @property
    def num_nodes(self) -> int:
        return int(self.counter[0])

    @property
    def size(self) -> int:
        return self.root_state.size

    def ensure_capacity(self, need: int) -> bool:
        """Grow (doubling) so that ``need`` nodes fit; True if it grew."""
        cap = self.capacity
        if need <= cap:
            return False
        grown = tree_arrays(max(need, 2 * cap), self.num_actions)
        for old, new in zip(self.arrays, grown):
            new[: old.shape[0]] = old
        self.arrays = grown
        return True

    # ------------------------------------------------------------ stats

    def q(self, node: int = 0) -> np.ndarray:
        """float64 [A]: mean value of each child from the chooser's view (NaN if unvisited)."""
        n = self.children_visits[node]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, self.children_value_sum[node] / np.maximum(n, 1), np.nan)

    def value(self, node: int = 0) -> float:
        """Mean value of ``node`` from its player to move's view."""
        v = int(self.node_visits[node])
        return float(self.node_value_sum[node] / v) if v else 0.0

    winrate_value = value  # the values are win/loss: the winrate the analysis lines print is 0.5 * (value + 1)

    def principal_variation(self, node: int = 0, max_len: int = 32) -> list[int]:
        """Most-visited line from ``node`` (flat moves; ties as ``choose_move``)."""
        pv = []
        while len(pv) < max_len and self.node_expanded[node]:
            visits = self.children_visits[node]
            a = choose_move(visits, self.children_prior[node], self.children_legal[node])
            if a < 0 or visits[a] == 0:
                break
            pv.append(a)
            node = int(self.children_index[node, a])
            if node < 0:
                break
        return pv

    @property
    def clean_root_prior(self) -> np.ndarray:
        """The root's priors before this move's noise (what ties and reports read)."""
        return self.raw_root_prior if self.raw_root_prior is not None else self.children_prior[0]

    def root_analysis(self, min_visits: int = 1, pv_len: int = 16) -> list[dict]:
        """Per visited root move (most visits first): move, visits, q (root
        player's view, [-1, 1]), winrate (0..1), prior (raw, before noise),
        lcb (winrate lower bound), pv, pv_visits (the visits of the node each
        pv move leads to). What ``lz-analyze`` and ``kata-analyze`` print."""
        prior = self.clean_root_prior

        def line(a):
            child = int(self.children_index[0, a])
            pv = [int(a)] + (self.principal_variation(child, pv_len - 1) if child >= 0 else [])
            pv_visits, node = [], 0
            for m in pv:
                pv_visits.append(int(self.children_visits[node, m]))
                node = int(self.children_index[node, m])
            return pv, pv_visits

        return analysis_rows(self.children_visits[0], prior, lambda a: self.children_value_sum[0, a]
                             / self.children_visits[0, a], line, min_visits)

    def check(self) -> None:
        """Assert the bookkeeping invariants (tests; O(nodes * A))."""
        n = self.num_nodes
        assert not self.children_virtual[:n].any() and not self.node_virtual[:n].any()
        for node in range(n):
            kids = self.children_index[node]
            for a in np.flatnonzero(kids >= 0):
                c = kids[a]
                assert self.parents[c] == node and self.action_from_parent[c] == a
                assert self.children_visits[node, a] == self.node_visits[c]
                sign = 1.0 if self.node_to_play[node] == self.node_to_play[c] else -1.0
                assert np.isclose(self.children_value_sum[node, a], sign * self.node_value_sum[c])
                assert self.children_legal[node, a]
            if self.node_expanded[node]:
                assert self.node_visits[node] == 1 + self.children_visits[node].sum()
                assert not (self.children_visits[node] > 0)[~self.children_legal[node]].any()


def choose_move(visits, prior, allowed, temperature: float = 0.0, gen=None) -> int:
    """The move to play after a search, among the ``allowed`` ones (bool
    ``[A]``): at temperature 0 the most visited (ties: the higher prior,
    then the lower index); at ``T > 0`` drawn with probability proportional
    to ``visits ** (1 / T)`` (``gen``: a numpy Generator). If no allowed
    move has a visit the prior stands in for the visits, and if no allowed
    move has prior either, every allowed move counts one. -1 if nothing is
    allowed. The one rule of the search, the players and self-play."""
    allowed = np.asarray(allowed, np.bool_)
    if not allowed.any():
        return -1
    prior = np.asarray(prior, np.float64)
    counts = np.where(allowed, np.asarray(visits, np.float64), 0.0)
    if not (counts > 0).any():
        counts = np.where(allowed, np.maximum(prior, 0.0), 0.0)
        if not (counts > 0).any():
            counts = allowed.astype(np.float64)
    if temperature <= 0:
        cand = np.flatnonzero(counts == counts.max())
        return int(cand[np.argmax(prior[cand])])
    mask = counts > 0
    logc = np.where(mask, np.log(np.where(mask, counts, 1.0)) / temperature, -np.inf)
    p = np.exp(logc - logc.max())
    return int(gen.choice(counts.shape[0], p=p / p.sum()))


def analysis_rows(visits, prior, q, line, min_visits: int = 1, win=None) -> list[dict]:
    """The rows ``lz-analyze``/``kata-analyze`` print, per root move with at
    least ``min_visits`` visits, most visits first (ties: higher prior):
    move, visits, q (``q(a)``, root player's view: the value the search
    maximises), winrate (from ``win(a)``, the win/loss value in [-1, 1];
    ``q`` itself when the search's values are win/loss), prior, lcb (a
    winrate lower bound), pv and pv_visits (``line(a) -> (moves, visits)``)."""
    win = win or q
    order = np.lexsort((-np.asarray(prior), -np.asarray(visits)))
    out = []
    for a in order:
        n = int(visits[a])
        if n < min_visits:
            break
        qa = float(q(int(a)))
        wr = 0.5 * (float(win(int(a))) + 1.0)
        lcb = wr - 1.96 * np.sqrt(max(wr * (1 - wr), 0.0025) / n)
        pv, pv_visits = line(int(a))
        out.append(dict(move=int(a), visits=n, q=qa, winrate=wr, prior=float(prior[a]), lcb=float(lcb), pv=pv,
                        pv_visits=pv_visits))
    return out


def subtree_nodes(children_index: np.ndarray, root: int) -> np.ndarray:
    """Nodes of the subtree under ``root`` in BFS order (root first)."""
    parts = [np.array([root], np.int64)]
    frontier = parts[0]
    while frontier.size:
        kids = children_index[frontier].ravel()
        frontier = kids[kids >= 0].astype(np.int64)
        if frontier.size:
            parts.append(frontier)
    return np.concatenate(parts)


def advance(tree: Tree, action: int) -> Tree:
    """The tree after ``action`` is played at the root: the chosen child's
    subtree, re-rooted at 0 with its statistics unchanged; the new root state
    is ``play(tree.root_state, action)`` (so the superko history is the real
    one). Chain it for several moves (opponent's move, then ours). If the
    child was never expanded the result is a fresh tree. Raises
    ``board.IllegalMove`` if ``action`` is illegal at the root."""
    state = _board.play(tree.root_state, int(action))
    child = int(tree.children_index[0, action]) if tree.node_expanded[0] else -1
    if child < 0 or not tree.node_expanded[child]:
        return Tree(state, 1 + max(tree.capacity // 2, 1))
    nodes = subtree_nodes(tree.children_index, child)
    new = Tree(state, max(nodes.size, tree.capacity))
    k = nodes.size
    remap = np.full(tree.capacity + 1, -1, np.int64)  # index -1 maps to remap[-1] == -1
    remap[nodes] = np.arange(k)
    ci = tree.children_index[nodes]
    new.children_index[:k] = np.where(ci >= 0, remap[ci], -1)
    for name in _LAYOUT:  # at rest: no virtual loss to carry
        if name not in ("children_index", "parents"):
            getattr(new, name)[:k] = getattr(tree, name)[nodes]
    new.parents[:k] = remap[tree.parents[nodes]]
    new.parents[0] = -1
    new.action_from_parent[0] = -1
    new.counter[0] = k
    return new


for _name in TreeArrays._fields:  # tree.children_visits is tree.arrays.children_visits
    setattr(Tree, _name, property(lambda self, _n=_name: getattr(self.arrays, _n)))
