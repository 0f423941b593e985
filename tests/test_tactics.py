"""Ladder reader and move facts on hand-checked diagrams."""

import numpy as np

from alphalite.go import board, coords
from alphalite.go.tactics import bad_self_atari, dead_shape, ladder_captured, move_facts
from alphalite.nn import features

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
    assert B.libs[B.head[_pt(8, 2)]] == 1
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


def _planes(d, to_play, preset="alphago48"):
    return features.encode(_state(d, to_play), preset)


def test_alphago_planes_on_the_ladder():
    x = _planes(LADDER, board.BLACK)
    assert x.shape == (9, 9, 48)
    assert x[3, 4, 0] == 1 and x[4, 4, 1] == 1 and x[0, 0, 2] == 1
    assert (x[..., 3] == 1).all() and (x[..., 47] == 0).all()
    # setup stones count as old: turns-since plane 11
    assert x[4, 4, 11] == 1 and x[..., 4:11].sum() == 0
    # O at (4,4) has 2 liberties, X (3,4) 3 (it touches O), X (5,5) 4
    assert x[4, 4, 13] == 1 and x[3, 4, 14] == 1 and x[5, 5, 15] == 1
    # black at (4,5): captures 0; the new (4,5)+(5,5) group has 5 liberties; ladder capture
    assert x[4, 5, 20] == 1 and x[4, 5, 40] == 1 and x[4, 5, 44] == 1
    # black at (5,4) ataris too and also ladders it (the chase runs up-right)
    assert x[5, 4, 44] == 1
    # the ladder capture plane is exactly those two points
    assert x[..., 44].sum() == 2
    assert x[..., 45].sum() == 0
    # every empty point is legal and sensible here
    assert (x[..., 46] == x[..., 2]).all()


def test_alphago_capture_self_atari_escape_and_history():
    rows = LADDER.strip().splitlines()
    rows[7] = ".O......."
    rows[1] = ".......O."
    s = board.play(_state("\n".join(rows), board.BLACK), coords.to_flat(4, 5, 9))
    x = features.encode(s, "alphago48")
    assert x[4, 5, 4] == 1 and x[4, 4, 11] == 1  # played 1 ply ago; a setup stone
    assert x[4, 4, 12] == 1  # O in atari
    assert x[5, 4, 45] == 1 and x[..., 45].sum() == 1  # the extension escapes
    d = """
.........
.........
.........
.........
....O....
...OX....
.........
....O....
.........
"""
    y = _planes(d, board.WHITE)
    assert y[5, 5, 20] == 1 and y[5, 5, 38] == 1  # no capture; 3 liberties
    d = d.replace("...OX....", "...OXO...").replace("""
.........
....O....""", """
...O.....
....O....""")
    y = _planes(d, board.WHITE)
    assert y[6, 4, 21] == 1  # white at (6,4) takes one stone
    # black at (6,4): X (5,4)+(6,4) keeps only (6,5): self-atari of 2 stones, 1 liberty
    z = _planes(d, board.BLACK)
    assert z[6, 4, 29] == 1 and z[6, 4, 36] == 1 and z[6, 4, 20] == 1
    assert z[..., 28:36].sum() == 1 + z[..., 28].sum()


def test_alphago40_is_alphago48_without_history():
    s = board.play(_state(LADDER, board.BLACK), coords.to_flat(4, 5, 9))
    a = features.encode(s, "alphago48")
    b = features.encode(s, "alphago40")
    assert np.array_equal(b, np.concatenate([a[..., :4], a[..., 12:]], axis=-1))


def test_alphago_planes_commute_with_symmetries():
    rng = np.random.default_rng(3)
    s = board.new_game(9)
    for _ in range(40):
        legal = np.flatnonzero(board.legal_moves(s))
        s = board.play(s, int(rng.choice(legal[legal < 81])))
    s = board.from_stones(board.stones(s), to_play=s.to_play)  # no history to transform
    x = features.encode(s, "alphago48")
    for k in range(8):
        t = board.from_stones(features.transform_planes(board.stones(s)[..., None], k)[..., 0],
                              to_play=s.to_play)
        y = features.encode(t, "alphago48")
        assert np.array_equal(y, features.transform_planes(x, k)), k


def test_long_19x19_ladder_reads_to_the_edge():
    # the ladder shape in the middle of 19x19: both diagonal chases run about
    # 9 ataris to the edge; a white stone on each far diagonal breaks it
    rows = [["."] * 19 for _ in range(19)]
    rows[8][9] = rows[9][8] = rows[10][10] = "X"
    rows[9][9] = "O"
    d = "\n".join("".join(r) for r in rows)
    s = board.parse_diagram(d, to_play=board.BLACK)
    g = coords.to_padded(coords.to_flat(9, 9, 19), 19)
    assert ladder_captured(s.board_tuple, g)
    rows[16][2] = rows[2][16] = "O"
    s = board.parse_diagram("\n".join("".join(r) for r in rows), to_play=board.BLACK)
    assert not ladder_captured(s.board_tuple, g)


