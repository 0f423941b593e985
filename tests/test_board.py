"""Rules of alphalite.go.board: golden diagrams and random-play invariants."""

import numpy as np
import pytest

from alphalite.go import board as bd
from alphalite.go import coords


def P(text, **kw):
    return bd.parse_diagram(text, **kw)


def mv(state, vertex, color=None):
    return bd.play(state, coords.from_gtp(vertex, state.size), color)


def grid(text):
    return bd.stones(P(text))


def illegal(state, vertex, reason):
    with pytest.raises(bd.IllegalMove) as info:
        mv(state, vertex)
    assert info.value.reason == reason
    assert not bd.legal_moves(state)[coords.from_gtp(vertex, state.size)]


# ------------------------------------------------------------ captures


def test_capture_in_the_middle():
    s = P("""
        . . . . .
        . . X . .
        . X O X .
        . . . . .
        . . . . .""")
    s = mv(s, "C2")
    assert (bd.stones(s) == grid("""
        . . . . .
        . . X . .
        . X . X .
        . . X . .
        . . . . .""")).all()
    assert s.captures == (1, 0)
    assert s.to_play == bd.WHITE


def test_capture_on_the_edge_two_stones():
    s = P("""
        X O O . .
        . X X . .
        . . . . .
        . . . . .
        . . . . .""")
    assert bd.liberties(s)[0, 1] == 1
    s = mv(s, "D5")
    assert (bd.stones(s) == grid("""
        X . . X .
        . X X . .
        . . . . .
        . . . . .
        . . . . .""")).all()
    assert s.captures == (2, 0)
    assert bd.liberties(s)[0, 0] == 2


def test_capture_in_the_corner_by_white():
    s = P("""
        . . . . .
        . . . . .
        O . . . .
        X O . . .
        X . . . .""", to_play=bd.WHITE)
    assert bd.liberties(s)[4, 0] == 1
    s = mv(s, "B1")
    assert (bd.stones(s) == grid("""
        . . . . .
        . . . . .
        O . . . .
        . O . . .
        . O . . .""")).all()
    assert s.captures == (0, 2)
    assert s.ko_point is None


def test_snapback():
    s = P("""
        . . . . .
        . . . . .
        X X X . .
        O O O X .
        O . . O .""")
    s = mv(s, "C1")  # throw-in: one liberty, captures nothing
    assert s.captures == (0, 0)
    s = mv(s, "B1")  # white takes the stone...
    assert s.captures == (0, 1)
    assert s.ko_point is None  # took one stone but its group is big: no ko
    s = mv(s, "C1")  # ...and black takes five back
    assert s.captures == (5, 1)
    assert (bd.stones(s) == grid("""
        . . . . .
        . . . . .
        X X X . .
        . . . X .
        . . X O .""")).all()


# ------------------------------------------------------------ suicide

SINGLE = """
    . X .
    X . X
    . X ."""

MULTI = """
    . X X .
    X O . X
    . X X .
    . . . ."""


def test_single_stone_suicide_forbidden():
    s = P(SINGLE, to_play=bd.WHITE)
    illegal(s, "B2", "suicide")


def test_single_stone_suicide_allowed_is_removed():
    s = P(SINGLE, to_play=bd.WHITE, suicide=True, superko=False)
    assert bd.legal_moves(s)[4]
    t = mv(s, "B2")
    assert (bd.stones(t) == bd.stones(s)).all()
    assert t.captures == (1, 0)  # the suicided stone counts for black
    assert t.to_play == bd.BLACK and t.hash == s.hash
    # Under positional superko the same move repeats the position.
    s = P(SINGLE, to_play=bd.WHITE, suicide=True, superko=True)
    illegal(s, "B2", "superko")


def test_multi_stone_suicide_forbidden():
    s = P(MULTI, to_play=bd.WHITE)
    illegal(s, "C3", "suicide")


@pytest.mark.parametrize("superko", [True, False])
def test_multi_stone_suicide_allowed_removes_group(superko):
    s = P(MULTI, to_play=bd.WHITE, suicide=True, superko=superko)
    t = mv(s, "C3")
    assert (bd.stones(t) == grid("""
        . X X .
        X . . X
        . X X .
        . . . .""")).all()
    assert t.captures == (2, 0)
    assert bd.liberties(t)[0, 1] == 4  # the black groups got their liberties back


def test_capture_is_not_suicide():
    s = P("""
        . X O .
        X O . O
        . X O .
        . . . .""")
    t = mv(s, "C3")  # no liberty of its own, but captures B3
    assert t.captures == (1, 0)
    assert bd.stones(t)[1, 1] == 0


