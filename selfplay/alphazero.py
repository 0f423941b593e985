"""AlphaZero-style self-play: ``K`` games at once on ``search.multigame``,
one network batch for all their leaves, records carrying the search's
improved policy.

::

    net_fn, params = pv_net(model, variables)           # ONNX Runtime on the CPU
    paths = play_games(net_fn, params, 128, "games/", size=9, config=SelfPlayConfig(games_at_once=64))

``play_games`` is what a self-play worker (a Ray actor, later) calls: it
keeps ``games_at_once`` games going (a finished game's slot starts the next
one, so the batch stays full) until ``n_games`` are done, and writes each
finished game at once as an atomic record (``selfplay.records``), so a
killed worker loses only the games in progress.

A game ends after two passes, at the move cap (``board.default_max_moves``
unless ``max_moves``), or when the player to move resigns: its search value
was below ``resign_below`` on its last ``resign_moves`` moves (off at the
default -1). It is scored by Tromp-Taylor area with komi on the final board
as it stands: games are played out (a player passes only when no move is
left but its own eyes and, with ``moves="area"``, its own territory), so no
dead-stone removal is done; the final ownership is the Tromp-Taylor owner
of each point. A resigned game's score and ownership are
those of its board at resignation; its winner is the other player.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from alphalite.go import board
from alphalite.go.board import area, owners_into
from search.multigame import MultiSearch
from search.params import SearchParams
from selfplay.config import SelfPlayConfig
from selfplay.games import Game
from selfplay.records import write_game


def pv_net(model, variables: dict, inference: str = "auto", pad_to: int | None = None):
    """``(net_fn, params)`` for ``MultiSearch.search`` from a policy-value
    net (``nets.ResNetPolicyValue``): ONNX Runtime on the CPU (``auto`` and
    ``onnx``; with ``pad_to``, its thread setting is the fastest here at
    that batch, ``onnx_export.fastest_runner``), else the jitted JAX
    function, padded to ``pad_to`` rows so it compiles once."""
    import jax

    from alphalite.nn import onnx_export
    from search.evaluators import policy_value_fn

    if inference == "onnx" or (inference == "auto" and jax.default_backend() == "cpu"
                               and onnx_export.exportable(model)):
        return onnx_export.pv_fn(model, variables, tune_batch=pad_to or 0), None
    fn = policy_value_fn(model)

    def net_fn(params, planes, legal):
        b = planes.shape[0]
        rows = max(b, pad_to or b)
        if rows > b:
            planes = np.concatenate([planes, np.zeros((rows - b,) + planes.shape[1:], planes.dtype)])
            legal = np.concatenate([legal, np.ones((rows - b, legal.shape[1]), np.bool_)])
        priors, values = fn(params, planes, legal)
        return np.asarray(priors)[:b], np.asarray(values)[:b]

    return net_fn, {"policy": variables}


class _Slot:
    """One game in progress: its moves, targets and values so far."""

    def __init__(self, index: int):
        self.index = index
        self.moves: list[int] = []
        self.values: list[float] = []
        self.target_moves: list[np.ndarray] = []
        self.target_probs: list[np.ndarray] = []


def _finish(slot: _Slot, ms: MultiSearch, g: int, ended: str, resigned: int, names) -> Game:
    B = ms.board(g)
    own = np.zeros(ms.size * ms.size, np.int8)
    owners_into(B, own)
    b, w = area(B)
    t = len(slot.moves)
    offsets = np.zeros(t + 1, np.int32)
    offsets[1:] = np.cumsum([m.size for m in slot.target_moves])
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    return Game(ms.size, ms.komi, np.array(slot.moves, np.int16),
                np.where(np.arange(t) % 2 == 0, 1, -1).astype(np.int8), float(b - w - ms.komi), names[0], names[1],
                ended, offsets, cat(slot.target_moves, np.int16), cat(slot.target_probs, np.float16),
                np.array(slot.values, np.float32), own, resigned)


def run_games(net_fn: Callable, params: Any, n_games: int, *, size: int, config: SelfPlayConfig = SelfPlayConfig(),
              search: SearchParams = SearchParams(), gen: np.random.Generator | None = None,
              on_game: Callable[[int, Game], None] | None = None,
              stop: Callable[[], bool] | None = None, names=("selfplay", "selfplay")) -> dict:
    """Play ``n_games`` self-play games, ``config.games_at_once`` at a time;
    ``on_game(index, game)`` is called as each finishes (in finishing
    order). ``search``: the PUCT knobs (``SelfPlayConfig.search_params``).
    ``stop()`` is polled between moves; games in progress are then
    dropped. Returns counts: games, moves, visits, net_calls, leaves."""
    stats = dict(games=0, moves=0, visits=0, net_calls=0, leaves=0)
    if n_games <= 0:
        return stats
    gen = np.random.default_rng() if gen is None else gen
    k = min(config.games_at_once, n_games)
    ms = MultiSearch(k, size, config.komi, config.search_params(size, search), preset=config.preset,
                     max_moves=config.max_moves or None)
    live = np.zeros(k, np.bool_)
    slots: list[_Slot | None] = [None] * k
    started = 0
    for g in range(k):
        ms.new_game(g)
        slots[g] = _Slot(started)
        live[g] = True
        started += 1
    while live.any():
        if stop is not None and stop():
            break
        out = ms.search(net_fn, params, live, gen)
        stats["net_calls"] += out.net_calls
        stats["leaves"] += out.leaves
        resign = np.zeros(k, np.bool_)
        for g in np.flatnonzero(live):
            s = slots[g]
            s.values.append(float(out.root_values[g]))
            mine = s.values[-2 * config.resign_moves + 1::2]  # the mover's last resign_moves values
            if config.resign_below > -1.0 and len(mine) >= config.resign_moves \
                    and max(mine) < config.resign_below:
                s.values.pop()
                resign[g] = True
                continue
            idx = np.flatnonzero(out.targets[g] > 0)
            s.target_moves.append(idx.astype(np.int16))
            s.target_probs.append(out.targets[g, idx])
            s.moves.append(int(out.actions[g]))
        playing = live & ~resign
        ms.play(out.actions, playing)
        n_moving = int(playing.sum())
        stats["moves"] += n_moving
        stats["visits"] += n_moving * ms.params.num_simulations
        for g in np.flatnonzero(live):
            s = slots[g]
            if resign[g]:
                ended, who = "resign", ms.board(g).meta[board.M_TOPLAY]
            elif ms.passes(g) >= 2:
                ended, who = "passes", 0
            elif len(s.moves) >= ms.max_moves:
                ended, who = "move cap", 0
            else:
                continue
            game = _finish(s, ms, g, ended, int(who), names)
            stats["games"] += 1
            if on_game is not None:
                on_game(s.index, game)
            if started < n_games:
                ms.new_game(g)
                slots[g] = _Slot(started)
                started += 1
            else:
                live[g] = False
    return stats


def play_games(net_fn: Callable, params: Any, n_games: int, out_dir: str | os.PathLike, *, size: int,
               config: SelfPlayConfig = SelfPlayConfig(), search: SearchParams = SearchParams(),
               seed: int | list[int] | None = None, prefix: str = "az",
               sgf: bool = False, stop: Callable[[], bool] | None = None) -> list[Path]:
    """``run_games`` writing each finished game as ``<out_dir>/<prefix>-<index>.npz``
    (atomic, ``selfplay.records``); returns the record paths in finishing order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []

    def save(index, game):
        paths.append(write_game(out_dir, f"{prefix}-{index:06d}", game, sgf=sgf))

    run_games(net_fn, params, n_games, size=size, config=config, search=search, gen=np.random.default_rng(seed),
              on_game=save, stop=stop)
    return paths