def test_a_capture_that_leaves_the_runner_laddered_is_read_on():
    """White G1 in atari can take F1 (in atari at E1), but is laddered
    after it: read on, the capture does not count as an escape."""
    d = """
        O O X X . X .
        . . . O . O X
        O . . . X X .
        . O . . X . .
        O . O . . . X
        . . . X X O .
        . . . . . X O
    """
    s = board.parse_diagram(d, to_play=board.WHITE)
    g = coords.to_padded(coords.from_gtp("G1", 7), 7)
    B = s.board_tuple
    assert B.libs[B.head[g]] == 1 and B.libs[B.head[coords.to_padded(coords.from_gtp("F1", 7), 7)]] == 1
    assert ladder_captured(B, g)


def test_a_suicide_loses_its_stones_and_has_no_liberty_plane():
    """Under rules that allow suicide, white at B5 takes its two stones off:
    0 liberties, 2 stones lost (the self-atari size plane), no
    liberties-after plane."""
    b = np.zeros((5, 5), np.int8)
    b[0, 0] = -1
    b[1, 0] = b[1, 1] = b[0, 2] = 1
    s = board.from_stones(b, to_play=board.WHITE, suicide=True)
    facts = np.zeros(6, np.int64)
    p = coords.to_padded(1, 5)
    assert move_facts(s.board_tuple, tactics_clone(s), p, board.WHITE, facts) == 1
    assert list(facts) == [1, 0, 0, 2, 0, 0]
    x = features.encode(s, "alphago48")
    assert x[0, 1, 8 + 20 + 1] == 1 and not x[0, 1, 8 + 28: 8 + 36].any() and x[0, 1, 8 + 20: 8 + 28].sum() == 1


def tactics_clone(s):
    from alphalite.go.tactics import clone

    return clone(s.board_tuple)


def _bf_group(s, m):
    """(stones, liberties) of the group at flat ``m``, by flood fill."""
    n, st = s.size, board.stones(s).ravel()
    seen, todo, libs = {m}, [m], set()
    while todo:
        r, c = divmod(todo.pop(), n)
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= rr < n and 0 <= cc < n:
                v = rr * n + cc
                if st[v] == 0:
                    libs.add(v)
                elif st[v] == st[m] and v not in seen:
                    seen.add(v)
                    todo.append(v)
    return seen, libs


def _bf_play(s, m, col):
    try:
        return board.play(s, m, col)
    except board.IllegalMove:
        return None


def _bf_runner_escapes(s, g, col, depth):
    """Runner (colour ``col``, group at ``g``) in atari, to move: any reply
    (its liberty, or the liberty of an adjacent chaser group in atari) that
    gets three liberties, or two the chaser cannot ladder."""
    stones, libs = _bf_group(s, g)
    opts, n, st = set(libs), s.size, board.stones(s).ravel()
    for q in stones:
        r, c = divmod(q, n)
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= rr < n and 0 <= cc < n and st[rr * n + cc] == -col:
                _, l2 = _bf_group(s, rr * n + cc)
                if len(l2) == 1:
                    opts |= l2
    for m in opts:
        t = _bf_play(s, m, col)
        if t is not None:
            libs_after = len(_bf_group(t, g)[1])
            if libs_after >= 3 or (libs_after == 2 and not _bf_chaser_captures(t, g, col, depth)):
                return True
    return False


def _bf_chaser_captures(s, g, col, depth):
    if depth <= 0:
        return False
    for m in sorted(_bf_group(s, g)[1]):
        t = _bf_play(s, m, -col)
        if t is not None and len(_bf_group(t, g)[1]) == 1 and not _bf_runner_escapes(t, g, col, depth - 1):
            return True
    return False


def test_ladder_reader_agrees_with_a_brute_force_reader():
    """On random 7x7 games every group with one or two liberties gets the
    same verdict from the reader as from a plain recursive read of every
    runner reply (captures of chasers in atari included)."""
    checked = {True: 0, False: 0}
    for seed in range(8):
        rng = np.random.default_rng(seed)
        s = board.new_game(7, 0.5)
        for _ in range(int(rng.integers(10, 49))):
            legal = np.flatnonzero(board.legal_moves(s)[:-1])
            if legal.size == 0:
                break
            s = board.play(s, int(rng.choice(legal)))
            st = board.stones(s).ravel()
            done = set()
            for g in map(int, np.flatnonzero(st)):
                if g in done:
                    continue
                stones, libs = _bf_group(s, g)
                done |= stones
                col = int(st[g])
                if len(libs) not in (1, 2):
                    continue
                t = board.with_to_play(s, col if len(libs) == 1 else -col)
                want = (not _bf_runner_escapes(t, g, col, 40)) if len(libs) == 1 else \
                    _bf_chaser_captures(t, g, col, 40)
                assert ladder_captured(t.board_tuple, coords.to_padded(g, 7)) == want, (coords.to_gtp(g, 7), str(t))
                checked[want] += 1
    assert checked[True] > 100 and checked[False] > 100, checked


