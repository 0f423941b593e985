"""Pass, resign and cleanup (alphalite.engine.decisions) without an engine:
fake searches, real positions, the playout judge."""

from __future__ import annotations

import numpy as np
import pytest

from alphalite.engine import decisions, players
from alphalite.engine.decisions import Judge, ResignPolicy, choose, cleanup_move
from alphalite.engine.game import Game, with_to_play
from alphalite.engine.players import Decision
from alphalite.go import board, coords
from alphalite.go.board import BLACK, WHITE

# 7x7, komi 0.5: Black walls column D, White column E; a lone white stone
# at B4 inside Black's side is dead. Black is 6.5 ahead with it off.
SPLIT = """
    . . . X O . .
    . . . X O . .
    . . . X O . .
    . O . X O . .
    . . . X O . .
    . . . X O . .
    . . . X O . .
"""
B4 = coords.from_gtp("B4", 7)
SETTLED = SPLIT.replace(". O . X", ". . . X")  # the same without the dead stone
PASS = 49


def _game(pass_by=None, to_play=BLACK, diagram=SPLIT):
    g = Game(7, 0.5)
    g.reset(start=board.parse_diagram(diagram, komi=0.5, to_play=to_play))
    if pass_by is not None:
        g.play(pass_by, PASS)
    return g


def _no_search():
    raise AssertionError("a rule should have decided before the search")


def _searched(move, rows=None):
    return lambda: Decision(move, winrate=0.5, analysis=rows)


@pytest.fixture(scope="module")
def judge():
    return Judge(128, seed=0)


def test_the_judge_sees_the_dead_stone_and_caches(judge):
    st = _game().state
    score, dead = judge(st)
    assert score == 6.5 and list(dead) == [B4]
    assert judge(st) is judge(st)
    small = Judge(16, capacity=2)
    for s in (st, with_to_play(st, WHITE), board.play(st, 0)):
        small(s)
    assert len(small._cache) == 1  # full at two: cleared, then the third kept


def test_the_judge_takes_the_search_estimate_when_there_is_one():
    st = _game().state
    asked = []

    def search(state, n, seconds):  # an engine's own ownership: here it calls B4's stone alive
        asked.append(n)
        own = np.where(np.arange(49) % 7 < 4, 1.0, -1.0)
        own[B4] = -1.0
        return own, -3.0, 1.0, n

    j = Judge(32, search=search)
    score, dead = j(st)
    assert asked == [32] and len(dead) == 0 and score == board.area_score(st)
    assert j.territory(st).margin == -3.0 and j.territory(st).stdev == 1.0 and asked == [32]  # cached
    # the same estimate with B4 Black's: the stone is dead, the score counts it off
    j = Judge(32, search=lambda state, n, seconds: (np.where(np.arange(49) % 7 < 4, 1.0, -1.0), 6.5, 0.0, n))
    score, dead = j(st)
    assert score == 6.5 and list(dead) == [B4]
    # no estimate from the search (a size it cannot play): playouts; no playouts at all: no one is dead
    j = Judge(128, search=lambda state, n, seconds: None)
    assert list(j(st)[1]) == [B4]
    j = Judge(0, search=search)
    assert len(j(st)[1]) == 0 and j.territory(st).margin == board.area_score(st) and asked == [32]


def test_pass_when_the_opponent_passed_and_the_game_is_won(judge):
    st = _game(pass_by=WHITE, diagram=SETTLED).state  # Black to move after White's pass
    cand = players.candidate_moves(st)
    d = choose(st, BLACK, cand, _no_search, judge)
    assert d.move == PASS and d.note == "the opponent passed and passing wins"
    # with the dead stone on the board Black's side is no one's area yet (Tromp-Taylor, as a
    # referee counting two passes would): the search is asked
    st = _game(pass_by=WHITE).state
    d = choose(st, BLACK, players.candidate_moves(st), _searched(3), judge)
    assert d.move == 3


