"""Round trips between every move encoding coords.py knows, and its errors."""

import pytest

from alphalite.go import coords

SIZES = (2, 5, 9, 13, 19, 25)


@pytest.mark.parametrize("size", SIZES)
def test_round_trips_every_point(size):
    seen_gtp = set()
    for move in range(size * size + 1):
        v = coords.to_gtp(move, size)
        assert coords.from_gtp(v, size) == move
        assert coords.from_gtp(v.lower(), size) == move
        assert coords.from_gtp(f"  {v} ", size) == move
        seen_gtp.add(v)
        pt = coords.to_sgfmill(move, size)
        assert coords.from_sgfmill(pt, size) == move
        rc = coords.from_flat(move, size)
        if move == size * size:
            assert v == "pass" and pt is None and rc is None
            continue
        row, col = rc
        assert coords.to_flat(row, col, size) == move
        assert pt == (size - 1 - row, col)
        padded = coords.to_padded(move, size)
        assert padded == (row + 1) * (size + 2) + col + 1
        assert coords.from_padded(padded, size) == move
        assert "I" not in v
    assert len(seen_gtp) == size * size + 1


def test_known_vertices_19():
    n = 19
    assert coords.to_gtp(0, n) == "A19"  # row 0 is the top line
    assert coords.to_gtp(n * n - 1, n) == "T1"
    assert coords.to_gtp(n * (n - 1), n) == "A1"
    assert coords.from_gtp("Q16", n) == 3 * n + 15
    assert coords.to_sgfmill(coords.from_gtp("Q16", n), n) == (15, 15)
    assert coords.from_gtp("J10", n) == 9 * n + 8  # J follows H: I is skipped
    assert coords.from_gtp("H10", n) == 9 * n + 7
    assert coords.from_gtp("PASS", n) == n * n
    assert coords.from_gtp("Pass", n) == n * n
    assert coords.to_gtp(coords.from_gtp("z25", 25), 25) == "Z25"


def test_num_actions_and_pass():
    assert coords.num_actions(9) == 82
    assert coords.pass_move(19) == 361


@pytest.mark.parametrize("bad", ["I5", "i5", "", "5", "D", "DD4", "D-1", "D0", "D4.5", "@4", "pass1", "D 4"])
def test_garbage_vertices_raise(bad):
    with pytest.raises(coords.CoordError):
        coords.from_gtp(bad, 19)


@pytest.mark.parametrize("vertex, size", [("K1", 9), ("J10", 9), ("A10", 9), ("T20", 19), ("A26", 25), ("C1", 2)])
def test_off_board_vertices_raise(vertex, size):
    with pytest.raises(coords.CoordError, match="off"):
        coords.from_gtp(vertex, size)


def test_off_board_other_encodings_raise():
    with pytest.raises(coords.CoordError):
        coords.to_flat(9, 0, 9)
    with pytest.raises(coords.CoordError):
        coords.to_flat(0, -1, 9)
    with pytest.raises(coords.CoordError):
        coords.from_flat(82, 9)
    with pytest.raises(coords.CoordError):
        coords.from_flat(-1, 9)
    with pytest.raises(coords.CoordError):
        coords.to_gtp(100, 9)
    with pytest.raises(coords.CoordError):
        coords.from_sgfmill((9, 0), 9)
    with pytest.raises(coords.CoordError):
        coords.from_sgfmill((0, -1), 9)


@pytest.mark.parametrize("size", [1, 26, 0, -3, 9.0, "9"])
def test_check_size_rejects(size):
    with pytest.raises(coords.CoordError, match="2..25"):
        coords.check_size(size)
