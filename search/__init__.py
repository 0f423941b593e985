"""PUCT Monte Carlo tree search over array trees (see ``search.mcts``).

Importing does no work: the names below are loaded on first use, so that
``search.params`` (the flags of ``alphalite gtp``) can be read without
loading Numba; JAX is imported only by the network evaluator helpers."""

import importlib

_WHERE = {"Leaves": "search.mcts", "SearchOutput": "search.mcts", "run_mcts": "search.mcts",
          "Tree": "search.tree", "advance": "search.tree", "choose_move": "search.tree",
          "SearchParams": "search.params", "MultiSearch": "search.multigame", "MultiParams": "search.multigame"}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'search' has no attribute {name!r}")