def test_an_estimate_cut_short_may_stop_a_pass_but_never_make_one():
    """After the opponent's pass a won game is passed out only on an
    estimate of all the playouts asked for: one the clock cut to a few
    (a chunk of 8) is too noisy to end the game on, and is not cached."""
    st = _game(pass_by=WHITE, diagram=SETTLED).state
    cand = players.candidate_moves(st)
    for got, passes in ((32, True), (31, False), (8, False)):
        j = Judge(32, search=lambda state, n, seconds, got=got: (
            players.owners(state).astype(np.float64), board.area_score(state), 0.0, got))
        d = choose(st, BLACK, cand, _searched(3), j)
        assert (d.move == PASS) == passes, got
        assert bool(j._territories) == passes and bool(j._cache) == passes


def test_a_players_own_pass_is_not_the_opponents(judge):
    """Black passed and is asked to move again (``play b pass``, ``genmove
    b``): no one passed to Black, so the won position's pass rule is not
    asked; it read Black's own pass as White's and passed back."""
    g = _game(pass_by=BLACK, diagram=SETTLED)  # White to move after Black's pass
    st = with_to_play(g.state, BLACK)
    assert not players.last_was_pass(st) and st.passes == 0
    d = choose(st, BLACK, players.candidate_moves(st), _searched(3), judge)
    assert d.move == 3
    # White to move: Black's pass is pending, for the rules and for the search's board
    st = with_to_play(g.state, WHITE)
    assert players.last_was_pass(st) and st.passes == 1


def test_no_game_ending_pass_that_loses(judge):
    st = _game(pass_by=BLACK, to_play=WHITE).state  # White to move, behind, after Black's pass
    assert st.to_play == WHITE
    cand = players.candidate_moves(st)
    first = int(np.flatnonzero(cand[:-1])[0])
    rows = [dict(move=PASS, visits=90), dict(move=first, visits=10)]
    d = choose(st, WHITE, cand, _searched(PASS, rows), judge)
    assert d.move == first and d.note == "passing would end the game lost: playing on"
    # no visited candidate: the move the prior likes best
    prior = np.zeros(PASS + 1)
    best = int(np.flatnonzero(cand[:-1])[-1])
    prior[best] = 1.0
    d = choose(st, WHITE, cand, _searched(PASS), judge, prior=lambda: prior)
    assert d.move == best
    # without the opponent's pass our pass ends nothing: the search's pass stands
    st = _game(to_play=WHITE).state
    d = choose(st, WHITE, players.candidate_moves(st), _searched(PASS), judge)
    assert d.move == PASS and d.note == ""


def test_the_search_decides_otherwise(judge):
    st = _game().state
    d = choose(st, BLACK, players.candidate_moves(st), _searched(3), judge)
    assert d.move == 3 and d.winrate == 0.5


def test_pass_when_nothing_is_left_but_own_eyes(judge):
    grid = np.ones((5, 5), np.int8)
    grid[0, 0] = grid[4, 4] = 0
    st = board.from_stones(grid, komi=0.5)
    cand = players.candidate_moves(st)
    d = choose(st, BLACK, cand, _no_search, judge)
    assert d.move == 25 and d.note == "no move left outside own territory and eyes"


def test_cleanup_plays_out_the_dead_stones(judge):
    g = _game()
    notes = []
    for _ in range(6):
        st = with_to_play(g.state, BLACK)
        d = choose(st, BLACK, players.candidate_moves(st), _searched(PASS), judge,
                   cleanup=True)
        notes.append(d.note)
        g.play(BLACK, d.move, start=st)
        if board.stones(g.state).ravel()[B4] == 0:
            break
        g.play(WHITE, PASS)
    assert board.stones(g.state).ravel()[B4] == 0, board.render(g.state)
    assert notes and all(n == "cleanup: 1 dead stones left" for n in notes)
    assert notes[0] and len(notes) == 4  # B4 has four liberties, Black fills them one by one
    # nothing dead is left: the search's pass stands (no stones thrown into
    # the opponent's area while a candidate is left)
    st = with_to_play(g.state, BLACK)
    assert decisions.cleanup_move(st, BLACK, judge) is None
    d = choose(st, BLACK, players.candidate_moves(st), _searched(PASS), judge, cleanup=True)
    assert d.move == PASS and players.candidate_moves(st)[:-1].any()