# ------------------------------------------------------------ ko

KO = """
    . . . . .
    . X O . .
    X O . O .
    . X O . .
    . . . . ."""


@pytest.mark.parametrize("superko", [False, True])
def test_simple_ko_and_its_release(superko):
    s = P(KO, superko=superko)
    s = mv(s, "C3")
    assert s.captures == (1, 0)
    assert s.ko_point == coords.from_gtp("B3", 5)
    illegal(s, "B3", "ko")
    s = mv(s, "E1")  # white elsewhere
    assert s.ko_point is None
    s = mv(s, "A1")  # black elsewhere, does not fill the ko
    assert bd.legal_moves(s)[coords.from_gtp("B3", 5)]
    s = mv(s, "B3")  # the ban has lapsed
    assert s.captures == (1, 1)
    assert bd.stones(s)[2, 2] == 0


# Send two, return one: black throws in at A1 (two stones in atari), white
# takes both at C1, black retakes one at B1 -- the position after B1 is the
# starting one. Simple ko allows it (white took two stones); positional
# superko does not.
SEND_TWO = """
    . . . . .
    . . . . .
    . . . . .
    O O X . .
    . X . X ."""


def test_send_two_return_one_simple_ko_allows():
    s0 = P(SEND_TWO, superko=False)
    s = mv(mv(s0, "A1"), "C1")
    assert s.captures == (0, 2)
    assert s.ko_point is None
    s = mv(s, "B1")
    assert (bd.stones(s) == bd.stones(s0)).all()
    assert s.hash == s0.hash


def test_send_two_return_one_superko_forbids():
    s0 = P(SEND_TWO, superko=True)
    s = mv(mv(s0, "A1"), "C1")
    illegal(s, "B1", "superko")
    # Elsewhere is still fine, and after that the recapture makes a new position.
    s = mv(mv(s, "E5"), "E4")
    assert bd.legal_moves(s)[coords.from_gtp("B1", 5)]
    mv(s, "B1")


# ------------------------------------------------------------ scoring, end

SEKI = """
    . X O . X O .
    X X O . X O O
    . X O O X O .
    X X X X O O O
    . X . X O . O
    X X X X O O O
    . X . X O . O"""


def test_seki_area_count():
    s = P(SEKI, komi=0.5)
    # 19 black stones + 6 eyes, 18 white stones + 4 eyes; the two shared
    # liberties of the seki belong to nobody.
    assert bd.area_counts(s) == (25, 22)
    assert bd.area_score(s) == 2.5
    # Either side filling a shared liberty is legal self-atari.
    t = mv(s, "D7")
    assert bd.liberties(t)[0, 3] == 1
    assert bd.area_counts(t) == (26, 22)


def test_empty_board_and_lone_stone_area():
    s = bd.new_game(9, komi=7.5)
    assert bd.area_counts(s) == (0, 0)
    assert bd.area_score(s) == -7.5
    s = mv(s, "E5")
    assert bd.area_counts(s) == (81, 0)


def test_pass_pass_ends_the_game():
    s = bd.new_game(5)
    s = bd.play(s, 25)
    assert not s.is_over and s.passes == 1
    s = mv(s, "C3")  # a move resets the pass count
    assert s.passes == 0
    s = bd.play(bd.play(s, 25), 25)
    assert s.is_over
    assert not bd.legal_moves(s).any()
    with pytest.raises(bd.IllegalMove) as info:
        bd.play(s, 0)
    assert info.value.reason == "game over"
    with pytest.raises(bd.IllegalMove):
        bd.play(s, 25)


def test_illegal_move_leaves_state_untouched():
    s = mv(P(KO), "C3")
    before = [a.copy() for a in s.board_tuple]
    snap = (s.to_play, s.move_number, s.captures, s.hash, s.ko_point, s.last_moves)
    for vertex, reason in (("B3", "ko"), ("C3", "occupied")):
        with pytest.raises(bd.IllegalMove) as info:
            mv(s, vertex)
        assert info.value.reason == reason
    for bad in (-1, 26, 1.5, "C3", True):
        with pytest.raises(bd.IllegalMove):
            bd.play(s, bad)
    s2 = P(MULTI, to_play=bd.WHITE)
    b2 = [a.copy() for a in s2.board_tuple]
    with pytest.raises(bd.IllegalMove):
        mv(s2, "C3")
    for a, b in zip(before, s.board_tuple):
        assert np.array_equal(a, b)
    for a, b in zip(b2, s2.board_tuple):
        assert np.array_equal(a, b)
    assert snap == (s.to_play, s.move_number, s.captures, s.hash, s.ko_point, s.last_moves)
    # A legal move returns a new state and leaves the old one alone too.
    t = mv(s, "E1")
    assert t is not s and s.to_play == snap[0] and bd.stones(s)[4, 4] == 0


