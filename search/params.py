"""The search's parameters in one frozen config (issue 16 item 3).

Defaults equal ``run_mcts``'s keyword defaults (a test holds them equal) so
the command line, self-play and the engine can take one object instead of
loose keywords. Flags come from ``alphalite.runtime.config.add_arguments``
as the SL flags do from SLConfig."""

from __future__ import annotations

from dataclasses import dataclass

from alphalite.runtime.config import field


@dataclass(frozen=True)
class SearchParams:
    c_puct: float = field(1.5, "PUCT exploration constant: prior weight in Q + c*P*sqrt(N)/(1+n)")
    fpu_reduction: float = field(0.25, "first-play urgency: an unvisited child's Q is the parent's Q "
                                       "minus this times sqrt(visited prior mass)")
    root_fpu_reduction: float = field(-1.0, "FPU reduction at the root; negative: same as --fpu-reduction")
    batch_size: int = field(8, "leaves gathered (virtual loss between them) per evaluator call")
    dirichlet_alpha: float = field(0.0, "root Dirichlet noise alpha; 0: no noise (0.03 for 19x19)")
    dirichlet_fraction: float = field(0.25, "share of the root prior replaced by the noise")
    temperature: float = field(0.0, "move choice: 0 plays the most visited, else visits^(1/T) drawn")
    temperature_moves: int = field(0, "the first this many moves use --temperature, the rest play greedily")
    lam: float = field(0.5, "leaf value mix: lam * value net + (1 - lam) * rollout outcome")

    def __post_init__(self):
        if self.c_puct < 0 or self.batch_size < 1 or self.temperature < 0 or self.temperature_moves < 0:
            raise ValueError("SearchParams: c_puct, temperature and temperature_moves must be >= 0, "
                             "batch_size >= 1")
        if not 0.0 <= self.dirichlet_fraction <= 1.0 or not 0.0 <= self.lam <= 1.0:
            raise ValueError("SearchParams: dirichlet_fraction and lam must be in [0, 1]")
        if self.dirichlet_alpha < 0:
            raise ValueError("SearchParams: dirichlet_alpha must be >= 0 (0: no noise)")

    @property
    def root_fpu(self) -> float:
        return self.fpu_reduction if self.root_fpu_reduction < 0 else self.root_fpu_reduction

    def run_mcts_kwargs(self) -> dict:
        """The keywords ``run_mcts`` takes today (until it takes this object)."""
        return dict(batch_size=self.batch_size, c_puct=self.c_puct, fpu_reduction=self.fpu_reduction,
                    root_fpu_reduction=None if self.root_fpu_reduction < 0 else self.root_fpu_reduction,
                    dirichlet_alpha=self.dirichlet_alpha or None,
                    dirichlet_fraction=self.dirichlet_fraction, temperature=self.temperature)