def test_a_pass_that_loses_by_the_count_as_the_board_stands_captures_the_dead_stone(judge):
    """After White's pass, Black wins once B4 is off but loses by the
    Tromp-Taylor count with it on the board (its side of the board is
    no one's): the search's pass is replaced by a move at one of B4's
    liberties."""
    st = _game(pass_by=WHITE, to_play=WHITE).state
    assert judge(st)[0] > 0 > board.area_score(st) and st.to_play == BLACK
    d = choose(st, BLACK, players.candidate_moves(st), _searched(PASS), judge)
    libs = {coords.from_gtp(v, 7) for v in ("A4", "B3", "B5", "C4")}
    assert d.move in libs and d.note.startswith("cleanup"), d
    # with avoid/allow leaving none of its liberties, no banned point is played
    allowed = np.ones(PASS + 1, bool)
    allowed[list(libs)] = False
    cand = players.candidate_moves(st) & allowed
    d = choose(st, BLACK, cand, _searched(PASS), judge, allowed=allowed)
    assert d.move not in libs and d.move != PASS and cand[d.move], d


def test_without_playouts_the_judge_counts_the_board_as_it_stands():
    """``--score-playouts 0``: every stone lives and each point is its
    Tromp-Taylor owner's, so a won game still ends by passing."""
    st = _game(pass_by=WHITE, diagram=SETTLED).state
    blind = Judge(0)
    assert blind(st)[0] == board.area_score(st) > 0 and not len(blind(st)[1])
    d = choose(st, BLACK, players.candidate_moves(st), _no_search, blind)
    assert d.move == PASS and d.note == "the opponent passed and passing wins"


def test_a_new_game_resets_the_resign_streak():
    rp = ResignPolicy(threshold=0.2, consecutive=2)
    assert not rp.observe(0.1, move_number=40, board_points=81, color=BLACK)
    rp.reset()  # what Game.reset's listener calls
    assert not rp.observe(0.0, move_number=60, board_points=81, color=BLACK)
    assert rp.observe(0.0, move_number=62, board_points=81, color=BLACK)


def test_resign_policy_with_fake_values():
    points = 81
    rp = ResignPolicy(threshold=0.1, consecutive=3)
    seq = [0.05, 0.05, 0.5, 0.05, 0.05, 0.05]
    got = [rp.observe(v, move_number=30 + 2 * i, board_points=points, color=1) for i, v in enumerate(seq)]
    assert got == [False, False, False, False, False, True]
    rp = ResignPolicy(threshold=0.1, consecutive=3)  # never in the opening (first 20% of 81 points)
    assert not any(rp.observe(0.0, move_number=m, board_points=points, color=1) for m in range(0, 17, 2))
    assert rp.observe(0.0, move_number=18, board_points=points, color=1)
    rp = ResignPolicy(threshold=0.1, consecutive=3)  # White giving handicap: stricter
    assert not any(rp.observe(0.07, move_number=40 + m, board_points=points, color=-1, handicap=4)
                   for m in range(20))
    assert [rp.observe(0.01, move_number=60 + m, board_points=points, color=-1, handicap=4)
            for m in range(6)] == [False] * 5 + [True]
    rp = ResignPolicy(enabled=False)
    assert not any(rp.observe(0.0, move_number=80, board_points=points, color=1) for _ in range(10))
    rp = ResignPolicy()
    assert not any(rp.observe(None, move_number=80, board_points=points, color=1) for _ in range(10))


# White's side of the split, with a true eye at F2: F7-G4 is white
# Tromp-Taylor territory, open to the search only while it is unsettled.
EYE = """
    . . . X O . .
    . . . X O . .
    . . . X O . .
    . . . X O . .
    . . . X O O O
    . . . X O . O
    . . . X O O O
"""


