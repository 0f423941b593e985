"""Clocks and the time a move may take (pure functions; no board, no I/O).

GTP gives the time system with ``time_settings main byo stones`` (Canadian
byo-yomi; ``byo == 0`` means absolute time, ``byo > 0 and stones == 0`` no
limit) or KGS's ``kgs-time_settings none | absolute M | byoyomi M P N |
canadian M T S``, and the clock with ``time_left colour seconds stones``
(``stones == 0``: still in main time; otherwise the time and stones -- or, in
Japanese byo-yomi, periods -- left in the current overtime).

``allocate(settings, clock, move_number, board_points)`` returns the seconds
for one move, or None when there is no limit:

* expected own moves left ``m = max(0.25*P + 10, (0.7*P - move_number) / 2)``
  for a board of ``P`` points (126 at the start of 19x19, 30 on 9x9);
* in main time: ``0.95 * main_left / m - LAG`` (the lag of every move
  still to come is kept back), plus half a byo-yomi allowance when
  overtime follows (main time may then be spent freely); in absolute time
  never more than a quarter of what is left;
* Canadian overtime: ``0.95 * period_left / stones_left - LAG`` (the lag
  of every stone kept back, as in main time);
* Japanese byo-yomi: one period minus ``LAG`` and 10% of it (a period is not
  lost when the move is made inside it);
* the result is always at least ``MIN_MOVE``.

``time_left`` gives whole seconds; in a Canadian period the engine's own
finer bookkeeping is kept where the report agrees with it (``from_time_left``);
that bookkeeping charges each stone ``LAG`` beyond the time it measured
(the move's travel, which the controller's clock sees and we do not).

The engine counts a move's time from the moment the ``genmove`` line was
read, so whatever it waits for (a warm-up still running, a command sent
ahead of it) is charged to the move.
"""

from __future__ import annotations

import dataclasses
import math

NONE, ABSOLUTE, CANADIAN, BYOYOMI = "none", "absolute", "canadian", "byoyomi"
LAG = 0.2  # seconds kept per move for pipes, process scheduling and the last search round
MIN_MOVE = 0.03  # seconds: the least a move gets (one search round)


@dataclasses.dataclass(frozen=True)
class TimeSettings:
    kind: str = NONE  # none | absolute | canadian | byoyomi
    main: float = 0.0  # seconds of main time
    period: float = 0.0  # seconds per overtime period
    stones: int = 0  # canadian: stones per period; byoyomi: number of periods


@dataclasses.dataclass(frozen=True)
class Clock:
    """One player's clock. ``main`` seconds of main time left; in overtime
    ``main == 0`` and ``period_left``/``stones_left`` (Canadian: stones to
    play in this period; byo-yomi: periods left) describe it."""

    main: float = 0.0
    period_left: float = 0.0
    stones_left: int = 0
    in_overtime: bool = False


def from_gtp_time_settings(main: float, byo: float, stones: int) -> TimeSettings:
    """GTP ``time_settings`` semantics."""
    if main < 0 or byo < 0 or stones < 0:
        raise ValueError("time settings must be non-negative")
    if byo > 0 and stones == 0:
        return TimeSettings(NONE)
    if byo == 0:
        return TimeSettings(ABSOLUTE, main=main)
    return TimeSettings(CANADIAN, main=main, period=byo, stones=stones)


def from_kgs(args: list[str]) -> TimeSettings:
    """``kgs-time_settings`` arguments; raises ValueError on bad ones."""
    if not args:
        raise ValueError("missing time system")
    kind = args[0].lower()
    nums = [float(a) for a in args[1:]]
    if any(x < 0 or not math.isfinite(x) for x in nums):
        raise ValueError("negative or endless time")
    if kind == NONE and not nums:
        return TimeSettings(NONE)
    if kind == ABSOLUTE and len(nums) == 1:
        return TimeSettings(ABSOLUTE, main=nums[0])
    if kind == BYOYOMI and len(nums) == 3:
        if nums[1] == 0 or nums[2] == 0:
            return TimeSettings(ABSOLUTE, main=nums[0])
        return TimeSettings(BYOYOMI, main=nums[0], period=nums[1], stones=int(nums[2]))
    if kind == CANADIAN and len(nums) == 3:
        if nums[1] == 0 or nums[2] == 0:
            return TimeSettings(ABSOLUTE, main=nums[0])
        return TimeSettings(CANADIAN, main=nums[0], period=nums[1], stones=int(nums[2]))
    raise ValueError(f"bad kgs-time_settings {' '.join(args)!r}")


