"""The GTP engine (``alphalite gtp``): the command groups over one session.

::

    eng = Engine(EngineConfig(engine="random", size=9))
    eng.handle("1 genmove b")   # -> "=1 E5\\n\\n"

``Engine.handle(line) -> str`` returns the whole framed response (``""`` for
a line that carries no command); only ``protocol.serve`` touches stdout,
and logs go to stderr. The parts:

* ``protocol``: parsing, framing, dispatch of ``cmd_<name>`` methods, the
  serve loop; errors use the canonical texts (``unknown command``,
  ``syntax error``, ``illegal move``, ``unacceptable size``, ``cannot
  undo``, ``board not empty``, ``invalid number of stones``, ``cannot load
  file``).
* ``session``: the config, the game record, nets and players, warm-up.
* ``commands_core`` (board, play, handicap, genmove), ``commands_time``,
  ``commands_score``, ``commands_sgf``, ``commands_analyze``: the commands.
* ``alphalite.engine.game`` (the record) and ``alphalite.engine.decisions``
  (pass, resign, cleanup) below them, each usable without an Engine.

The engine answers ``name``, ``protocol_version`` and the other identity
commands at once on start-up, while Numba warm-up, network loading and
compiling (read back from ``alphalite.nn.jitcache``) run in a background
thread; every other command waits for it, so the first ``genmove`` finds a
warm engine. A move's time counts from the arrival of its ``genmove`` line.

Players (``--engine``): ``random``, ``policy`` (policy net; argmax or
sampling), ``mcts`` (PUCT with policy priors and rollout values, a value net
mixed in with ``--lambda``); the search's flags (``--c-puct``, ``--batch``,
``--lambda``, ``--temperature`` ...) are ``search.params.SearchParams``'s
fields (``--batch`` is the apv search's network batch too, 32 unless
given: ``session.default_search``); nets: see ``session``. Time control, resigning,
passing and scoring: see ``alphalite.engine.timecontrol``,
``alphalite.engine.decisions`` and ``alphalite.engine.players``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Callable

from alphalite.gtp.commands_analyze import AnalyzeCommands
from alphalite.gtp.commands_core import CoreCommands
from alphalite.gtp.commands_score import ScoreCommands
from alphalite.gtp.commands_sgf import SgfCommands
from alphalite.gtp.commands_time import TimeCommands
from alphalite.gtp.protocol import Dispatcher, serve
from alphalite.gtp.session import NAME, EngineConfig, Session, default_search
from search.params import SearchParams


class Engine(CoreCommands, TimeCommands, ScoreCommands, SgfCommands, AnalyzeCommands, Session, Dispatcher):
    """A GTP engine. ``log`` is a callable taking one line (stderr by
    default); ``warmup=False`` skips the background warm-up thread (the
    first ``genmove`` then loads what it needs)."""

    engine_name = NAME

    def __init__(self, config: EngineConfig | None = None, *, log: Callable[[str], None] | None = None,
                 warmup: bool = True):
        self.init_dispatch(log)
        self.init_session(config or EngineConfig(), warmup)


def config_from_args(args) -> EngineConfig:
    """The config of ``alphalite gtp``'s flags (``none`` for a net: no net);
    ValueError for a value out of range."""
    def net(word):
        return None if word is None or word.lower() == "none" else word

    from alphalite.runtime import config

    return EngineConfig(engine=args.engine, checkpoint=net(args.checkpoint),
                        value_checkpoint=net(args.value_checkpoint), visits=args.visits,
                        max_time=args.max_time, lag_buffer=args.lag_buffer, inference=args.inference,
                        search=config.from_args(SearchParams, args, config.to_dict(default_search(args.engine))),
                        resign_threshold=args.resign_threshold, resign_moves=args.resign_moves,
                        resign=not args.no_resign, komi=args.komi, size=args.size, seed=args.seed,
                        score_playouts=args.score_playouts, tree_policy=args.tree_policy,
                        rollout_policy=args.rollout_policy)


@contextlib.contextmanager
def _stray_errors_held():
    """Hold the errors Python would print for nobody (unraisable exceptions,
    asyncio's unretrieved futures) while the nets load: a failed Orbax
    restore leaves reads whose callbacks raise later in TensorStore's
    threads. After a good start they are printed after all; after a failed
    one they stay held, so the refusal is one line."""
    held: list = []
    hook, sys.unraisablehook = sys.unraisablehook, held.append
    log = logging.getLogger("asyncio")

    def hold(record):
        held.append(record)
        return False

    log.addFilter(hold)
    yield  # an exception from the body leaves everything held: the process is ending
    log.removeFilter(hold)
    sys.unraisablehook = hook
    for item in held:
        if isinstance(item, logging.LogRecord):
            log.handle(item)
        else:
            hook(item)


def run(args) -> int:
    """The ``alphalite gtp`` entry point. A bad flag or a net that is not
    what it should be stops it before it reads a command: one line on
    stderr, exit status 2."""
    from alphalite.nn import checkpoint, jitcache

    try:
        with _stray_errors_held():
            cfg = config_from_args(args)
            jitcache.enable()
            engine = Engine(cfg)
    except (ValueError, checkpoint.CheckpointError) as e:
        print(f"{NAME}: error: {e}", file=sys.stderr)
        code = 2
    else:
        code = serve(engine)
    # The stdin reader is a daemon thread blocked in readline, and a failed
    # Orbax restore leaves callbacks in its threads; leave without the
    # interpreter's shutdown touching either.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
