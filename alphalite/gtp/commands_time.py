"""Time control commands: ``time_settings``, ``kgs-time_settings``,
``time_left``, and each move's budget and charge (the clock itself is
``alphalite.engine.timecontrol``)."""

from __future__ import annotations

import time

from alphalite.gtp.protocol import BLACK, WHITE, GtpFailure, parse_color, parse_float, parse_int
from alphalite.gtp.session import NAME


class TimeCommands:
    """Mixin over a ``Session``: the time settings and both sides' clocks."""

    _time = None  # TimeSettings, set on first use
    _clocks: dict | None = None  # colour -> timecontrol.Clock
    _time_announced = False  # time_settings / kgs-time_settings seen ("none" included)

    def _timing(self):
        from alphalite.engine import timecontrol as tc

        if self._time is None:
            self._time = tc.TimeSettings()
            self._clocks = {BLACK: tc.Clock(), WHITE: tc.Clock()}
        return tc

    def _move_budget(self, color: int, move_number: int) -> tuple[float | None, float | None]:
        """(seconds allocated to this move, what is left of them now): the
        clock's share (``timecontrol.allocate``) capped by ``--max-time``,
        counted from the arrival of the command; (None, None): no limit."""
        tc = self._timing()
        n2 = self.size * self.size
        budget = tc.allocate(self._time, self._clocks[color], move_number, n2, lag=self.config.lag_buffer)
        if self.config.max_time is not None:
            budget = self.config.max_time if budget is None else min(budget, self.config.max_time)
        if budget is None:
            return None, None
        # what the wait for warm-up (or anything else) took is gone
        return budget, max(budget - (time.perf_counter() - self.arrived), tc.MIN_MOVE)

    def _charge(self, color: int, seconds: float) -> None:
        tc = self._timing()
        self._clocks[color] = tc.charge(self._time, self._clocks[color], seconds, lag=self.config.lag_buffer)

    def _set_time(self, settings):
        tc = self._timing()
        self._time = settings
        self._time_announced = True
        self._clocks = {BLACK: tc.start_clock(settings), WHITE: tc.start_clock(settings)}
        self.log(f"{NAME}: time settings {settings}")

    def cmd_time_settings(self, main, byo, stones):
        tc = self._timing()
        try:
            settings = tc.from_gtp_time_settings(parse_float(main), parse_float(byo), parse_int(stones))
        except ValueError:
            raise GtpFailure("syntax error") from None
        self._set_time(settings)
        return ""

    def cmd_kgs_time_settings(self, *args):
        tc = self._timing()
        if len(args) > 4 or any(len(a) > 40 for a in args):
            raise GtpFailure("syntax error")
        try:
            settings = tc.from_kgs(list(args))
        except ValueError:
            raise GtpFailure("syntax error") from None
        self._set_time(settings)
        return ""

    def cmd_time_left(self, color, seconds, stones):
        tc = self._timing()
        c = parse_color(color)
        t = parse_float(seconds)
        s = parse_int(stones)
        if t < 0 or s < 0:
            raise GtpFailure("syntax error")
        if self._time.kind == tc.NONE and self._time_announced:  # "no limit" announced: nothing to keep
            return ""
        if self._time.kind == tc.NONE:  # a clock nobody announced: treat it as absolute time
            self._time = tc.TimeSettings(tc.ABSOLUTE, main=t) if s == 0 else \
                tc.TimeSettings(tc.CANADIAN, main=0.0, period=t, stones=s)
        self._clocks[c] = tc.from_time_left(self._time, t, s, own=self._clocks[c])
        return ""
