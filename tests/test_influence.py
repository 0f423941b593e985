"""NN-Influence baseline: the influence map on hand-checked diagrams, the
363/27 inputs, and the MLP learning a task the map makes easy."""

from __future__ import annotations

import numpy as np

from alphalite.go import board

from alphalite.train import influence


def _stones(diagram: str) -> np.ndarray:
    return board.stones(board.parse_diagram(diagram))[None]


def test_single_stone_spreads_10_minus_2d():
    m = influence.influence_map(_stones("""
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . X . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
    """))[0]
    # own point 10, neighbour 8, one-space jump 6 (as the paper), two-space jump 4, knight's move 4
    assert m[3, 3] == 10 and m[3, 4] == 8 and m[3, 5] == 6 and m[3, 6] == 4
    assert m[1, 3] == 6 and m[0, 3] == 4 and m[2, 4] == 6 and m[1, 4] == 4
    assert m[0, 0] == 0 and m[1, 1] == 2 and m[0, 1] == 0  # distance 6, 4, 5
    assert (m >= 0).all()


def test_black_and_white_cancel_and_sum():
    m = influence.influence_map(_stones("""
        O . . . .
        . . . . .
        . . X . .
        . . . . .
        . . . . X
    """))[0]
    # the same from the formula, stone by stone
    r, c = np.mgrid[0:5, 0:5]
    ref = (np.maximum(0, 10 - 2 * (abs(r - 2) + abs(c - 2))) + np.maximum(0, 10 - 2 * (abs(r - 4) + abs(c - 4)))
           - np.maximum(0, 10 - 2 * (r + c)))
    np.testing.assert_array_equal(m, ref)
    # by hand: A5 = -10 (own) + 2 (C3 at d 4); C5 = -6 + 6 (d 2 from both); C3 = 10 + 2 (E1) - 2 (A5)
    assert m[0, 0] == -8 and m[0, 2] == 0 and m[2, 2] == 10
    # E4 = 4 (C3 at d 3) + 4 (E1 at d 3); D2 = 6 + 6; E1 = 10 + 2; A1 = 2 (C3) + 2 (E1) - 2 (A5), all at d 4
    assert m[1, 4] == 8 and m[3, 3] == 12 and m[4, 4] == 12 and m[4, 0] == 2


def test_features_are_map_plus_prisoners_scaled():
    st = _stones("""
        . X .
        . O .
        . . .
    """)
    f = influence.influence_features(st, np.array([[3, 1]]))
    assert f.shape == (1, 3 * 3 + 2)
    np.testing.assert_allclose(f[0, :9] * 10, influence.influence_map(st)[0].ravel())
    np.testing.assert_allclose(f[0, 9:], [0.3, 0.1])
    assert influence.influence_features(np.zeros((4, 19, 19), np.int8), np.zeros((4, 2))).shape == (4, 363)


def test_mlp_learns_who_has_more_influence():
    rng = np.random.default_rng(0)
    n, size = 1500, 7
    stones = rng.choice([-1, 0, 1], size=(n, size, size), p=[0.2, 0.6, 0.2]).astype(np.int8)
    x = influence.influence_features(stones, np.zeros((n, 2)))
    y = x[:, : size * size].sum(1) > 0
    predict, info = influence.fit_mlp(x[:1200], y[:1200], epochs=60, seed=1)
    acc = ((predict(x[1200:]) > 0.5) == y[1200:]).mean()
    assert acc > 0.85, (acc, info)
    assert info["epochs"] >= 1
