"""The game record (alphalite.engine.game) without an engine: one reset,
undo, handicap, SGF load; and the result text (go.sgf.result_string)."""

from __future__ import annotations

import numpy as np
import pytest

from alphalite.engine.game import Game, with_to_play
from alphalite.go import board, coords, sgf
from alphalite.go.board import BLACK, WHITE


def _game(size=9, komi=7.5):
    resets = []
    g = Game(size, komi, on_reset=lambda: resets.append(1))
    return g, resets


def _at(v, n=9):
    return coords.from_gtp(v, n)


def test_reset_starts_an_empty_game_and_tells_the_listener():
    g, resets = _game()
    g.play(BLACK, _at("E5"))
    g.place_handicap([_at("C3"), _at("G7")])
    assert len(resets) == 1 and g.handicap == 2
    g.play(WHITE, _at("D4"))
    g.reset()
    assert len(resets) == 2
    assert (g.size, g.komi, g.moves, g.setup_black, g.handicap) == (9, 7.5, [], [], 0)
    assert g.board_empty() and len(g.stack) == 1 and g.state.to_play == BLACK
    g.set_komi(0.5)
    g.reset(13)
    assert len(resets) == 3 and g.size == 13 and g.state.size == 13 and g.komi == 0.5 == g.state.komi


def test_play_undo_and_a_failed_play_change_nothing_else():
    g, _ = _game()
    assert not g.undo()
    first = g.state
    g.play(BLACK, _at("E5"))
    second = g.state
    g.play(WHITE, _at("E6"))
    with pytest.raises(board.IllegalMove):
        g.play(BLACK, _at("E6"))  # occupied
    assert len(g.stack) == 3 and g.moves == [(BLACK, _at("E5")), (WHITE, _at("E6"))]
    assert g.undo() and g.state is second and g.moves == [(BLACK, _at("E5"))]
    assert g.undo() and g.state is first and g.moves == []
    assert not g.undo()
    # the same colour twice (GTP allows it), and play after two passes goes on
    g.play(BLACK, 81)
    g.play(WHITE, 81)
    assert g.state.is_over
    g.play(BLACK, _at("A1"))
    g.play(BLACK, _at("B1"))
    assert board.stones(g.state).sum() == 2


def test_two_passes_by_one_colour_do_not_end_the_game():
    """``play b pass`` twice: the second pass replaces the first (it did
    count as two, and the game was over); then White's pass ends it."""
    g, _ = _game()
    g.play(BLACK, _at("E5"))
    g.play(BLACK, 81)
    g.play(BLACK, 81)
    assert g.state.passes == 1 and not g.state.is_over and g.state.to_play == WHITE
    g.play(WHITE, 81)
    assert g.state.is_over
    # passes out of turn: still one while the same colour makes them
    h, _ = _game()
    h.play(WHITE, 81)
    h.play(WHITE, 81)
    h.play(WHITE, 81)
    assert h.state.passes == 1 and not h.state.is_over
    h.play(BLACK, 81)
    assert h.state.is_over


def test_komi_changes_every_position():
    g, resets = _game()
    g.play(BLACK, _at("E5"))
    g.set_komi(-3)
    assert [s.komi for s in g.stack] == [-3.0, -3.0] and g.komi == -3.0 and resets == []


def test_handicap_places_black_stones_with_white_to_move():
    g, _ = _game()
    pts = [_at(v) for v in ("G7", "C3", "G3")]
    g.place_handicap(pts)
    assert g.state.to_play == WHITE and g.handicap == 3 and g.setup_black == sorted(pts)
    s = board.stones(g.state).ravel()
    assert sorted(np.flatnonzero(s == BLACK)) == sorted(pts) and not (s == WHITE).any()
    rec = g.record()
    assert rec.handicap == 3 and rec.setup_black == tuple(sorted(pts)) and rec.first_player == WHITE
    g2, _ = _game(5)
    corner = [0, 1, 5, 6, 2, 7, 10, 11, 12, 15, 16, 17, 20, 21, 22, 23, 24, 3, 8, 13, 18, 19, 14, 9]  # all but 4
    g2.play(BLACK, 4)
    with pytest.raises(ValueError):  # every point black: no liberties
        g2.place_handicap(corner + [4])
    assert g2.moves == [(BLACK, 4)] and g2.handicap == 0


