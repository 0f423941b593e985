"""The pattern rollout/tree policies: codes, features, sampler, training."""

import numpy as np
import pytest

from alphalite.go import board as bd
from alphalite.go import patterns as pt
from alphalite.go.tactics import bad_self_atari
from alphalite.train import patterns as tp


def _padded(r, c, size):
    return (r + 1) * (size + 2) + c + 1


def _random_game(size, seed, moves):
    """A board tuple after up to ``moves`` random legal moves, with its pattern tuple kept by ``pt.play``,
    checked against a full recomputation after every move."""
    rng = np.random.default_rng(seed)
    B = bd.new_game(size).copy_tuple(4 * moves)
    S = pt.new_state(B)
    for _ in range(moves):
        stone = int(B.meta[bd.M_TOPLAY])
        legal = [p for p in range(len(B.color)) if B.color[p] == bd.EMPTY
                 and bd.legal_reason(B, p, stone) == bd.LEGAL]
        if not legal:
            break
        pt.play(B, S, int(rng.choice(legal)), stone)
        full = (S[0].copy(),) + S[1:]
        pt.recompute(B, full)
        assert (full[0] == S[0]).all()
    return B, S


def test_incremental_codes_equal_recomputation():
    for seed in range(3):
        _random_game(9, seed, 120)


def _transform(grid, s):
    g = grid
    if s & 4:
        g = g.T
    if s & 1:
        g = g[::-1, :]
    if s & 2:
        g = g[:, ::-1]
    return np.ascontiguousarray(g)


def _grid_point(r, c, s, size):
    if s & 4:
        r, c = c, r
    if s & 1:
        r = size - 1 - r
    if s & 2:
        c = size - 1 - c
    return r, c


def test_codes_invariant_under_symmetries():
    size = 9
    B, S = _random_game(size, 7, 60)
    grid = B.color.reshape(size + 2, size + 2)[1:-1, 1:-1].copy()
    m = int(S[2][1])
    mr, mc = m // (size + 2) - 1, m % (size + 2) - 1
    for s in range(8):
        T = bd.from_stones(_transform(grid, s)).copy_tuple()
        T_S = pt.new_state(T)
        W = size + 2
        tm = _padded(*_grid_point(mr, mc, s, size), size)
        for r in range(size):
            for c in range(size):
                p, q = _padded(r, c, size), _padded(*_grid_point(r, c, s, size), size)
                for v in (0, 1):
                    assert pt.canon3(S[0][v, p]) == pt.canon3(T_S[0][v, q])
                    if grid[r, c] == 0 and (r, c) != (mr, mc):
                        # the raw codes are images of each other under some symmetry
                        assert T_S[0][v, q] in [pt.sym3(S[0][v, p], k) for k in range(8)]
                if grid[r, c] == 0:
                    for stone in (1, -1):
                        assert pt.response(B.color, B.head, B.libs, m, p, stone, W) == \
                            pt.response(T.color, T.head, T.libs, tm, q, stone, W)


def test_liberty_buckets_match_board():
    size = 9
    B, _ = _random_game(size, 3, 80)
    state = bd.GoState(size, 7.5, True, False, B)
    libs = bd.liberties(state).reshape(size, size)
    for r in range(size):
        for c in range(size):
            p = _padded(r, c, size)
            colour = B.color[p]
            if colour == 0:
                continue
            k = pt._cell(B.color, B.head, B.libs, p, 1)
            want = min(int(libs[r, c]), 3) + 1 + (0 if colour == 1 else 3)
            assert k == want


DIAGRAM = """
. . . . .
. O X O .
. . O . .
. O . O .
. . . . .
"""


