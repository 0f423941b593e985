"""PUCT Monte Carlo tree search over array trees (see ``search.mcts``).

Importing does no work (Numba kernels compile on first call; JAX is imported
only by the network evaluator helpers)."""

from search.mcts import Leaves, SearchOutput, run_mcts
from search.tree import Tree, advance

__all__ = ["Leaves", "SearchOutput", "Tree", "advance", "run_mcts"]
