"""The GTP engine (``alphalite gtp``): protocol, command groups, session.
Depends on ``engine`` and below (not on ``selfplay``)."""

from alphalite.gtp.engine import Engine, EngineConfig, run
from alphalite.gtp.protocol import parse

__all__ = ["Engine", "EngineConfig", "parse", "run"]
