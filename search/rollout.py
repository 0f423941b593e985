"""Fast random rollouts to the end of the game, scored Tromp-Taylor with komi.

``rollout_value(B, scratch, rng, max_moves, komi, n)``: the mean result of
``n`` random playouts (``board.playout``: uniform over legal moves that do not
fill the mover's own eyes) from board tuple ``B``, as +1/-1/0 from the point
of view of the player to move in ``B``. ``B`` is not modified; ``scratch`` is
a board tuple of the same size whose history has room for ``B``'s history
plus ``max_moves``. A playout cut off at ``max_moves`` is scored as it stands.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphalite.go.board import B_HIST, B_META, M_NHIST, M_TOPLAY, area, copy_board, init_board, playout, zobrist_table


@njit(cache=True)
def rollout_value(B, scratch, rng, max_moves, komi, n):
    me = B[B_META][M_TOPLAY]
    total = 0.0
    for _ in range(n):
        copy_board(scratch, B)
        playout(scratch, rng, max_moves)
        black, white = area(scratch)
        score = black - white - komi
        if score > 0:
            total += me
        elif score < 0:
            total -= me
    return total / n


class RolloutScratch:
    """A reusable scratch board for ``rollout_value``, grown as needed."""

    def __init__(self):
        self.board = None

    def get(self, B, max_moves: int):
        size = int(B[B_META][0])
        need = int(B[B_META][M_NHIST]) + max_moves + 8
        b = self.board
        if b is None or b[B_META][0] != size or b[B_HIST].shape[0] < need:
            self.board = init_board(size, True, False, zobrist_table(), need)
        return self.board


def default_max_moves(size: int) -> int:
    return 3 * size * size + 20


def rollout_values(leaves, max_moves: int | None = None, num_rollouts: int = 1,
                   scratch: RolloutScratch | None = None) -> np.ndarray:
    """float32 [B]: rollout values of a ``search.mcts.Leaves`` batch, one
    independent LCG stream per leaf from ``leaves.seeds``."""
    if max_moves is None:
        max_moves = default_max_moves(leaves.size)
    scratch = scratch or RolloutScratch()
    out = np.zeros(len(leaves), np.float32)
    rng = np.zeros(1, np.int64)
    for i, B in enumerate(leaves.boards):
        rng[0] = leaves.seeds[i]
        out[i] = rollout_value(B, scratch.get(B, max_moves), rng, max_moves, float(leaves.komi), num_rollouts)
    return out
