"""Differential test of alphalite.go.board against GNU Go, the rules oracle.

GNU Go runs in GTP mode with Chinese (area) rules, positional superko and
its default no-suicide rule, i.e. our default rules. Random games are played
on both boards; after every move the stones (``list_stones``) and the full
set of legal points for the side to move (``all_legal``) must agree exactly,
and games played out to two passes must get the same area score.

GNU Go's ``all_legal`` (and ``is_legal``/``play``) honour positional
superko: ``test_gnugo_superko_send_two_return_one`` shows it on a known
cycle, so the per-move comparison below includes superko-forbidden points
with no special case.
"""

import numpy as np
import pytest

from alphalite.go import board as bd
from alphalite.go import coords
from alphalite.go.gtpclient import GtpClient, GtpError, find_gnugo
from tests.test_board import SEKI  # the same diagram on both boards

GNUGO = find_gnugo()
pytestmark = pytest.mark.skipif(GNUGO is None, reason="GNU Go not found on PATH or in /usr/games: install gnugo")

RULES = ["--mode", "gtp", "--chinese-rules", "--positional-superko", "--forbid-suicide"]


def gnugo(size, komi):
    eng = GtpClient([GNUGO, *RULES, "--komi", str(komi)], timeout=30)
    eng.send(f"boardsize {size}")
    eng.send("clear_board")
    eng.send(f"komi {komi}")
    return eng


def colour_name(c):
    return "black" if c == bd.BLACK else "white"


def vertex_set(text, size):
    return {coords.from_gtp(v, size) for v in text.split()}


def check_same(eng, s):
    size = s.size
    st = bd.stones(s).ravel()
    for c in (bd.BLACK, bd.WHITE):
        theirs = vertex_set(eng.send(f"list_stones {colour_name(c)}"), size)
        ours = set(np.flatnonzero(st == c).tolist())
        assert theirs == ours, f"{colour_name(c)} stones differ at move {s.move_number}\n{bd.render(s)}"
    if s.is_over:
        return  # we allow no move after two passes; GNU Go has no such state
    theirs = vertex_set(eng.send(f"all_legal {colour_name(s.to_play)}"), size)
    ours = set(np.flatnonzero(bd.legal_moves(s)[:-1]).tolist())
    assert theirs == ours, (
        f"legal points differ at move {s.move_number} for {colour_name(s.to_play)}: "
        f"only GNU Go {sorted(coords.to_gtp(m, size) for m in theirs - ours)}, "
        f"only ours {sorted(coords.to_gtp(m, size) for m in ours - theirs)}\n{bd.render(s)}")


def own_eye(st, m, size, who):
    """A real one-point eye of ``who`` (the diagonal test of board.is_eye):
    the random mover never fills these, so games end, mostly with every
    group plainly alive."""
    r, c = divmod(m, size)
    for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
        if 0 <= rr < size and 0 <= cc < size and st[rr, cc] != who:
            return False
    bad = edge = 0
    for rr, cc in ((r - 1, c - 1), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c + 1)):
        if not (0 <= rr < size and 0 <= cc < size):
            edge = 1
        elif st[rr, cc] == -who:
            bad += 1
    return bad + edge < 2


def score_string(x):
    return "0" if x == 0 else (f"B+{x:.1f}" if x > 0 else f"W+{-x:.1f}")


def superko_points(s):
    """How many points the side to move may not take because of superko alone."""
    b = s.board_tuple
    n = s.size
    return sum(bd.legal_reason(b, coords.to_padded(m, n), s.to_play) == bd.SUPERKO for m in range(n * n))


