"""Batched self-play on Numba boards.

``play_policy_games`` plays many games at once: every game moves in lock
step (a pass is a move), so at each step all live games have the same colour
to move and each network taking part is called once for the games where it
is to move, on a batch padded to a fixed size (JAX compiles once per net
shape). Moves are sampled from the masked softmax of the policy at a
temperature (0 = argmax).

Moves a player may choose (``board.candidates_into``, the rule of the GTP
players too): legal, not a true one-point eye of its own (``board.is_eye``) and,
once the opponent has a stone on the board, not inside its own Tromp-Taylor
territory. Pass is allowed only when nothing else is (``allow_pass=True``
lets the net pass whenever it likes). ``no_self_atari=True`` also removes
moves that leave the mover's group one liberty (``board.is_self_atari``:
lone stones and ko captures too; captures of two or more stones stay): the
value-data games use it, so that weak policies stop filling their own
liberties and fighting kos, and their games end by two passes. A game ends
after two passes or at ``max_moves`` and is scored by Tromp-Taylor area with
komi (``board.area``).

``play_mcts_games`` plays games move by move with ``search.run_mcts``
(``players.MctsPlayer``: network priors, rollout or value-net leaves, tree
reuse), one game after another, with the same candidate rule.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import numpy as np

from alphalite.go import board, sgf
from alphalite.go.board import M_PASSES, candidates, candidates_into


@dataclasses.dataclass
class Game:
    """A finished game. ``moves``: int16 [T] flat moves (pass = size*size),
    black first, colours alternating (``colours`` int8 [T] spells it out)."""

    size: int
    komi: float
    moves: np.ndarray  # int16 [T]
    colours: np.ndarray  # int8 [T], +1 black, -1 white
    score: float  # Tromp-Taylor black area - white area - komi
    black: str = ""  # player ids
    white: str = ""
    ended: str = "passes"  # "passes", "move cap" or "resign"
    # Search targets (selfplay.alphazero; None for the other games): move t's
    # improved policy is policy_probs[o[t]:o[t+1]] on moves policy_moves[o[t]:o[t+1]],
    # o = policy_offsets.
    policy_offsets: np.ndarray | None = None  # int32 [T+1]
    policy_moves: np.ndarray | None = None  # int16 [nnz]
    policy_probs: np.ndarray | None = None  # float16 [nnz]
    root_values: np.ndarray | None = None  # float32 [T]  search value at each move, mover's view
    ownership: np.ndarray | None = None  # int8 [size*size]  final Tromp-Taylor owner, +1 black
    resigned: int = 0  # the colour that resigned (ended "resign"), 0: none

    @property
    def winner(self) -> int:
        if self.resigned:
            return -self.resigned
        return 1 if self.score > 0 else (-1 if self.score < 0 else 0)

    @property
    def result(self) -> str:
        """SGF RE: ``B+3.5``, ``W+0.5``, ``0`` or ``B+R``/``W+R``."""
        if self.resigned:
            return "W+R" if self.resigned == 1 else "B+R"
        return sgf.result_string(self.score)

    def policy_target(self, t: int) -> np.ndarray:
        """float32 [A]: the search's policy target at move ``t`` (dense)."""
        out = np.zeros(self.size * self.size + 1, np.float32)
        o = self.policy_offsets
        out[self.policy_moves[o[t]:o[t + 1]]] = self.policy_probs[o[t]:o[t + 1]]
        return out


@dataclasses.dataclass
class NetPlayer:
    """A policy net taking part in batched games."""

    name: str
    model: Any  # alphalite.nn.nets model (hashable: the jitted call is keyed on it)
    variables: dict
    preset: str = "default"
    temperature: float = 1.0


@dataclasses.dataclass
class Positions:
    """The positions where one player moved, for training: ``planes`` uint8
    [N, H, W, C], ``mask`` bool [N, A] (the moves it could choose), ``moves``
    int32 [N], ``game`` int32 [N] (index into the games list)."""

    planes: np.ndarray
    mask: np.ndarray
    moves: np.ndarray
    game: np.ndarray


# ---------------------------------------------------------------- network


@functools.cache
def _logp_fn():
    """jitted (model, variables, planes [B,H,W,C], mask [B,A], inv_temp) ->
    masked log-probabilities [B, A] at the temperature (-inf off the mask)."""
    import jax

    from alphalite.nn import nets

    def f(model, variables, planes, mask, inv_temp):
        logits = model.apply(variables, planes, train=False)
        return nets.masked_log_softmax(logits * inv_temp, mask)

    return jax.jit(f, static_argnums=0)


