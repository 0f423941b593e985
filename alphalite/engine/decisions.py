"""When to pass, resign and clean up: the rules a move goes through around
the search, apart from any protocol, clock or net.

``choose(state, color, candidates, search, judge)`` is one move's
decision: kgs-genmove_cleanup's capture of dead stones first, a pass that
surely wins after the opponent's pass, a pass when nothing is left to play
outside own territory and eyes, else ``search()`` (a player's ``genmove``);
its pass is replaced by a move when it would end the game lost once the
dead stones are off, or lost by the count as the board stands (the dead
stones are captured then), or won only while an unsettled group is read
our way. ``ResignPolicy`` decides resigning
from the winrates of the moves chosen. ``Judge`` scores positions from an
ownership estimate, cached: the player's own search's (the apv engine's
rollouts), else playouts.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable, NamedTuple

import numpy as np

from alphalite.engine import players
from alphalite.engine.game import with_to_play
from alphalite.engine.players import Decision
from alphalite.go import board
from alphalite.go.board import WHITE


class Territory(NamedTuple):
    """Expected end of a game from one position."""

    ownership: np.ndarray  # float64 [size*size] in [-1, 1], black's view (+1 black), row 0 the top row
    margin: float  # mean final area, black minus white minus komi
    stdev: float  # its standard deviation over the playouts
    playouts: int  # how many it rests on, or the simulations of the search it is from (fewer than asked: cut short)


def playout_territory(state: board.GoState, playouts: int, seed: int, policy=None,
                      max_seconds: float | None = None) -> Territory:
    """``Territory`` over ``playouts`` playouts (``players.playout_outcomes``;
    pattern rollouts with ``policy``, uniform random without; fewer when
    ``max_seconds`` runs out), seeded by the position and ``seed``: the
    same position, the same estimate."""
    black, white, margins = players.playout_outcomes(state, playouts, (state.hash ^ seed) & 0x7FFFFFFFFFFFFFFF,
                                                     policy, max_seconds)
    return Territory((black - white) / len(margins), float(margins.mean()), float(margins.std()), len(margins))


JUDGE_SHARE = 0.5  # of a move's time still left, what one estimate may take: the search keeps the rest


class Judge:
    """``judge(state) -> (score, dead points)``: the chains that
    ``territory(state)`` gives to the opponent are dead
    (``players.dead_points``); the score is the area once they are off.
    ``territory`` is ``search(state, playouts, max_seconds)`` when given
    and it answers (the engine's own search: ``ApvPlayer.territory``), else
    ``playouts`` playouts seeded by the position (pattern rollouts with
    ``policy``, uniform random without). The last ``capacity`` positions
    are cached. ``within`` puts the estimates on a move's clock."""

    def __init__(self, playouts: int, seed: int = 0, capacity: int = 64, policy=None,
                 search: Callable | None = None):
        self.playouts = playouts
        self.seed = seed
        self.capacity = capacity
        self.policy = policy
        self.search = search
        self._cache: dict = {}
        self._territories: dict = {}
        self.time_left: Callable[[], float | None] = lambda: None  # the move's clock (``within``); None: none

    def within(self, time_left: Callable[[], float | None]) -> Judge:
        """This judge, its caches shared, on a move's clock: an estimate
        takes at most ``JUDGE_SHARE`` of ``time_left()`` (the move's seconds
        left as it starts; None: no limit), and one that the limit cut short
        is not cached. Unbounded, the estimates after the opponent's pass
        took 0.31 s of a 0.03 s move at the end of absolute time (19x19)."""
        view = copy.copy(self)
        view.time_left = time_left
        return view

    def whole(self, t: Territory) -> bool:
        """Whether ``t`` rests on all the playouts asked for: not cut short."""
        return t.playouts >= self.playouts

    def territory(self, state: board.GoState) -> Territory:
        key = (state.hash, state.komi, state.move_number, state.to_play)
        if key in self._territories:
            return self._territories[key]
        if len(self._territories) >= self.capacity:
            self._territories.clear()
        n = self.playouts
        left = self.time_left()
        limit = None if left is None else JUDGE_SHARE * left
        found = self.search(state, n, limit) if self.search is not None and n > 0 else None
        out = None if found is None else Territory(*found)
        if out is None and n <= 0:  # no estimate: every stone lives, the board as it stands
            out = Territory(players.owners(state).astype(np.float64), board.area_score(state), 0.0, 0)
        elif out is None:
            out = playout_territory(state, n, self.seed, self.policy, limit)
        if self.whole(out):  # one cut short is not kept: the next asks again
            self._territories[key] = out
        return out

    def __call__(self, state: board.GoState) -> tuple[float, np.ndarray]:
        key = (state.hash, state.komi, state.move_number, state.to_play)
        if key not in self._cache:
            if len(self._cache) >= self.capacity:
                self._cache.clear()
            t = self.territory(state)
            dead = players.dead_points(state, t.ownership)
            judged = (players.score_without(state, dead), dead)
            if not self.whole(t):  # cut short by the clock
                return judged
            self._cache[key] = judged
        return self._cache[key]

    def clear(self) -> None:
        self._cache.clear()
        self._territories.clear()


SURE = 0.5  # ownership, for its own colour, that keeps a stone alive when our pass would end the game


def surely_won(state: board.GoState, color: int, judge: Judge) -> bool:
    """Do we win even when the estimate is read against us: our stones
    alive only where it surely keeps them (ownership above ``SURE`` for
    us), the opponent's dead only where it surely takes them? A referee
    judges an unsettled group its own way (GNU Go called dead four of our
    stones the rollouts gave us at 0.45: a won game scored a draw). The
    estimate is of the board with the opponent to move: our pass gives up
    the move that an estimate with us to move spends saving a group (GNU
    Go called dead eight stones a search with us to move kept alive).
    An estimate cut short by the clock (a few playouts) never says yes: it
    may stop a pass, not make one."""
    t = judge.territory(with_to_play(state, -color))
    if not judge.whole(t):
        return False
    own = t.ownership * color  # > 0: ours
    s = board.stones(state).ravel() * color  # +1 ours, -1 the opponent's
    dead = np.flatnonzero(((s > 0) & (own <= SURE)) | ((s < 0) & (own > SURE)))
    return players.score_without(state, dead) * color > 0


def pass_wins(state: board.GoState, color: int, judge: Judge) -> bool:
    """After the opponent's pass: do we win by the Tromp-Taylor count as
    the board stands, with the dead stones taken off, and ``surely_won``?"""
    score, _ = judge(state)
    return board.area_score(state) * color > 0 and score * color > 0 and surely_won(state, color, judge)


def cleanup_move(state: board.GoState, color: int, judge: Judge, allowed: np.ndarray | None = None
                 ) -> Decision | None:
    """kgs-genmove_cleanup: while the opponent has dead stones, fill a
    liberty of the dead group with the fewest liberties (None: none left,
    or none can be filled). ``allowed``: the only points it may fill."""
    _, dead = judge(state)
    s = board.stones(state).ravel()
    dead = [int(p) for p in dead if s[p] == -color]
    if not dead:
        return None
    n = state.size
    libs = board.liberties(state).ravel()
    legal = board.legal_moves(state)
    for p in sorted(dead, key=lambda q: libs[q]):
        r, c = divmod(p, n)
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            q = rr * n + cc
            if 0 <= rr < n and 0 <= cc < n and s[q] == 0 and legal[q] and (allowed is None or allowed[q]):
                return Decision(int(q), note=f"cleanup: {len(dead)} dead stones left")
    return None


def play_on(candidates: np.ndarray, decision: Decision, prior: Callable[[], np.ndarray],
            why: str = "lost") -> Decision:
    """Instead of a game-ending pass: the searched candidate with most
    visits, else the candidate ``prior()`` likes best."""
    rows = [r for r in (decision.analysis or []) if r["move"] < len(candidates) - 1 and candidates[r["move"]]]
    if rows:
        move = max(rows, key=lambda r: r["visits"])["move"]
    else:
        p = np.asarray(prior(), np.float64)
        move = int(np.argmax(np.where(candidates, p + 1e-9, -1.0)))
    return dataclasses.replace(decision, move=int(move), note=f"passing would end the game {why}: playing on")


def choose(state: board.GoState, color: int, candidates: np.ndarray, search: Callable[[], Decision],
           judge: Judge, *, cleanup: bool = False, prior: Callable[[], np.ndarray] | None = None,
           allowed: np.ndarray | None = None) -> Decision:
    """One move for ``color`` (to play in ``state``). ``candidates``:
    ``players.candidate_moves(state)`` (within ``allowed``); ``search()``:
    the player's choice, called only when no rule decides first;
    ``prior()``: the player's prior over moves, asked only when a pass must
    be replaced and the search gave no visited candidate (uniform over the
    candidates without one). ``allowed`` (bool [A], GTP's ``avoid``/``allow``):
    the only moves it may play, pass among them or not."""
    n2 = state.size * state.size
    prior = prior or (lambda: np.ones(n2 + 1))  # play_on masks it: uniform over whatever it chooses among
    pass_ok = allowed is None or bool(allowed[n2])
    decision = cleanup_move(state, color, judge, allowed) if cleanup else None
    if decision is None and pass_ok and players.last_was_pass(state) and pass_wins(state, color, judge):
        decision = Decision(n2, note="the opponent passed and passing wins")
    if decision is None and not candidates[:-1].any():
        if pass_ok:
            decision = Decision(n2, note="no move left outside own territory and eyes")
        else:  # an avoided pass: any allowed point the rules leave
            points = board.legal_moves(state) & allowed
            points[n2] = False
            decision = play_on(points, Decision(n2), prior)
            return dataclasses.replace(decision, note="pass avoided: playing on")
    if decision is not None:
        return decision
    decision = search()
    if decision.move == n2 and not pass_ok:
        return dataclasses.replace(play_on(candidates, decision, prior), note="pass avoided: playing on")
    if decision.move != n2 or not candidates[:-1].any() or cleanup:
        return decision  # cleaning up: no dead stone is left, so the pass stands
    if players.last_was_pass(state):
        # Our pass would end the game, and with the dead stones off (as
        # servers and referees score) we lose, or win only as long as no
        # one reads an unsettled group against us: play on. The search
        # scores two passes by Tromp-Taylor as the board stands, so a dead
        # stone in our area can make it pass here.
        if judge(state)[0] * color <= 0:
            return play_on(candidates, decision, prior)
        if board.area_score(state) * color <= 0:
            # won once the dead stones are off, lost by the count as the
            # board stands (Tromp-Taylor counts them alive): capture them
            return cleanup_move(state, color, judge, allowed) or play_on(candidates, decision, prior,
                                                                          "lost as the board stands")
        if not surely_won(state, color, judge):
            return play_on(candidates, decision, prior, "unsettled")
    return decision


@dataclasses.dataclass
class ResignPolicy:
    """Resign when the winrate stays below ``threshold`` for ``consecutive``
    own moves in a row. Never before ``opening_fraction`` of the board's
    points have been played. As White in a handicap game (an early deficit
    is expected there) the threshold is multiplied by ``handicap_factor``
    and ``handicap_extra`` more moves are needed."""

    threshold: float = 0.1
    consecutive: int = 3
    enabled: bool = True
    opening_fraction: float = 0.2
    handicap_factor: float = 0.5
    handicap_extra: int = 3
    streak: int = 0

    def limits(self, color: int, handicap: int) -> tuple[float, int]:
        if color == WHITE and handicap > 0:
            return self.threshold * self.handicap_factor, self.consecutive + self.handicap_extra
        return self.threshold, self.consecutive

    def observe(self, winrate: float | None, *, move_number: int, board_points: int, color: int,
                handicap: int = 0) -> bool:
        """Feed the winrate of one of our moves; True means resign now."""
        if not self.enabled or winrate is None:
            self.streak = 0
            return False
        threshold, need = self.limits(color, handicap)
        self.streak = self.streak + 1 if winrate < threshold else 0
        if move_number < self.opening_fraction * board_points:
            return False
        return self.streak >= need

    def reset(self):
        self.streak = 0
