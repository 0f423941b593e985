"""Feature planes and board symmetries (alphalite.nn.features)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from alphalite.go import board

from alphalite.nn import features
from alphalite.go.board import BLACK, WHITE

PLANES = {"thesis3": 3, "clark7": 7, "book11": 11, "default": 17}


# ---------------------------------------------------------------- reference


def ref_liberties(st: np.ndarray) -> np.ndarray:
    """Liberties of the group on each point, by flood fill from scratch."""
    n = st.shape[0]
    out = np.zeros((n, n), int)
    done = np.zeros((n, n), bool)
    for r0 in range(n):
        for c0 in range(n):
            if st[r0, c0] == 0 or done[r0, c0]:
                continue
            group, libs, stack = [], set(), [(r0, c0)]
            done[r0, c0] = True
            while stack:
                r, c = stack.pop()
                group.append((r, c))
                for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                    if 0 <= rr < n and 0 <= cc < n:
                        if st[rr, cc] == 0:
                            libs.add((rr, cc))
                        elif st[rr, cc] == st[r0, c0] and not done[rr, cc]:
                            done[rr, cc] = True
                            stack.append((rr, cc))
            for r, c in group:
                out[r, c] = len(libs)
    return out


def ref_reasons(state) -> list[str]:
    """Why each point is illegal for the mover ('' when legal), through play()."""
    reasons = []
    for m in range(state.size * state.size):
        try:
            board.play(state, m)
            reasons.append("")
        except board.IllegalMove as e:
            reasons.append(e.reason)
    return reasons


def reference(state, preset: str) -> np.ndarray:
    """Straightforward per-point encoder, written from the docstring table."""
    n = state.size
    st = board.stones(state)
    libs = ref_liberties(st)
    me = state.to_play
    x = np.zeros((n, n, PLANES[preset]), np.float32)
    reasons = ref_reasons(state) if preset in ("book11", "default") else None
    ko = state.ko_point
    for r in range(n):
        for c in range(n):
            s, lib, m = st[r, c], libs[r, c], r * n + c
            if preset == "thesis3":
                x[r, c, 0 if s == me else 1 if s == -me else 2] = 1
            elif preset == "clark7":
                if s:
                    x[r, c, min(lib, 3) - 1 + (0 if s == me else 3)] = 1
                x[r, c, 6] = m == ko
            elif preset == "book11":
                if s:
                    x[r, c, min(lib, 4) - 1 + (0 if s == BLACK else 4)] = 1
                x[r, c, 8] = me == BLACK
                x[r, c, 9] = me == WHITE
                x[r, c, 10] = reasons[m] in ("ko", "superko")
            else:
                if s:
                    x[r, c, min(lib, 4) - 1 + (0 if s == me else 4)] = 1
                x[r, c, 8] = s == 0
                x[r, c, 9] = reasons[m] != ""
                x[r, c, 10] = m == ko
                x[r, c, 11] = me == BLACK
                x[r, c, 12] = 1
                for i, mv in enumerate(state.last_moves[:4]):
                    x[r, c, 13 + i] = mv == m
    return x


def random_state(rng: np.random.Generator, size: int, moves: int, superko: bool, suicide: bool = False):
    s = board.new_game(size, superko=superko, suicide=suicide)
    for _ in range(moves):
        legal = np.flatnonzero(board.legal_moves(s)[:-1])
        if legal.size == 0 or (rng.random() < 0.04 and s.passes == 0):
            s = board.play(s, size * size)
        else:
            s = board.play(s, int(rng.choice(legal)))
        if s.is_over:
            break
    return s


def planes_of(state, preset, ch):
    return features.encode(state, preset)[:, :, ch]


def onehot(n, *moves):
    x = np.zeros((n, n), np.float32)
    for m in moves:
        x[m // n, m % n] = 1
    return x


# ---------------------------------------------------------------- presets


def test_presets_and_shapes():
    assert features.PRESETS == {"thesis3": 0, "clark7": 1, "book11": 2, "default": 3,
                                 "alphago48": 4, "alphago40": 5}
    for name, c in PLANES.items():
        assert features.num_planes(name) == c
        assert features.preset_id(name) == features.PRESETS[name]
        for size in (2, 9, 19):
            x = features.encode(board.new_game(size), name)
            assert x.shape == (size, size, c) and x.dtype == np.float32
    assert features.encode(board.new_game(5)).shape == (5, 5, 17)  # default preset


def test_unknown_preset_is_a_clear_value_error():
    with pytest.raises(ValueError, match=r"unknown feature preset 'alphago19'.*alphago40, alphago48, book11, clark7, default, thesis3"):
        features.encode(board.new_game(9), "alphago19")
    with pytest.raises(ValueError, match="known presets"):
        features.num_planes("Default")


def test_a_preset_pair_is_the_first_presets_planes_then_the_seconds():
    """What the search encodes for a policy and a value net that learned
    from different planes: each net reads its own channels (``split``)."""
    s = random_state(np.random.default_rng(7), 9, 30, True)
    assert features.pair("default", "default") == "default" and features.split("default") is None
    name = features.pair("alphago40", "default")
    assert name == "alphago40+default" and features.split(name) == 40 and features.num_planes(name) == 57
    assert features.preset_id(name) >= len(features.PRESETS)
    x = features.encode(s, name)
    np.testing.assert_array_equal(x[..., :40], features.encode(s, "alphago40"))
    np.testing.assert_array_equal(x[..., 40:], features.encode(s, "default"))
    swapped = features.encode(s, "default+alphago40")
    np.testing.assert_array_equal(swapped[..., :17], x[..., 40:])
    stacked = board.stacked(s.board_tuple, 2, 200)
    board.copy_board(board.board_at(stacked, 0), s.board_tuple)
    out = np.zeros((2, 9, 9, 57), np.float32)
    features.encode_stacked_into(stacked, 1, features.preset_id(name), out)  # the search's batch path
    np.testing.assert_array_equal(out[0], x)
    for bad in ("default+default", "default+alphago40+clark7", "default+nope"):
        with pytest.raises(ValueError, match="preset"):
            features.preset_id(bad)
    with pytest.raises(ValueError, match="shape"):
        features.encode_into(s.board_tuple, features.preset_id(name), np.zeros((9, 9, 40), np.float32))


def test_encode_into_rejects_wrong_output_shape():
    s = board.new_game(9)
    with pytest.raises(ValueError, match="shape"):
        features.encode_into(s.board_tuple, features.PRESETS["clark7"], np.zeros((9, 9, 17), np.float32))


LIB_DIAGRAM = """
X O . . X . .
. O . . . . .
. . . . X X .
. . . . . . .
O . . . . . .
X O . . . . .
. . X O X . X
"""


def test_liberty_planes_on_a_diagram():
    s = board.parse_diagram(LIB_DIAGRAM, to_play=BLACK)
    x = features.encode(s, "default")
    rc = lambda r, c: r * 7 + c  # noqa: E731
    expect = {
        0: [rc(0, 0), rc(5, 0)],  # own (black) 1 liberty
        1: [rc(6, 2), rc(6, 4), rc(6, 6)],  # own 2
        2: [rc(0, 4)],  # own 3
        3: [rc(2, 4), rc(2, 5)],  # own >= 4 (6 liberties)
        4: [rc(6, 3)],  # opp (white) 1
        5: [rc(4, 0)],  # opp 2
        6: [rc(5, 1)],  # opp 3
        7: [rc(0, 1), rc(1, 1)],  # opp 4
    }
    for ch, pts in expect.items():
        np.testing.assert_array_equal(x[:, :, ch], onehot(7, *pts), err_msg=f"plane {ch}")
    c7 = features.encode(s, "clark7")
    np.testing.assert_array_equal(c7[:, :, 0], x[:, :, 0])
    np.testing.assert_array_equal(c7[:, :, 1], x[:, :, 1])
    np.testing.assert_array_equal(c7[:, :, 2], x[:, :, 2] + x[:, :, 3])  # >= 3
    np.testing.assert_array_equal(c7[:, :, 5], x[:, :, 6] + x[:, :, 7])
    b11 = features.encode(s, "book11")  # absolute colours: black first
    np.testing.assert_array_equal(b11[:, :, :8], x[:, :, :8])
    t3 = features.encode(s, "thesis3")
    st = board.stones(s)
    np.testing.assert_array_equal(t3[:, :, 0], st == BLACK)
    np.testing.assert_array_equal(t3[:, :, 1], st == WHITE)
    np.testing.assert_array_equal(t3[:, :, 2], st == 0)
    np.testing.assert_array_equal(x[:, :, 8], st == 0)


def test_perspective_flips_with_the_side_to_move():
    b = board.parse_diagram(LIB_DIAGRAM, to_play=BLACK)
    w = board.parse_diagram(LIB_DIAGRAM, to_play=WHITE)
    for preset, swap in (("thesis3", [1, 0, 2]), ("clark7", [3, 4, 5, 0, 1, 2, 6])):
        np.testing.assert_array_equal(features.encode(w, preset), features.encode(b, preset)[:, :, swap])
    xb, xw = features.encode(b), features.encode(w)
    np.testing.assert_array_equal(xw[:, :, :8], xb[:, :, [4, 5, 6, 7, 0, 1, 2, 3]])
    np.testing.assert_array_equal(xw[:, :, 8], xb[:, :, 8])
    assert xb[:, :, 11].min() == 1 and xw[:, :, 11].max() == 0
    b11b, b11w = features.encode(b, "book11"), features.encode(w, "book11")
    np.testing.assert_array_equal(b11w[:, :, :8], b11b[:, :, :8])  # colours stay absolute
    assert b11b[:, :, 8].min() == 1 and b11b[:, :, 9].max() == 0
    assert b11w[:, :, 9].min() == 1 and b11w[:, :, 8].max() == 0


def test_side_to_move_and_ones_planes():
    s = board.new_game(9)
    x0 = features.encode(s)
    assert (x0[:, :, 11] == 1).all() and (x0[:, :, 12] == 1).all()
    s = board.play(s, 40)
    x1 = features.encode(s)
    assert (x1[:, :, 11] == 0).all() and (x1[:, :, 12] == 1).all()
    assert x1[4, 4, 7] == 1 and x1[:, :, 7].sum() == 1  # black's stone is now the opponent's, 4 liberties


KO_DIAGRAM = """
. X O . .
X O . O .
. X O . .
. . . . .
. . . . .
"""


@pytest.mark.parametrize("superko", [False, True])
def test_ko_plane_after_a_ko_capture(superko):
    s = board.parse_diagram(KO_DIAGRAM, to_play=BLACK, superko=superko)
    assert features.encode(s)[:, :, 10].max() == 0
    s = board.play(s, 7)  # black takes the ko at (1, 2), capturing (1, 1)
    assert s.to_play == WHITE and s.ko_point == 6
    ko = onehot(5, 6)
    np.testing.assert_array_equal(planes_of(s, "clark7", 6), ko)
    np.testing.assert_array_equal(planes_of(s, "default", 10), ko)
    np.testing.assert_array_equal(planes_of(s, "book11", 10), ko)
    assert planes_of(s, "default", 9)[1, 1] == 1  # the ko point is illegal for white
    # White plays elsewhere: the ban is gone for everyone.
    s = board.play(s, 24)
    for preset, ch in (("clark7", 6), ("default", 10), ("book11", 10)):
        assert planes_of(s, preset, ch).max() == 0
    s = board.play(s, 20)
    assert planes_of(s, "default", 9)[1, 1] == 0  # white may retake now


@pytest.mark.parametrize("superko", [False, True])
def test_superko_point_is_in_the_illegal_plane_but_not_the_simple_ko_plane(superko):
    # History holds the position with white on (1, 1); black then stands on
    # (1, 2) with (1, 1) empty and white to move. Retaking repeats the first
    # position: positional superko, although no simple ko point is set.
    p0 = board.parse_diagram(KO_DIAGRAM, to_play=WHITE, superko=superko)
    s = board.setup(p0, black=[7], empty=[6])
    assert s.ko_point is None and s.to_play == WHITE
    assert board.legal_moves(s)[6] == (not superko)
    x = features.encode(s)
    assert x[1, 1, 9] == (1 if superko else 0)
    assert x[:, :, 10].max() == 0
    assert planes_of(s, "clark7", 6).max() == 0
    np.testing.assert_array_equal(planes_of(s, "book11", 10), onehot(5, 6) if superko else onehot(5))


def test_superko_by_a_plain_placement_is_in_the_illegal_plane():
    # Black's stone on (2, 2) is lifted by setup; putting it back (no capture,
    # empty neighbours) would repeat the first position.
    p0 = board.parse_diagram(KO_DIAGRAM.replace(". X O . .\n. .", ". X X . .\n. ."), to_play=BLACK)
    assert board.stones(p0)[2, 2] == BLACK
    s = board.setup(p0, empty=[12])
    assert not board.legal_moves(s)[12] and board.legal_moves(s)[13]
    assert features.encode(s)[2, 2, 9] == 1
    np.testing.assert_array_equal(planes_of(s, "book11", 10), onehot(5, 12))


def test_illegal_plane_has_suicide_and_occupied_points():
    s = board.parse_diagram(
        """
        . X . . .
        X . . . .
        . . . O O
        . . . O .
        . . . O O
        """,
        to_play=WHITE,
    )
    x = features.encode(s)
    st = board.stones(s)
    illegal = (st != 0).astype(np.float32)
    illegal[0, 0] = 1  # suicide for white
    np.testing.assert_array_equal(x[:, :, 9], illegal)
    s = board.from_stones(st, to_play=BLACK)
    x = features.encode(s)
    illegal = (st != 0).astype(np.float32)
    illegal[3, 4] = 1  # suicide for black inside white's eye; (0, 0) is fine for black
    np.testing.assert_array_equal(x[:, :, 9], illegal)


def test_history_planes_after_a_few_moves():
    n = 5
    s = board.new_game(n)
    s = board.play(s, 12)
    x = features.encode(s)
    np.testing.assert_array_equal(x[:, :, 13], onehot(n, 12))
    assert x[:, :, 14:].max() == 0
    for m in (3, n * n, 20, 8):  # a pass in between
        s = board.play(s, m)
    x = features.encode(s)
    np.testing.assert_array_equal(x[:, :, 13], onehot(n, 8))
    np.testing.assert_array_equal(x[:, :, 14], onehot(n, 20))
    np.testing.assert_array_equal(x[:, :, 15], onehot(n))  # the pass
    np.testing.assert_array_equal(x[:, :, 16], onehot(n, 3))


def test_history_marks_a_captured_point():
    s = board.parse_diagram(KO_DIAGRAM, to_play=BLACK)
    s = board.play(s, 7)
    s = board.play(s, 24)
    x = features.encode(s)
    np.testing.assert_array_equal(x[:, :, 13], onehot(5, 24))
    np.testing.assert_array_equal(x[:, :, 14], onehot(5, 7))


@pytest.mark.parametrize("preset", list(PLANES))
def test_encode_matches_a_pure_python_reference(preset):
    rng = np.random.default_rng(7)
    cases = ((9, 70, True, False), (9, 120, False, False), (7, 90, True, False), (13, 60, True, False),
             (9, 100, True, True), (5, 40, True, False))
    for size, moves, superko, suicide in cases:
        s = random_state(rng, size, moves, superko, suicide)
        np.testing.assert_array_equal(features.encode(s, preset), reference(s, preset),
                                      err_msg=f"size {size} superko {superko} suicide {suicide}")


def test_encode_into_is_callable_from_numba():
    @njit
    def replay_and_encode(B, moves, pid, out):
        for i in range(moves.shape[0]):
            board.play_flat(B, moves[i], B.meta[board.M_TOPLAY])
        features.encode_into(B, pid, out)

    s0 = board.new_game(9)
    # Replay a short game (at most 8 plies, all in last_moves) from an empty board.
    s = random_state(np.random.default_rng(4), 9, 8, True)
    moves = np.array(list(reversed(s.last_moves)), np.int64)
    assert len(moves) == 8
    out = np.zeros((9, 9, 17), np.float32)
    replay_and_encode(s0.copy_tuple(extra_history=16), moves, features.PRESETS["default"], out)
    np.testing.assert_array_equal(out, features.encode(s))


# ---------------------------------------------------------------- symmetries

SIZES = (2, 3, 4, 5, 8, 9, 19)


def asym_planes(n, c=3, seed=0):
    return np.random.default_rng(seed).random((n, n, c)).astype(np.float32)


def test_symmetry_zero_is_identity_and_one_turns_counter_clockwise():
    x = asym_planes(5)
    np.testing.assert_array_equal(features.transform_planes(x, 0), x)
    t = features.sym_move_table(5)
    np.testing.assert_array_equal(t[0], np.arange(26))
    assert t[1, 0] == 20  # top-left corner -> bottom-left corner
    assert t[4, 0] == 4  # mirror: top-left -> top-right
    assert features.transform_move(1, 5, 1) == 15


@pytest.mark.parametrize("n", SIZES)
def test_every_symmetry_has_an_inverse(n):
    x = asym_planes(n)
    t = features.sym_move_table(n)
    inv = features.inverse_move_table(n)
    ident = np.arange(n * n + 1)
    for k in range(8):
        ki = features.inverse(k)
        assert features.compose(k, ki) == 0 and features.compose(ki, k) == 0
        np.testing.assert_array_equal(features.transform_planes(features.transform_planes(x, k), ki), x)
        np.testing.assert_array_equal(t[ki][t[k]], ident)
        np.testing.assert_array_equal(inv[k][t[k]], ident)
        np.testing.assert_array_equal(t[k][inv[k]], ident)


@pytest.mark.parametrize("n", SIZES)
def test_composition_is_closed_and_matches_applying_both(n):
    x = asym_planes(n, seed=n)
    t = features.sym_move_table(n)
    table = np.array([[features.compose(a, b) for b in range(8)] for a in range(8)])
    for row in (*table, *table.T):  # a group table is a Latin square
        assert sorted(row) == list(range(8))
    for a in range(8):
        for b in range(8):
            c = features.compose(a, b)
            both = features.transform_planes(features.transform_planes(x, a), b)
            np.testing.assert_array_equal(both, features.transform_planes(x, c))
            np.testing.assert_array_equal(t[b][t[a]], t[c])
    if n > 2:  # the 8 images of an asymmetric array differ
        assert len({features.transform_planes(x, k).tobytes() for k in range(8)}) == 8


@pytest.mark.parametrize("n", SIZES)
def test_plane_and_move_transforms_agree(n):
    t = features.sym_move_table(n)
    for k in range(8):
        for m in range(n * n):
            y = features.transform_planes(onehot(n, m)[:, :, None], k)[:, :, 0]
            np.testing.assert_array_equal(y, onehot(n, int(t[k, m])))
            assert features.transform_move(m, n, k) == t[k, m]
        assert features.transform_move(n * n, n, k) == n * n == t[k, n * n]


@pytest.mark.parametrize("n", (3, 4, 9))
def test_numba_transforms_match_numpy(n):
    x = asym_planes(n, c=5)
    vec = np.random.default_rng(1).random(n * n + 1)
    t = features.sym_move_table(n)
    for k in range(8):
        dst = np.empty_like(x)
        features.transform_planes_into(x, k, dst)
        np.testing.assert_array_equal(dst, features.transform_planes(x, k))
        out = np.empty_like(vec)
        features.transform_moves_into(vec, n, k, out)
        np.testing.assert_array_equal(out[t[k]], vec)


def test_transform_planes_on_a_batch_and_policy_mapping_back():
    n = 9
    batch = np.stack([asym_planes(n, seed=s) for s in range(4)])  # [B, H, W, C]
    t = features.sym_move_table(n)
    for k in range(8):
        y = features.transform_planes(batch, k)
        for i in range(4):
            np.testing.assert_array_equal(y[i], features.transform_planes(batch[i], k))
        # A net that sees the transformed board and predicts move t[k, m]
        # means move m on the real board.
        policy = np.zeros((2, n * n + 1))
        policy[0, t[k, 10]] = 1
        policy[1, n * n] = 1
        back = features.untransform_policy(policy, k)
        assert back[0].argmax() == 10 and back[1].argmax() == n * n


def test_features_are_equivariant_under_symmetry():
    rng = np.random.default_rng(11)
    s = random_state(rng, 9, 60, True)
    st = board.stones(s)
    for k in range(8):
        stk = features.transform_planes(st[:, :, None], k)[:, :, 0]
        sk = board.from_stones(stk, to_play=s.to_play)
        for preset in ("thesis3", "clark7"):
            np.testing.assert_array_equal(
                features.encode(sk, preset), features.transform_planes(features.encode(board.from_stones(st, to_play=s.to_play), preset), k)
            )


def test_bad_symmetry_index():
    for bad in (-1, 8, 1.0, True):
        with pytest.raises(ValueError, match="0..7"):
            features.inverse(bad)
    with pytest.raises(ValueError, match="0..7"):
        features.transform_planes(asym_planes(3), 9)