def test_own_territory_opens_only_where_the_search_has_not_settled_it():
    st = board.parse_diagram(EYE, komi=0.5, to_play=WHITE)
    region = [coords.from_gtp(p, 7) for p in ("F7", "G7", "F6", "G6", "F5", "G5", "F4", "G4")]
    white_owns = -np.ones(49)
    assert not players.unsettled_territory(st, white_owns).any()
    shaky = white_owns.copy()
    shaky[coords.from_gtp("G7", 7)] = -0.5  # one point of the region
    assert sorted(np.flatnonzero(players.unsettled_territory(st, shaky))) == sorted(region)
    wall = white_owns.copy()
    wall[coords.from_gtp("E6", 7)] = -0.6  # a stone next to it
    assert sorted(np.flatnonzero(players.unsettled_territory(st, wall))) == sorted(region)
    # the true eye F2 stays closed however shaky; for Black, its own side opens
    everything = np.zeros(49)
    assert coords.from_gtp("F2", 7) not in np.flatnonzero(players.unsettled_territory(st, everything))
    black_side = [r * 7 + c for r in range(7) for c in range(3)]
    assert list(np.flatnonzero(players.unsettled_territory(board.with_to_play(st, BLACK), everything))) == black_side


def test_settle_keeps_the_search_move_in_unsettled_territory():
    st = board.parse_diagram(EYE, komi=0.5, to_play=WHITE)
    cand = players.candidate_moves(st)
    f6, a1 = coords.from_gtp("F6", 7), coords.from_gtp("A1", 7)
    assert not cand[f6] and cand[a1]
    visits = np.zeros(50)
    visits[f6], visits[a1] = 90, 10
    prior = np.full(50, 1 / 50)
    settled = -np.ones(49)
    assert players.settle(st, f6, visits, prior, cand, ownership=settled) == (a1, "search move F6 fills own territory")
    assert players.settle(st, f6, visits, prior, cand) == (a1, "search move F6 fills own territory")
    open_ = settled.copy()
    open_[coords.from_gtp("G5", 7)] = 0.0
    assert players.settle(st, f6, visits, prior, cand, ownership=open_) == (f6, "")


# Black's side with a hole at B5 that White could only fill in self-atari.
HOLE = """
    . . . X O . .
    . X . X O . .
    X . X X O . .
    . . . X O . .
    . . . X O . .
    . . . X O . .
    . . . X O . .
"""


def _late(st):
    """``st`` at move 30: past the opening, where passes are the search's."""
    b = st.copy_tuple()
    b.meta[board.M_MOVES] = 30
    return board.GoState(st.size, st.komi, st.superko, st.suicide, b)


def test_no_search_pass_while_a_move_can_still_matter():
    st = board.parse_diagram(HOLE, komi=0.5, to_play=WHITE)
    cand = players.candidate_moves(st)
    a7, b5 = coords.from_gtp("A7", 7), coords.from_gtp("B5", 7)
    settled = np.where(np.arange(49) % 7 < 4, 1.0, -1.0)  # black left, white right
    assert not players.open_points(st, settled, cand).any()
    shaky = settled.copy()
    shaky[[a7, b5]] = 0.0
    assert list(np.flatnonzero(players.open_points(st, shaky, cand))) == [a7]  # B5: self-atari
    visits = np.zeros(50)
    visits[PASS], visits[a7] = 100, 5
    prior = np.full(50, 1 / 50)
    late = _late(st)
    assert players.settle(late, PASS, visits, prior, cand, ownership=settled) == (PASS, "")
    assert players.settle(late, PASS, visits, prior, cand, ownership=shaky) == (a7, "unsettled points left: no pass")
    # the opening is counted in stones, not moves: this diagram at move 0
    # (a loaded position) is past it; three stones at move 30 are not
    assert st.move_number == 0 and st.stones_placed == 17
    assert players.settle(st, PASS, visits, prior, cand, ownership=settled) == (PASS, "")
    early = _late(board.parse_diagram(HOLE.replace("X X O", ". . ."), komi=0.5, to_play=WHITE))
    assert early.stones_placed < 49 // 3
    assert players.settle(early, PASS, visits, prior, players.candidate_moves(early), ownership=settled)[1] == (
        "no pass in the opening")


