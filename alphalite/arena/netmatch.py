"""Matches between two policy-value nets searched in one process, with SPRT
gating (AlphaZero's and Leela Zero's "is the new net better than the best").

::

    res = gate(new_fn, new_params, best_fn, best_params, size=9, komi=7.5,
               search=MultiParams(num_simulations=16), sprt=Sprt(), max_games=40)
    res["accepted"]

Both nets drive ``search.multigame.MultiSearch`` over the same ``K`` game
boards (one search object each): at every ply the side to move in game
``g`` is searched by its own net, then the chosen moves are played on both
searches' boards, so the boards stay equal. The new net is Black in
every other game, the even ones for an even seed, else the odd ones: the
extra game of an odd ``max_games`` takes turns between Black and White
from one gating to the next (the AlphaZero driver's seeds step by one),
as Leela Zero's gating alternates colours. Games end after two passes or at the
move cap and are scored by Tromp-Taylor area with komi as they stand (the
games are played out, as self-play's are). No GTP process is started: on a
Ray worker the match is one task.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from alphalite.arena.ratings import Sprt
from alphalite.go.board import area
from search.multigame import MultiParams, MultiSearch


def play_match(a_fn: Callable, a_params: Any, b_fn: Callable, b_params: Any, n_games: int, *, size: int,
               komi: float, search: MultiParams, gen: np.random.Generator, max_moves: int | None = None,
               preset: str = "default", a_black_even: bool = True) -> np.ndarray:
    """``n_games`` games of net ``a`` against net ``b`` at once, ``a`` Black in
    the even ones (``a_black_even``) or else in the odd ones. Returns float
    [n_games]: ``a``'s score (1 win, 0 loss, 0.5 for a jigo)."""
    search = dataclasses.replace(search, carry_over=False)  # each search sees the other's moves only as played
    k = int(n_games)
    sides = [MultiSearch(k, size, komi, search, preset=preset, max_moves=max_moves) for _ in range(2)]
    for ms in sides:
        for g in range(k):
            ms.new_game(g)
    a_black = (np.arange(k) % 2 == 0) == a_black_even
    live = np.ones(k, np.bool_)
    ply = 0
    while live.any():
        a_moves = live & (a_black == (ply % 2 == 0))
        actions = np.full(k, -1, np.int64)
        for ms, mask, fn, params in ((sides[0], a_moves, a_fn, a_params), (sides[1], live & ~a_moves, b_fn, b_params)):
            if mask.any():
                out = ms.search(fn, params, mask, gen)
                actions[mask] = out.actions[mask]
        for ms in sides:
            ms.play(actions, live)
        ply += 1
        ms = sides[0]
        live &= np.array([ms.passes(g) < 2 and ms.move_number(g) < ms.max_moves for g in range(k)])
    scores = np.zeros(k)
    for g in range(k):
        b, w = area(sides[0].board(g))
        black_margin = b - w - komi
        black = 0.5 if black_margin == 0 else float(black_margin > 0)
        scores[g] = black if a_black[g] else 1.0 - black
    return scores


def gate(new_fn: Callable, new_params: Any, best_fn: Callable, best_params: Any, *, size: int, komi: float,
         search: MultiParams, sprt: Sprt | None = Sprt(), max_games: int = 40, batch: int = 8, seed: int = 0,
         threshold: float = 0.55, max_moves: int | None = None, preset: str = "default") -> dict:
    """Batches of ``batch`` games (even) of the new net against the best until
    the SPRT decides or ``max_games`` are played. ``accepted``: the SPRT
    accepted H1 (the new net is ``elo1`` better), or it had not decided and
    the new net scored at least ``threshold`` (AlphaGo Zero's 55%). With
    ``sprt=None`` all ``max_games`` are played (a rating match)."""
    gen = np.random.default_rng(seed)
    # batches are even but the last of an odd max_games: its extra game's colour by seed, not always Black
    a_black_even = seed % 2 == 0
    batch = max(2, batch + batch % 2)
    wins = losses = draws = 0
    decide = sprt.state if sprt is not None else (lambda *_: {"decision": "continue"})
    state = decide(0, 0)
    while wins + losses + draws < max_games and state["decision"] == "continue":
        n = min(batch, max_games - wins - losses - draws)
        s = play_match(new_fn, new_params, best_fn, best_params, n, size=size, komi=komi, search=search, gen=gen,
                       max_moves=max_moves, preset=preset, a_black_even=a_black_even)
        wins += int((s == 1).sum())
        losses += int((s == 0).sum())
        draws += int((s == 0.5).sum())
        state = decide(wins, losses, draws)
    games = wins + losses + draws
    score = (wins + draws / 2) / games if games else 0.0
    accepted = state["decision"] == "accept H1" or (state["decision"] == "continue" and score >= threshold)
    return {**state, "wins": wins, "losses": losses, "draws": draws, "games": games, "score": score,
            "accepted": bool(accepted)}
