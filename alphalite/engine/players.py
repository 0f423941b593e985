"""Move choosers for the GTP engine, and the end-of-game judgement they share.

Players (``genmove(state, candidates, budget, rng, callback) -> Decision``):

* ``RandomPlayer``: uniform over the candidate moves (legal, not filling an
  own eye or own territory); passes when there is none.
* ``PolicyPlayer``: masked softmax of a policy net; argmax, or sampling with
  ``SearchParams.temperature > 0``. With a value net its winrate is the
  net's value of the position it moves in, so it can resign; without one it
  never does.
* ``MctsPlayer``: ``search.run_mcts`` with any evaluator (policy priors +
  Numba rollout values, a value net mixed in with ``lambda``, or uniform
  priors + rollouts), searched in growing chunks so a time budget, a visit
  cap and a stop callback all end it; the tree is reused between moves.
* ``ApvPlayer``: AlphaGo's asynchronous policy-value search
  (``search.apv``): pattern rollouts on every core, the network's priors and
  values arriving in batches beside them.

Judgement (no GNU Go needed):

* ``ownership_counts(state, n, seed)``: for every point, in how many of ``n``
  random playouts (``board.playout``, the rollout policy) it ends black /
  white (stones, and empty regions reaching only that colour);
  ``playout_outcomes`` adds each playout's final area margin (the
  analysis commands' score estimate).
* ``dead_stones``: the chains whose points end the opponent's on average
  over the playouts (by ``DEAD``: ``dead_points``); ``final_score``:
  Tromp-Taylor area after removing them, with komi.
* ``candidate_moves``: ``board.candidates_into`` (the self-play rule too)
  for a GTP position: no own one-point eye, nothing inside own Tromp-Taylor
  territory (while the opponent has no stone on the board, only eyes:
  nothing is territory yet).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from alphalite.go import board, coords, patterns, tactics
from alphalite.go.board import M_SIZE
from alphalite.nn import INFERENCE
from alphalite.runtime.kernels import njit


# ---------------------------------------------------------------- ownership

UNIFORM = patterns.rollout_tables(np.zeros(0, np.int64), np.zeros((2, 0), np.float32))  # no pattern policy


@njit(cache=True)
def _ownership_counts(B, scratch, rng, n, max_moves, komi, black, white, margins, rt):
    # rt: a pattern rollout policy's tables (patterns.rollout_tables); an empty table: uniform playouts
    size = B.meta[M_SIZE]
    own = np.zeros(size * size, np.int8)
    for k in range(n):
        board.copy_board(scratch, B)
        if rt.tab.shape[0] > 0:
            patterns.rollout(scratch, patterns.state_for(scratch), rt, rng, max_moves)
        else:
            board.playout(scratch, rng, max_moves)
        board.owners_into(scratch, own)
        area = 0
        for i in range(size * size):
            if own[i] == 1:
                black[i] += 1
                area += 1
            elif own[i] == -1:
                white[i] += 1
                area -= 1
        margins[k] = area - komi


def owners(state: board.GoState) -> np.ndarray:
    """int8 [size*size]: Tromp-Taylor owner of each point as the board stands."""
    out = np.zeros(state.size * state.size, np.int8)
    board.owners_into(state.board_tuple, out)  # touches only the scratch marks, as area() does
    return out


PLAYOUT_CHUNK = 8  # playouts between two looks at the clock (about 10 ms on 19x19)


def playout_outcomes(state: board.GoState, num_playouts: int = 64, seed: int = 0,
                     policy=None, max_seconds: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(black, white, margins): ``black``/``white`` int64 [size*size] count
    the playouts in which each point ends owned by black / by white;
    ``margins`` float64 [playouts] is each playout's final Tromp-Taylor
    area, black minus white minus komi. ``num_playouts`` of them, or fewer
    (at least ``PLAYOUT_CHUNK``) when ``max_seconds`` runs out first; the
    same seed plays the same playouts either way. ``policy``: a pattern
    rollout policy (``search.rollout.PatternPolicy``) plays the playouts;
    None: uniform random ones."""
    from search.rollout import RolloutScratch

    n = state.size
    num_playouts = max(int(num_playouts), 0)
    black = np.zeros(n * n, np.int64)
    white = np.zeros(n * n, np.int64)
    margins = np.zeros(num_playouts, np.float64)
    if num_playouts == 0:
        return black, white, margins
    max_moves = board.default_max_moves(n)
    b = state.board_tuple
    if state.is_over:  # playouts stop at two passes: start from a resumable copy
        b = resume(state).board_tuple
    scratch = RolloutScratch().get(b, max_moves)
    rng = np.array([seed & 0x7FFFFFFFFFFFFFFF or 1], np.int64)
    rt = policy.rollout_tables() if policy is not None else UNIFORM
    t_end = None if max_seconds is None else time.perf_counter() + max_seconds
    chunk = np.zeros(PLAYOUT_CHUNK, np.float64)
    done = 0
    while done < num_playouts and (done == 0 or t_end is None or time.perf_counter() < t_end):
        k = min(PLAYOUT_CHUNK, num_playouts - done)  # the rng goes on from chunk to chunk
        _ownership_counts(b, scratch, rng, k, max_moves, float(state.komi), black, white, chunk, rt)
        margins[done:done + k] = chunk[:k]
        done += k
    return black, white, margins[:done]


