"""Ladder reader and move facts on hand-checked diagrams."""

import numpy as np

from alphalite.go import board, coords
from alphalite.go.tactics import ladder_captured, move_facts

# White O at C5 (row 4, col 4) in a ladder shape: black to chase down-left.
LADDER = """
.........
.........
.........
....X....
...XO....
.....X...
.........
.........
.........
"""


def _pt(r, c, n=9):
    return coords.to_padded(coords.to_flat(r, c, n), n)


def _state(d, to_play):
    return board.parse_diagram(d, to_play=to_play)


def test_plain_ladder_is_captured():
    s = _state(LADDER, board.BLACK)
    assert ladder_captured(s.board_tuple, _pt(4, 4))


def test_breaker_stone_on_the_path_saves_the_runner():
    rows = LADDER.strip().splitlines()
    # the chaser can ladder either way, so one breaker on each diagonal
    rows[7] = ".O......."
    rows[1] = ".......O."
    s = _state("\n".join(rows), board.BLACK)
    assert not ladder_captured(s.board_tuple, _pt(4, 4))


def test_runner_that_can_capture_a_chaser_escapes():
    # the first-line runner below, but the X at (8,2) is in atari (O at (7,2))
    d = FIRST_LINE.replace("..XO.....", "..XO.....").replace("...XXXXXX", "..OXXXXXX")
    s = _state(d, board.WHITE)
    B = s.board_tuple
    assert B[board.B_LIBS][B[board.B_HEAD][_pt(8, 2)]] == 1
    assert not ladder_captured(B, _pt(8, 3))


FIRST_LINE = """
.........
.........
.........
.........
.........
.........
.........
...XXXXXX
..XO.....
"""


def test_first_line_runner_is_captured():
    s = _state(FIRST_LINE, board.WHITE)
    assert ladder_captured(s.board_tuple, _pt(8, 3))


def test_ladder_capture_and_escape_facts():
    s = _state(LADDER, board.BLACK)
    B = s.board_tuple
    scratch = s.copy_tuple()
    out = np.zeros(6, np.int64)
    # black at (4,5) ataris; the runner extends and is caught
    assert move_facts(B, scratch, _pt(4, 5), board.BLACK, out) == 1
    assert out[4] == 1 and out[1] == 0 and out[3] == 2  # joins the X at (5,5)
    # after that atari, white's extension at (5,4) is no escape
    s2 = board.play(s, coords.to_flat(4, 5, 9))
    assert move_facts(s2.board_tuple, s2.copy_tuple(), _pt(5, 4), board.WHITE, out) == 1
    assert out[5] == 0 and out[2] == 2 and out[3] == 2
    rows = LADDER.strip().splitlines()
    rows[7] = ".O......."
    rows[1] = ".......O."
    s3 = board.play(_state("\n".join(rows), board.BLACK), coords.to_flat(4, 5, 9))
    assert move_facts(s3.board_tuple, s3.copy_tuple(), _pt(5, 4), board.WHITE, out) == 1
    assert out[5] == 1
