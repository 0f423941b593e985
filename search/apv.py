"""Asynchronous policy-value MCTS (AlphaGo, Methods "Search algorithm") on
two CPU cores: pattern rollouts in compiled code on one core, the network on
the other.

::

    search = ApvSearch(net_fn, params, preset, tree_policy, rollout_policy, size=19)
    out = search.run(state, max_seconds=1.0)      # or max_sims=...
    out.action, out.visit_probs, out.root_value, out.tree
    search.close()

The search thread runs ``apv_kernels.simulate`` in chunks (no Python per
visit, the GIL released): every new leaf is expanded with the pattern tree
policy's priors and valued at once by one pattern rollout; positions the
network has not seen are queued. A network thread takes the queue in
batches (``net_fn(params, planes, legal) -> (priors, values)``, ONNX Runtime
or JAX, both release the GIL); between chunks the search thread folds the
returned batch in (``apply_net``): the network's priors replace the tree
policy's, its values join the rollouts as ``Q = lam * value net + (1 - lam)
* rollouts``. The root is evaluated by the network before the first
simulation. Without a value net pass ``lam=0`` (priors only).

A ``net_fn`` may give a third output, the value net's ownership head
(``[B, size*size]``, mover's view, KataGo's): the search's ownership is
then ``lam`` times the mean over the positions the network evaluated (the
tree's average, as KataGo reports it) plus ``1 - lam`` times the rollouts'
final owners.

``synchronous=True`` runs the network in the search thread after every chunk
(deterministic for a fixed seed: tests).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Callable, NamedTuple

import numpy as np

from alphalite.go.board import GoState, board_at, copy_board, default_max_moves, legal_mask, stacked
from alphalite.runtime import cpu
from search import apv_kernels as K
from search.params import SearchParams, mix_root_noise
from search.tree import analysis_rows

# a path is cut (valued by a rollout without expanding) this deep
MAX_DEPTH = 256
CHUNK_SECONDS = 0.004
NET_TIMEOUT = 60.0  # seconds a network batch may take before the search gives up
# A tree doubling copies every array into fresh memory: seconds per node and
# action. Measured 16-50 ns warm and 200 ns where the memory is touched for the
# first time (2-core AMD EPYC VM; a 9x9 tree of 16K nodes took 0.28 s), which
# made 9x9 moves of 1.04 and 1.34 s at 1 s byo-yomi (docs/strength.md).
GROW_SECONDS_PER_ENTRY = 1e-7
# KataGo's dynamic score utility: scale per board side, centre shrunk towards 0
SCORE_SCALE, SCORE_CENTER_ZERO_WEIGHT = 0.75, 0.2


class ApvOutput(NamedTuple):
    action: int  # most-rollout-visited root move (flat, pass = size*size)
    visit_probs: np.ndarray  # float32 [A]: root rollout-visit distribution
    root_value: float  # mixed root value, [-1, 1], the root player's view (with a score utility
    # the tree's wins and losses, node_wl, not its utilities)
    tree: K.ApvTree
    simulations: int  # rollouts this search
    net_evals: int  # positions the network evaluated this search (root included)
    seconds: float
    # The search's view of the end of the game, filled in the final output
    # only (zeros in the outputs a callback sees during the search):
    ownership: np.ndarray  # float32 [size*size]: mean final owner, black +1, white -1 (the rollouts',
    # mixed with the ownership head's by lambda where the value net has one)
    margin: float  # the rollouts' mean final area, black minus white minus komi
    margin_stdev: float  # its standard deviation over the rollouts
    rollouts: int  # the rollouts these cover (this search's, not a reused tree's)
    net_ownership: int = 0  # network-evaluated positions in ``ownership`` (0: no ownership head)


class _NetWorker:
    """A thread that runs ``net_fn`` on one batch at a time."""

    def __init__(self, net_fn, params):
        self.net_fn, self.params = net_fn, params
        self._go = threading.Event()
        self._done = threading.Event()
        self._done.set()
        self._job = None
        self.result = None
        self.error = None
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="apv-net", daemon=True)
        self._thread.start()

    def _loop(self):
        while True:
            self._go.wait()
            self._go.clear()
            if self._stop:
                return
            planes, legal = self._job
            try:
                self.result = _answers(self.net_fn(self.params, planes, legal))
            except BaseException as e:  # noqa: BLE001 - handed to the search thread
                self.error = e
            self._done.set()

    @property
    def idle(self) -> bool:
        return self._done.is_set()

    def submit(self, planes, legal):
        self._done.clear()
        self.result = None
        self._job = (planes, legal)
        self._go.set()

    def wait(self, timeout=None) -> bool:
        return self._done.wait(timeout)

    def close(self):
        self._stop = True
        self._go.set()
        self._thread.join(timeout=5)


def _answers(out):
    """(priors, values, ownership or None) of a ``net_fn`` call, as float32."""
    own = np.asarray(out[2], np.float32) if len(out) > 2 else None
    return np.asarray(out[0], np.float32), np.asarray(out[1], np.float32).reshape(-1), own


class _Lane:
    """One search thread's scratch: ``m`` stacked boards and leaf slots."""

    def __init__(self, root_board, m: int, hist_cap: int, A: int, seed: int):
        self.m = m
        self.scr = stacked(root_board, m, hist_cap)
        self.hist_cap = hist_cap
        self.leaf_node = np.zeros(m, np.int64)
        self.leaf_kind = np.zeros(m, np.int64)
        self.leaf_value = np.zeros((m, 2), np.float64)  # a leaf's utility and win/loss
        self.prior_buf = np.zeros(A, np.float64)
        self.rng = np.array([seed], np.int64)
        self.own = np.zeros(A - 1, np.float64)  # summed final owners of this lane's rollouts (black +1)
        self.own_buf = np.zeros(A - 1, np.int8)
        self.margins = np.zeros(3, np.float64)  # summed final area margins, their squares, black's win/loss
        self.n_own = 0