def policy_logp(model, variables, planes: np.ndarray, mask: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Masked log-probabilities [B, A] (numpy) of a policy net at a temperature."""
    inv = 1.0 if temperature <= 0 else 1.0 / float(temperature)
    return np.asarray(_logp_fn()(model, variables, planes, mask, np.float32(inv)))


def sample_moves(logp: np.ndarray, temperature: float, gen: np.random.Generator) -> np.ndarray:
    """One move per row of masked log-probabilities: Gumbel-max sampling, or
    argmax at temperature 0."""
    if temperature <= 0:
        return np.argmax(logp, axis=1)
    g = gen.gumbel(size=logp.shape)
    return np.argmax(np.where(np.isfinite(logp), logp + g, -np.inf), axis=1)


# ---------------------------------------------------------------- policy games


def policy_moves(boards, rows, pid, own, planes, masks, allow_pass, model, variables, temperature, rng,
                 no_self_atari=False):
    """One move step for the games ``rows``: each board's planes into
    ``planes[j]`` ``[P, size, size, C]`` and its candidate moves into
    ``masks[j]`` ``[P, A]``, the unused rows padded (a fixed batch, so the net
    compiles once), one network call, moves sampled at ``temperature``.
    Returns ``[len(rows)]`` int moves."""
    from alphalite.nn import features

    for j, g in enumerate(rows):
        features.encode_into(boards[g], pid, planes[j])
        candidates_into(boards[g], own, masks[j], allow_pass, no_self_atari)
    planes[rows.size:] = 0.0
    masks[rows.size:] = True
    logp = policy_logp(model, variables, planes, masks, temperature)[: rows.size]
    return sample_moves(logp, temperature, rng)


def play_policy_games(
    players: Sequence[NetPlayer],
    black: Sequence[int],
    white: Sequence[int],
    size: int,
    komi: float,
    rng: np.random.Generator,
    *,
    max_moves: int | None = None,
    allow_pass: bool = False,
    collect: int | None = None,
    stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Game], Positions | None]:
    """Play ``len(black)`` games at once; game ``g`` has ``players[black[g]]``
    as Black and ``players[white[g]]`` as White.

    ``collect``: index of a player whose positions (planes, mask, move) are
    returned for training, else None. ``stop()`` is polled between move
    steps; when it returns True the games are abandoned and ``([], None)`` is
    returned. ``progress(step, live_games)`` is called after every step.
    Returns (games in order, positions of ``collect``)."""
    from alphalite.nn import features

    n_games = len(black)
    if n_games != len(white) or n_games == 0:
        raise ValueError("black and white must list the same, non-zero number of games")
    if not players:
        raise ValueError("no players")
    for p in players:
        if p.model.size != size:
            raise ValueError(f"player {p.name} is a {p.model.size}x{p.model.size} net, the games are {size}x{size}")
    black = np.asarray(black, np.int64)
    white = np.asarray(white, np.int64)
    max_moves = board.default_max_moves(size) if max_moves is None else int(max_moves)
    A = size * size + 1
    states = [board.new_game(size, komi) for _ in range(n_games)]
    boards = [s.copy_tuple(extra_history=max_moves + 1) for s in states]
    moves = np.full((n_games, max_moves), -1, np.int16)
    n_played = np.zeros(n_games, np.int64)
    live = np.ones(n_games, np.bool_)
    own = np.zeros(size * size, np.int8)

    # Fixed batch per player: the most games it plays with one colour.
    pad = [max(int((black == i).sum()), int((white == i).sum()), 1) for i in range(len(players))]
    pids = [features.preset_id(p.preset) for p in players]
    nplanes = [features.num_planes(p.preset) for p in players]
    planes = [np.zeros((pad[i], size, size, nplanes[i]), np.float32) for i in range(len(players))]
    masks = [np.ones((pad[i], A), np.bool_) for i in range(len(players))]
    col_planes: list[np.ndarray] = []
    col_mask: list[np.ndarray] = []
    col_moves: list[np.ndarray] = []
    col_game: list[np.ndarray] = []

    step = 0
    while live.any():
        if stop is not None and stop():
            return [], None
        colour = 1 if step % 2 == 0 else -1
        mover = black if colour == 1 else white
        chosen = np.full(n_games, -1, np.int64)
        for i, p in enumerate(players):
            rows = np.flatnonzero(live & (mover == i))
            if rows.size == 0:
                continue
            pl, mk = planes[i], masks[i]
            picks = policy_moves(boards, rows, pids[i], own, pl, mk, allow_pass, p.model, p.variables,
                                 p.temperature, rng)
            chosen[rows] = picks
            if collect == i:
                col_planes.append(pl[: rows.size].astype(np.uint8))
                col_mask.append(mk[: rows.size].copy())
                col_moves.append(picks.astype(np.int32))
                col_game.append(rows.astype(np.int32))
        for g in np.flatnonzero(live):
            m = int(chosen[g])
            why = board.play_flat(boards[g], m, colour)
            if why != board.LEGAL:  # cannot happen: the mask holds legal moves only
                raise RuntimeError(f"self-play chose an illegal move {m}: {board.REASONS[why]}")
            moves[g, n_played[g]] = m
            n_played[g] += 1
            if boards[g].meta[M_PASSES] >= 2 or n_played[g] >= max_moves:
                live[g] = False
        step += 1
        if progress is not None:
            progress(step, int(live.sum()))

    games = []
    for g in range(n_games):
        t = int(n_played[g])
        b, w = board.area(boards[g])
        over = boards[g].meta[M_PASSES] >= 2
        games.append(Game(size, float(komi), moves[g, :t].copy(),
                          np.where(np.arange(t) % 2 == 0, 1, -1).astype(np.int8),
                          float(b - w - komi), players[black[g]].name, players[white[g]].name,
                          "passes" if over else "move cap"))
    positions = None
    if collect is not None:
        if col_planes:
            positions = Positions(np.concatenate(col_planes), np.concatenate(col_mask),
                                  np.concatenate(col_moves), np.concatenate(col_game))
        else:
            C = nplanes[collect]
            positions = Positions(np.zeros((0, size, size, C), np.uint8), np.zeros((0, A), np.bool_),
                                  np.zeros(0, np.int32), np.zeros(0, np.int32))
    return games, positions


# ---------------------------------------------------------------- MCTS games


def mcts_player(model, variables, *, preset: str = "default", visits: int = 64, search_params=None,
                value_model=None, value_variables=None):
    """A ``players.MctsPlayer`` over a policy net: network priors; leaf values
    from random rollouts (no value net) or ``lam * value + (1 - lam) *
    rollout`` (``search_params.lam``; ``search.params.SearchParams``, None:
    the defaults)."""
    from alphalite.engine.players import MctsPlayer
    from search.evaluators import net_evaluator, policy_value_fn
    from search.params import SearchParams

    sp = SearchParams() if search_params is None else search_params
    evaluate = net_evaluator(policy_value_fn(model, value_model), has_value=value_model is not None, lam=sp.lam,
                             preset=preset, pad_to=sp.batch_size)
    params = {"policy": variables, "value": value_variables or {}}
    return MctsPlayer(evaluate, params, visits=visits, search_params=sp)


def play_mcts_games(
    black_player,
    white_player,
    n_games: int,
    size: int,
    komi: float,
    rng: np.random.Generator,
    *,
    names: tuple[str, str] = ("mcts", "mcts"),
    max_moves: int | None = None,
    stop: Callable[[], bool] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Game]:
    """``n_games`` games between two ``players.MctsPlayer`` (the same object
    for self-play), one after another, the tree reused between moves. Only
    candidate moves (``candidates``) are played; pass only when there is
    none. The move is ``search.tree.choose_move`` among the candidates at
    the mover's ``search_params.temperature_at`` the move number (e.g.
    ``temperature=1, temperature_moves=30``: drawn in proportion to the
    root visits early on for variety, the most visited after). ``stop()`` polled between moves: the game in
    progress is dropped."""
    from search.tree import choose_move

    max_moves = board.default_max_moves(size) if max_moves is None else int(max_moves)
    games = []
    for g in range(n_games):
        black_player.forget()
        white_player.forget()
        state = board.new_game(size, komi)
        played: list[int] = []
        while not state.is_over and len(played) < max_moves:
            if stop is not None and stop():
                return games
            me = black_player if state.to_play == 1 else white_player
            cand = candidates(state)
            cand[-1] = False
            if cand.any():
                out = me.run(state, rng)
                t = out.tree
                prior = t.clean_root_prior  # ties: not the noise
                move = choose_move(t.children_visits[0], prior, cand,
                                   me.search_params.temperature_at(len(played)), rng)
            else:
                move = size * size
            state = board.play(state, move)
            played.append(move)
        b, w = board.area_counts(state)
        t = len(played)
        games.append(Game(size, float(komi), np.array(played, np.int16),
                          np.where(np.arange(t) % 2 == 0, 1, -1).astype(np.int8),
                          float(b - w - komi), names[0], names[1],
                          "passes" if state.is_over else "move cap"))
        if progress is not None:
            progress(g + 1)
    return games