def test_a_pass_put_in_for_a_territory_move_gives_way_to_unsettled_points():
    st = board.parse_diagram(HOLE, komi=0.5, to_play=WHITE)
    late = _late(st)
    cand = players.candidate_moves(late)
    f6, a7 = coords.from_gtp("F6", 7), coords.from_gtp("A7", 7)
    visits = np.zeros(50)
    visits[f6], visits[PASS], visits[a7] = 200, 100, 5  # F6: settled own territory
    prior = np.full(50, 1 / 50)
    shaky = np.where(np.arange(49) % 7 < 4, 1.0, -1.0)
    shaky[a7] = 0.0
    assert players.settle(late, f6, visits, prior, cand, ownership=shaky) == (
        a7, "unsettled points left: no pass (search move F6 fills own territory)")


def test_a_territory_move_that_matters_by_q_stands():
    from search.params import SearchParams

    st = board.parse_diagram(EYE, komi=0.5, to_play=WHITE)
    cand = players.candidate_moves(st)
    f6, a1, f2 = coords.from_gtp("F6", 7), coords.from_gtp("A1", 7), coords.from_gtp("F2", 7)
    visits = np.zeros(50)
    visits[f6], visits[a1], visits[f2] = 90, 10, 95
    prior = np.full(50, 1 / 50)
    settled = -np.ones(49)
    q = np.full(50, np.nan)
    q[f6], q[a1], q[f2] = 0.30, 0.20, 0.9
    assert players.settle(st, f6, visits, prior, cand, ownership=settled, q=q) == (f6, "own territory, by Q +0.100 over A1")
    q[f6] = 0.22  # within MATTERS of the move put in: the filter stands
    assert players.settle(st, f6, visits, prior, cand, ownership=settled, q=q) == (a1, "search move F6 fills own territory")
    # a true eye is never filled, whatever its Q
    assert players.settle(st, f2, visits, prior, cand, ownership=settled, q=q) == (a1, "search move F2 fills own territory")
    # --own-territory search: the search's move stands, below A1 by Q too; a true eye still never
    q[f6] = 0.18
    assert players.settle(st, f6, visits, prior, cand, ownership=settled, q=q, own_territory="search") == (f6, "")
    assert players.settle(st, f2, visits, prior, cand, ownership=settled, q=q, own_territory="search") == (
        a1, "search move F2 fills own territory")
    assert SearchParams().own_territory == "filter"
    with pytest.raises(ValueError, match="--own-territory"):
        SearchParams(own_territory="auto")


def test_a_pass_the_search_prefers_by_q_stands():
    st = board.parse_diagram(HOLE, komi=0.5, to_play=WHITE)
    late = _late(st)
    cand = players.candidate_moves(late)
    a7 = coords.from_gtp("A7", 7)
    visits = np.zeros(50)
    visits[PASS], visits[a7] = 100, 5
    prior = np.full(50, 1 / 50)
    shaky = np.where(np.arange(49) % 7 < 4, 1.0, -1.0)
    shaky[a7] = 0.0
    q = np.full(50, np.nan)
    q[PASS], q[a7] = 0.5, 0.3  # A7 would cost the mover: the pass stands
    assert players.settle(late, PASS, visits, prior, cand, ownership=shaky, q=q) == (PASS, "")
    q[a7] = 0.48
    assert players.settle(late, PASS, visits, prior, cand, ownership=shaky, q=q) == (a7, "unsettled points left: no pass")
    q[a7] = np.nan  # never searched: the search's pass stands
    assert players.settle(late, PASS, visits, prior, cand, ownership=shaky, q=q) == (PASS, "")