class ApvSearch:
    """The search for one board size; keep it for the whole game (the
    network thread is made once). ``net_fn`` None: no network (a board size
    none plays, ``lam`` 0): the tree policy's priors and the rollouts alone."""

    initial_nodes = 1024  # tree capacity a timed search starts with (it doubles as needed)

    def __init__(self, net_fn: Callable, params, preset_id: int, num_planes: int, tree_policy, rollout_policy,
                 *, size: int, search_params: SearchParams | None = None, batch_size: int = 32,
                 pad_batches: bool = False, max_moves: int | None = None, threads: int | None = None,
                 leaves_per_call: int | None = None, synchronous: bool = False, seed: int = 0):
        sp = search_params or SearchParams()
        if net_fn is None and sp.lam:
            raise ValueError("apv: lambda must be 0 without a network")
        self.sp = sp
        self.size = size
        self.A = size * size + 1
        self.net_fn, self.params = net_fn, params
        self.batch = int(batch_size) if net_fn is not None else 0  # no network: nothing is ever queued
        self.pad = pad_batches
        self.max_moves = int(max_moves or default_max_moves(size))
        # search threads (one per core; the network thread runs beside them)
        # and the leaves each takes per kernel call (a few milliseconds of
        # rollouts; more leaves in flight means more virtual loss)
        self.threads = 1 if synchronous else int(threads or cpu.cores())
        self.m = int(leaves_per_call or max(1, round(CHUNK_SECONDS / (2e-6 * size ** 3))))
        self.pol = K.Policies(tree_policy.tab, tree_policy.w, int(tree_policy.row), rollout_policy.rollout_tables())
        self.preset_id = int(preset_id)
        self.queues = [K.Queue(np.zeros((self.batch, size, size, num_planes), np.float32),
                               np.zeros((self.batch, self.A), np.bool_), np.zeros(self.batch, np.int64),
                               np.zeros(1, np.int64)) for _ in range(2)]
        self.seeds = np.random.default_rng(seed)
        self.worker = None if synchronous or net_fn is None else _NetWorker(net_fn, params)
        if self.worker is not None:  # stop the thread at exit, or when the search is dropped unclosed
            weakref.finalize(self, self.worker.close)
        self._lanes: list[_Lane] = []
        self._running = threading.Lock()  # one search at a time: the queues and lanes are shared
        self._last_margin: tuple[int, float] | None = None  # (move number, mean final margin) of the last search

    def cfg(self, komi: float, center: float = 0.0) -> np.ndarray:
        sp = self.sp
        c = np.zeros(K.N_CFG, np.float64)
        c[K.C_PUCT], c[K.C_FPU], c[K.C_ROOT_FPU], c[K.C_LAM] = sp.c_puct_at(self.size), sp.fpu_reduction, sp.root_fpu, sp.lam
        c[K.C_VL] = sp.virtual_loss
        c[K.C_KOMI], c[K.C_MAX_MOVES], c[K.C_MAX_DEPTH], c[K.C_PRESET] = komi, self.max_moves, MAX_DEPTH, \
            self.preset_id
        c[K.C_SCORE_W], c[K.C_SCORE_CENTER] = sp.score_utility_at(self.size), center
        c[K.C_SCORE_SCALE] = SCORE_SCALE * self.size
        return c

    def _center(self, state: GoState) -> float:
        """The score utility's centre: the mean final margin (black's view)
        of this game's previous search, one or two moves back, shrunk
        towards 0 as KataGo does; 0 without one."""
        last = self._last_margin
        if last is None or not 0 < state.move_number - last[0] <= 2:
            return 0.0
        return (1.0 - SCORE_CENTER_ZERO_WEIGHT) * last[1]

    def _lanes_for(self, root) -> list[_Lane]:
        need = K.hist_room(root, self.max_moves, MAX_DEPTH)
        lanes = self._lanes
        if (len(lanes) != self.threads or lanes[0].hist_cap < need
                or lanes[0].scr.color.shape[1] != root.color.shape[0]):
            cap = need + 256  # room for later moves of the game
            self._lanes = lanes = [_Lane(root, self.m, cap, self.A, int(self.seeds.integers(1, 2**62)))
                                   for _ in range(self.threads)]
        return lanes

    def _net(self, q: K.Queue):
        """(planes, legal) of the queued positions, padded when asked."""
        n = int(q.count[0])
        if self.pad and n < self.batch:
            q.planes[n:] = 0.0
            q.legal[n:] = True
            return q.planes, q.legal
        return q.planes[:n], q.legal[:n]

    def run(self, state: GoState, *, max_sims: int | None = None, max_seconds: float | None = None,
            callback: Callable | None = None, tree: K.ApvTree | None = None,
            allowed: np.ndarray | None = None) -> ApvOutput:
        """Search ``state`` until ``max_sims`` rollouts or ``max_seconds``
        (at least one kernel call per thread). ``callback(out_so_far)`` may
        return True to stop. ``tree``: an earlier search's tree advanced to
        ``state`` (``apv_kernels.advance``) to go on with. ``allowed`` (bool
        [A]): the only root moves searched (a fresh tree only)."""
        if state.is_over:
            raise ValueError("apv: the game is over (two passes)")
        if state.size != self.size:
            raise ValueError(f"apv: search built for {self.size}x{self.size}, position is {state.size}x{state.size}")
        if max_sims is None and max_seconds is None:
            raise ValueError("apv: give max_sims or max_seconds")
        if tree is not None and (tree.children_prior.shape[1] != self.A or int(tree.to_play[0]) != state.to_play
                                 or not tree.expanded[0]):
            raise ValueError("apv: the tree given is not a searched tree of this position")
        if allowed is not None and tree is not None:
            raise ValueError("apv: root moves are restricted in a fresh tree only")
        if not self._running.acquire(blocking=False):
            raise RuntimeError("apv: a search is already running on this ApvSearch")
        try:
            t0 = time.perf_counter()
            t_end = None if max_seconds is None else t0 + max(float(max_seconds), 0.0)
            root = state.board_tuple
            lanes = self._lanes_for(root)
            run = _Run(self, state, lanes, max_sims, t_end, callback, t0, tree, allowed)
            run.go()
            out = run.output(final=True)
            if out.rollouts:
                self._last_margin = (state.move_number, out.margin)
            return out
        finally:
            self._running.release()

    def forget(self) -> None:
        """A new game: the last search's margin is not this game's score
        utility centre (a loaded game at the same move number took it)."""
        self._last_margin = None

    def close(self):
        if self.worker is not None:
            self.worker.close()
            self.worker = None