def _shape(cells, W=11):
    return np.array([(r + 1) * W + c + 1 for r, c in cells], np.int64)


def test_dead_eye_shapes():
    """Spaces whose owner cannot make two eyes if the other side plays
    first (the nakade shapes), and the living ones of the same sizes."""
    dead = [[(0, 0)], [(0, 0), (0, 1)], [(0, 0), (0, 1), (0, 2)], [(0, 0), (0, 1), (1, 1)],
            [(0, 0), (0, 1), (1, 0), (1, 1)],  # square four
            [(0, 0), (0, 1), (0, 2), (1, 1)],  # pyramid four
            [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)],  # bulky five
            [(0, 1), (1, 0), (1, 1), (1, 2), (2, 1)],  # cross five
            [(0, 1), (1, 0), (1, 1), (1, 2), (2, 1), (2, 2)]]  # rabbity six
    alive = [[(0, 0), (0, 1), (0, 2), (0, 3)],  # straight four
             [(0, 0), (1, 0), (2, 0), (2, 1)],  # bent four
             [(0, 0), (0, 1), (1, 1), (1, 2)],  # zigzag four
             [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)],
             [(0, 0), (0, 1), (0, 2), (1, 1), (2, 1)],  # a T of five
             [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)],  # a block of six
             [(0, c) for c in range(7)]]
    for cells in dead:
        assert dead_shape(_shape(cells), len(cells), 11), cells
    for cells in alive:
        assert not dead_shape(_shape(cells), len(cells), 11), cells


def test_bad_self_atari_in_a_seki_and_a_nakade():
    """Filling a liberty of test_board.SEKI gives a group away for nothing,
    for either side (White's five would leave Black a dead shape, but Black
    has eyes enough elsewhere), and so it does when Black's outer group
    lives by territory instead of eyes. In a space that is all a White group
    has left, a two-stone self-atari that leaves a dead shape is a nakade
    and allowed; not while White keeps an eye elsewhere, nor in the open.
    A capture, a lone throw-in and a move that keeps two liberties are
    never bad."""
    from tests.test_board import SEKI

    for diagram in (SEKI, SEKI_BY_TERRITORY):
        s = board.parse_diagram(diagram, komi=0.5).board_tuple
        for stone in (board.BLACK, board.WHITE):
            for r, c in ((0, 3), (1, 3)):  # D7, D6
                assert bad_self_atari(s, _pt(r, c, 7), stone), (r, c, stone)
    s = board.parse_diagram(NAKADE).board_tuple
    assert not bad_self_atari(s, _pt(2, 3, 7), board.BLACK)  # two stones in atari; White's space of three dies
    assert not bad_self_atari(s, _pt(2, 4, 7), board.BLACK)  # a lone stone in atari: a throw-in
    rows = NAKADE.strip().splitlines()
    rows[4:] = ["X O . O X X X", "X O O O X . .", "X X X X X . ."]  # White's second eye at C3
    s = board.parse_diagram("\n".join(rows)).board_tuple
    assert bad_self_atari(s, _pt(2, 3, 7), board.BLACK)
    s = board.parse_diagram(NAKADE.replace("X X X X X X X", ". . . . . . .")).board_tuple
    assert bad_self_atari(s, _pt(2, 3, 7), board.BLACK)  # White's ring keeps outside liberties
    opened = """
        . . . . . . .
        . . O O . . .
        . O X X O . .
        . . O . O . .
        . . . . . . .
        . . . . . . .
        . . . . . . ."""
    s = board.parse_diagram(opened).board_tuple
    assert bad_self_atari(s, _pt(3, 3, 7), board.BLACK)  # two stones in atari made three, in the open
    big = """
        . . . . . . .
        O O O O O O .
        X X X X X O .
        . . X X X O .
        O O O O O O .
        . . . . . . .
        . . . . . . ."""
    s = board.parse_diagram(big).board_tuple
    assert bad_self_atari(s, _pt(3, 0, 7), board.BLACK)  # nine stones in atari, capturing nothing
    assert not bad_self_atari(s, _pt(3, 0, 7), board.WHITE)  # only takes a liberty
    s = board.parse_diagram(big.replace(". . X X X O .", "O . X X X O .")).board_tuple
    assert not bad_self_atari(s, _pt(3, 1, 7), board.WHITE)  # a capture


