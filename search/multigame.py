"""Many games searched at once, one network batch for all their leaves
(KataGo's and AlphaZero's self-play shape), in compiled code.

::

    ms = MultiSearch(K, size, komi, MultiParams(num_simulations=32, root="gumbel"))
    out = ms.search(net_fn, params, live, gen)    # one move's search in every live game
    ms.play(out.actions, live)                    # the chosen moves on the game boards

The ``K`` game trees live in one ``search.tree.TreeArrays`` node pool: game
``g`` owns nodes ``g * per_game .. (g + 1) * per_game - 1``, its root first,
and ``counter[g]`` (the pool's ``counter`` has ``K`` entries) is how many of
them are in use. ``per_game = 2 * num_simulations + 4``: every simulation creates at most
one node, and up to ``num_simulations + 2`` more carried over from the last
move. The arithmetic, perspective and visit invariants are those of
``search.tree`` (``Tree.check`` holds for each game's block at rest).

Evaluations carried over (a network cache, as KataGo's): after a move, the
played child's subtree is kept as *evaluated, unvisited* nodes (priors,
candidate moves, network value; visit counts and value sums zeroed). A
descent that reaches such a node takes its stored value instead of calling
the network on the same position again. Every search still starts from
zero visits and adds exactly ``num_simulations``, and a position's stored
evaluation is what the network would return for it again (same path from
the same game, so the same planes), so the search is the one a fresh tree
would make, with fewer network calls (``carry_over=False``: none kept).

A move's search is ``num_simulations + 1`` steps; each step runs
``select_leaves`` (one descent per live game, the path played on a scratch
board, a new leaf's planes encoded into row ``j`` of one batch), one call
``net_fn(params, planes [B, H, W, C], legal [B, A]) -> (priors [B, A],
values [B])`` for the ``B <= K`` new leaves (the contract of
``search.evaluators.policy_value_fn``; ``alphalite.nn.onnx_export.pv_fn`` on
the CPU), and ``backup_leaves`` (priors set, values backed up: the network's
value only, AlphaZero style, no rollouts). Step 0 evaluates the roots. No
Python runs per visit or per game inside a step.

Moves a node may choose are the candidate moves (``board.candidates_into``:
no own true eyes, pass only when nothing else is), with
``MultiParams.moves``: ``"area"`` (the default) keeps the inside of one's
own Tromp-Taylor territory open while any other move is left, since a net
trained on games without those moves never learns to defend its area, and
on 9x9 that area is open long before it is safe; ``"candidates"`` leaves
it out, the GTP players' rule. (Passing at any time, AlphaZero's rule,
ended the start net's 9x9 games after 29-99 moves, when one side's pass let
the other win by counting an undecided board.) The search and the games
agree. A leaf after two passes is terminal, scored exactly (Tromp-Taylor
with komi).

Root selection, ``MultiParams.root``:

* ``"gumbel"``: Gumbel top-``max_considered`` with sequential halving over
  ``num_simulations`` (``search.gumbel``), mctx's deterministic choice below
  the root; the target is the completed-Q improved policy and the move is
  the Gumbel argmax among the most visited actions (no temperature: the
  Gumbel noise is the exploration).
* ``"puct"``: PUCT everywhere (``search.mcts.puct_pick`` with the FPU of
  ``SearchParams``), Dirichlet noise mixed into each root's priors once per
  move; the target is the root visit distribution and the move is
  ``choose_move`` at the ``SearchParams`` temperature.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import numpy as np

from alphalite.go.board import (M_MOVES, M_PASSES, M_TOPLAY, board_at, candidates_into,
                                copy_board, init_board, play_flat, result_for, stacked, zobrist_table)
from alphalite.nn.features import encode_into, num_planes, preset_id
from alphalite.runtime.kernels import njit
from search.apv_kernels import set_priors
from search.gumbel import considered_table, improved_policy, interior_action, legal_count, root_action
from search.mcts import puct_pick
from search.params import SearchParams, mix_root_noise
from search.tree import TreeArrays, choose_move, tree_arrays

KIND_NONE, KIND_NEW, KIND_TERMINAL, KIND_CACHED = -1, 0, 1, 2
MODE_PUCT, MODE_GUMBEL = 0, 1
# cfg slots (float64 array)
C_MODE, C_PUCT, C_FPU, C_ROOT_FPU, C_VALUE_SCALE, C_MAXVISIT, C_KOMI, C_PRESET, C_AREA = range(9)
MOVE_RULES = ("area", "candidates")


@dataclasses.dataclass(frozen=True)
class MultiParams:
    num_simulations: int = 32  # visits a move, the root's own evaluation not counted
    root: str = "gumbel"  # "gumbel" (sequential halving, completed-Q target) or "puct" (visit target)
    max_considered: int = 16  # Gumbel: actions sampled at the root (m)
    gumbel_scale: float = 1.0  # Gumbel: scale of the root noise (0: none, deterministic)
    value_scale: float = 0.1  # Gumbel: c_scale of sigma(q) = (c_visit + max N) * c_scale * q
    maxvisit_init: float = 50.0  # Gumbel: c_visit
    puct: SearchParams = SearchParams()  # PUCT: c_puct, FPU, root Dirichlet noise, move temperature
    carry_over: bool = True  # keep the played move's evaluated subtree for the next search (network cache)
    moves: str = "area"  # "area" (own territory open while other moves are left) or "candidates"

    def __post_init__(self):
        if self.root not in ("gumbel", "puct"):
            raise ValueError(f"root must be 'gumbel' or 'puct', got {self.root!r}")
        if self.moves not in MOVE_RULES:
            raise ValueError(f"moves must be one of {MOVE_RULES}, got {self.moves!r}")
        if self.num_simulations < 1 or self.max_considered < 1:
            raise ValueError("num_simulations and max_considered must be >= 1")


class MoveSearch(NamedTuple):
    actions: np.ndarray  # int64 [K]  the move to play (-1 for a game not live)
    targets: np.ndarray  # float32 [K, A]  improved policy (Gumbel) or visit distribution (PUCT)
    root_values: np.ndarray  # float32 [K]  root mean value, its player to move's view
    net_calls: int  # network calls made
    leaves: int  # leaves evaluated by the network


def stacked_boards(k: int, size: int, hist_cap: int, superko: bool = True, suicide: bool = False):
    """``k`` empty boards, stacked (``board.stacked``: ``board_at(boards, g)``
    is board ``g``), and the empty board they were copied from."""
    fresh = init_board(size, superko, suicide, zobrist_table(), hist_cap)
    arrays = stacked(fresh, k, hist_cap)
    for g in range(k):
        copy_board(board_at(arrays, g), fresh)
    return arrays, fresh


# ---------------------------------------------------------------- kernels


@njit(cache=True)
def _clear(T, n):
    A = T.children_index.shape[1]
    for a in range(A):
        T.children_index[n, a] = -1
        T.children_prior[n, a] = 0.0
        T.children_legal[n, a] = False
        T.children_visits[n, a] = 0
        T.children_value_sum[n, a] = 0.0
        T.children_virtual[n, a] = 0
    T.node_visits[n] = 0
    T.node_value_sum[n] = 0.0
    T.node_value[n] = 0.0
    T.node_virtual[n] = 0
    T.parents[n] = -1
    T.action_from_parent[n] = -1
    T.node_to_play[n] = 0
    T.node_terminal[n] = False
    T.node_expanded[n] = False


@njit(cache=True)
def clear_block(T, per_game, g):
    base = g * per_game
    for n in range(base, base + max(T.counter[g], 1)):
        _clear(T, n)
    T.counter[g] = 0


@njit(cache=True)
def reset_roots(T, per_game, games, live, own, cfg):
    """A fresh root for every live game whose block is empty (nothing
    carried over): at the game's position, the candidate moves as its
    legal actions."""
    for g in range(live.shape[0]):
        base = g * per_game
        if not live[g] or T.counter[g] > 0:
            continue
        clear_block(T, per_game, g)
        B = board_at(games, g)
        T.counter[g] = 1
        T.node_to_play[base] = B.meta[M_TOPLAY]
        candidates_into(B, own, T.children_legal[base], False, False, cfg[C_AREA] > 0)


@njit(cache=True)
def select_leaves(T, per_game, games, scr, live, cfg, gumbel, table, planes, legal_out, leaf_node,
                  leaf_kind, leaf_row, own, sigma, probs):
    """One descent per live game from its root, the path played on scratch
    board ``g``; a new leaf's planes go to ``planes[j]`` and its candidate
    moves to ``legal_out[j]`` (``leaf_row[g] = j``). Returns the new leaves."""
    mode = int(cfg[C_MODE])
    preset = int(cfg[C_PRESET])
    komi = cfg[C_KOMI]
    j = 0
    for g in range(live.shape[0]):
        leaf_kind[g] = KIND_NONE
        leaf_row[g] = -1
        if not live[g]:
            continue
        S = board_at(scr, g)
        copy_board(S, board_at(games, g))
        root = g * per_game
        node = root
        while True:
            if T.node_terminal[node]:
                leaf_kind[g] = KIND_TERMINAL
                break
            if not T.node_expanded[node]:  # only a root: new nodes stop the descent below
                leaf_kind[g] = KIND_NEW
                break
            if T.node_visits[node] == 0:  # evaluated in the last move's search, not yet visited
                leaf_kind[g] = KIND_CACHED
                break
            if mode == MODE_GUMBEL:
                if node == root:
                    sim = 0
                    for a in range(T.children_visits.shape[1]):
                        sim += T.children_visits[node, a]
                    k = min(table.shape[0] - 1, legal_count(T, node))
                    a = root_action(T, node, gumbel[g], table[k, min(sim, table.shape[1] - 1)],
                                    cfg[C_VALUE_SCALE], cfg[C_MAXVISIT], sigma)
                else:
                    a = interior_action(T, node, cfg[C_VALUE_SCALE], cfg[C_MAXVISIT], sigma, probs)
            else:
                a = puct_pick(T, node, cfg[C_PUCT], cfg[C_ROOT_FPU] if node == root else cfg[C_FPU])
            if a < 0:
                raise RuntimeError("multigame: no action to take at an expanded node")
            if play_flat(S, a, T.node_to_play[node]) != 0:
                raise RuntimeError("multigame: a move marked legal was refused by the board")
            c = T.children_index[node, a]
            if c < 0:
                c = root + T.counter[g]
                if T.counter[g] >= per_game:
                    raise RuntimeError("multigame: a game's node block is full")
                T.counter[g] += 1
                T.children_index[node, a] = c
                T.parents[c] = node
                T.action_from_parent[c] = a
                meta = S.meta
                T.node_to_play[c] = meta[M_TOPLAY]
                node = c
                if meta[M_PASSES] >= 2:
                    T.node_terminal[c] = True
                    T.node_value[c] = result_for(S, komi, T.node_to_play[c])
                    leaf_kind[g] = KIND_TERMINAL
                else:
                    candidates_into(S, own, T.children_legal[c], False, False, cfg[C_AREA] > 0)
                    leaf_kind[g] = KIND_NEW
                break
            node = c
        leaf_node[g] = node
        if leaf_kind[g] == KIND_NEW:
            encode_into(S, preset, planes[j])
            for a in range(legal_out.shape[1]):
                legal_out[j, a] = T.children_legal[node, a]
            leaf_row[g] = j
            j += 1
    return j


@njit(cache=True)
def backup_leaves(T, leaf_node, leaf_kind, leaf_row, priors, values):
    """Expand the new leaves with their priors and back every leaf's value up
    to its root (a terminal leaf's is its exact result). Returns the visits."""
    done = 0
    for g in range(leaf_node.shape[0]):
        kind = leaf_kind[g]
        if kind == KIND_NONE:
            continue
        node = leaf_node[g]
        if kind == KIND_NEW:
            row = leaf_row[g]
            set_priors(T, node, priors[row])
            v = values[row]
            v = min(1.0, max(-1.0, v)) if v == v else 0.0
            T.node_value[node] = v
            T.node_expanded[node] = True
        else:  # terminal (exact) or carried over (its network value)
            v = T.node_value[node]
        me = T.node_to_play[node]
        T.node_visits[node] += 1
        T.node_value_sum[node] += v
        n = node
        while T.parents[n] >= 0:
            p = T.parents[n]
            a = T.action_from_parent[n]
            s = v if T.node_to_play[p] == me else -v
            T.children_visits[p, a] += 1
            T.children_value_sum[p, a] += s
            T.node_visits[p] += 1
            T.node_value_sum[p] += s
            n = p
        done += 1
    return done


@njit(cache=True)
def finish_gumbel(T, per_game, live, gumbel, cfg, targets, actions, root_values, sigma):
    """Per live game: the improved policy into ``targets[g]``, the move (the
    Gumbel score's best among the most visited) and the root value."""
    for g in range(live.shape[0]):
        actions[g] = -1
        root_values[g] = 0.0
        if not live[g]:
            continue
        root = g * per_game
        improved_policy(T, root, cfg[C_VALUE_SCALE], cfg[C_MAXVISIT], sigma, targets[g])
        most = 0
        for a in range(T.children_visits.shape[1]):
            if T.children_legal[root, a]:
                most = max(most, T.children_visits[root, a])
        actions[g] = root_action(T, root, gumbel[g], most, cfg[C_VALUE_SCALE], cfg[C_MAXVISIT], sigma)
        root_values[g] = T.node_value_sum[root] / max(T.node_visits[root], 1)


@njit(cache=True)
def play_moves(games, live, actions):
    """Play ``actions[g]`` on every live game's board (by its player to move)."""
    for g in range(live.shape[0]):
        if live[g]:
            B = board_at(games, g)
            if play_flat(B, actions[g], B.meta[M_TOPLAY]) != 0:
                raise RuntimeError("multigame: the chosen move is illegal")


@njit(cache=True)
def carry_over(T, T2, per_game, live, actions, keep, queue):
    """Into the empty pool ``T2``: for each live game, the subtree of ``T``
    under the root's child ``actions[g]`` (BFS, at most ``keep`` nodes),
    re-rooted at the block's first node, evaluations kept and visit
    statistics zeroed. A game with nothing to keep gets an empty block."""
    A = T.children_index.shape[1]
    for g in range(live.shape[0]):
        base = g * per_game
        clear_block(T2, per_game, g)
        if not live[g] or T.counter[g] == 0 or keep < 1:
            continue
        c = T.children_index[base, actions[g]]
        if c < 0 or not T.node_expanded[c]:
            continue
        queue[0] = c
        head = 0
        tail = 1
        while head < tail:
            n = queue[head]
            new = base + head
            T2.node_value[new] = T.node_value[n]
            T2.node_expanded[new] = T.node_expanded[n]
            T2.node_terminal[new] = T.node_terminal[n]
            T2.node_to_play[new] = T.node_to_play[n]
            for a in range(A):
                T2.children_prior[new, a] = T.children_prior[n, a]
                T2.children_legal[new, a] = T.children_legal[n, a]
                m = T.children_index[n, a]
                if m >= 0 and tail < keep and (T.node_expanded[m] or T.node_terminal[m]):
                    queue[tail] = m
                    T2.children_index[new, a] = base + tail
                    T2.parents[base + tail] = new
                    T2.action_from_parent[base + tail] = a
                    tail += 1
            head += 1
        T2.counter[g] = tail


# ---------------------------------------------------------------- host side


class MultiSearch:
    """``K`` game slots (boards) and their search trees; see the module docstring.

    ``games`` (stacked boards) hold the games' positions: ``new_game(g)``
    sets slot ``g`` to the empty board, ``play(actions, live)`` plays a move
    in every live slot, ``board(g)`` is slot ``g``'s board tuple (a view)."""

    def __init__(self, k: int, size: int, komi: float, params: MultiParams = MultiParams(), *,
                 preset: str = "default", max_moves: int | None = None, superko: bool = True):
        from alphalite.go.board import default_max_moves

        self.k, self.size, self.komi, self.params = int(k), int(size), float(komi), params
        self.A = size * size + 1
        self.max_moves = default_max_moves(size) if max_moves is None else int(max_moves)
        hist = self.max_moves + 16
        self.games, self._fresh = stacked_boards(k, size, hist, superko)
        self.scratch, _ = stacked_boards(k, size, hist + params.num_simulations + 16, superko)
        self.per_game = 2 * params.num_simulations + 4
        self.tree = tree_arrays(self.k * self.per_game, self.A)._replace(counter=np.zeros(self.k, np.int64))
        self.spare = tree_arrays(self.k * self.per_game, self.A)._replace(counter=np.zeros(self.k, np.int64))
        self.queue = np.zeros(self.per_game, np.int64)
        C = num_planes(preset)
        self.planes = np.zeros((k, size, size, C), np.float32)
        self.legal = np.zeros((k, self.A), np.bool_)
        self.leaf_node = np.zeros(k, np.int64)
        self.leaf_kind = np.zeros(k, np.int64)
        self.leaf_row = np.zeros(k, np.int64)
        self.own = np.zeros(size * size, np.int8)
        self.sigma = np.zeros(self.A, np.float64)
        self.probs = np.zeros(self.A, np.float64)
        sp = params.puct
        self.cfg = np.array([MODE_GUMBEL if params.root == "gumbel" else MODE_PUCT, sp.c_puct_at(size), sp.fpu_reduction,
                             sp.root_fpu, params.value_scale, params.maxvisit_init, self.komi, preset_id(preset),
                             params.moves == "area"],
                            np.float64)
        self.table = considered_table(params.max_considered, params.num_simulations)

    def new_game(self, g: int) -> None:
        copy_board(board_at(self.games, g), self._fresh)
        clear_block(self.tree, self.per_game, g)

    def board(self, g: int):
        return board_at(self.games, g)

    def move_number(self, g: int) -> int:
        return int(self.games.meta[g, M_MOVES])

    def passes(self, g: int) -> int:
        return int(self.games.meta[g, M_PASSES])

    def search(self, net_fn: Callable, params: Any, live: np.ndarray, gen: np.random.Generator) -> MoveSearch:
        """One move's search in every ``live`` game (bool [K])."""
        live = np.ascontiguousarray(live, np.bool_)
        p, T = self.params, self.tree
        reset_roots(T, self.per_game, self.games, live, self.own, self.cfg)
        gumbel = np.zeros((self.k, self.A), np.float64)
        clean = {}
        if p.root == "gumbel" and p.gumbel_scale > 0:
            gumbel = p.gumbel_scale * gen.gumbel(size=(self.k, self.A))
        calls = leaves = 0
        for step in range(p.num_simulations + 1):
            n = select_leaves(T, self.per_game, self.games, self.scratch, live, self.cfg, gumbel,
                              self.table, self.planes, self.legal, self.leaf_node, self.leaf_kind, self.leaf_row,
                              self.own, self.sigma, self.probs)
            if n:
                priors, values = net_fn(params, self.planes[:n], self.legal[:n])
                priors = np.ascontiguousarray(np.asarray(priors)[:n], np.float32)
                values = np.ascontiguousarray(np.asarray(values).reshape(-1)[:n], np.float32)
                calls += 1
                leaves += n
            else:
                priors, values = np.zeros((1, self.A), np.float32), np.zeros(1, np.float32)
            backup_leaves(T, self.leaf_node, self.leaf_kind, self.leaf_row, priors, values)
            if step == 0 and p.root == "puct":
                clean = self._root_noise(live, gen)
        targets = np.zeros((self.k, self.A), np.float64)
        actions = np.full(self.k, -1, np.int64)
        root_values = np.zeros(self.k, np.float64)
        if p.root == "gumbel":
            finish_gumbel(T, self.per_game, live, gumbel, self.cfg, targets, actions, root_values, self.sigma)
        else:
            self._finish_puct(live, gen, targets, actions, root_values, clean)
        return MoveSearch(actions, targets.astype(np.float32), root_values.astype(np.float32), calls, leaves)

    def _roots(self, live):
        return np.flatnonzero(live) * self.per_game

    def _root_noise(self, live, gen) -> dict[int, np.ndarray]:
        """Dirichlet noise mixed into every live root's priors; returns the
        clean priors by root node (empty without noise)."""
        sp = self.params.puct
        clean = {}
        if not sp.root_noise:
            return clean
        for r in self._roots(live):
            idx = np.flatnonzero(self.tree.children_legal[r])
            clean[int(r)] = self.tree.children_prior[r].copy()
            self.tree.children_prior[r, idx] = mix_root_noise(clean[int(r)][idx], sp, gen)
        return clean

    def _finish_puct(self, live, gen, targets, actions, root_values, clean):
        """Visit targets, moves and root values; ties and the fallback move
        read the clean priors (``clean``, from ``_root_noise``), which go
        back into the roots."""
        T, sp = self.tree, self.params.puct
        for g in np.flatnonzero(live):
            r = g * self.per_game
            if r in clean:
                T.children_prior[r] = clean[r]
            visits = T.children_visits[r].astype(np.float64)
            targets[g] = visits / max(visits.sum(), 1.0)
            actions[g] = choose_move(visits, T.children_prior[r], T.children_legal[r],
                                     sp.temperature_at(self.move_number(g)), gen)
            root_values[g] = T.node_value_sum[r] / max(T.node_visits[r], 1)

    def play(self, actions: np.ndarray, live: np.ndarray) -> None:
        """Play ``actions[g]`` in every ``live`` game; the searched trees are
        replaced by what is carried over (or emptied)."""
        live = np.ascontiguousarray(live, np.bool_)
        actions = np.asarray(actions, np.int64)
        play_moves(self.games, live, actions)
        keep = self.per_game - self.params.num_simulations - 2 if self.params.carry_over else 0
        carry_over(self.tree, self.spare, self.per_game, live, actions, keep, self.queue)
        self.tree, self.spare = self.spare, self.tree

    def game_tree(self, g: int) -> TreeArrays:
        """Game ``g``'s block of the pool as a tree of its own (a copy, node
        ids rebased to 0; tests and analysis)."""
        base, n = g * self.per_game, int(self.tree.counter[g])
        parts = []
        for name, arr in zip(TreeArrays._fields, self.tree):
            if name == "counter":
                parts.append(np.array([n], np.int64))
                continue
            a = arr[base: base + n].copy()
            if name in ("children_index", "parents"):
                a = np.where(a >= 0, a - base, -1).astype(arr.dtype)
            parts.append(a)
        return TreeArrays(*parts)