# 9x9, komi 7, after Black's pass at move 32 of an arena game against GNU Go
# level 10 (docs/games/default9-gnugo10/games/default9-gnugo10-0023.sgf),
# White to play. White wins by Tromp-Taylor as the board stands, and by 35
# with the stone the rollouts call dead (B9) off; but White's four stones
# top left are unsettled (the rollouts give them to White at 0.45), and
# GNU Go as referee called them dead: the game was scored a draw.
UNSETTLED = """
    . X . . . . . . .
    . O O O X . . . .
    . O . . . . . . .
    . . . . . X X X X
    X X X X X X O O X
    X O O O O O . O O
    O O . . . . . . .
    . . . . . . . . .
    . . . . . . . . .
"""
# the engine's own estimate there, black +1, row 9 first
UNSETTLED_OWN = np.array([
    [-0.5, -0.45, -0.5, -0.2, 0.1, 0.5, 0.7, 0.8, 0.8],
    [-0.5, -0.45, -0.45, -0.45, 0.58, 0.5, 0.7, 0.8, 0.8],
    [-0.3, -0.45, -0.0, 0.1, 0.4, 0.7, 0.8, 0.8, 0.8],
    [0.4, 0.1, 0.3, 0.4, 0.7, 0.9, 0.9, 0.9, 0.9],
    [0.73, 0.73, 0.73, 0.73, 0.73, 0.73, -0.78, -0.78, 0.73],
    [0.73, -0.83, -0.83, -0.83, -0.83, -0.83, -0.7, -0.78, -0.78],
    [-0.83, -0.83, -0.8, -0.8, -0.7, -0.7, -0.6, -0.6, -0.7],
    [-0.8, -0.8, -0.8, -0.8, -0.7, -0.6, -0.6, -0.5, -0.6],
    [-0.8, -0.8, -0.8, -0.7, -0.7, -0.6, -0.6, -0.6, -0.6]]).ravel()


def test_no_game_ending_pass_while_our_group_is_unsettled():
    g = Game(9, 7.0)
    g.reset(start=board.parse_diagram(UNSETTLED, komi=7.0, to_play=BLACK))
    g.play(BLACK, 81)
    st = g.state
    judge = Judge(32, search=lambda state, n, seconds: (UNSETTLED_OWN, -15.8, 29.6, n))
    score, dead = judge(st)
    assert board.area_score(st) < 0 and score == -35 and list(dead) == [coords.from_gtp("B9", 9)]
    assert not decisions.surely_won(st, WHITE, judge)
    cand = players.candidate_moves(st)
    d = choose(st, WHITE, cand, _searched(coords.from_gtp("C7", 9)), judge)
    assert d.move == coords.from_gtp("C7", 9) and d.note == ""  # no pass by rule: the search moves
    first = int(np.flatnonzero(cand[:-1])[0])
    rows = [dict(move=81, visits=90), dict(move=first, visits=10)]
    d = choose(st, WHITE, cand, _searched(81, rows), judge)
    assert d.move == first and d.note == "passing would end the game unsettled: playing on"
    # the same estimate with White's four stones sure: the pass wins and is played
    own = UNSETTLED_OWN.copy()
    own[own == -0.45] = -0.9
    sure = Judge(32, search=lambda state, n, seconds: (own, -15.8, 29.6, n))
    assert decisions.surely_won(st, WHITE, sure)
    d = choose(st, WHITE, cand, _no_search, sure)
    assert d.move == 81 and d.note == "the opponent passed and passing wins"


def test_our_pass_is_judged_with_the_opponent_to_move():
    """A group that lives when we move first is no reason to pass: the
    estimate that answers the opponent's pass has the opponent to move
    (default9n game 37: a search with White to move kept eight stones that
    GNU Go, the referee, called dead; the pass drew a won-looking game)."""
    g = Game(9, 7.0)
    g.reset(start=board.parse_diagram(UNSETTLED, komi=7.0, to_play=BLACK))
    g.play(BLACK, 81)
    st = g.state
    sure = UNSETTLED_OWN.copy()
    sure[sure == -0.45] = -0.9

    def search(state, n, seconds):  # White's four stones live only if White moves first
        return (sure if state.to_play == WHITE else UNSETTLED_OWN), -15.8, 29.6, n

    judge = Judge(32, search=search)
    assert st.to_play == WHITE and not decisions.surely_won(st, WHITE, judge)
    d = choose(st, WHITE, players.candidate_moves(st), _searched(coords.from_gtp("C7", 9)), judge)
    assert d.move == coords.from_gtp("C7", 9)