def start_clock(settings: TimeSettings) -> Clock:
    if settings.kind == NONE:
        return Clock()
    if settings.main > 0 or settings.kind == ABSOLUTE:
        return Clock(main=settings.main)
    return _enter_overtime(settings)


def _enter_overtime(settings: TimeSettings) -> Clock:
    if settings.kind == CANADIAN:
        return Clock(0.0, settings.period, settings.stones, True)
    if settings.kind == BYOYOMI:
        return Clock(0.0, settings.period, settings.stones, True)
    return Clock(0.0, 0.0, 0, False)


def from_time_left(settings: TimeSettings, seconds: float, stones: int, own: Clock | None = None) -> Clock:
    """The clock a ``time_left colour seconds stones`` describes. No main
    time left (``time_left b 0 0``, what a controller sends before the first
    move of a game with no main time) means a fresh overtime period.

    GTP's seconds are whole (the arena, like most controllers, truncates):
    in a Canadian period, 0.6 s left of 1 s for 2 stones arrives as 0 and
    would leave the period's last move ``MIN_MOVE``. Where ``own``, this
    engine's bookkeeping of the same clock (``charge``), is in the same
    period with the same stones and within that rounding of the report
    (``seconds - 0.5 <= own < seconds + 1``), its finer figure is kept; its
    error cannot grow past one period, which starts afresh. Otherwise the
    report wins."""
    if settings.kind in (NONE, ABSOLUTE):
        return Clock(main=max(seconds, 0.0))
    if stones <= 0:
        return Clock(main=seconds) if seconds > 0 else _enter_overtime(settings)
    reported = Clock(0.0, max(seconds, 0.0), int(stones), True)
    if (settings.kind == CANADIAN and own is not None and own.in_overtime
            and own.stones_left == reported.stones_left
            and seconds - 0.5 <= own.period_left < seconds + 1.0):
        return own
    return reported


def charge(settings: TimeSettings, clock: Clock, elapsed: float, lag: float = LAG) -> Clock:
    """Our own bookkeeping after a move took ``elapsed`` seconds (used when
    the controller sends no ``time_left``, and in a Canadian period between
    its whole-second reports). The controller's clock also runs while a
    move travels, which we cannot see: a Canadian period is charged ``lag``
    more a stone, so that the bookkeeping errs low (then the report wins)."""
    if settings.kind == NONE:
        return clock
    if not clock.in_overtime:
        left = clock.main - elapsed
        if left >= 0 or settings.kind == ABSOLUTE:
            return Clock(main=max(left, 0.0))
        clock = _enter_overtime(settings)
        elapsed = -left
    if settings.kind == CANADIAN:
        left = clock.period_left - elapsed - lag
        stones = clock.stones_left - 1
        if stones <= 0:
            return Clock(0.0, settings.period, settings.stones, True)
        return Clock(0.0, max(left, 0.0), stones, True)
    if settings.kind == BYOYOMI:
        periods = clock.stones_left
        over = elapsed
        while over > settings.period and periods > 1:
            over -= settings.period
            periods -= 1
        return Clock(0.0, settings.period, periods, True)
    return clock


def expected_moves_left(move_number: int, board_points: int) -> float:
    """Own moves still to play, a rough guess that never gets small."""
    return max(0.25 * board_points + 10.0, (0.7 * board_points - move_number) / 2.0)


def allocate(settings: TimeSettings, clock: Clock, move_number: int, board_points: int,
             lag: float = LAG) -> float | None:
    """Seconds to think on this move (see the module docstring), counted from
    the ``genmove``'s arrival; None = no limit. ``lag``: seconds kept back per
    move (``LAG`` by default; KataGo's lagBuffer)."""
    if settings.kind == NONE:
        return None
    moves = expected_moves_left(move_number, board_points)
    if not clock.in_overtime:
        budget = clock.main
        t = 0.95 * budget / moves - lag
        if settings.kind == CANADIAN and settings.stones > 0:
            t += 0.5 * max(settings.period / settings.stones - lag, 0.0)
        elif settings.kind == BYOYOMI:
            t += 0.5 * max(settings.period - lag, 0.0)
        t = min(t, 0.25 * budget) if settings.kind == ABSOLUTE else t
        return max(t, MIN_MOVE)
    if settings.kind == CANADIAN:  # the lag is kept back on every stone, as in main time
        stones = max(clock.stones_left, 1)
        return max(0.95 * clock.period_left / stones - lag, MIN_MOVE)
    if settings.kind == BYOYOMI:
        period = clock.period_left if clock.period_left > 0 else settings.period
        return max(period - lag - 0.1 * period, MIN_MOVE)
    return MIN_MOVE