def test_save_atari_and_self_atari():
    B = bd.parse_diagram(DIAGRAM).copy_tuple()
    assert pt.save_atari(B, _padded(0, 2, 5), 1)
    assert not pt.save_atari(B, _padded(4, 2, 5), 1)
    assert bd.is_self_atari(B, _padded(3, 2, 5), 1, False)
    S = pt.new_state(B)
    keys = np.zeros(pt.MAX_KEYS, np.int64)
    n = pt.features(B, S, _padded(3, 2, 5), 1, True, -1, keys)
    assert (pt.T_SELFATARI << pt.TYPE_SHIFT) in keys[:n]
    n = pt.features(B, S, _padded(0, 2, 5), 1, False, -1, keys)
    assert (pt.T_SAVE << pt.TYPE_SHIFT) in keys[:n]


def test_nakade_point_after_capture_of_three():
    B = bd.parse_diagram("""
    . X X X . . .
    X O O O X . .
    . X X . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    """).copy_tuple()
    S = pt.new_state(B)
    assert pt.nakade_point(S, 9) == -1
    pt.play(B, S, _padded(2, 3, 7), 1)
    assert S[2][0] == 3
    assert pt.nakade_point(S, 9) == _padded(1, 2, 7)


def test_sampler_plays_legal_moves_and_fills_no_eye_nor_gives_stones_away():
    rng = np.random.default_rng(0)
    keys = [pt._key(t, 0) for t in (pt.T_SAVE, pt.T_NBR, pt.T_NAKADE)]
    rt = pt.rollout_tables(*pt.table_from(np.array(keys), rng.normal(0, 2, (2, len(keys)))))
    lcg = np.array([3], np.int64)
    for size in (7, 9):
        B = bd.new_game(size).copy_tuple(4 * size * size)
        S = pt.new_state(B)
        for _ in range(3 * size * size):
            meta = B.meta
            if meta[bd.M_PASSES] >= 2:
                break
            stone = int(meta[bd.M_TOPLAY])
            W = size + 2
            ok = {p for p in range(len(B.color)) if B.color[p] == 0 and bd.legal_reason(B, p, stone) == bd.LEGAL
                  and not bd.is_eye(B.color, p, stone, W) and not bad_self_atari(B, p, stone)}
            pt.rollout(B, S, rt, lcg, 1)
            last = int(B.meta[bd.M_LAST])
            if last == size * size:
                assert not ok
            else:
                assert _padded(last // size, last % size, size) in ok


def test_rollouts_keep_a_seki_standing_and_still_kill_by_nakade():
    """The seki of test_board.SEKI, and the same with open points around it
    (Black's outer group alive by territory): whoever fills a shared
    liberty loses its group, so neither may (``tactics.bad_self_atari``)
    and every rollout ends with both groups on the board, whoever moves
    first. (Before, the rollouts filled it in every playout and the judge
    called one side dead.) A White ring whose only space is three points
    with a Black stone in the middle still dies: the stones Black must give
    up there are a nakade."""
    from search.rollout import PatternPolicy
    from tests.test_board import SEKI
    from tests.test_tactics import SEKI_BY_TERRITORY

    rt = PatternPolicy.load("rollout19").rollout_tables()
    lcg = np.array([7], np.int64)
    seki = [(0, 2), (1, 2), (2, 2), (2, 3), (0, 4), (1, 4), (2, 4)]  # White's C7-C6-C5-D5, Black's E7-E6-E5
    killed = 0
    for to_play in (bd.BLACK, bd.WHITE):
        for diagram in (SEKI, SEKI_BY_TERRITORY):
            st = bd.parse_diagram(diagram, komi=0.5, to_play=to_play)
            before = bd.stones(st)
            for _ in range(40):
                B = st.copy_tuple(400)
                pt.rollout(B, pt.state_for(B), rt, lcg, 300)
                after = B.color.reshape(9, 9)[1:8, 1:8]
                assert all(after[r, c] == before[r, c] for r, c in seki)
        ring = bd.parse_diagram("""
            X X X X X X X
            X O O O O O X
            X O . X . O X
            X O O O O O X
            X X X X X X X
            . . . . . . .
            . . . . . . .""", to_play=to_play)
        for _ in range(40):
            B = ring.copy_tuple(400)
            pt.rollout(B, pt.state_for(B), rt, lcg, 300)
            killed += B.color[(1 + 1) * 9 + 1 + 1] != bd.WHITE  # B6 (row 1, col 1): a stone of the ring
    assert killed >= 72, killed  # of 80 (199 and 200 of 200 measured)


def _planted_games(n_games, size, seed):
    """Random games whose every move, where it can, is 8-connected to the previous one."""
    rng = np.random.default_rng(seed)
    moves, offs = [], [0]
    for _ in range(n_games):
        st = bd.new_game(size, superko=False)
        last = None
        for _ in range(40):
            legal = [int(m) for m in np.flatnonzero(bd.legal_moves(st)) if m < size * size]
            near = [m for m in legal if last is not None and abs(m // size - last // size) <= 1
                    and abs(m % size - last % size) <= 1]
            m = int(rng.choice(near or legal))
            st = bd.play(st, m)
            moves.append(m)
            last = m
        offs.append(len(moves))
    mv = np.array(moves, np.int64)
    col = np.tile(np.array([1, -1] * 20, np.int64), n_games)
    return (np.array(offs, np.int64), mv, col, np.zeros(n_games + 1, np.int64), np.zeros(0, np.int64),
            np.zeros(0, np.int8))


def test_tiny_training_learns_planted_preference():
    size = 7
    arrs = _planted_games(30, size, 1)
    cap = 1 << 14
    tab, w = np.zeros(cap, np.int64), np.zeros((2, cap), np.float32)
    acc, counts = np.zeros((2, cap), np.float32), np.zeros(cap, np.int64)
    zob = bd.zobrist_table()

    def run(order, train):
        stats = np.zeros((2, 2), np.int64)
        tp._games(size, zob, *arrs, order, tab, w, acc, counts, 0.1, cap // 2, np.zeros(1, np.int64), train,
                  stats, tp.EMPTY_LOGITS, tp.EMPTY_MOVES)
        return stats[0, 1] / stats[0, 0]

    before = run(np.arange(20, 30), False)
    run(np.arange(20), True)
    after = run(np.arange(20, 30), False)
    nbr = pt.lookup(tab, pt._key(pt.T_NBR, 0))
    assert nbr >= 0 and w[pt.ROLLOUT, nbr] > 1.0
    assert after > before + 0.05


def test_save_and_load_round_trip(tmp_path):
    keys = np.array([pt._key(pt.T_PAT3, 5), pt._key(pt.T_NBR, 0)])
    tab, w = pt.table_from(keys, np.array([[0.5, -1.0], [0.25, 2.0]]), expand=False)
    counts = (tab != 0).astype(np.int64)
    assert pt.save(tmp_path / "w.npz", tab, w, counts) == 2
    tab2, w2, _ = pt.load(tmp_path / "w.npz")
    for k in keys:
        assert w2[:, pt.lookup(tab2, k)].tolist() == w[:, pt.lookup(tab, k)].tolist()
    assert pt.lookup(tab2, pt._key(pt.T_SAVE, 0)) == -1
    image = pt._key(pt.T_PAT3, pt.sym3(5, 3))  # load adds the symmetric images
    assert image != keys[0] and w2[0, pt.lookup(tab2, image)] == 0.5
    with pytest.raises(ValueError, match="unknown pattern policy"):
        pt.load_policy(tmp_path, {"policy": "nope"})


def test_search_entry_points():
    from search.rollout import PatternPolicy, pattern_rollout_margin, pattern_rollout_value

    keys = np.array([pt._key(pt.T_NBR, 0), pt._key(pt.T_DIST1, 1)])
    tab, w = pt.table_from(keys, np.array([[1.0, 0.0], [1.0, 2.0]]))
    st = bd.play(bd.play(bd.new_game(9), 40), 41)
    B = st.copy_tuple(400)
    scratch = st.copy_tuple(400)
    rt = pt.rollout_tables(tab, w)
    v = pattern_rollout_value(B, scratch, np.array([9], np.int64), 300, 7.5, 8, rt)
    assert -1.0 <= v <= 1.0 and B.meta[bd.M_MOVES] == 2  # B untouched
    margin = pattern_rollout_margin(scratch, np.array([9], np.int64), 300, 7.5, rt)
    black, white = bd.area(scratch)
    assert margin == black - white - 7.5 and scratch.meta[bd.M_PASSES] == 2
    pri = PatternPolicy(tab, w, pt.TREE, {}).priors(B)
    assert abs(pri.sum() - 1) < 1e-9 and pri[40] == 0 and pri[41] == 0 and pri[81] == 0
    # the tree policy's distance-1 weight makes the previous move's neighbours likelier
    assert pri[32] > pri[0] and pri[42] > pri[80]


def test_sampler_draws_the_rollout_softmax():
    """The first move of a rollout follows ``probabilities`` (the rollout
    row: 3x3, save-atari, neighbour, response), own eyes left out."""
    size, W = 9, 11
    B, S = _random_game(size, 1, 36)
    stone = int(B.meta[bd.M_TOPLAY])
    rng = np.random.default_rng(1)
    keys = np.zeros(pt.MAX_KEYS, np.int64)
    seen = set()
    nak = pt.nakade_point(S, W)
    for p in range(len(B.color)):
        if B.color[p] == bd.EMPTY:
            seen.update(int(k) for k in keys[:pt.features(B, S, p, stone, False, nak, keys)])
    seen = np.array(sorted(seen), np.int64)
    assert len({int(k) >> pt.TYPE_SHIFT for k in seen} & {pt.T_SAVE, pt.T_NBR, pt.T_RESP}) == 3
    tab, w = pt.table_from(seen, rng.normal(0, 1.5, (2, len(seen))))
    want = np.zeros(size * size + 1)
    pt.probabilities(B, S, tab, w, pt.ROLLOUT, want)
    for p in range(len(B.color)):
        if B.color[p] == bd.EMPTY and bd.is_eye(B.color, p, stone, W):
            want[(p // W - 1) * size + p % W - 1] = 0.0
    want /= want.sum()
    rt = pt.rollout_tables(tab, w)
    n = 20000
    got = np.zeros(size * size + 1)
    scratch, S2 = bd.new_game(size).copy_tuple(4 * size * size), pt.new_state(B)
    lcg = np.array([11], np.int64)
    for _ in range(n):
        bd.copy_board(scratch, B)
        pt.copy_state(S2, S)
        pt.rollout(scratch, S2, rt, lcg, 1)
        got[int(scratch.meta[bd.M_LAST])] += 1
    got /= n
    assert np.abs(got - want).sum() / 2 < 0.025, (got, want)


def test_resumed_training_state_is_laid_out_by_the_current_hash():
    keys = np.array([pt._key(pt.T_PAT3, c) for c in range(1, 300)] + [pt._key(pt.T_RESP, 7 << 36)])
    cap = 1024
    old = (np.arange(len(keys)) * 7) % cap  # the slots some other hash chose
    tab = np.zeros(cap, np.int64)
    tab[old] = keys
    rng = np.random.default_rng(0)
    w, acc = rng.normal(size=(2, cap)).astype(np.float32), rng.normal(size=(2, cap)).astype(np.float32)
    counts = rng.integers(1, 100, cap)
    t2, w2, a2, c2 = tp._rehash(tab, w, acc, counts)
    assert (t2 != 0).sum() == len(keys)
    for k, j in zip(keys, old):
        s = pt.lookup(t2, k)
        assert s >= 0 and (w2[:, s] == w[:, j]).all() and (a2[:, s] == acc[:, j]).all() and c2[s] == counts[j]