class _Run:
    """One search: the shared tree, its lock and the network hand-offs."""

    def __init__(self, search: ApvSearch, state, lanes, max_sims, t_end, callback, t0, tree=None, allowed=None):
        self.s, self.state, self.lanes, self.allowed = search, state, lanes, allowed
        self.max_sims, self.t_end, self.callback, self.t0 = max_sims, t_end, callback, t0
        self.root = state.board_tuple
        self.cfg = search.cfg(float(state.komi), search._center(state))
        self.lam = float(search.sp.lam)
        # start small and let the loop grow it: a cap of max_sims (the memory bound
        # of a timed search) would allocate and touch tens of MB a move
        cap = search.initial_nodes if max_sims is None else min(max_sims + 2 * len(lanes) * search.m + 2,
                                                                search.initial_nodes)
        self.tree = K.new_tree(cap, search.A, state.to_play) if tree is None else tree
        self.lock = threading.Lock()
        self.fill, self.busy = search.queues
        self.in_flight = False
        self.sims = 0  # rollouts started
        self.backed = 0  # rollouts backed up
        self.net_evals = 0
        self.net_own = np.zeros(search.A - 1)  # summed ownership heads of evaluated positions, black +1
        self.n_net_own = 0
        self.stop = False
        self.error: BaseException | None = None

    def go(self):
        s, tree = self.s, self.tree
        for q in s.queues:
            q.count[0] = 0
        for lane in self.lanes:
            lane.own[:] = 0.0
            lane.margins[:] = 0.0
            lane.n_own = 0
        if s.worker is not None:
            # a batch of the previous search may still be in flight: its
            # answer (or error) belongs to that search's tree, not this one
            if not s.worker.wait(NET_TIMEOUT):
                raise RuntimeError(f"apv: the network gave no answer in {NET_TIMEOUT:.0f} s")
            s.worker.result = s.worker.error = None
        # the root: the network's priors and value before any rollout
        # (without a network the first descent expands it by the tree policy)
        if tree.net_state[0] != K.NET_DONE and s.net_fn is not None:
            S = board_at(self.lanes[0].scr, 0)
            copy_board(S, self.root)
            K.tree_moves(S, tree.children_legal[0])
            K.encode_into(S, s.preset_id, self.fill.planes[0])
            self.fill.legal[0] = tree.children_legal[0]
            self.fill.node[0] = 0
            self.fill.count[0] = 1
            tree.net_state[0] = K.NET_QUEUED
            tree.expanded[0] = True
            self._evaluate_now()
        if self.allowed is not None:
            allowed = np.ascontiguousarray(self.allowed, np.bool_)
            S = board_at(self.lanes[0].scr, 0)
            copy_board(S, self.root)
            if not tree.expanded[0]:  # no network: the tree policy's priors
                K.expand(tree, 0, S, s.pol, self.lanes[0].prior_buf)
            if not (tree.children_legal[0] & allowed).any():  # only own eyes allowed: those, then
                legal_mask(S, tree.children_legal[0])
            K.restrict_root(tree, allowed)
        clean = self._add_noise()
        threads = [threading.Thread(target=self._guarded, args=(lane,), daemon=True) for lane in self.lanes[1:]]
        for t in threads:
            t.start()
        self._guarded(self.lanes[0])
        for t in threads:
            t.join()
        with self.lock:
            if clean is not None:  # a later search of this root draws noise of its own
                self.tree.children_prior[0] = clean
            self._service_net(final=True)
            # positions queued but never answered: queue them again next time
            for q in (self.fill, self.busy):
                self.tree.net_state[q.node[: int(q.count[0])]] = K.NET_NONE
                q.count[0] = 0
        if self.error is not None:
            raise self.error

    def _add_noise(self):
        """Root Dirichlet noise for this search (``dirichlet_alpha``),
        mixed into the network's root priors over the legal moves; returns
        the clean priors, or None without noise."""
        sp, tree = self.s.sp, self.tree
        idx = np.flatnonzero(tree.children_legal[0])
        if not (sp.root_noise and idx.size):
            return None
        clean = tree.children_prior[0].copy()
        tree.children_prior[0, idx] = mix_root_noise(clean[idx], sp, self.s.seeds)
        return clean

    def _evaluate_now(self):
        """The filling queue through the network in this thread (the root;
        every call in synchronous mode)."""
        q = self.fill
        n = int(q.count[0])
        if n:
            self._fold(q, _answers(self.s.net_fn(self.s.params, *self.s._net(q))), n)

    def _fold(self, q: K.Queue, answers, n: int):
        """A queue's network answers into the tree (and the ownership sums)."""
        p, v, own = answers
        K.apply_net(self.tree, q.node, p, v, n, self.lam)
        if own is not None:
            self.net_own += own[:n].T @ self.tree.to_play[q.node[:n]].astype(np.float64)
            self.n_net_own += n
        self.net_evals += n
        q.count[0] = 0

    def _service_net(self, final=False):
        """Under the lock: fold in a returned batch, hand the next one over."""
        worker = self.s.worker
        if worker is None:
            self._evaluate_now()
            return
        if self.in_flight and worker.idle:
            self.in_flight = False
            if worker.error is not None:
                err, worker.error = worker.error, None
                raise err
            self._fold(self.busy, worker.result, int(self.busy.count[0]))
        if not self.in_flight and self.fill.count[0] > 0 and not final:
            worker.submit(*self.s._net(self.fill))
            self.fill, self.busy = self.busy, self.fill
            self.in_flight = True

    def _guarded(self, lane):
        try:
            self._loop(lane)
        except BaseException as e:  # noqa: BLE001 - re-raised by go()
            self.error = self.error or e
            self.stop = True

    def _loop(self, lane: _Lane):
        s = self.s
        while not self.stop:
            with self.lock:
                m = lane.m if self.max_sims is None else min(lane.m, self.max_sims - self.sims)
                if m <= 0:
                    break
                need = int(self.tree.counter[0]) + 2 * len(self.lanes) * s.m + 2
                if need > self.tree.parents.shape[0] and self._no_time_to_grow():
                    self.stop = True  # a doubling now would outlast the budget (a big reused tree)
                    break
                self.tree = tree = K.grown(self.tree, need)
                m = K.descend_many(tree, self.root, lane.scr, s.pol, self.fill, self.cfg, lane.prior_buf, m,
                                   lane.leaf_node, lane.leaf_kind, lane.leaf_value)
                self.sims += m
            lane.n_own += K.rollout_many(lane.scr, s.pol, self.cfg, lane.rng, m, lane.leaf_kind, lane.leaf_value,
                                         lane.own, lane.own_buf, lane.margins)
            with self.lock:
                K.backup_many(self.tree, m, lane.leaf_node, lane.leaf_value)
                self.backed += m
                self._service_net()
                if self.t_end is not None and time.perf_counter() >= self.t_end:
                    self.stop = True
                out = self.output() if self.callback is not None and not self.stop else None
            # outside the lock: an analysis line may take a while to write
            if out is not None and self.callback(out):
                self.stop = True

    def _no_time_to_grow(self) -> bool:
        if self.t_end is None:
            return False
        cap, A = self.tree.children_prior.shape
        return time.perf_counter() + GROW_SECONDS_PER_ENTRY * cap * A > self.t_end

    def output(self, final: bool = False) -> ApvOutput:
        """The search so far (under the lock, or once every thread is done:
        ``final``; the ownership estimate only then, as the lanes' sums
        change outside the lock)."""
        tree = self.tree
        visits = tree.children_nr[0].astype(np.float64)
        total = visits.sum()
        prior = tree.children_prior[0]
        legal = tree.children_legal[0]
        if total > 0:
            probs = (visits / total).astype(np.float32)
            best = visits.max()
        else:
            probs = prior.astype(np.float32)
            visits, best = prior.astype(np.float64), prior.max()
        cand = np.flatnonzero((visits == best) & legal)
        action = int(cand[np.argmax(prior[cand])]) if cand.size else self.s.A - 1
        own, margin, stdev, n = np.zeros(self.s.A - 1), 0.0, 0.0, 0
        # the tree's utilities hold a score term where the score utility is on: report its
        # win/loss then, the sums the analysis lines read
        score_on = self.cfg[K.C_SCORE_W] > 0.0
        value = float(K.node_winrate(tree, 0, self.lam) if score_on else K.node_q(tree, 0, self.lam))
        if final:
            n = sum(lane.n_own for lane in self.lanes)
            if n:
                own = sum(lane.own for lane in self.lanes) / n
                margin, square, _ = sum(lane.margins for lane in self.lanes) / n
                stdev = float(np.sqrt(max(square - margin * margin, 0.0)))
            if self.n_net_own:  # the ownership head's tree average beside the rollouts', by lambda
                head = self.net_own / self.n_net_own
                own = self.lam * head + (1.0 - self.lam) * own if n else head
        return ApvOutput(action, probs, value, tree, self.backed, self.net_evals,
                         time.perf_counter() - self.t0, own.astype(np.float32), float(margin), stdev, int(n),
                         self.n_net_own if final else 0)


