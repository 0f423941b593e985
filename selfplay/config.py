"""Self-play's settings (``selfplay.alphazero``), kept apart from the games
so the command line reads them without loading Numba or JAX."""

from __future__ import annotations

import dataclasses

from alphalite.runtime.config import field, require
from search.params import SearchParams


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    games_at_once: int = field(64, "games played at once (one network batch for all their leaves)")
    simulations: int = field(32, "search visits a move")
    root: str = field("gumbel", "root selection: gumbel (sequential halving, completed-Q target) or puct "
                                "(Dirichlet noise, visit-count target)", choices=("gumbel", "puct"))
    max_considered: int = field(16, "gumbel: actions considered at the root")
    komi: float = field(7.5, "komi")
    max_moves: int = field(0, "move cap; 0: board.default_max_moves(size)")
    resign_below: float = field(-1.0, "resign when the mover's search value was below this on its last "
                                      "resign_moves moves; -1: never")
    resign_moves: int = field(3, "see resign_below")
    preset: str = field("default", "input planes of the net")
    moves: str = field("area", "moves the search may choose: area (the candidate moves and the inside of own "
                               "territory while any other move is left) or candidates (the GTP players' rule: "
                               "nothing inside own territory); pass only when nothing else is",
                       choices=("area", "candidates"))

    def __post_init__(self):
        require(self, (
            ("games_at_once", self.games_at_once >= 1, ">= 1"),
            ("simulations", self.simulations >= 1, ">= 1"),
            ("max_considered", self.max_considered >= 1, ">= 1"),
            ("max_moves", self.max_moves >= 0, ">= 0 (0: the board's default)"),
            ("resign_below", -1.0 <= self.resign_below <= 1.0, "in [-1, 1] (-1: never)"),
            ("resign_moves", self.resign_moves >= 1, ">= 1")))

    def search_params(self, size: int, puct: SearchParams = SearchParams()):
        """The ``search.multigame.MultiParams`` of these games: the root rule and visits from here, the
        PUCT knobs (c_puct, FPU, noise, temperature) from ``puct``, the one
        search-parameters object. Self-play's own defaults by rule: where
        ``puct`` leaves the root noise off (alpha 0) it is 10 / (size * size),
        where it plays greedily (temperature 0) moves are drawn in proportion
        to visits, and where every move would use that temperature
        (temperature_moves 0) only the first ``size`` moves do."""
        puct = dataclasses.replace(
            puct, dirichlet_alpha=puct.dirichlet_alpha or 10.0 / (size * size),
            temperature=puct.temperature or 1.0, temperature_moves=puct.temperature_moves or size)
        from search.multigame import MultiParams

        return MultiParams(num_simulations=self.simulations, root=self.root, max_considered=self.max_considered,
                           puct=puct, moves=self.moves)