def test_a_seki_read_near_zero_is_not_dead():
    """Dead stones are whole chains the estimate gives to the opponent by a
    margin (``players.DEAD``): the seki of test_board.SEKI read at -0.01
    for its own colour stays on the board (it was reported dead, and
    cleanup filled its liberties); a chain read at -0.6 is dead, every
    stone of it, though one stone alone reads better."""
    from tests.test_board import SEKI

    st = board.parse_diagram(SEKI, komi=0.5)
    seki = [coords.from_gtp(v, 7) for v in ("E7", "E6", "E5")]  # Black's, in seki with C7-C6-C5-D5
    own = board.stones(st).ravel().astype(np.float64)  # every stone its own colour's
    own[seki] = -0.01
    j = Judge(32, search=lambda state, n, seconds: (own.copy(), 2.5, 0.0, n))
    score, dead = j(st)
    assert len(dead) == 0 and score == board.area_score(st)
    assert cleanup_move(st, WHITE, j) is None
    # three Black stones in atari in White's corner: no seki
    corner = board.parse_diagram("""
        . X X X O . .
        O O O O O . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", komi=0.5)
    line = [coords.from_gtp(v, 7) for v in ("B7", "C7", "D7")]
    own = board.stones(corner).ravel().astype(np.float64)
    own[line] = [-0.9, -0.85, 0.05]  # mean -0.57: the stone read its own colour's dies with its chain
    j = Judge(32, search=lambda state, n, seconds: (own.copy(), 2.5, 0.0, n))
    assert sorted(j(corner)[1]) == sorted(line)
    # exactly at the threshold a chain is dead, whatever its size (a float mean may round up)
    for threshold in (players.DEAD, 1 / 3):
        for stones in (3, 20, 61):  # rows filled from the top: one chain
            chain = board.setup(board.new_game(19), black=range(stones))
            own = np.zeros(361)
            own[:stones] = -threshold
            assert len(players.dead_points(chain, own, threshold)) == stones, (threshold, stones)


def test_dead_stones_reads_playout_counts_as_shares():
    """``players.dead_stones`` turns its playouts' counts into ownership
    before the threshold: a chain the opponent owns in 33 of 64 playouts
    (a share of 0.03 against it) is not dead."""
    st = _game(diagram=SETTLED).state
    calls = []

    def counts(state, n, seed, policy):
        calls.append(n)
        s = board.stones(state).ravel()
        return np.where(s > 0, 31, 33).astype(np.int64), np.where(s > 0, 33, 31).astype(np.int64)

    import unittest.mock

    with unittest.mock.patch.object(players, "ownership_counts", counts):
        assert len(players.dead_stones(st, 64)) == 0 and calls == [64]


def test_a_judge_on_a_moves_clock_keeps_to_it_and_caches_no_cut_estimate():
    """``Judge.within``: an estimate takes at most ``JUDGE_SHARE`` of the
    time left (20,000 playouts would take seconds), and one cut short is
    not cached, in the view or in the judge whose caches it shares; with
    time enough it is the judge's own estimate. Cut playouts are the first
    of the same seed's, a chunk at least."""
    import time

    st = _game().state
    judge = Judge(20000, seed=0)
    t0 = time.perf_counter()
    cut = judge.within(lambda: 0.02).territory(st)
    assert time.perf_counter() - t0 < 0.1 and cut.ownership.shape == (49,)
    assert not judge._territories and not judge._cache
    judge = Judge(64, seed=0)
    ample = judge.within(lambda: 100.0).territory(st)
    assert np.array_equal(ample.ownership, Judge(64, seed=0).territory(st).ownership)
    assert len(judge._territories) == 1
    whole = players.playout_outcomes(st, 40, 5)
    assert all(np.array_equal(a, b) for a, b in zip(whole, players.playout_outcomes(st, 40, 5, max_seconds=100.0)))
    first = players.playout_outcomes(st, 40, 5, max_seconds=0.0)[2]
    assert len(first) == players.PLAYOUT_CHUNK and np.array_equal(first, whole[2][:len(first)])