class ApvView:
    """What the GTP analysis commands read of a search tree
    (``search.tree.Tree``'s names), over an ``ApvTree``."""

    def __init__(self, tree: K.ApvTree, root_state: GoState, lam: float):
        self.tree, self.root_state, self.lam = tree, root_state, lam
        self.children_prior = tree.children_prior
        self.children_legal = tree.children_legal
        self.node_visits = tree.node_nr

    @property
    def num_nodes(self) -> int:
        return int(self.tree.counter[0])

    @property
    def clean_root_prior(self) -> np.ndarray:
        """The root's priors: a search puts its noise's clean priors back when it ends."""
        return self.children_prior[0]

    def value(self, node: int = 0) -> float:
        return float(K.node_q(self.tree, node, self.lam))

    def winrate_value(self, node: int = 0) -> float:
        """``value`` without the rollouts' score term: win/loss in [-1, 1]."""
        return float(K.node_winrate(self.tree, node, self.lam))

    def root_q(self) -> np.ndarray:
        """float64 [A]: each root move's mixed Q from the mover's view, NaN
        where it has no rollout."""
        nr = self.tree.children_nr[0]
        return np.array([K.edge_q(self.tree, 0, a, self.lam) if nr[a] > 0 else np.nan for a in range(nr.shape[0])])

    def root_analysis(self, min_visits: int = 1, pv_len: int = 16) -> list[dict]:
        return root_analysis(self.tree, self.lam, min_visits, pv_len)


def root_analysis(tree: K.ApvTree, lam: float, min_visits: int = 1, pv_len: int = 16) -> list[dict]:
    """``search.tree.analysis_rows`` of the root (visits: rollouts; q: the
    mixed value, with the score term; winrate: the mixed win/loss), what
    ``lz-analyze`` prints."""
    def line(a):
        pv, pv_visits, node, m = [], [], 0, a
        while len(pv) < pv_len and tree.children_nr[node, m] > 0:
            pv.append(m)
            pv_visits.append(int(tree.children_nr[node, m]))
            node = int(tree.children_index[node, m])
            if node < 0 or not tree.expanded[node]:
                break
            m = int(np.argmax(tree.children_nr[node]))
        return pv, pv_visits

    return analysis_rows(tree.children_nr[0], tree.children_prior[0], lambda a: K.edge_q(tree, 0, a, lam), line,
                         min_visits, win=lambda a: K.edge_winrate(tree, 0, a, lam))


__all__ = ["ApvOutput", "ApvSearch", "ApvView", "MAX_DEPTH", "root_analysis"]