# test_board.SEKI with Black's outer group alive by territory, not one-point eyes
SEKI_BY_TERRITORY = """
    . X O . X O .
    . X O . X O O
    . X O O X O .
    . X X X O O O
    . . X X O . O
    X X X X O O O
    . . . X O . O"""

# a White ring whose liberties are all inside: three points, one Black stone in them
NAKADE = """
    X X X X X X X
    X O O O O O X
    X O X . . O X
    X O O O O O X
    X X X X X X X
    . . . . . . .
    . . . . . . ."""


def _bad_self_atari_by_hand(state, m, stone, n):
    """``bad_self_atari`` read from its docstring by playing the move on a
    copy: None where it is illegal."""
    before = board.stones(state)
    try:
        after = board.stones(board.play(board.with_to_play(state, stone), m, stone))
    except board.IllegalMove:
        return None
    if ((before == -stone) & (after == 0)).any():
        return False  # a capture

    def chain(grid, r, c):
        out, todo = {(r, c)}, [(r, c)]
        while todo:
            a, b = todo.pop()
            for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                if 0 <= x < n and 0 <= y < n and grid[x, y] == grid[r, c] and (x, y) not in out:
                    out.add((x, y))
                    todo.append((x, y))
        return out

    def empty_around(grid, pts):
        return {(x, y) for a, b in pts for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1))
                if 0 <= x < n and 0 <= y < n and grid[x, y] == 0}

    r, c = divmod(m, n)
    group = chain(after, r, c)
    libs = empty_around(after, group)
    if len(group) < 2 or len(libs) >= 2:
        return False
    if len(group) > 6 or not dead_shape(np.array([_pt(x, y, n) for x, y in group], np.int64),
                                        len(group), n + 2):
        return True
    around = set()
    for a, b in group:
        for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
            if 0 <= x < n and 0 <= y < n and before[x, y] == -stone:
                around |= chain(before, x, y)
    return bool(empty_around(before, around) - {(r, c)} - libs)


def test_bad_self_atari_agrees_with_a_reading_by_hand():
    """Every empty point, both colours, along random 7x7 games."""
    rng = np.random.default_rng(1)
    n = 7
    seen = {True: 0, False: 0}
    for _ in range(6):
        s = board.new_game(n, 0.5)
        for _ in range(70):
            for m in np.flatnonzero(board.stones(s).ravel() == 0):
                for stone in (board.BLACK, board.WHITE):
                    want = _bad_self_atari_by_hand(s, int(m), stone, n)
                    if want is not None:
                        got = bool(bad_self_atari(s.board_tuple, _pt(*divmod(int(m), n), n), stone))
                        assert got == want, (board.render(s), coords.to_gtp(int(m), n), stone)
                        seen[want] += 1
            legal = [m for m in range(n * n) if board.is_legal(s, m)]
            if not legal:
                break
            s = board.play(s, int(rng.choice(legal)))
    assert seen[True] > 50 and seen[False] > 1000, seen


def test_in_seki_reads_shared_liberties_no_one_may_fill():
    """``in_seki``: both chains of test_board.SEKI (with Black's outer group
    alive by eyes or by territory) are in seki; the groups around them, which
    may fill their own points, are not. Two Black stones with two liberties
    inside White's wall are no seki: White fills either safely; nor is a
    group whose only liberties are its two eyes."""
    from alphalite.go.tactics import in_seki
    from tests.test_board import SEKI

    for diagram in (SEKI, SEKI_BY_TERRITORY):
        s = board.parse_diagram(diagram, komi=0.5).board_tuple
        assert in_seki(s, _pt(0, 2, 7)) and in_seki(s, _pt(2, 3, 7))  # White's C7 chain, from C7 and D5
        assert in_seki(s, _pt(0, 4, 7))  # Black's E7-E6-E5
        assert not in_seki(s, _pt(0, 1, 7)) and not in_seki(s, _pt(0, 5, 7))  # the outer groups
        assert not in_seki(s, _pt(0, 3, 7))  # an empty point
    boxed = board.parse_diagram("""
        . . . . . . .
        . O O O O . .
        . O X X O . .
        . O . . O . .
        . O O O O . .
        . . . . . . .
        . . . . . . .""").board_tuple
    assert not in_seki(boxed, _pt(2, 2, 7))
    assert not in_seki(boxed, _pt(1, 1, 7))
    two_eyes = board.parse_diagram("""
        . X O . .
        X X O . .
        . X O . .
        X X O . .
        O O O . .""").board_tuple
    assert not in_seki(two_eyes, _pt(0, 1, 5))  # its two liberties are its eyes: alive, not seki
