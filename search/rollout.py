"""Fast random rollouts to the end of the game, scored Tromp-Taylor with komi.

``rollout_value(B, scratch, rng, max_moves, komi, n)``: the mean result of
``n`` random playouts (``board.playout``: uniform over legal moves that do not
fill the mover's own eyes) from board tuple ``B``, as +1/-1/0 from the point
of view of the player to move in ``B``. ``B`` is not modified; ``scratch`` is
a board tuple of the same size whose history has room for ``B``'s history
plus ``max_moves``. A playout cut off at ``max_moves`` is scored as it stands.

Pattern rollouts (AlphaGo's rollout policy, ``alphalite.go.patterns``):
``PatternPolicy.load(name)`` reads a shipped or exported pattern policy;
``pattern_rollout_value(B, scratch, rng, max_moves, komi, n, rt)`` is
``rollout_value`` with that policy; ``pattern_rollout_margin`` plays one
rollout and returns black's area margin minus komi (its sign names the
winner); ``PatternPolicy.priors(B)`` gives the tree policy's move
probabilities for the search's priors.
"""

from __future__ import annotations

import numpy as np

from alphalite.go import board, patterns
from alphalite.go.board import M_NHIST, M_TOPLAY, area, board_at, copy_board, init_board, playout, zobrist_table
from alphalite.runtime.kernels import njit


@njit(cache=True, inline="always")
def _margin(B, komi):
    """Black's area minus white's minus komi of a finished playout."""
    black, white = area(B)
    return black - white - komi


@njit(cache=True)
def rollout_value(B, scratch, rng, max_moves, komi, n):
    me = B.meta[M_TOPLAY]
    total = 0.0
    for _ in range(n):
        copy_board(scratch, B)
        playout(scratch, rng, max_moves)
        total += me * np.sign(_margin(scratch, komi))
    return total / n


@njit(cache=True)
def rollout_values_stacked(S, n, scratch, seeds, max_moves, komi, num_rollouts, out):
    """``rollout_value`` of the first ``n`` boards of the stacked boards ``S``
    (``board.stacked``) into ``out[:n]``, leaf ``k``'s LCG seeded from
    ``seeds[k]``: one call for a batch of leaves."""
    rng = np.zeros(1, np.int64)
    for k in range(n):
        rng[0] = seeds[k]
        out[k] = rollout_value(board_at(S, k), scratch, rng, max_moves, komi, num_rollouts)


@njit(cache=True)
def pattern_rollout_margin(B, rng, max_moves, komi, rt):
    """One pattern rollout on ``B`` itself (it is played to the end): black's
    area minus white's minus komi."""
    S = patterns.state_for(B)
    patterns.rollout(B, S, rt, rng, max_moves)
    return _margin(B, komi)


@njit(cache=True)
def pattern_rollout_value(B, scratch, rng, max_moves, komi, n, rt):
    """``rollout_value`` with the pattern rollout policy (``patterns.rollout_tables``)."""
    me = B.meta[M_TOPLAY]
    base = patterns.state_for(B)
    S = patterns.new_state(scratch)
    total = 0.0
    for _ in range(n):
        copy_board(scratch, B)
        patterns.copy_state(S, base)
        patterns.rollout(scratch, S, rt, rng, max_moves)
        total += me * np.sign(_margin(scratch, komi))
    return total / n


class PatternPolicy:
    """A pattern softmax policy (rollout or tree) loaded by name or folder."""

    def __init__(self, tab, w, row, info):
        self.tab, self.w, self.row, self.info = tab, w, row, info
        self._rt = None

    def rollout_tables(self) -> patterns.RolloutTables:
        """The tables ``patterns.rollout`` samples from (made once)."""
        if self._rt is None:
            self._rt = patterns.rollout_tables(self.tab, self.w)
        return self._rt

    @classmethod
    def load(cls, ref):
        from alphalite.nn import checkpoint

        d = checkpoint.find_model_dir(ref)
        info = checkpoint.read_model_info(d)
        if info["model"] != "patterns":
            raise checkpoint.CheckpointError(f"{ref} is not a pattern policy (model {info['model']!r})")
        try:
            tab, w, row = patterns.load_policy(d, info)
        except ValueError as e:
            raise checkpoint.CheckpointError(str(e)) from None
        return cls(tab, w, row, info)

    def priors(self, B) -> np.ndarray:
        """float64 [size*size+1]: move probabilities on board tuple ``B``."""
        out = np.zeros(int(B.meta[0]) ** 2 + 1, np.float64)
        patterns.probabilities(B, patterns.state_for(B), self.tab, self.w, self.row, out)
        return out


class RolloutScratch:
    """A reusable scratch board for ``rollout_value``, grown as needed."""

    def __init__(self):
        self.board = None

    def get(self, B, max_moves: int):
        size = int(B.meta[0])
        need = int(B.meta[M_NHIST]) + max_moves + 8
        b = self.board
        if b is None or b.meta[0] != size or b.hist.shape[0] < need:
            self.board = init_board(size, True, False, zobrist_table(), need)
        return self.board


def rollout_values(leaves, max_moves: int | None = None, num_rollouts: int = 1,
                   scratch: RolloutScratch | None = None) -> np.ndarray:
    """float32 [B]: rollout values of a ``search.mcts.Leaves`` batch, one
    independent LCG stream per leaf from ``leaves.seeds``."""
    if max_moves is None:
        max_moves = board.default_max_moves(leaves.size)
    scratch = scratch or RolloutScratch()
    out = np.zeros(len(leaves), np.float32)
    if leaves.stack is not None and len(leaves):
        longest = leaves.boards[int(np.argmax(leaves.stack.meta[: len(leaves), M_NHIST]))]
        rollout_values_stacked(leaves.stack, len(leaves), scratch.get(longest, max_moves), leaves.seeds, max_moves,
                               float(leaves.komi), num_rollouts, out)
        return out
    rng = np.zeros(1, np.int64)
    for i, B in enumerate(leaves.boards):
        rng[0] = leaves.seeds[i]
        out[i] = rollout_value(B, scratch.get(B, max_moves), rng, max_moves, float(leaves.komi), num_rollouts)
    return out