@pytest.mark.parametrize("size", range(2, 26))
def test_sizes_accepted(size):
    s = bd.new_game(size)
    assert bd.stones(s).shape == (size, size)
    assert bd.legal_moves(s).shape == (size * size + 1,)
    assert bd.legal_moves(s).all()
    s = bd.play(s, size * size - 1)
    assert bd.stones(s)[size - 1, size - 1] == bd.BLACK


@pytest.mark.parametrize("size", [1, 26])
def test_sizes_rejected(size):
    with pytest.raises(ValueError, match=r"board size must be an integer in 2\.\.25"):
        bd.new_game(size)


def test_diagram_round_trip_and_bad_setup():
    s = P(KO)
    text = bd.render(s)
    assert "Black to play" in text
    with pytest.raises(ValueError):
        P("X O\nO .")  # black stone without liberties
    with pytest.raises(ValueError):
        P(". Z\n. .")


# ------------------------------------------------------------ random play invariants


def flood_liberties(st):
    """Plain-Python liberties per point (0 where empty)."""
    n = st.shape[0]
    out = np.zeros((n, n), np.int16)
    done = np.zeros((n, n), bool)
    for r in range(n):
        for c in range(n):
            if st[r, c] == 0 or done[r, c]:
                continue
            group, libs, todo = [], set(), [(r, c)]
            done[r, c] = True
            while todo:
                y, x = todo.pop()
                group.append((y, x))
                for yy, xx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                    if 0 <= yy < n and 0 <= xx < n:
                        if st[yy, xx] == 0:
                            libs.add((yy, xx))
                        elif st[yy, xx] == st[r, c] and not done[yy, xx]:
                            done[yy, xx] = True
                            todo.append((yy, xx))
            for y, x in group:
                out[y, x] = len(libs)
    return out


def scratch_hash(st):
    zob = bd.zobrist_table()
    n = st.shape[0]
    h = np.int64(0)
    for r in range(n):
        for c in range(n):
            if st[r, c] != 0:
                h ^= zob[0 if st[r, c] == 1 else 1, coords.to_padded(r * n + c, n)]
    return int(h)


def own_eye(st, r, c, who):
    n = st.shape[0]
    for yy, xx in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
        if 0 <= yy < n and 0 <= xx < n and st[yy, xx] != who:
            return False
    return True


def random_game_check(size, superko, suicide, seed, check_every):
    rng = np.random.default_rng(seed)
    s = bd.new_game(size, superko=superko, suicide=suicide)
    placed = {1: 0, -1: 0}
    seen_reasons = set()
    ply = 0
    while not s.is_over and ply < 3 * size * size:
        mask = bd.legal_moves(s)
        st = bd.stones(s)
        if ply % check_every == 0:
            for m in range(size * size + 1):
                try:
                    bd.play(s, m)
                    ok = True
                except bd.IllegalMove as e:
                    ok = False
                    seen_reasons.add(e.reason)
                    if m < size * size and st.flat[m] != 0:
                        assert e.reason == "occupied"
                assert ok == mask[m], (m, s)
        assert np.array_equal(bd.liberties(s), flood_liberties(st))
        assert s.hash == scratch_hash(st)
        nb, nw = int((st == 1).sum()), int((st == -1).sum())
        assert nb == placed[1] - s.captures[1]
        assert nw == placed[-1] - s.captures[0]
        choices = [m for m in np.flatnonzero(mask[:-1]) if not own_eye(st, *divmod(m, size), s.to_play)]
        m = int(rng.choice(choices)) if choices else size * size
        if m < size * size:
            placed[s.to_play] += 1
        s = bd.play(s, m)
        ply += 1
    return s, seen_reasons


@pytest.mark.parametrize("superko, suicide", [(True, False), (False, False), (True, True)])
def test_random_play_invariants(superko, suicide):
    reasons = set()
    captured = 0
    for seed in range(12):
        s, r = random_game_check(5, superko, suicide, seed, 1)
        reasons |= r
        captured += sum(s.captures)
    for seed in range(2):
        s, r = random_game_check(9, superko, suicide, 100 + seed, 1)
        reasons |= r
    s, r = random_game_check(19, superko, suicide, 200, 25)
    reasons |= r
    assert s.move_number > 200
    assert captured > 0
    assert "occupied" in reasons and "ko" in reasons
    if not suicide:
        assert "suicide" in reasons