def play_random_game(size, seed, komi=7.5, max_moves=None):
    """Random game to two passes, checked against GNU Go after every move."""
    rng = np.random.default_rng(seed)
    s = bd.new_game(size, komi)
    stats = {"captures": 0, "superko_points": 0, "dead": 0}
    with gnugo(size, komi) as eng:
        check_same(eng, s)
        while not s.is_over and (max_moves is None or s.move_number < max_moves):
            st = bd.stones(s)
            legal = np.flatnonzero(bd.legal_moves(s)[:-1])
            choices = [m for m in legal if not own_eye(st, m, size, s.to_play)]
            m = int(rng.choice(choices)) if choices else size * size
            eng.send(f"play {colour_name(s.to_play)} {coords.to_gtp(m, size)}")
            s = bd.play(s, m)
            check_same(eng, s)
            stats["superko_points"] += superko_points(s)
        stats["captures"] = sum(s.captures)
        if s.is_over:
            # At the end of such a game almost every group lives with its own
            # eyes and every empty point is an eye, so GNU Go's dead-stone
            # list is empty and its Chinese final_score (stones + surrounded
            # points - komi) is exactly the Tromp-Taylor score. Rarely, on
            # small boards, a superko ban blocks a capture and GNU Go calls
            # the uncapturable stones dead; it then also hands the
            # neighbouring empty points to the other side by its own
            # territory judgement, which no area count reproduces. Such games
            # are counted in stats["dead"] (the callers bound how many) and
            # only their stones and legal moves are compared.
            dead = eng.send("final_status_list dead")
            stats["dead"] = len(dead.split())
            if not dead:
                assert eng.send("final_score") == score_string(bd.area_score(s)), bd.render(s)
    return s, stats


@pytest.mark.gnugo
@pytest.mark.subprocess
def test_random_games_small_boards_agree_with_gnugo():
    # Small boards are where kos, superko cycles and suicide points are common.
    totals = {"captures": 0, "superko_points": 0}
    plain = 0
    for seed in range(40):
        s, stats = play_random_game(5 if seed < 30 else 7, seed, komi=0.5)
        assert s.is_over
        for k in totals:
            totals[k] += stats[k]
        plain += stats["dead"] == 0
    assert plain >= 36  # nearly all scores compared, with no dead stones at all
    assert totals["captures"] > 0
    assert totals["superko_points"] > 0  # the check really met superko bans


@pytest.mark.gnugo
@pytest.mark.subprocess
@pytest.mark.parametrize("seed", range(4))
def test_random_games_9x9_agree_with_gnugo(seed):
    for k in range(5):
        s, stats = play_random_game(9, 10 * seed + k)
        assert s.is_over
        assert stats["captures"] > 0
        assert stats["dead"] == 0


@pytest.mark.gnugo
@pytest.mark.subprocess
@pytest.mark.parametrize("seed", range(3))
def test_random_game_19x19_agrees_with_gnugo(seed):
    s, stats = play_random_game(19, 1234 + seed)
    assert s.is_over and s.move_number > 300
    assert stats["captures"] > 0
    assert stats["dead"] == 0


@pytest.mark.gnugo
@pytest.mark.subprocess
def test_gnugo_superko_send_two_return_one():
    """GNU Go forbids the positional-superko recapture, as we do (see
    test_board.SEND_TWO: the position after B1 would repeat the one after D1)."""
    moves = [("white", "A2"), ("white", "B2"), ("black", "C2"), ("black", "B1"), ("black", "D1"),
             ("black", "A1"), ("white", "C1")]
    s = bd.new_game(5, 0.5)
    with gnugo(5, 0.5) as eng:
        for colour, v in moves:
            eng.send(f"play {colour} {v}")
            s = bd.play(s, coords.from_gtp(v, 5), bd.BLACK if colour == "black" else bd.WHITE)
        assert s.to_play == bd.BLACK and s.captures == (0, 2)
        b1 = coords.from_gtp("B1", 5)
        assert not bd.legal_moves(s)[b1]
        with pytest.raises(bd.IllegalMove, match="superko"):
            bd.play(s, b1)
        assert "B1" not in eng.send("all_legal black").split()
        assert eng.send("is_legal black B1") == "0"
        with pytest.raises(GtpError, match="illegal move"):
            eng.send("play black B1")
        check_same(eng, s)


@pytest.mark.gnugo
@pytest.mark.subprocess
def test_gnugo_scores_a_seki_like_us():
    """The seki of test_board.SEKI set up on both boards: the same area
    score, the two shared liberties counting for nobody."""
    s = bd.parse_diagram(SEKI, komi=0.5)
    st = bd.stones(s)
    with gnugo(7, 0.5) as eng:
        for m in np.flatnonzero(st.ravel()):
            eng.send(f"play {colour_name(st.flat[m])} {coords.to_gtp(int(m), 7)}")
        assert eng.send("final_status_list dead") == ""
        assert set(eng.send("final_status_list seki").split()) >= {"C7", "E7"}
        assert eng.send("final_score") == score_string(bd.area_score(s)) == "B+2.5"