def ownership_counts(state: board.GoState, num_playouts: int = 64, seed: int = 0,
                     policy=None) -> tuple[np.ndarray, np.ndarray]:
    """(black, white) of ``playout_outcomes``."""
    return playout_outcomes(state, num_playouts, seed, policy)[:2]


# A chain is dead when its points are the opponent's by at least this on
# average (KataGo judges whole chains too). Exactly zero or a hair below is
# no one's: a seki read at -0.01 was reported dead per stone, and cleanup
# filled its liberties. Measured on 40 counted Tygem test games against GNU
# Go's dead stones (benchmarks/judge.py; stones agreeing, games with every
# stone agreeing, winners right): 0.05 gave 99.88/95/100% by the pattern
# rollouts and 99.96/97.5/100% by the search, the old per-stone rule (below 0)
# 99.88/95/100% and 99.88/95/100%, Pachi's two thirds of the playouts (1/3)
# 99.93/95/95% and 99.85/92.5/95%: chains read near -1/3 are mostly dead.
DEAD = 0.05


def _chains(state: board.GoState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the board's stones, flat, black +1; the flat points of the stones;
    each one's chain as its padded head stone)."""
    n = state.size
    s = board.stones(state).ravel()
    idx = np.flatnonzero(s)
    return s, idx, state.board_tuple.head.reshape(n + 2, n + 2)[1:-1, 1:-1].ravel()[idx]


def _in_seki(state: board.GoState, idx: np.ndarray, chain: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """The points of ``idx`` (chains ``chain``, from ``_chains``) whose chain
    is one of ``heads`` and in seki by ``tactics.in_seki``."""
    B = state.board_tuple
    seki = [int(h) for h in np.unique(heads) if tactics.in_seki(B, int(h))]
    return idx[np.isin(chain, seki)]


def seki_points(state: board.GoState) -> np.ndarray:
    """Flat points of the stones whose chains are in seki by the static
    reading of ``tactics.in_seki``."""
    _, idx, chain = _chains(state)
    return _in_seki(state, idx, chain, chain)


def dead_points(state: board.GoState, ownership: np.ndarray, threshold: float = DEAD) -> np.ndarray:
    """Flat points of the dead stones by an ownership estimate (float
    [size*size], black +1): the chains whose mean ownership, for their own
    colour, is ``-threshold`` or less, but for chains in seki
    (``seki_points``: an estimate that averages lines where the seki is
    broken reads one side dead)."""
    s, idx, chain = _chains(state)
    own = (s * np.asarray(ownership, np.float64))[idx]
    mean = np.bincount(chain, own) / np.maximum(np.bincount(chain), 1)
    # a chain at exactly -threshold (16 playouts of 24) is dead whatever its size: the float sum may round up
    is_dead = mean[chain] <= -threshold + 1e-9
    dead = idx[is_dead]
    if len(dead):
        dead = np.setdiff1d(dead, _in_seki(state, idx, chain, chain[is_dead]))
    return dead


def dead_stones(state: board.GoState, num_playouts: int = 64, seed: int = 0, policy=None) -> np.ndarray:
    """``dead_points`` of the ownership over ``num_playouts`` playouts."""
    black, white = ownership_counts(state, num_playouts, seed, policy)
    return dead_points(state, (black.astype(np.float64) - white) / max(num_playouts, 1))


def score_without(state: board.GoState, dead: np.ndarray) -> float:
    """Black minus white minus komi once the ``dead`` points are emptied."""
    s = board.setup(state, empty=[int(p) for p in dead]) if len(dead) else state
    return board.area_score(s)


def final_score(state: board.GoState, num_playouts: int = 64, seed: int = 0,
                policy=None) -> tuple[float, np.ndarray]:
    """(black minus white minus komi after removing dead stones, dead points)."""
    dead = dead_stones(state, num_playouts, seed, policy)
    return score_without(state, dead), dead


def moves_since(old: board.GoState, state: board.GoState) -> list[int] | None:
    """The moves that lead from ``old`` to ``state`` when ``state`` goes on
    from ``old`` in the same game (same board, komi and history; at most as
    many moves as the board remembers), else None: what a search tree of
    ``old`` must be advanced along to be reused for ``state``."""
    k = state.move_number - old.move_number
    if not 0 <= k <= len(state.last_moves) or old.size != state.size or old.komi != state.komi:
        return None
    moves = list(reversed(state.last_moves[:k]))
    s = old
    try:
        for m in moves:
            s = board.play(s, m)
    except board.IllegalMove:
        return None
    return moves if s.hash == state.hash and s.to_play == state.to_play else None


def resume(state: board.GoState) -> board.GoState:
    """The same position with the consecutive-pass count cleared, so that play
    goes on after two passes (GUIs continue games after a dispute)."""
    if not state.is_over:
        return state
    b = state.copy_tuple()
    board.clear_passes(b)
    return board.GoState(state.size, state.komi, state.superko, state.suicide, b)


# ---------------------------------------------------------------- candidates


def candidate_moves(state: board.GoState, color: int | None = None) -> np.ndarray:
    """bool [size*size+1]: the moves ``color`` (default: to play) may choose
    by ``board.candidates_into`` (legal, no own true eye, nothing inside its
    own territory unless it saves a group in atari), after two passes too;
    pass is False. All False: nothing useful is left to play."""
    if color is not None:
        state = board.with_to_play(state, color)
    cand = board.candidates(resume(state))
    cand[-1] = False
    return cand


# With --own-territory search the rules below leave the apv search's move
# alone (a true eye apart). On 9x9 against GNU Go level 10 that lost fewer
# games and drew more (over-defending own territory in the endgame),
# 88.8% of 160 against the filter's 89.8% of 240: the filter stays.
# A region of own territory is settled when the search gives each of its
# points, and each stone around it, to the mover in at least 90% of its
# rollouts (mean owner 0.8). Open 9x9 regions are Tromp-Taylor territory
# long before they are safe: the filter overrode the search's move 41 times
# in 17 of 40 games against GNU Go level 10, often with a pass.
SETTLED = 0.8
# A search's move inside settled own territory still stands when its Q beats
# the move put in for it by this much (2 winrate points at 0.04), and so
# does its pass against the open point put in for it: the rules are for
# moves that change nothing. Rollouts misjudge cutting points and eye
# shape, so a region "settled" by them can still need the move: in 21
# games the search insisted, at winrates 0.2-0.8, on moves the filter
# turned into passes or throw-ins, and lost or drew 6 of the 7 such games.
MATTERS = 0.04


def _own_eye(state: board.GoState, move: int) -> bool:
    """Whether ``move`` is a true one-point eye of the player to move."""
    return bool(board.is_eye(state.board_tuple.color, coords.to_padded(move, state.size), state.to_play,
                             state.size + 2))


def unsettled_territory(state: board.GoState, ownership: np.ndarray, threshold: float = SETTLED) -> np.ndarray:
    """bool [size*size]: the legal points of the mover's own Tromp-Taylor
    territory, true eyes apart (what ``candidate_moves`` leaves out as
    territory), in a region that ``ownership`` (mean final owner, black +1)
    does not settle: some point of it, or some stone next to it, is the
    mover's by less than ``threshold``."""
    n = state.size
    mine = ownership * state.to_play
    territory = (owners(state) == state.to_play) & (board.stones(state).ravel() == board.EMPTY)
    legal = board.legal_moves(state)
    out = np.zeros(n * n, np.bool_)
    seen = np.zeros(n * n, np.bool_)
    for start in np.flatnonzero(territory):  # group the territory into regions
        if seen[start]:
            continue
        seen[start] = True
        region, border, stack = [], set(), [int(start)]
        while stack:
            m = stack.pop()
            region.append(m)
            r, c = divmod(m, n)
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= rr < n and 0 <= cc < n:
                    k = rr * n + cc
                    if not territory[k]:
                        border.add(k)  # an own stone: the region reaches no other colour
                    elif not seen[k]:
                        seen[k] = True
                        stack.append(k)
        if min(mine[k] for k in (*region, *border)) < threshold:
            for m in region:
                out[m] = legal[m] and not _own_eye(state, m)
    return out


def open_points(state: board.GoState, ownership: np.ndarray, candidates: np.ndarray,
                threshold: float = SETTLED) -> np.ndarray:
    """bool [size*size]: the ``candidates`` where a move can still matter by
    ``ownership`` (black +1): not the opponent's by ``threshold`` or more,
    and not a self-atari (in a seki that would give the group away)."""
    out = candidates[:-1] & (ownership * state.to_play > -threshold)
    for m in np.flatnonzero(out):
        out[m] = not board.is_self_atari(state.board_tuple, coords.to_padded(int(m), state.size), state.to_play,
                                         False)
    return out


def warm_up_rules(state: board.GoState) -> None:
    """Load the kernels that the rules around a search (``settle``,
    ``decisions``) call from Python on positions a game reaches late: own
    territory, a pass, a finished game. Loaded at a move's first need they
    cost it up to 30 ms from Numba's cache, and 0.7 s where not yet compiled
    (``is_self_atari`` in a 9x9 pass at 1 s a move: a 1.46 s move)."""
    n2 = state.size * state.size
    owners(state)
    board.legal_moves(state)  # cleanup's liberties to fill (the search's own nodes use apv_kernels.tree_moves)
    score_without(state, np.flatnonzero(board.stones(state).ravel())[:1])  # dead stones off
    tactics.in_seki(state.board_tuple, 0)  # the judge's seki reading (dead_points, final_status_list)
    _own_eye(state, 0)
    open_points(state, np.zeros(n2), candidate_moves(state))
    resume(board.play(board.play(state, n2), n2))
    board.with_to_play(state, -state.to_play)


def last_was_pass(state: board.GoState) -> bool:
    """Whether the opponent of the player to move just passed: a pending
    pass is always the other side's (``game.with_to_play`` drops a
    player's own when it is to move again)."""
    lm = state.last_moves
    return bool(lm) and lm[0] == state.size * state.size and state.passes >= 1


# ---------------------------------------------------------------- decisions


@dataclasses.dataclass
class Decision:
    move: int  # flat; pass = size*size
    winrate: float | None = None  # for the player to move, 0..1 (None: no estimate)
    visits: int = 0
    analysis: list[dict] | None = None  # tree.root_analysis() rows
    note: str = ""


class RandomPlayer:
    name = "random"
    has_prior = False

    def genmove(self, state, candidates, budget, rng, callback=None) -> Decision:
        idx = np.flatnonzero(candidates[:-1])
        if idx.size == 0:
            return Decision(state.size * state.size, note="no candidate move")
        return Decision(int(rng.choice(idx)))

    def prior(self, state) -> np.ndarray:
        legal = board.legal_moves(resume(state)).astype(np.float32)
        return legal / max(float(legal.sum()), 1.0)

    def forget(self):
        pass


class PolicyNet:
    """A policy (and optional value) network for one board size, or a
    policy-value net (``nets.ResNetPolicyValue``, AlphaZero's) whose own
    value head gives the value in the same call (``has_value``)."""

    def __init__(self, info: dict, variables: dict, value_info: dict | None = None, value_variables=None,
                 inference: str = "auto"):
        import jax

        from alphalite.nn import features, nets

        self.size = int(info["board_size"])
        self.resized_from = info.get("resized_from")  # the board size the policy net learned on, if another
        ppreset = info.get("preset", "default")
        self.preset = ppreset  # the planes the search encodes: a pair when the value net's differ
        self.model = nets.make_model(info["model"], self.size, features.num_planes(ppreset))
        self.variables = jax.tree_util.tree_map(jax.numpy.asarray, variables)
        self.value_model = None
        self.value_variables = None
        self.has_value = isinstance(self.model, nets.ResNetPolicyValue)  # its own head values positions
        # KataGo's ownership head on the net that values positions: the search's ownership
        self.has_ownership = nets.has_ownership(self.model)
        if self.has_value and value_info is not None:
            raise ValueError("a policy-value net has its own value head: no value net beside it")
        if value_info is not None:
            self.has_value = True
            vsize = int(value_info["board_size"])
            if vsize != self.size:
                raise ValueError(f"value net is for {vsize}x{vsize}, policy for {self.size}x{self.size}")
            vpreset = value_info.get("preset", "default")
            self.preset = features.pair(ppreset, vpreset)
            self.value_model = nets.make_model(value_info["model"], self.size, features.num_planes(vpreset))
            self.has_ownership = nets.has_ownership(self.value_model)
            self.value_variables = jax.tree_util.tree_map(jax.numpy.asarray, value_variables)
        from alphalite.nn import onnx_export
        from search.evaluators import policy_value_fn

        # ONNX Runtime on the CPU: 1.3-1.9x JAX's evals/s for our nets at
        # batch 1-32 in fp32, 3-6x PyTorch's in int8 with the policy's top-1
        # kept (alphalite/nn/int8.py; benchmarks/inference.py,
        # int8_accuracy.py); JAX on a GPU. auto takes int8 there, and fp32 if
        # the int8 nets fail their check.
        if inference not in INFERENCE:
            raise ValueError(f"inference must be one of {', '.join(INFERENCE)}, got {inference!r}")
        self.inference = inference
        nets_ok = onnx_export.exportable(self.model) and (
            self.value_model is None or onnx_export.exportable(self.value_model))
        if inference == "auto":
            self.inference = "int8" if jax.default_backend() == "cpu" and nets_ok else "jax"
        from alphalite.nn.int8 import QuantizationError

        if inference in ("int8", "onnx") and not nets_ok:
            raise QuantizationError(f"{inference} inference covers the ResNet nets, not "
                                    f"{type(self.model).__name__}")
        self.protos = None  # the int8 graphs (policy's, value net's)
        self.note = ""  # how the int8 graphs came to be, for the start-up line
        if self.inference == "int8":
            try:
                self.protos, self.note = self._int8_protos(variables, value_variables)
            except QuantizationError as e:
                if inference != "auto":
                    raise
                self.inference, self.note = "onnx", f"not int8: {e}"
        if self.inference in ("onnx", "int8"):
            self.net_fn = onnx_export.policy_value_fn(self.model, variables, self.value_model, value_variables,
                                                      protos=self.protos, split=self.split)
        else:
            self.net_fn = policy_value_fn(self.model, self.value_model, split=self.split)
        self.params = {"policy": self.variables, "value": self.value_variables or {}}

    @property
    def split(self) -> int | None:
        """With a preset pair, the policy's channels (the value net reads the rest)."""
        from alphalite.nn import features

        return features.split(self.preset)

    def _int8_protos(self, variables, value_variables) -> tuple[list[bytes], str]:
        from alphalite.nn import features, int8, onnx_export

        protos = [onnx_export.to_onnx(self.model, variables).SerializeToString()]
        if self.value_model is not None:
            protos.append(onnx_export.to_onnx(self.value_model, value_variables).SerializeToString())

        def planes():
            sess = onnx_export.session_of(protos[0])
            split = self.split

            def policy(x):  # the policy plays the calibration games on its own channels
                return sess.run(None, {"planes": np.ascontiguousarray(features.split_planes(x, split)[0])})[0]

            return int8.self_play_planes(policy, self.size, self.preset)

        return int8.quantized(protos, planes, self.split)

    def evaluate(self, state, symmetries: int = 1) -> tuple[np.ndarray, float | None]:
        """(priors float32 [A]: masked softmax over the legal moves, value
        in [-1, 1] for the player to move, None without a value net or
        head); one network call for both. ``symmetries`` > 1 averages both
        over the first that many of the 8 board symmetries (the identity
        first), all in that one call."""
        from alphalite.nn import features

        planes = features.encode(state, self.preset)
        legal = board.legal_moves(resume(state))
        xs, ls = features.symmetry_images(planes, legal, symmetries)
        p, v = self.net_fn(self.params, xs, ls)
        prior = features.mean_of_images(p, len(xs))
        return prior.astype(np.float32), (float(np.mean(v)) if self.has_value else None)

    def priors(self, state, symmetries: int = 1) -> np.ndarray:
        """float32 [A]: masked softmax over the legal moves (averaged over
        ``symmetries`` board symmetries)."""
        return self.evaluate(state, symmetries)[0]



def load_net(policy: str, value: str | None = None, inference: str = "auto", size: int | None = None) -> PolicyNet:
    """The policy net ``policy`` (a shipped net's name or a folder) with the
    value net ``value`` beside it, each checked for its kind, the value net
    for the policy's board size; or a policy-value net (a folder, or an
    AlphaZero run folder: its best net) alone, valued by its own head;
    ``checkpoint.CheckpointError`` names the folder otherwise. ``size``:
    a ResNet policy net of another board size, alone, is moved to this one
    (``nets.resize_policy``; its ``info`` says ``resized_from``)."""
    from alphalite.nn import checkpoint, nets

    info, model, variables = checkpoint.load_model(policy, ("policy", "policy_value"))
    if size is not None and size != info["board_size"]:
        n = info["board_size"]
        if value is not None:
            raise checkpoint.CheckpointError(f"{policy} is a {n}x{n} net: only a policy net alone plays "
                                             f"{size}x{size}, no value net beside it")
        try:
            _, variables = nets.resize_policy(model, variables, size)
        except ValueError as e:
            raise checkpoint.CheckpointError(f"{policy} is a {n}x{n} net and cannot play {size}x{size}: {e}") \
                from None
        info = {**info, "board_size": size, "resized_from": n}
    if value is not None and checkpoint.net_kind(info) == "policy_value":
        raise checkpoint.CheckpointError(f"{policy} is a policy-value net, valued by its own head: "
                                         f"no value net beside it (drop --value-checkpoint {value})")
    vinfo = vvars = None
    if value is not None:
        vinfo, _, vvars = checkpoint.load_model(value, "value")
    from alphalite.nn.int8 import QuantizationError

    try:
        return PolicyNet(info, variables, vinfo, vvars, inference)
    except QuantizationError as e:
        raise checkpoint.CheckpointError(f"{policy}: {e}") from None
    except ValueError as e:  # the two nets do not go together (or the one net cannot run so)
        where = f"{value} beside the policy net {policy}" if value is not None else str(policy)
        raise checkpoint.CheckpointError(f"{where}: {e}") from None


class PolicyPlayer:
    name = "policy"
    has_prior = True

    def __init__(self, net: PolicyNet, search_params=None):
        from search.params import SearchParams

        self.net = net
        # only temperature, temperature_moves and symmetries: the move choice
        self.search_params = SearchParams() if search_params is None else search_params

    def prior(self, state) -> np.ndarray:
        return self.net.priors(state, self.search_params.symmetries)

    def genmove(self, state, candidates, budget, rng, callback=None) -> Decision:
        n2 = state.size * state.size
        if not candidates[:-1].any():
            return Decision(n2, note="no candidate move")
        p, v = self.net.evaluate(state, self.search_params.symmetries)
        # the value net's verdict on the position we move in: what resigning
        # and the GTP log go by (None without a value net)
        winrate = None if v is None else (v + 1.0) / 2.0
        p = p.astype(np.float64)
        p = np.where(candidates, p, 0.0)
        if p.sum() <= 0:
            p = candidates.astype(np.float64)
        temperature = self.search_params.temperature_at(state.move_number)
        if temperature > 0:
            logp = np.where(p > 0, np.log(np.maximum(p, 1e-300)) / temperature, -np.inf)
            q = np.exp(logp - logp.max())
            move = int(rng.choice(p.shape[0], p=q / q.sum()))
        else:
            move = int(np.argmax(p))
        return Decision(move, winrate=winrate)

    def forget(self):
        pass


def search(state, evaluate_fn, params, rng, *, max_visits: int, max_seconds: float | None = None,
           search_params=None, tree=None, callback: Callable | None = None, allowed=None):
    """``run_mcts`` in growing chunks (the tree doubles as it needs), so a
    large visit cap costs no memory up front. Stops at ``max_visits`` new
    visits, after ``max_seconds``, or when ``callback(tree, visits)`` returns
    True. ``search_params``: ``search.params.SearchParams`` (None: the
    defaults). ``allowed``: the only root moves (``run_mcts``). Returns the
    last SearchOutput."""
    from search.mcts import DEFAULT_PARAMS, run_mcts

    search_params = DEFAULT_PARAMS if search_params is None else search_params

    t_end = None if max_seconds is None else time.perf_counter() + max(float(max_seconds), 0.0)
    done = 0
    out = None
    stopped = False
    while out is None or (done < max_visits and not stopped
                          and (t_end is None or time.perf_counter() < t_end)):
        chunk = max(0, min(max_visits - done, max(64, done)))
        base = done
        last = [0]

        def cb(t, n, base=base, last=last):
            last[0] = n
            return callback is not None and bool(callback(t, base + n))

        left = None if t_end is None else max(t_end - time.perf_counter(), 0.0)
        out = run_mcts(params, rng, state, evaluate_fn, num_simulations=chunk,
                       search_params=search_params, tree=tree, max_seconds=left, callback=cb,
                       new_noise=base == 0,  # one noise draw for the whole move
                       allowed=allowed if base == 0 else None)
        tree = out.tree
        done += last[0]
        stopped = chunk == 0 or last[0] < chunk and (t_end is None or time.perf_counter() < t_end)
    return out


def line_prior(size: int) -> np.ndarray:
    """float32 [A]: a knowledge-free prior for searches without a policy net:
    the first line 0.2, the second 0.6, elsewhere 1, pass 0.1 (uniform on
    boards under 7x7)."""
    w = np.ones(size * size + 1, np.float32)
    if size >= 7:
        r, c = np.divmod(np.arange(size * size), size)
        line = np.minimum(np.minimum(r, c), np.minimum(size - 1 - r, size - 1 - c))
        w[: size * size] = np.where(line == 0, 0.2, np.where(line == 1, 0.6, 1.0))
        w[-1] = 0.1
    return w / w.sum()


def line_prior_fn(size: int) -> Callable:
    """``prior_fn(params, leaves)`` for ``rollout_evaluator`` with ``line_prior``."""
    w = line_prior(size)

    def prior_fn(params, leaves):
        return np.broadcast_to(w, (len(leaves), w.shape[0]))

    return prior_fn


ADVANCE_SECONDS_PER_NODE = 2e-5  # tree reuse cost, generous (measured ~11 us a node on 19x19)
REUSE_SHARE = 0.5  # under a clock, reuse a tree only if advancing it costs less than this share of the budget
TREE_BYTES = 300 << 20  # memory a search tree may grow to (about 25 bytes per node and action)


def max_tree_visits(size: int) -> int:
    """Visits that keep a tree within TREE_BYTES (tens of thousands on 19x19)."""
    return int(TREE_BYTES // (25 * (size * size + 1)))


DEFAULT_VISITS = 400  # visits a move without a clock, when none are given


class MctsPlayer:
    """PUCT search as a player. ``visits`` caps every search, with or without
    a clock; None: ``DEFAULT_VISITS`` without a clock, and under one only
    the time budget (and the tree's memory, ``max_tree_visits``) ends it."""

    name = "mcts"
    has_prior = False

    def __init__(self, evaluate_fn, params=None, *, visits: int | None = None, search_params=None,
                 prior_fn: Callable | None = None, label: str = "mcts"):
        from search.params import SearchParams

        self.evaluate_fn = evaluate_fn
        self.params = params  # the network's, passed to evaluate_fn
        self.visits = None if visits is None else int(visits)
        self.search_params = SearchParams() if search_params is None else search_params
        self.prior_fn = prior_fn
        self.label = label
        self.tree = None
        self.has_prior = prior_fn is not None

    def forget(self):
        self.tree = None

    def prior(self, state) -> np.ndarray:
        if self.prior_fn is not None:
            return self.prior_fn(state)
        return RandomPlayer().prior(state)

    def _reused_tree(self, state):
        """The previous tree advanced along the moves played since."""
        from search import advance

        tree = self.tree
        moves = None if tree is None else moves_since(tree.root_state, state)
        if moves is None:
            return None
        try:
            for m in moves:
                tree = advance(tree, m)
        except (board.IllegalMove, IndexError, ValueError):
            return None
        return tree

    def run(self, state, rng, *, max_visits=None, max_seconds=None, callback=None, allowed=None):
        """Search from ``state`` (reusing the previous tree where it fits).
        ``max_seconds`` covers everything here, tree reuse included:
        advancing a large tree copies it (about 10 us a node), so under a
        clock a tree that would eat a real share of the budget is dropped,
        and the time reuse took is taken off the search's budget.
        ``allowed`` (bool [A]): the only root moves searched, in a tree of
        their own (none reused, none kept)."""
        t0 = time.perf_counter()
        visits = max_visits
        if visits is None:
            visits = DEFAULT_VISITS if self.visits is None else self.visits
        if (max_seconds is not None and self.tree is not None
                and self.tree.num_nodes * ADVANCE_SECONDS_PER_NODE > REUSE_SHARE * max_seconds):
            self.tree = None
        tree = self._reused_tree(state) if allowed is None else None
        if max_seconds is not None:
            max_seconds = max(max_seconds - (time.perf_counter() - t0), 0.0)
        out = search(state, self.evaluate_fn, self.params, rng, max_visits=visits, max_seconds=max_seconds,
                     search_params=self.search_params, tree=tree, callback=callback, allowed=allowed)
        self.tree = out.tree if allowed is None else None
        return out

    def genmove(self, state, candidates, budget, rng, callback=None, allowed=None) -> Decision:
        if self.visits is not None:
            cap = self.visits
        else:
            cap = DEFAULT_VISITS if budget is None else max_tree_visits(state.size)
        out = self.run(state, rng, max_visits=cap, max_seconds=budget, callback=callback, allowed=allowed)
        tree = out.tree
        visits = tree.children_visits[0]
        move, note = settle(state, int(out.action), visits, tree.clean_root_prior, candidates,
                            self.search_params.temperature_at(state.move_number), rng)
        return Decision(move, winrate=0.5 * (out.root_value + 1.0), visits=int(visits.sum()),
                        analysis=tree.root_analysis(), note=note)


def settle(state, move: int, visits: np.ndarray, prior: np.ndarray, candidates: np.ndarray,
           temperature: float = 0.0, rng=None, ownership: np.ndarray | None = None,
           q: np.ndarray | None = None, own_territory: str = "filter") -> tuple[int, str]:
    """A search's move checked against the candidate rule: no pass in the
    opening (until a third of the board's points have had a stone), no move
    that fills own territory (instead ``choose_move`` among the allowed
    moves: by visits, else by prior, never a pass then).
    With the search's ``ownership`` (black +1), own territory that it does
    not settle (``unsettled_territory``) is open to the search's move, and
    the search's pass gives way to its most visited ``open_points`` move
    while there is one: a pass is a free move for the opponent while any
    point is unsettled (under area scoring a filled dame is a point, too).
    With the root moves' ``q`` as well, a move in settled own territory
    (never a true eye) stands when its Q beats the move that would replace
    it by ``MATTERS``, and a pass when it beats the open point so (or
    either is unsearched). ``own_territory`` "search"
    (``SearchParams.own_territory``): the search's move inside own
    territory is played as it is, a true eye apart. Returns (move, note)."""
    from search.tree import choose_move

    n2 = state.size * state.size
    note = ""
    allowed = candidates.copy()
    if own_territory == "search" and move < n2 and not allowed[move] and not _own_eye(state, move):
        allowed[move] = True
    if ownership is not None and not allowed[move]:
        allowed[:n2] |= unsettled_territory(state, ownership)
    allowed[n2] = True  # the search may pass ...
    opening = candidates[:-1].any() and state.stones_placed < n2 // 3  # a loaded position may be late at move 0
    if move == n2 and opening:
        allowed[n2] = False  # ... but not in the opening
        note = "no pass in the opening"
    if not allowed[move]:
        if not (visits > 0)[allowed].any():  # by prior: among the candidates, never a pass
            allowed = candidates
        wanted = move
        move = choose_move(visits, prior, allowed, temperature, rng)
        move = n2 if move < 0 else move
        if q is not None and ownership is not None and wanted < n2 and move != wanted:
            gain = np.inf if np.isnan(q[move]) else q[wanted] - q[move]  # nothing else searched
            # a legal move outside the candidates is an own eye or own territory
            if gain > MATTERS and not _own_eye(state, wanted):
                return wanted, f"own territory, by Q {gain:+.3f} over {coords.to_gtp(move, state.size)}"
        note = note or f"search move {coords.to_gtp(wanted, state.size)} fills own territory"
    if move == n2 and not opening and ownership is not None:
        unsettled = open_points(state, ownership, candidates)
        if unsettled.any():  # ... nor while a move can still matter
            alt = choose_move(visits, prior, np.append(unsettled, False), temperature, rng)
            loss = 0.0 if q is None else q[n2] - q[alt]  # NaN (either unsearched): the pass stands
            if loss <= MATTERS:
                move = alt
                note = "unsettled points left: no pass" + (f" ({note})" if note else "")
    return move, note


class ApvPlayer:
    """AlphaGo's asynchronous policy-value search (``search.apv``) as a
    player: pattern rollouts on every core, the network in batches beside
    them. ``visits`` caps the rollouts of a move; without a clock the cap
    is ``DEFAULT_VISITS``. ``net`` None (a board size no network plays,
    ``size`` then given): the pattern policies alone, the tree policy's
    priors and the rollouts' values. ``batch_size``: the most positions a
    network call takes (None: ``ApvSearch``'s default, 32)."""

    name = "apv"
    has_prior = True

    def __init__(self, net: PolicyNet | None, tree_policy, rollout_policy, search_params=None, *,
                 size: int | None = None, visits: int | None = None, threads: int | None = None,
                 batch_size: int | None = None, label: str = "apv"):
        from alphalite.nn import features, onnx_export
        from search.apv import ApvSearch
        from search.params import SearchParams

        self.net = net
        self.tree_policy = tree_policy
        self.visits = None if visits is None else int(visits)
        self.label = label
        self.last = None  # the last search's ApvOutput (ownership, counts)
        self._prev = None  # (state, tree) of the last search, for reuse
        sp = search_params or SearchParams()
        if (net is None or not net.has_value) and sp.lam:
            sp = dataclasses.replace(sp, lam=0.0)  # no value net: the rollouts alone value the leaves
        if net is None:
            if size is None:
                raise ValueError("ApvPlayer: give the board size when there is no network")
            self.search = ApvSearch(None, None, 0, 1, tree_policy, rollout_policy, size=int(size),
                                    search_params=sp, threads=threads)
            return
        net_fn = net.net_fn
        if net.inference in ("onnx", "int8"):  # one ORT thread: the other cores play rollouts
            net_fn = onnx_export.policy_value_fn(net.model, net.variables, net.value_model, net.value_variables,
                                                 threads=1, protos=net.protos, split=net.split,
                                                 ownership=net.has_ownership)
        elif net.has_ownership:  # the search also takes the ownership head
            from search.evaluators import policy_value_fn

            net_fn = policy_value_fn(net.model, net.value_model, split=net.split, ownership=True)
        batch = {} if batch_size is None else {"batch_size": int(batch_size)}
        self.search = ApvSearch(net_fn, net.params, features.preset_id(net.preset), features.num_planes(net.preset),
                                tree_policy, rollout_policy, size=net.size, search_params=sp,
                                pad_batches=net.inference == "jax", threads=threads, **batch)

    def prior(self, state) -> np.ndarray:
        if self.net is None:
            return self.tree_policy.priors(state.board_tuple)
        return self.net.priors(state)

    def forget(self):
        self._prev = None
        self.search.forget()

    def close(self):
        self.search.close()

    def territory(self, state, rollouts: int, max_seconds: float | None = None):
        """The search's own view of the end of the game from ``state``:
        (ownership float64 [size*size], black +1; mean final area margin,
        black minus white minus komi; its spread; the simulations of the search it comes from, fewer
        than ``rollouts`` only when ``max_seconds`` cut it short), over the rollouts of the
        last search when that searched this position with at least
        ``rollouts`` simulations, else of a search of ``rollouts`` more now, or
        fewer if ``max_seconds`` ends it first (the next search of the
        position goes on with its tree). A finished game is judged as if
        play went on."""
        state = resume(state)
        last, prev = self.last, self._prev
        # simulations, not the rollouts they hold, both here and returned: near the end of a game many
        # end in the tree at two passes, so a whole search of 128 held 28-52 rollouts and read as cut
        # short (and was searched again)
        if last is None or prev is None or last.simulations < rollouts or moves_since(prev[0], state) != []:
            self.run(state, max_visits=max(int(rollouts), 1), max_seconds=max_seconds)
            last = self.last
        return last.ownership.astype(np.float64), last.margin, last.margin_stdev, int(last.simulations)

    def _reused_tree(self, state):
        """The last search's tree advanced along the moves played since."""
        from search.apv_kernels import advance

        if self._prev is None:
            return None
        old, tree = self._prev
        moves = moves_since(old, state)
        for m in moves or ():
            tree = advance(tree, m) if tree is not None else None
        return None if moves is None else tree

    def run(self, state, rng=None, *, max_visits=None, max_seconds=None, callback=None, allowed=None):
        """``MctsPlayer.run``'s contract: a search of ``state`` until
        ``max_visits`` rollouts, ``max_seconds`` (tree reuse included) or
        ``callback(tree, visits)`` returning True (``tree``: an
        ``ApvView``); returns a ``SearchOutput`` whose ``tree`` is the view.
        ``rng`` is unused: the search keeps its own streams."""
        from search.apv import ApvView
        from search.mcts import SearchOutput

        t0 = time.perf_counter()
        lam = self.search.sp.lam
        cb = None if callback is None else (lambda out: bool(callback(ApvView(out.tree, state, lam),
                                                                      out.simulations)))
        if max_visits is None:
            # the apv tree takes 45 bytes per node and action (the mcts one 25), and doubles with a copy:
            # a 19x19 search under a clock peaks near 0.8 GiB at this cap (long moves only)
            max_visits = (DEFAULT_VISITS if self.visits is None else self.visits) if max_seconds is None \
                else max_tree_visits(state.size) * 2 // 3
        if (max_seconds is not None and self._prev is not None
                and int(self._prev[1].counter[0]) * ADVANCE_SECONDS_PER_NODE > REUSE_SHARE * max_seconds):
            self._prev = None  # too big to carry over within this budget
        tree = self._reused_tree(state) if allowed is None else None
        self._prev = None  # kept again only if this search ends well
        if max_seconds is not None:
            max_seconds = max(max_seconds - (time.perf_counter() - t0), 0.0)
        out = self.search.run(state, max_sims=max_visits, max_seconds=max_seconds, callback=cb, tree=tree,
                              allowed=allowed)
        self.last = out
        self._prev = (state, out.tree) if allowed is None else None
        return SearchOutput(out.action, out.visit_probs, out.root_value, ApvView(out.tree, state, lam))

    def genmove(self, state, candidates, budget, rng, callback=None, allowed=None) -> Decision:
        cap = self.visits if self.visits is not None else (DEFAULT_VISITS if budget is None else None)
        view = self.run(state, max_visits=cap, max_seconds=budget, callback=callback, allowed=allowed).tree
        visits = view.tree.children_nr[0]
        temperature = self.search.sp.temperature_at(state.move_number)
        move = int(self.last.action)
        if temperature > 0:
            from search.tree import choose_move

            move = choose_move(visits, view.children_prior[0], view.children_legal[0], temperature, rng)
        move, note = settle(state, move, visits, view.children_prior[0], candidates, temperature, rng,
                            ownership=self.last.ownership, q=view.root_q(),
                            own_territory=self.search.sp.own_territory)
        return Decision(move, winrate=0.5 * (self.last.root_value + 1.0), visits=int(visits.sum()),
                        analysis=view.root_analysis(), note=note)


__all__ = ["ApvPlayer", "Decision", "MctsPlayer", "PolicyNet", "PolicyPlayer", "RandomPlayer",
           "candidate_moves", "dead_points", "dead_stones", "final_score", "load_net", "moves_since",
           "owners", "ownership_counts", "playout_outcomes", "resume", "score_without", "search", "settle",
           "warm_up_rules"]
