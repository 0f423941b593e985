"""Batched self-play: legal finished games, Tromp-Taylor scores, the move
mask, MCTS games, and records written atomically and read back."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from alphalite.go import board, sgf

from alphalite.nn import nets
from search.params import SearchParams
from selfplay import games as sp
from selfplay import records


@pytest.fixture(scope="module")
def tiny():
    model = nets.make_model("b1c8", 5, 17)
    a = nets.init_variables(model, jax.random.PRNGKey(0))
    b = nets.init_variables(model, jax.random.PRNGKey(1))
    return model, a, b


def _replay(game):
    s = board.new_game(game.size, game.komi)
    for c, m in zip(game.colours, game.moves):
        assert c == s.to_play
        s = board.play(s, int(m))  # raises IllegalMove on an illegal move
    return s


def test_batched_games_are_legal_finish_and_score_by_area(tiny):
    model, a, b = tiny
    players = [sp.NetPlayer("a", model, a), sp.NetPlayer("b", model, b, temperature=0.5)]
    black = [0, 0, 0, 1, 1, 1, 0]
    white = [1, 1, 0, 0, 0, 1, 1]
    games, pos = sp.play_policy_games(players, black, white, 5, 6.5, np.random.default_rng(0), collect=0)
    assert len(games) == 7
    learner_moves = 0
    for g, game in enumerate(games):
        assert (game.black, game.white) == (players[black[g]].name, players[white[g]].name)
        s = _replay(game)
        assert game.ended == "passes" and s.is_over
        assert game.score == board.area_score(s)
        assert game.winner == np.sign(game.score)
        assert game.result == ("B+" if game.score > 0 else "W+") + f"{abs(game.score):g}"
        learner_moves += sum(1 for i in range(len(game.moves)) if (black[g] if i % 2 == 0 else white[g]) == 0)
    # the collected positions are exactly player 0's moves, each allowed by its mask
    assert len(pos.moves) == learner_moves
    assert pos.mask[np.arange(len(pos.moves)), pos.moves].all()
    assert pos.planes.dtype == np.uint8 and pos.planes.shape[1:] == (5, 5, 17)


def test_move_cap_and_argmax_games_are_deterministic(tiny):
    model, a, _ = tiny
    p = [sp.NetPlayer("a", model, a, temperature=0.0)]
    g1, _ = sp.play_policy_games(p, [0, 0], [0, 0], 5, 7.5, np.random.default_rng(1), max_moves=9)
    g2, _ = sp.play_policy_games(p, [0, 0], [0, 0], 5, 7.5, np.random.default_rng(2), max_moves=9)
    for x, y in zip(g1, g2):
        assert x.ended == "move cap" and len(x.moves) == 9
        np.testing.assert_array_equal(x.moves, y.moves)
        assert x.score == board.area_score(_replay(x))


def test_candidates_leave_out_own_eyes_and_territory():
    s = board.parse_diagram("""
        . X . O .
        X X X O O
        . X . O .
        X X X O O
        . . X O .
    """)
    cand = sp.candidates(s)
    n = 5
    # Black to play: the top-left corner is black's eye; (2,0) is black territory
    assert not cand[0] and not cand[2 * n + 0] and not cand[4 * n + 0]
    # points reaching both colours stay open; white's eyes are suicide for black
    assert cand[0 * n + 2] and cand[2 * n + 2]
    assert not cand[0 * n + 4] and not cand[2 * n + 4]
    assert not cand[n * n]  # pass only when nothing else
    w = board.parse_diagram("""
        X X X X X
        X . X . X
        X X X X X
        X . X . X
        X X X X X
    """, to_play=board.WHITE)
    assert not sp.candidates(w)[:-1].any()  # only suicides for white: it passes
    assert sp.candidates(w)[-1]


def test_candidates_can_leave_out_self_atari():
    s = board.parse_diagram("""
        . X O . .
        X O . O .
        . X O . .
        O O O . .
        X X . . .
    """)
    n = 5
    ko, fill, join, lone = 1 * n + 2, 4 * n + 2, 2 * n + 0, 0 * n + 3
    plain = sp.candidates(s)
    strict = sp.candidates(s, no_self_atari=True)
    # the ko capture; the fill that leaves two stones one liberty; the join of
    # three stones with one liberty; a lone stone in atari
    for m in (ko, fill, join, lone):
        assert plain[m] and not strict[m], m
    assert strict[2 * n + 3] and (plain & ~strict).sum() == 4  # the rest stays
    assert not strict[n * n]


def test_mcts_selfplay_games_finish_legally(tiny):
    model, a, _ = tiny
    player = sp.mcts_player(model, a, visits=8,
                            search_params=SearchParams(batch_size=4, temperature=1.0, temperature_moves=4))
    games = sp.play_mcts_games(player, player, 2, 5, 7.5, np.random.default_rng(0))
    assert len(games) == 2
    for game in games:
        s = _replay(game)
        assert game.score == board.area_score(s)
        assert s.is_over or game.ended == "move cap"


def test_records_round_trip_and_ignore_partial_files(tmp_path, tiny):
    model, a, _ = tiny
    games, _ = sp.play_policy_games([sp.NetPlayer("a", model, a)], [0, 0], [0, 0], 5, 7.5,
                                    np.random.default_rng(3))
    for i, g in enumerate(games):
        records.write_game(tmp_path / "recs", f"g{i}", g)
    # what a killed writer or a crash could leave behind
    (tmp_path / "recs" / ".g2.npz.abc.tmp").write_bytes(b"PK\x03\x04 half")
    (tmp_path / "recs" / "torn.npz").write_bytes(b"PK\x03\x04 torn")
    back = records.read_games(tmp_path / "recs")
    assert len(back) == 2
    for x, y in zip(games, back):
        np.testing.assert_array_equal(x.moves, y.moves)
        np.testing.assert_array_equal(x.colours, y.colours)
        assert (x.score, x.komi, x.size, x.black, x.white, x.ended) == \
            (y.score, y.komi, y.size, y.black, y.white, y.ended)
    with pytest.raises(ValueError, match="not a self-play record"):
        records.read_game(tmp_path / "recs" / "torn.npz")
    rec = sgf.read_sgf((tmp_path / "recs" / "g0.sgf").read_bytes())
    assert [m for _, m in rec.moves] == [int(m) for m in games[0].moves]
    assert rec.winner == games[0].winner and rec.komi == 7.5
    with pytest.raises(FileNotFoundError):
        records.record_paths(tmp_path / "missing")


def test_territory_filter_never_drops_the_move_that_saves_a_group():
    """White's A9-C9 are in atari; their last liberty D9 lies in a region
    that touches only white stones (Tromp-Taylor white territory). Both
    candidate rules (the engine's and self-play's) must keep D9: leaving it
    out lost a self-play game's four stones. The same region without a
    group in atari stays left out."""
    from alphalite.engine import players
    from alphalite.go import board as bd

    st = bd.parse_diagram("""
        O O O . O . . . .
        X X X O . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .""", to_play=bd.WHITE)
    d9 = 3
    assert players.owners(st)[d9] == bd.WHITE
    assert players.candidate_moves(st)[d9] and sp.candidates(st)[d9]
    safe = bd.parse_diagram("""
        O O O . O . . . .
        . . . O . . . . .
        X X X . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .""", to_play=bd.WHITE)
    assert players.owners(safe)[d9] == bd.WHITE
    assert not players.candidate_moves(safe)[d9] and not sp.candidates(safe)[d9]


def test_one_candidate_rule_for_the_engine_and_self_play():
    """The engine's candidate moves are self-play's (one kernel,
    ``board.candidates_into``), for either colour, on random positions
    (one-colour ones too: no territory yet, only own true eyes left out)
    and after two passes (the engine resumes)."""
    from alphalite.engine import players

    rng = np.random.default_rng(5)
    checked = 0
    for g in range(60):
        n = (5, 7, 9)[g % 3]
        st = board.new_game(n, 7.5)
        for _ in range(int(rng.integers(0, n * n))):
            legal = np.flatnonzero(board.legal_moves(st)[:-1])
            m = int(rng.choice(legal)) if legal.size else n * n
            col = board.BLACK if g % 2 else st.to_play  # odd games: black stones only
            if board.is_legal(board.with_to_play(st, col), m):
                st = board.play(st, m, col)
        for col in (board.BLACK, board.WHITE):
            eng = players.candidate_moves(st, col)
            sp_ = sp.candidates(players.resume(board.with_to_play(st, col)))
            assert not eng[-1] and (eng[:-1] == sp_[:-1]).all()
            checked += 1
    assert checked == 120
    # a corner point of black's: a true eye, and once white takes the
    # diagonal a false one, still left out as black's own territory
    eye = board.parse_diagram("""
        . X . . .
        X X . . .
        . . . . .
        . . . . .
        . . . . .""")
    assert not players.candidate_moves(eye)[0]
    false_eye = board.parse_diagram("""
        . X . . .
        X O . . .
        . . . . .
        . . . . .
        . . . . .""")
    assert board.is_legal(false_eye, 0) and not players.candidate_moves(false_eye)[0]
    over = board.play(board.play(board.new_game(5, 7.5), 25), 25)
    assert over.is_over and players.candidate_moves(over)[:-1].sum() == 25