def test_replay_kernel_matches_play_and_stops_at_illegal():
    rng = np.random.default_rng(3)
    t = bd.new_game(9)
    seq = []
    for _ in range(60):
        legal = np.flatnonzero(bd.legal_moves(t))
        m = int(rng.choice(legal[:-1])) if len(legal) > 1 else 81
        seq.append(m)
        t = bd.play(t, m)
    b = bd.new_game(9).copy_tuple(extra_history=100)
    assert bd.replay(b, np.array(seq, np.int64), len(seq)) == len(seq)
    assert np.array_equal(b.color, t.board_tuple.color)
    assert b.meta[bd.M_HASH] == t.hash
    bad = np.array(seq[:10] + [seq[3]] + seq[11:], np.int64)  # replays an occupied point
    b = bd.new_game(9).copy_tuple(extra_history=100)
    assert bd.replay(b, bad, len(bad)) == 10


def _group_size(stones, r, c):
    seen, todo, col = {(r, c)}, [(r, c)], stones[r, c]
    while todo:
        y, x = todo.pop()
        for v, u in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
            if 0 <= v < stones.shape[0] and 0 <= u < stones.shape[1] and (v, u) not in seen and stones[v, u] == col:
                seen.add((v, u))
                todo.append((v, u))
    return len(seen)


def test_self_atari_matches_playing_the_move():
    """is_self_atari against the oracle: play the move, count the liberties
    and stones of the group it is in (captures, kos and merges included)."""
    rng = np.random.default_rng(3)
    n = 9
    checked = {True: 0, False: 0}
    for _ in range(12):
        s = bd.new_game(n, 7.5)
        for _ in range(int(rng.integers(20, 90))):
            legal = np.flatnonzero(bd.legal_moves(s)[:-1])
            if legal.size == 0:
                break
            s = bd.play(s, int(rng.choice(legal)))
            stone = s.to_play
            for m in np.flatnonzero(bd.legal_moves(s)[:-1]):
                after = bd.play(s, int(m))
                r, c = divmod(int(m), n)
                libs = int(bd.liberties(after)[r, c])
                taken = (bd.stones(s) == -stone).sum() - (bd.stones(after) == -stone).sum()
                size = _group_size(bd.stones(after), r, c)
                if taken >= 2 and taken >= size:
                    libs = 0  # a capture that takes at least what it puts at risk does not count
                lone = size == 1
                p = coords.to_padded(int(m), n)
                b = s.copy_tuple()
                assert bd.is_self_atari(b, p, stone, False) == (libs == 1), (m, str(s))
                assert bd.is_self_atari(b, p, stone, True) == (libs == 1 and not lone)
                checked[libs == 1] += 1
    assert checked[True] > 50 and checked[False] > 1000


def test_self_atari_counts_kos_not_captures_of_two_stones():
    s = bd.parse_diagram("""
        . X O . .
        X O . O .
        . X O . .
        . . . . .
        . . . . .
    """)
    b = s.copy_tuple()
    ko = coords.to_padded(1 * 5 + 2, 5)  # black takes the ko at (1,2): one liberty after
    assert bd.is_self_atari(b, ko, bd.BLACK, False)
    assert not bd.is_self_atari(b, ko, bd.BLACK, True)  # a lone stone
    v = bd.parse_diagram("""
        . O O O X
        O X X X .
        O . . . .
        O . . . .
        . . . . .
    """)
    # black at (0,0) takes three stones and keeps one liberty: no ko, not counted
    assert bd.liberties(bd.play(v, 0))[0, 0] == 1
    assert not bd.is_self_atari(v.copy_tuple(), coords.to_padded(0, 5), bd.BLACK, False)
    # black at C5 takes two stones and keeps one liberty, and white takes
    # three back at B5 (a snapback): counted, and it saves nothing
    w = bd.parse_diagram("""
        O O . X X
        X X O O O
        . . . . .
        . . . . .
        . . . . .
    """)
    c5 = coords.from_gtp("C5", 5)
    assert bd.liberties(bd.play(w, c5))[0, 2] == 1
    assert bd.is_self_atari(w.copy_tuple(), coords.to_padded(c5, 5), bd.BLACK, False)
    assert not bd.candidates(w, no_self_atari=True)[c5]
    snap = bd.play(bd.play(w, c5), coords.from_gtp("B5", 5))
    assert (bd.stones(snap)[0] == [0, -1, 0, 0, 0]).all()