def test_load_replays_a_record_and_refuses_one_with_an_illegal_move():
    g, _ = _game()
    g.place_handicap([_at("C3"), _at("G7")])
    g.play(WHITE, _at("E5"))
    g.play(BLACK, _at("E4"))
    g.play(WHITE, 81)
    data = sgf.write_sgf(g.record("B+3.5"))
    back = sgf.read_sgf(data)
    h, h_resets = _game(13, komi=0.5)
    assert h.load(back) is None and h_resets == [1]
    assert (h.size, h.komi, h.handicap, h.setup_black, h.moves) == (9, 7.5, 2, g.setup_black, g.moves)
    assert h.state.hash == g.state.hash and h.state.to_play == BLACK
    h.load(back, limit=1)
    assert h.moves == g.moves[:1] and h.state.to_play == BLACK
    # an illegal move (onto a stone) among those asked for: refused, the game before it stands
    bad = sgf.GameRecord(size=9, komi=6.5, moves=((BLACK, _at("E5")), (WHITE, _at("D5")), (BLACK, _at("D5")),
                                                  (WHITE, _at("A1"))))
    before = (h.moves[:], h.state.hash, h.komi, len(h_resets))
    with pytest.raises(ValueError, match="move 3 is illegal"):
        h.load(bad)
    assert (h.moves, h.state.hash, h.komi, len(h_resets)) == before
    h.load(bad, limit=2)  # the moves before it load
    assert h.moves == list(bad.moves[:2]) and h.komi == 6.5


def test_load_of_setup_our_board_refuses_changes_nothing():
    g, resets = _game()
    g.play(BLACK, _at("E5"))
    dead = sgf.GameRecord(size=9, komi=7.5, setup_black=(0,), setup_white=(1, 9))  # A9 without liberties
    with pytest.raises(ValueError):
        g.load(dead)
    assert resets == [] and g.moves == [(BLACK, _at("E5"))]


def test_load_sets_who_moves_first():
    g, _ = _game()
    g.load(sgf.GameRecord(size=9, komi=7.5, setup_black=(0, 80)))  # black stones only: white starts
    assert g.state.to_play == WHITE and g.record().first_player == WHITE
    g.load(sgf.GameRecord(size=9, komi=7.5, moves=((WHITE, 40),)))
    assert g.stack[0].to_play == WHITE and g.state.to_play == BLACK


def test_with_to_play_clears_the_ko_ban_of_the_other_side():
    st = board.parse_diagram("""
        . X O .
        X O . O
        . X O .
        . . . .
    """, superko=False)  # simple ko: the ban is the position's ko point
    st = board.play(st, 6, BLACK)  # X takes at C3 (row 1, col 2): a ko
    assert st.to_play == WHITE and not board.legal_moves(st)[5]  # White may not retake at once
    same = with_to_play(st, WHITE)
    assert same.hash == st.hash and not board.legal_moves(same)[5]
    black = with_to_play(st, BLACK)
    assert black.to_play == BLACK and black.hash == st.hash
    assert board.legal_moves(with_to_play(black, WHITE))[5]  # the ban went with the change of side


@pytest.mark.parametrize("score,text", [(3.5, "B+3.5"), (-0.5, "W+0.5"), (0.0, "0"), (12.0, "B+12"),
                                        (-181.0, "W+181")])
def test_result_string_reads_back(score, text):
    assert sgf.result_string(score) == text
    winner, margin, kind = sgf.parse_result(text)
    assert winner == int(np.sign(score)) and margin == abs(score)
