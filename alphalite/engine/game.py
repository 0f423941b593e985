"""The record of the game being played: board size, komi, the positions
(``stack[0]`` the start, ``stack[i + 1]`` after ``moves[i]``), the moves as
``(colour, flat move)``, setup stones and handicap.

Every way a game starts (``reset`` for a new board, ``place_handicap``,
``load``) goes through ``reset``, which calls ``on_reset`` so that whatever
hangs on the old game (a search tree, cached judgements, a resign streak)
is dropped in one place. A failed ``play``, ``place_handicap`` or ``load``
leaves the record as it was.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from alphalite.engine.players import resume
from alphalite.go import board, sgf
from alphalite.go.board import BLACK, WHITE


def with_to_play(state: board.GoState, color: int) -> board.GoState:
    """``state`` resumed (``players.resume``: play goes on after two passes)
    with ``color`` to move (``board.with_to_play``). A pass that ``color``
    made itself is no longer pending: a pass counts towards the game's end,
    and for ``decisions`` as the opponent's pass, only while the other side
    is to move (``play b pass`` then ``genmove b`` read it as White's)."""
    if state.passes and state.to_play != color:  # the last move, a pass, was color's own
        b = state.copy_tuple()
        board.clear_passes(b)
        state = board.GoState(state.size, state.komi, state.superko, state.suicide, b)
    return board.with_to_play(resume(state), color)


class Game:
    """One game's record. The start position is made on first use, so a
    session that never plays compiles no board kernel."""

    def __init__(self, size: int, komi: float, *, superko: bool = True,
                 on_reset: Callable[[], None] | None = None):
        self.size = int(size)
        self.komi = float(komi)
        self.superko = superko
        self.on_reset = on_reset
        self._stack: list[board.GoState] | None = None
        self.moves: list[tuple[int, int]] = []  # (colour, flat move) leading to stack[i + 1]
        self.setup_black: list[int] = []
        self.setup_white: list[int] = []
        self.handicap = 0

    @property
    def stack(self) -> list[board.GoState]:
        if self._stack is None:
            self._stack = [board.new_game(self.size, self.komi, superko=self.superko)]
        return self._stack

    @property
    def state(self) -> board.GoState:
        return self.stack[-1]

    def reset(self, size: int | None = None, *, start: board.GoState | None = None, komi: float | None = None,
              setup_black=(), setup_white=(), handicap: int = 0) -> None:
        """The one way a game starts: an empty ``size`` board (default: the
        current size), or ``start`` with its setup stones and handicap."""
        if start is not None:
            size, komi = start.size, start.komi
        self.size = self.size if size is None else int(size)
        self.komi = self.komi if komi is None else float(komi)
        self._stack = [start] if start is not None else None
        self.moves = []
        self.setup_black, self.setup_white = [int(p) for p in setup_black], [int(p) for p in setup_white]
        self.handicap = int(handicap)
        if self.on_reset is not None:
            self.on_reset()

    def set_komi(self, komi: float) -> None:
        """The same game under another komi (every position of it)."""
        self.komi = float(komi)
        if self._stack is not None:
            self._stack = [board.with_komi(s, self.komi) for s in self._stack]

    def play(self, color: int, move: int, start: board.GoState | None = None) -> board.GoState:
        """Play ``move`` for ``color`` (after two passes too: the game goes
        on); ``board.IllegalMove`` leaves the record as it was. ``start``:
        the last position as the move was chosen in (``with_to_play`` of it).
        Two passes in a row end the game only when by both players: a
        colour's second pass replaces its first (``with_to_play``)."""
        new = board.play(with_to_play(self.state, color) if start is None else start, move, color)
        self.stack.append(new)
        self.moves.append((color, move))
        return new

    def undo(self) -> bool:
        """Take back the last move; False when there is none."""
        if len(self.stack) <= 1:
            return False
        self.stack.pop()
        self.moves.pop()
        return True

    def board_empty(self) -> bool:
        return not board.stones(self.state).any()

    def place_handicap(self, points) -> None:
        """A new game with black stones on ``points`` (flat), White to move;
        ValueError for points no board can hold."""
        n = self.size
        grid = np.zeros((n, n), np.int8)
        for p in points:
            grid[p // n, p % n] = BLACK
        start = board.from_stones(grid, komi=self.komi, to_play=WHITE, superko=self.superko)
        self.reset(start=start, setup_black=sorted(int(p) for p in points), handicap=len(points))

    def load(self, rec: sgf.GameRecord, limit: int | None = None) -> None:
        """A new game from an SGF record, its first ``limit`` moves (all:
        None) replayed. ValueError, and nothing changed, for setup stones our
        board refuses or an illegal move among those replayed (a controller
        told "loaded" would think the whole record is on the board)."""
        start = board.new_game(rec.size, rec.komi, superko=self.superko)
        if rec.setup_black or rec.setup_white:
            start = board.setup(start, rec.setup_black, rec.setup_white)
        first = rec.first_player or (rec.moves[0][0] if rec.moves else
                                     (WHITE if rec.setup_black and not rec.setup_white else BLACK))
        start = with_to_play(start, first)
        scratch = Game(rec.size, rec.komi, superko=self.superko)
        scratch.reset(start=start)
        for i, (colour, m) in enumerate(rec.moves[:limit]):
            try:
                scratch.play(colour, m)
            except board.IllegalMove as e:
                raise ValueError(f"move {i + 1} is illegal: {e}") from None
        self.reset(start=start, setup_black=rec.setup_black, setup_white=rec.setup_white, handicap=rec.handicap)
        self._stack, self.moves = scratch.stack, scratch.moves

    def record(self, result: str = "") -> sgf.GameRecord:
        """The game as an SGF record (``sgf.write_sgf`` writes it)."""
        first = self.stack[0].to_play
        return sgf.GameRecord(size=self.size, komi=self.komi, handicap=self.handicap, result=result,
                              setup_black=tuple(self.setup_black), setup_white=tuple(self.setup_white),
                              moves=tuple(self.moves), first_player=first if first == WHITE else 0)
