"""The search's parameters in one frozen config (KataGo's ``SearchParams``).

``run_mcts(..., search_params=SearchParams(...))`` takes it, and so do the
players built on the search (``alphalite.engine.players.MctsPlayer``,
``selfplay.games.mcts_player``); the ``alphalite gtp`` flags are generated
from its fields by ``alphalite.runtime.config.add_arguments``, as the SL
flags are from SLConfig. Importing it loads neither Numba nor JAX (the GTP
engine reads its flags before either is loaded)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphalite.runtime.config import field, finite, require


C_PUCT_SMALL, C_PUCT_19 = 1.5, 6.0  # the default exploration constants (SearchParams.c_puct_at)
SCORE_UTILITY_SMALL, SCORE_UTILITY_19 = 0.25, 0.0  # the default score utility shares (SearchParams.score_utility_at)
OWN_TERRITORY = ("filter", "search")  # SearchParams.own_territory's choices


@dataclass(frozen=True)
class SearchParams:
    c_puct: float = field(-1.0, "PUCT exploration constant: prior weight in Q + c*P*sqrt(N)/(1+n); negative: "
                                "by board size, 6 on 19x19 and 1.5 on smaller boards (docs/strength.md)")
    fpu_reduction: float = field(0.25, "first-play urgency: an unvisited child's Q is the parent's Q "
                                       "minus this times sqrt(visited prior mass)")
    root_fpu_reduction: float = field(-1.0, "FPU reduction at the root; negative: same as --fpu-reduction")
    batch_size: int = field(8, "leaves gathered (virtual loss between them) per evaluator call; for the apv "
                            "search the most positions a network call takes (the engine gives it 32 unless set)",
                            flag="--batch")
    virtual_loss: float = field(1.0, "each search path in flight counts as this many lost visits on the edges it "
                                     "took (spreads the leaves gathered at once); 0: none")
    dirichlet_alpha: float = field(0.0, "root Dirichlet noise alpha; 0: no noise (0.03 for 19x19)")
    dirichlet_fraction: float = field(0.25, "share of the root prior replaced by the noise")
    temperature: float = field(0.0, "move choice: 0 plays the most visited (the policy engine: the most "
                                    "probable), T > 0 draws in proportion to visits (probabilities) ** (1/T)")
    temperature_moves: int = field(0, "only the first this many moves of a game use --temperature, the "
                                      "rest play greedily; 0: every move")
    symmetries: int = field(8, "the policy engine's move from its priors averaged over this many of the 8 board "
                               "symmetries, in one network call (policy19b12's top-1 48.5% with 8, 47.1% with 1)")
    lam: float = field(0.5, "leaf value = lambda * value net + (1 - lambda) * rollout (with a value net)",
                       flag="--lambda")
    score_utility: float = field(-1.0, "the apv search's rollout and end-of-game values: this share is KataGo's "
                                       "score utility (2/pi) atan((margin - expected margin) / (0.75 * board side)), "
                                       "the rest win/loss; 0: win/loss only; negative: by board size, 0.25 below "
                                       "19x19 and 0 on 19x19 (docs/strength.md)")
    own_territory: str = field("filter", "a move the apv search chooses inside its own Tromp-Taylor territory "
                                         "(never a true eye): filter = where the search's rollouts settle the "
                                         "region, another move replaces it unless its Q beats that move's by 0.04; "
                                         "search = it is played (on 9x9 no stronger, more draws: "
                                         "docs/strength.md)", choices=OWN_TERRITORY)

    def __post_init__(self):
        """ValueError naming the flag of a value no search can use."""
        require(self, (
                ("c_puct", finite(self.c_puct), "a finite number (negative: by board size)"),
                ("fpu_reduction", finite(self.fpu_reduction), "a finite number"),
                ("root_fpu_reduction", finite(self.root_fpu_reduction), "a finite number"),
                ("batch_size", self.batch_size >= 1, ">= 1"),
                ("virtual_loss", finite(self.virtual_loss) and self.virtual_loss >= 0, ">= 0"),
                ("dirichlet_alpha", finite(self.dirichlet_alpha) and self.dirichlet_alpha >= 0, ">= 0 (0: no noise)"),
                ("dirichlet_fraction", finite(self.dirichlet_fraction) and 0 <= self.dirichlet_fraction <= 1,
                 "in [0, 1]"),
                ("temperature", finite(self.temperature) and self.temperature >= 0, ">= 0"),
                ("temperature_moves", self.temperature_moves >= 0, ">= 0"),
                ("symmetries", 1 <= self.symmetries <= 8, "in 1..8"),
                ("lam", finite(self.lam) and 0 <= self.lam <= 1, "in [0, 1]"),
                ("score_utility", finite(self.score_utility) and self.score_utility <= 1,
                 "in [0, 1] (negative: by board size)"),
                ("own_territory", self.own_territory in OWN_TERRITORY, f"one of {', '.join(OWN_TERRITORY)}")))

    @property
    def root_noise(self) -> bool:
        """Whether each search mixes Dirichlet noise into the root's priors."""
        return self.dirichlet_alpha > 0 and self.dirichlet_fraction > 0

    @property
    def root_fpu(self) -> float:
        """The FPU reduction at the root."""
        return self.fpu_reduction if self.root_fpu_reduction < 0 else self.root_fpu_reduction

    def c_puct_at(self, size: int) -> float:
        """The exploration constant on a ``size`` board. The default (negative)
        is measured per size: on 19x19 a second's few hundred rollouts and
        net values are too noisy to overrule good priors, and 6 follows them
        (the search's move matched the 9-dan's as often as the policy's own,
        47.5% against 35.8% at 1.5); on 9x9, 1.5 sits at a sharp peak."""
        if self.c_puct >= 0:
            return self.c_puct
        return C_PUCT_19 if size >= 19 else C_PUCT_SMALL

    def score_utility_at(self, size: int) -> float:
        """The score utility's share on a ``size`` board. The default
        (negative) is measured on 9x9, where wins by a point or two and
        draws (komi 7) were lost to a search indifferent to the margin;
        19x19 keeps win/loss, not measured there."""
        if self.score_utility >= 0:
            return self.score_utility
        return SCORE_UTILITY_19 if size >= 19 else SCORE_UTILITY_SMALL

    def temperature_at(self, move_number: int) -> float:
        """The move-choice temperature for a move at ``move_number`` (0 = the game's first)."""
        if self.temperature_moves and move_number >= self.temperature_moves:
            return 0.0
        return self.temperature


def mix_root_noise(prior: np.ndarray, sp: SearchParams, gen: np.random.Generator) -> np.ndarray:
    """The root's noisy priors ``(1 - dirichlet_fraction) * prior +
    dirichlet_fraction * Dir(dirichlet_alpha)`` from its clean ones over the
    legal moves (``prior`` [L]), one draw of ``gen``. Every search (mcts,
    multigame, apv) draws its root noise here and writes it into its own tree."""
    noise = gen.dirichlet(np.full(len(prior), float(sp.dirichlet_alpha)))
    return (1.0 - sp.dirichlet_fraction) * prior + sp.dirichlet_fraction * noise
