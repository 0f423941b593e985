"""The board and play commands: ``name``, ``version``, ``boardsize``,
``clear_board``, ``komi``, ``play``, ``undo``, ``showboard``, the handicap
commands, and ``genmove`` with its variants ``reg_genmove`` and
``kgs-genmove_cleanup``. What a move is (pass, resign, cleanup) is decided
by ``alphalite.engine.decisions``; the game record is
``alphalite.engine.game``."""

from __future__ import annotations

import time

from alphalite.gtp.protocol import BLACK, GtpFailure, parse_color, parse_float, parse_int
from alphalite.gtp.session import NAME, VERSION


class CoreCommands:
    """Mixin over a ``Session`` and ``TimeCommands``."""

    def cmd_name(self):
        return NAME

    def cmd_version(self):
        return VERSION

    def cmd_boardsize(self, size):
        n = parse_int(size)
        if not 2 <= n <= 25:
            raise GtpFailure("unacceptable size")
        self.game.reset(n)
        return ""

    def cmd_clear_board(self):
        self.game.reset()
        return ""

    def cmd_komi(self, komi):
        k = parse_float(komi)
        self.game.set_komi(k)
        self.judge.clear()
        return ""

    def cmd_play(self, color, vertex):
        from alphalite.go import board

        c = parse_color(color)
        move = self._vertex(vertex)
        try:
            self.game.play(c, move)
        except board.IllegalMove as e:
            self.log(f"{NAME}: {e}")
            raise GtpFailure("illegal move") from None
        return ""

    def cmd_undo(self):
        if not self.game.undo():
            raise GtpFailure("cannot undo")
        self.resign_policy.reset()  # the streak may hold moves taken back: count afresh
        return ""

    def cmd_showboard(self):
        from alphalite.go import board

        return "\n" + board.render(self.state)

    # ------------------------------------------------------------ handicap

    def cmd_fixed_handicap(self, n):
        from alphalite.go import sgf

        k = parse_int(n)
        if not self.game.board_empty():
            raise GtpFailure("board not empty")
        if k < 2:
            raise GtpFailure("invalid number of stones")
        try:
            points = sgf.handicap_points(self.size, k)
        except sgf.SgfError:
            raise GtpFailure("invalid number of stones") from None
        self._place_handicap(points)
        return " ".join(self._to_gtp(p) for p in points)

    def cmd_place_free_handicap(self, n):
        import numpy as np

        from alphalite.go import sgf

        k = parse_int(n)
        if not self.game.board_empty():
            raise GtpFailure("board not empty")
        pts = self.size * self.size
        if k < 2 or k > pts - 1:
            raise GtpFailure("invalid number of stones")
        try:
            points = sgf.handicap_points(self.size, min(k, 9))
        except sgf.SgfError:
            points = []
        if len(points) < k:
            n = self.size
            rest = [p for p in range(pts) if p not in points]
            line = [min(p // n, p % n, n - 1 - p // n, n - 1 - p % n) for p in rest]
            want = 3 if n >= 13 else 2
            noise = self._gen().random(len(rest))
            order = np.lexsort((noise, [abs(v - want) for v in line]))
            points = points + [rest[i] for i in order[: k - len(points)]]
        self._place_handicap(points)
        return " ".join(self._to_gtp(p) for p in points)

    def cmd_set_free_handicap(self, *vertices):
        if not self.game.board_empty():
            raise GtpFailure("board not empty")
        try:
            points = [self._vertex(v) for v in vertices]
        except GtpFailure as e:  # a well-formed vertex off this board is a bad list, not a bad move
            raise GtpFailure("bad vertex list" if str(e) == "illegal move" else str(e)) from None
        if len(points) < 2 or len(points) > self.size * self.size - 1:
            raise GtpFailure("invalid number of stones")
        if len(set(points)) != len(points) or self.size * self.size in points:
            raise GtpFailure("bad vertex list")
        self._place_handicap(points)
        return ""

    def _place_handicap(self, points):
        try:
            self.game.place_handicap(points)
        except ValueError:
            raise GtpFailure("bad vertex list") from None

    # ------------------------------------------------------------ moves

    def cmd_genmove(self, color):
        return self._genmove(parse_color(color))

    def cmd_kgs_genmove_cleanup(self, color):
        return self._genmove(parse_color(color), cleanup=True)

    def cmd_reg_genmove(self, color):
        return self._genmove(parse_color(color), commit=False)

    def _genmove(self, color: int, *, commit: bool = True, cleanup: bool = False, callback=None,
                 allowed=None) -> str:
        """A move for ``color``, its time counted from the command's
        arrival: the rules of ``decisions.choose`` around the player's
        search, then the clock charged, resigning judged, the move played
        (``commit``). ``allowed`` (bool [A], from ``avoid``/``allow``): the
        only points it may play, and the search's only root moves."""
        from alphalite.engine import decisions, players
        from alphalite.engine.game import with_to_play

        t0 = self.arrived  # everything from the command's arrival is charged to the move
        self.wait_ready()
        state = with_to_play(self.state, color)
        allocated, _ = self._move_budget(color, state.move_number)
        cand = players.candidate_moves(state)
        kw = {}
        if allowed is not None:
            cand &= allowed
            if hasattr(self._player(), "run"):  # a search (the others choose among the candidates)
                kw["allowed"] = allowed
        rng = self._gen()

        def left():  # the move's seconds left now (None: no clock)
            return self._move_budget(color, state.move_number)[1]

        # the search gets what is left when it starts: the rules before it
        # (judging the board after a pass, on the move's clock too) are charged to the move as well
        decision = decisions.choose(
            state, color, cand, lambda: self._player().genmove(state, cand, left(), rng, callback, **kw),
            self.judge.within(left), cleanup=cleanup, prior=lambda: self._player().prior(state), allowed=allowed)
        move = decision.move
        elapsed = time.perf_counter() - t0
        wr = "" if decision.winrate is None else f" winrate {decision.winrate:.3f}"
        self.log(f"{NAME}: {'B' if color == BLACK else 'W'} {self._to_gtp(move)}{wr} visits {decision.visits} "
                 f"in {elapsed:.2f} s" + (f" (budget {allocated:.2f} s)" if allocated is not None else "")
                 + (f" [{decision.note}]" if decision.note else ""))
        if not commit:
            return self._to_gtp(move)
        self._charge(color, elapsed)
        if self.resign_policy.observe(decision.winrate, move_number=state.move_number,
                                      board_points=self.size * self.size, color=color,
                                      handicap=self.game.handicap):
            self.log(f"{NAME}: resigning (winrate {decision.winrate:.3f})")
            return "resign"
        self.game.play(color, move, start=state)
        return self._to_gtp(move)
