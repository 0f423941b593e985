"""Search on tiny boards with fake evaluators."""

from __future__ import annotations

import re

import numpy as np
import pytest

from alphalite.go import board, coords
from search import advance, run_mcts
from search.evaluators import (
    mix_rollouts,
    network_evaluator,
    rollout_evaluator,
    uniform_evaluator,
    value_evaluator,
)
from search.mcts import Leaves
from search.params import SearchParams
from search.rollout import RolloutScratch, rollout_value, rollout_values

# Black to play: one move (C1) captures seven white stones. With komi 12.5
# Black loses by 2.5 unless it captures, and wins the whole board if it does.
CAPTURE = """
X X X X .
X O O O X
X O O O X
X X O X X
. X . X .
"""
CAPTURE_MOVE = coords.to_flat(4, 2, 5)

# A simple ko on 4x4: Black captures at C3 (row 1, col 2); White may not
# retake at B3 (row 1, col 1) at once; White at A4 (0, 0) is suicide.
KO = """
. X O .
X O . O
. X O .
. . . .
"""


def rng(seed=0):
    return np.random.default_rng(seed)


def sign_area(state):
    """A static value: who wins if the game stopped now, for the player to move."""
    return float(np.sign(board.area_score(state))) * state.to_play


def replay(root, tree, node):
    path = []
    while tree.parents[node] >= 0:
        path.append(int(tree.action_from_parent[node]))
        node = int(tree.parents[node])
    s = root
    for a in reversed(path):
        s = board.play(s, a)
    return s


def check_tree_against_board(root, tree):
    """Every node's legality, player to move and terminal flag agree with the
    position reached by really playing its path (superko included)."""
    for node in range(tree.num_nodes):
        s = replay(root, tree, node)
        assert tree.node_to_play[node] == s.to_play
        assert tree.node_terminal[node] == s.is_over
        if tree.node_expanded[node]:
            np.testing.assert_array_equal(tree.children_legal[node], board.legal_moves(s))
        if s.is_over:
            assert tree.node_value[node] == np.sign(board.area_score(s)) * s.to_play


@pytest.mark.parametrize("batch_size", [1, 8, 32])
def test_finds_the_winning_capture(batch_size):
    s = board.parse_diagram(CAPTURE, komi=12.5)
    # a misleading prior: pass 20 times likelier than any other move
    def prior(st):
        p = np.full(26, 0.05, np.float32)
        p[25] = 1.0
        return p

    out = run_mcts(None, rng(), s, value_evaluator(sign_area, prior), num_simulations=120,
                   search_params=SearchParams(batch_size=batch_size))
    assert out.action == CAPTURE_MOVE
    assert out.visit_probs[CAPTURE_MOVE] == out.visit_probs.max()
    assert out.root_value > (0.3 if batch_size < 32 else 0.0)  # 4 rounds of 32: virtual loss spreads
    out.tree.check()
    assert out.tree.node_visits[0] == 121


def test_rollouts_find_the_winning_capture():
    s = board.parse_diagram(CAPTURE, komi=12.5)
    out = run_mcts(None, rng(1), s, rollout_evaluator(), num_simulations=100, search_params=SearchParams(batch_size=8))
    assert out.action == CAPTURE_MOVE
    assert out.root_value > 0.3


@pytest.mark.parametrize("point", [(2, 2), (1, 3)])
def test_follows_the_value_functions_preference(point):
    liked = coords.to_flat(*point, 5)

    def likes_point(st):  # Black wants a stone on `liked`
        good = board.stones(st)[point] == board.BLACK
        return (1.0 if good else -1.0) * st.to_play

    out = run_mcts(None, rng(), board.new_game(5, 0.5), value_evaluator(likes_point), num_simulations=150,
                   search_params=SearchParams(batch_size=8))
    assert out.action == liked
    assert out.visit_probs[liked] > 0.5
    assert out.root_value > 0.5


@pytest.mark.parametrize("batch_size", [1, 8, 32])
def test_visits_and_values_add_up(batch_size):
    s = board.play(board.new_game(5, 0.5), 12)
    out = run_mcts(None, rng(3), s, rollout_evaluator(), num_simulations=200,
                   search_params=SearchParams(batch_size=batch_size))
    t = out.tree
    t.check()  # parent/child visit and value sums, no virtual loss left
    assert t.node_visits[0] == 201
    assert t.children_visits[0].sum() == 200
    np.testing.assert_allclose(out.visit_probs.sum(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(out.visit_probs, t.children_visits[0] / 200, rtol=1e-6)
    assert out.root_value == pytest.approx(t.node_value_sum[0] / t.node_visits[0])
    # the value sum of a node is its own evaluation plus its children's, signed
    for node in range(t.num_nodes):
        if t.node_expanded[node]:
            assert t.node_value_sum[node] == pytest.approx(
                t.node_value[node] + t.children_value_sum[node].sum())
    # every node's sum is over values in [-1, 1]
    assert (np.abs(t.node_value_sum[: t.num_nodes]) <= t.node_visits[: t.num_nodes] + 1e-9).all()
    check_tree_against_board(s, t)


def test_reuse_keeps_the_right_subtree():
    s = board.new_game(5, 0.5)
    out = run_mcts(None, rng(), s, rollout_evaluator(), num_simulations=300, search_params=SearchParams(batch_size=8))
    t = out.tree
    a = out.action
    c = int(t.children_index[0, a])
    b = int(np.argmax(t.children_visits[c]))  # the reply we will pretend the opponent plays
    g = int(t.children_index[c, b])
    kept = [k for k in t.arrays._fields if k.startswith("children_")] + ["node_visits", "node_value_sum"]
    old_child = {k: getattr(t, k)[c].copy() for k in kept}
    old_grand = {k: getattr(t, k)[g].copy() for k in kept}
    size_before = len(np.flatnonzero(_subtree_mask(t, c)))

    t1 = advance(t, a)
    t1.check()
    assert t1.num_nodes == size_before
    assert t1.root_state.hash == board.play(s, a).hash
    for k, v in old_child.items():
        if k == "children_index":
            np.testing.assert_array_equal(getattr(t1, k)[0] >= 0, v >= 0)
        else:
            np.testing.assert_array_equal(getattr(t1, k)[0], v)
    check_tree_against_board(t1.root_state, t1)

    t2 = advance(t1, b)  # two moves ahead: ours, then the opponent's
    t2.check()
    for k, v in old_grand.items():
        if k != "children_index":
            np.testing.assert_array_equal(getattr(t2, k)[0], v)
    s2 = board.play(board.play(s, a), b)
    check_tree_against_board(s2, t2)

    # searching on adds exactly num_simulations visits to the kept statistics
    before = int(t2.node_visits[0])
    out2 = run_mcts(None, rng(), s2, rollout_evaluator(), num_simulations=50, tree=t2,
                    search_params=SearchParams(batch_size=8))
    assert out2.tree is t2
    assert t2.node_visits[0] == before + 50
    t2.check()
    check_tree_against_board(s2, t2)

    # a tree for another position is not reused
    other = board.play(board.play(s, a), (b + 1) % 25 if (b + 1) % 25 != a else (b + 2) % 25)
    out3 = run_mcts(None, rng(), other, rollout_evaluator(), num_simulations=10, tree=advance(t1, b),
                    search_params=SearchParams(batch_size=4))
    assert out3.tree.node_visits[0] == 11


def _subtree_mask(t, root):
    mask = np.zeros(t.num_nodes, bool)
    for node in range(t.num_nodes):
        n = node
        while n >= 0 and n != root:
            n = int(t.parents[n])
        mask[node] = n == root
    return mask


def test_advance_to_an_unexpanded_child_gives_a_fresh_tree():
    s = board.new_game(5, 0.5)
    out = run_mcts(None, rng(), s, uniform_evaluator(), num_simulations=3, search_params=SearchParams(batch_size=1))
    unvisited = int(np.flatnonzero(out.tree.children_visits[0] == 0)[0])
    t = advance(out.tree, unvisited)
    assert t.num_nodes == 1 and not t.node_expanded[0]
    with pytest.raises(board.IllegalMove):
        advance(out.tree, 26)


def test_terminal_positions_scored_exactly():
    # Black is ahead on the board; White has just passed. Black's pass ends the
    # game: its value is exact, so with a flat evaluator (value 0 everywhere)
    # the search passes.
    s = board.parse_diagram(CAPTURE, komi=0.5, to_play=board.WHITE)
    s = board.play(s, 25)  # white passes, black to play
    assert s.to_play == board.BLACK and s.passes == 1
    out = run_mcts(None, rng(), s, uniform_evaluator(0.0), num_simulations=60, search_params=SearchParams(batch_size=8))
    t = out.tree
    p = int(t.children_index[0, 25])
    assert t.node_terminal[p] and not t.node_expanded[p]
    assert t.node_value[p] == -1.0  # White to move at the end, and White lost
    assert t.children_value_sum[0, 25] == t.children_visits[0, 25]  # every visit exactly +1 for Black
    assert out.action == 25
    t.check()

    # Behind if the game ended now (komi 12.5): the search does not pass,
    # it captures.
    s = board.play(board.parse_diagram(CAPTURE, komi=12.5, to_play=board.WHITE), 25)
    out = run_mcts(None, rng(), s, value_evaluator(sign_area), num_simulations=60,
                   search_params=SearchParams(batch_size=8))
    assert out.action == CAPTURE_MOVE
    p = int(out.tree.children_index[0, 25])
    if p >= 0:
        assert out.tree.node_value[p] == 1.0  # White, to move at the end, won
    check_tree_against_board(s, out.tree)


def test_game_over_raises():
    s = board.play(board.play(board.new_game(5, 0.5), 25), 25)
    with pytest.raises(ValueError):
        run_mcts(None, rng(), s, uniform_evaluator(), num_simulations=4)


def test_illegal_moves_never_chosen_suicide_ko_superko():
    s = board.parse_diagram(KO, komi=0.5)
    s = board.play(s, coords.to_flat(1, 2, 4))  # Black takes the ko
    ko, suicide = coords.to_flat(1, 1, 4), coords.to_flat(0, 0, 4)
    legal = board.legal_moves(s)
    assert not legal[ko] and not legal[suicide]
    # a value function that would love the illegal points
    def loves_illegal(st):
        st_ = board.stones(st)
        return (1.0 if st_[1, 1] == board.WHITE or st_[0, 0] == board.WHITE else -1.0) * -st.to_play

    for bs in (1, 8, 32):
        out = run_mcts(None, rng(bs), s, rollout_evaluator(), num_simulations=300,
                       search_params=SearchParams(batch_size=bs))
        t = out.tree
        assert out.action not in (ko, suicide)
        assert t.children_visits[0, ko] == 0 and t.children_visits[0, suicide] == 0
        assert not t.children_legal[0, ko] and not t.children_legal[0, suicide]
        assert out.visit_probs[ko] == 0 and out.visit_probs[suicide] == 0
        check_tree_against_board(s, t)  # superko: legality from each node's real path
    out = run_mcts(None, rng(), s, value_evaluator(loves_illegal), num_simulations=100,
                   search_params=SearchParams(batch_size=8))
    assert out.action not in (ko, suicide)
    check_tree_against_board(s, out.tree)


def test_superko_inside_the_tree():
    # Deep search on a ko fight: nodes that would repeat a position of their
    # own path (not just the last one) must have the move masked.
    s = board.parse_diagram(KO, komi=0.5)
    out = run_mcts(None, rng(7), s, rollout_evaluator(), num_simulations=600, search_params=SearchParams(batch_size=8))
    t = out.tree
    check_tree_against_board(s, t)
    # every path is free of repeated positions
    for node in range(t.num_nodes):
        path, n = [], node
        while t.parents[n] >= 0:
            path.append(int(t.action_from_parent[n]))
            n = int(t.parents[n])
        st, seen = s, {(s.hash)}
        for a in reversed(path):
            st = board.play(st, a)
            if a != 16:
                assert st.hash not in seen
            seen.add(st.hash)


def test_dirichlet_noise_changes_root_priors():
    s = board.parse_diagram(KO, komi=0.5)
    out0 = run_mcts(None, rng(), s, uniform_evaluator(), num_simulations=64, search_params=SearchParams(batch_size=8))
    out = run_mcts(None, rng(), s, uniform_evaluator(), num_simulations=64,
                   search_params=SearchParams(batch_size=8, dirichlet_alpha=0.3, dirichlet_fraction=0.25))
    t = out.tree
    raw = t.raw_root_prior
    np.testing.assert_allclose(raw, out0.tree.children_prior[0])
    assert not np.allclose(t.children_prior[0], raw)
    legal = t.children_legal[0]
    assert (t.children_prior[0][~legal] == 0).all()
    np.testing.assert_allclose(t.children_prior[0].sum(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out.visit_probs.sum(), 1.0, rtol=1e-6)
    assert (out.visit_probs[~legal] == 0).all()
    # noise is fresh on each call, and the clean priors are what it is mixed into
    out2 = run_mcts(None, rng(9), s, uniform_evaluator(), num_simulations=8, tree=t,
                    search_params=SearchParams(batch_size=8, dirichlet_alpha=0.3))
    np.testing.assert_allclose(out2.tree.raw_root_prior, raw)
    out3 = run_mcts(None, rng(9), s, uniform_evaluator(), num_simulations=8, tree=t,
                    search_params=SearchParams(batch_size=8))
    assert out3.tree.raw_root_prior is None
    np.testing.assert_allclose(out3.tree.children_prior[0], raw)


def test_root_noise_mixes_one_dirichlet_draw_into_the_clean_priors():
    from search.params import mix_root_noise

    prior = np.array([0.5, 0.25, 0.125, 0.125])
    sp = SearchParams(dirichlet_alpha=0.3, dirichlet_fraction=0.25)
    noise = rng(5).dirichlet(np.full(4, 0.3))
    np.testing.assert_array_equal(mix_root_noise(prior, sp, rng(5)), 0.75 * prior + 0.25 * noise)
    np.testing.assert_allclose(mix_root_noise(prior, sp, rng(5)).sum(), 1.0)
    assert not SearchParams().root_noise and not SearchParams(dirichlet_alpha=0.3, dirichlet_fraction=0).root_noise


def spy_root_noise(monkeypatch, module):
    """Record each (clean prior, mixed prior) of ``module``'s root noise."""
    from search import params

    calls = []

    def spy(prior, sp, gen):
        out = params.mix_root_noise(prior, sp, gen)
        calls.append((prior.copy(), out))
        return out

    monkeypatch.setattr(module, "mix_root_noise", spy)
    return calls


def test_mcts_and_multigame_draw_their_root_noise_in_one_home(monkeypatch):
    from search import mcts, multigame

    calls = spy_root_noise(monkeypatch, mcts)
    sp = SearchParams(batch_size=8, dirichlet_alpha=0.3)
    out = run_mcts(None, rng(11), board.new_game(5, 0.5), uniform_evaluator(), num_simulations=16, search_params=sp)
    idx = np.flatnonzero(out.tree.children_legal[0])
    (clean, mixed), = calls
    np.testing.assert_array_equal(clean, out.tree.raw_root_prior[idx])
    np.testing.assert_array_equal(out.tree.children_prior[0, idx], mixed.astype(np.float32))

    calls = spy_root_noise(monkeypatch, multigame)
    ms = multigame.MultiSearch(3, 5, 0.5, multigame.MultiParams(num_simulations=4, root="puct", puct=sp))
    seen = {}

    def net(params, planes, legal):
        return legal.astype(np.float32), np.zeros(len(planes), np.float32)

    real_finish = ms._finish_puct

    def finish(live, gen, targets, actions, root_values, clean):  # the roots' priors while they searched
        seen.update({r: ms.tree.children_prior[r].copy() for r in clean})
        return real_finish(live, gen, targets, actions, root_values, clean)

    monkeypatch.setattr(ms, "_finish_puct", finish)
    ms.search(net, None, np.array([True, False, True]), rng(3))
    assert len(calls) == 2 and sorted(seen) == [0, 2 * ms.per_game]
    for (clean, mixed), r in zip(calls, sorted(seen)):
        idx = np.flatnonzero(ms.tree.children_legal[r])
        np.testing.assert_array_equal(seen[r][idx], mixed.astype(np.float32))
        np.testing.assert_array_equal(ms.tree.children_prior[r, idx], clean)  # clean again after the move


def test_one_noise_draw_for_the_whole_move():
    """The engine searches a move in chunks (64, 64, 128, ...): every chunk
    goes on under the root noise the first drew (AlphaZero's one sample a
    move; each chunk drew anew before)."""
    from alphalite.engine.players import MctsPlayer

    seen = []

    def record(tree, n):
        seen.append(tree.children_prior[0].copy())
        return False

    p = MctsPlayer(uniform_evaluator(0.0), visits=400, search_params=SearchParams(dirichlet_alpha=0.3))
    out = p.run(board.new_game(5), rng(4), max_visits=400, callback=record)
    assert out.tree.raw_root_prior is not None and len(seen) > 8
    assert all(np.array_equal(x, seen[0]) for x in seen)  # one noised prior throughout
    assert not np.allclose(seen[0], out.tree.raw_root_prior)


def test_temperature():
    s = board.new_game(4, 0.5)
    out = run_mcts(None, rng(), s, rollout_evaluator(), num_simulations=100, search_params=SearchParams(batch_size=8))
    visits = out.tree.children_visits[0]
    assert visits[out.action] == visits.max()
    chosen = set()
    for seed in range(20):
        o = run_mcts(None, rng(seed), s, uniform_evaluator(), num_simulations=40,
                     search_params=SearchParams(batch_size=8, temperature=1.0))
        assert o.tree.children_visits[0, o.action] > 0
        chosen.add(o.action)
    assert len(chosen) > 1
    # temperature 0 with tied visits: the higher prior wins
    def prior(st):
        p = np.ones(17, np.float32)
        p[5] = 2.0
        return p

    o = run_mcts(None, rng(), s, value_evaluator(lambda st: 0.0, prior), num_simulations=0)
    assert o.action == 5


def test_deterministic_for_a_fixed_rng():
    s = board.new_game(5, 0.5)
    kw = dict(num_simulations=120, search_params=SearchParams(batch_size=8, dirichlet_alpha=0.5, temperature=1.0))
    a = run_mcts(None, rng(42), s, rollout_evaluator(), **kw)
    b = run_mcts(None, rng(42), s, rollout_evaluator(), **kw)
    c = run_mcts(None, rng(43), s, rollout_evaluator(), **kw)
    assert a.action == b.action
    np.testing.assert_array_equal(a.tree.children_visits[0], b.tree.children_visits[0])
    np.testing.assert_array_equal(a.visit_probs, b.visit_probs)
    assert a.root_value == b.root_value
    assert not np.array_equal(a.tree.children_visits[0], c.tree.children_visits[0])


def test_leaves_contract():
    s = board.play(board.parse_diagram(KO, komi=0.5), coords.to_flat(1, 2, 4))
    seen = []

    def evaluate(params, leaves):
        assert params == "params"
        assert isinstance(leaves, Leaves) and 1 <= len(leaves) <= 4
        assert leaves.legal.shape == (len(leaves), 17) and leaves.seeds.shape == (len(leaves),)
        for i, st in enumerate(leaves.states()):
            np.testing.assert_array_equal(board.legal_moves(st), leaves.legal[i])
            assert st.to_play == leaves.to_play[i] and st.komi == 0.5
        seen.append(len(leaves))
        # raw, unnormalised weights with mass on illegal points are fine
        return np.ones((len(leaves), 17)) * 3.0, np.zeros(len(leaves))

    out = run_mcts("params", rng(), s, evaluate, num_simulations=30, search_params=SearchParams(batch_size=4))
    assert seen[0] == 1 and max(seen) <= 4
    p = out.tree.children_prior[0]
    legal = out.tree.children_legal[0]
    np.testing.assert_allclose(p[legal], 1.0 / legal.sum())
    assert (p[~legal] == 0).all()

    with pytest.raises(ValueError):
        run_mcts(None, rng(), s, lambda params, leaves: (np.ones((len(leaves), 5)), np.zeros(len(leaves))),
                 num_simulations=4)


def test_rollout_value_and_mix():
    s = board.parse_diagram(CAPTURE, komi=12.5)
    done = board.play(board.play(s, CAPTURE_MOVE), 25)
    b = done.board_tuple
    before = [a.copy() for a in b]
    rs = RolloutScratch()
    r = np.array([5], np.int64)
    # after the capture Black owns the board: every rollout is a Black win
    v = rollout_value(b, rs.get(b, 100), r, 100, 12.5, 8)
    assert v == 1.0  # Black to move (White passed), and Black wins every time
    for x, y in zip(before, b):
        np.testing.assert_array_equal(x, y)

    const = uniform_evaluator(0.5)
    leaves = Leaves([done.board_tuple], board.legal_moves(done)[None], np.array([done.to_play], np.int8),
                    np.array([1], np.int64), 5, 12.5, True, False)
    _, v1 = mix_rollouts(const, 1.0)(None, leaves)
    _, v0 = mix_rollouts(const, 0.0)(None, leaves)
    _, vh = mix_rollouts(const, 0.5)(None, leaves)
    assert v1[0] == pytest.approx(0.5) and v0[0] == pytest.approx(1.0) and vh[0] == pytest.approx(0.75)


def test_network_evaluator_pads_and_masks():
    calls = []

    def net_fn(params, planes, legal):
        calls.append(planes.shape)
        logits = np.zeros(legal.shape, np.float32) + params
        e = np.where(legal, np.exp(logits), 0.0)
        return e / e.sum(-1, keepdims=True), np.full(planes.shape[0], 0.25, np.float32)

    ev = network_evaluator(net_fn, preset="default", pad_to=8)
    s = board.play(board.parse_diagram(KO, komi=0.5), coords.to_flat(1, 2, 4))
    out = run_mcts(0.0, rng(), s, ev, num_simulations=20, search_params=SearchParams(batch_size=8))
    assert all(shape == (8, 4, 4, 17) for shape in calls)
    assert out.tree.node_value[0] == pytest.approx(0.25)
    legal = out.tree.children_legal[0]
    np.testing.assert_allclose(out.tree.children_prior[0][legal], 1.0 / legal.sum(), rtol=1e-6)
    out.tree.check()


def test_network_evaluator_random_symmetry_maps_policy_back():
    # An equivariant fake net: weight 1 + 9 * (own stones next to the point),
    # read from the planes it is shown. Mapped back, the prior must peak on
    # the neighbours of the real stone whatever symmetry was drawn.
    def net_fn(params, planes, legal):
        own = planes[..., 0:4].sum(-1)  # [B, n, n]
        B, n = own.shape[0], own.shape[1]
        p = np.pad(own, ((0, 0), (1, 1), (1, 1)))
        nb = p[:, :-2, 1:-1] + p[:, 2:, 1:-1] + p[:, 1:-1, :-2] + p[:, 1:-1, 2:]
        w = np.concatenate([1.0 + 9.0 * nb.reshape(B, n * n), np.ones((B, 1))], axis=1)
        w = np.where(legal, w, 0.0)
        return w / w.sum(-1, keepdims=True), np.zeros(B, np.float32)

    s = board.play(board.play(board.new_game(5, 0.5), coords.to_flat(1, 1, 5)), 25)  # Black B4, White passes
    nbrs = [coords.to_flat(r, c, 5) for r, c in ((0, 1), (1, 0), (1, 2), (2, 1))]
    ev = network_evaluator(net_fn, random_symmetry=True)
    for k in range(8):
        leaves = Leaves([s.board_tuple], board.legal_moves(s)[None], np.array([s.to_play], np.int8),
                        np.array([k << 7], np.int64), 5, 0.5, True, False)
        priors, _ = ev(None, leaves)
        p = priors[0]
        assert p[coords.to_flat(1, 1, 5)] == 0.0
        np.testing.assert_allclose(p[nbrs], p.max())
        others = np.setdiff1d(np.arange(25), nbrs + [6])
        assert (p[others] < p.max() / 5).all()
        np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-6)
    out = run_mcts(None, rng(), s, ev, num_simulations=16, search_params=SearchParams(batch_size=4))
    assert out.tree.children_prior[0].argmax() in nbrs


def test_callback_and_time_limit_stop_the_search():
    s = board.new_game(5, 0.5)
    seen = []

    def cb(tree, done):
        seen.append(done)
        return done >= 24

    out = run_mcts(None, rng(), s, uniform_evaluator(), num_simulations=200, callback=cb,
                   search_params=SearchParams(batch_size=8))
    assert seen == [8, 16, 24]
    assert out.tree.node_visits[0] == 25
    out.tree.check()
    out = run_mcts(None, rng(), s, uniform_evaluator(), num_simulations=10**6, max_seconds=0.0,
                   search_params=SearchParams(batch_size=8))
    assert out.tree.node_visits[0] == 9
    np.testing.assert_allclose(out.visit_probs.sum(), 1.0, rtol=1e-6)


@pytest.mark.parametrize("batch_size", [8, 32])
def test_collisions_on_a_tiny_tree(batch_size):
    # 2x2: a handful of positions, so big batches keep selecting the same
    # leaves and terminal nodes. Each node is evaluated exactly once, the
    # visit count is exact, and no virtual loss is left behind.
    s = board.new_game(2, 0.5)
    sizes = []
    inner = rollout_evaluator()

    def evaluate(params, leaves):
        sizes.append(len(leaves))
        return inner(params, leaves)

    out = run_mcts(None, rng(), s, evaluate, num_simulations=150, search_params=SearchParams(batch_size=batch_size))
    t = out.tree
    t.check()
    assert t.node_visits[0] == 151
    assert sum(sizes) == int(t.node_expanded[: t.num_nodes].sum())
    assert max(sizes) <= batch_size
    assert t.node_terminal[: t.num_nodes].any()
    check_tree_against_board(s, t)


def test_search_params_flags_build_it_and_name_the_flag_in_errors():
    import argparse
    import dataclasses

    from alphalite.runtime import config

    p = argparse.ArgumentParser()
    config.add_arguments(p, SearchParams)
    sp = config.from_args(SearchParams, p.parse_args(["--c-puct", "2.5", "--root-fpu-reduction", "0",
                                                      "--lambda", "0.25", "--batch", "3"]))
    assert (sp.c_puct, sp.root_fpu, sp.fpu_reduction, sp.lam, sp.batch_size) == (2.5, 0.0, 0.25, 0.25, 3)
    assert SearchParams().root_fpu == 0.25
    assert {a.dest for a in p._actions} - {"help"} == {f.name for f in dataclasses.fields(SearchParams)}
    for kw, msg in ((dict(lam=1.5), "--lambda must be in [0, 1], got 1.5"),
                    (dict(batch_size=0), "--batch must be >= 1"),
                    (dict(temperature=float("nan")), "--temperature must be >= 0"),
                    (dict(c_puct=float("inf")), "--c-puct must be a finite number")):
        with pytest.raises(ValueError, match=re.escape(msg)):
            SearchParams(**kw)


def test_temperature_applies_to_the_first_moves_only():
    assert SearchParams(temperature=1.0).temperature_at(300) == 1.0  # 0: every move
    sp = SearchParams(temperature=1.0, temperature_moves=4)
    assert [sp.temperature_at(m) for m in (0, 3, 4, 9)] == [1.0, 1.0, 0.0, 0.0]
    # run_mcts draws its move at the root's move number: late in the game, greedy
    s = board.new_game(5, 0.5)
    for k in range(5):
        s = board.play(s, [0, 24, 4, 20, 12][k])
    picks = {run_mcts(None, rng(i), s, uniform_evaluator(), num_simulations=30, search_params=sp).action
             for i in range(6)}
    assert len(picks) == 1
    early = {run_mcts(None, rng(i), board.new_game(5, 0.5), uniform_evaluator(), num_simulations=30,
                      search_params=sp).action for i in range(6)}
    assert len(early) > 1


def test_c_puct_reaches_the_selection():
    """More exploration spreads the root visits over more moves."""
    s = board.new_game(5, 0.5)
    spread = []
    for c in (0.05, 50.0):
        out = run_mcts(None, rng(), s, rollout_evaluator(), num_simulations=200,
                       search_params=SearchParams(c_puct=c))
        spread.append(int((out.tree.children_visits[0] > 0).sum()))
    assert spread[0] < spread[1]


def test_c_puct_by_board_size_unless_given():
    """The default exploration constant is the one measured per size (6 on
    19x19, 1.5 below); a value given is used on every size, 0 included; a
    non-finite one is refused naming the flag."""
    from search import params

    assert SearchParams().c_puct < 0
    assert [SearchParams().c_puct_at(n) for n in (7, 9, 13, 19)] == [params.C_PUCT_SMALL] * 3 + [params.C_PUCT_19]
    assert (params.C_PUCT_SMALL, params.C_PUCT_19) == (1.5, 6.0)
    assert [SearchParams(c_puct=c).c_puct_at(19) for c in (0.0, 2.5)] == [0.0, 2.5]
    with pytest.raises(ValueError, match="--c-puct must be a finite number"):
        SearchParams(c_puct=float("nan"))
    # the default reaches the selection as that size's constant: the same search as with it given
    s = board.new_game(9, 7.0)
    runs = [run_mcts(None, rng(), s, rollout_evaluator(), num_simulations=120, search_params=sp).tree.children_visits[0]
            for sp in (SearchParams(), SearchParams(c_puct=1.5), SearchParams(c_puct=6.0))]
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


def _one_node(prior, visits, value_sum, virtual=None, node_visits=0, node_value_sum=0.0, legal=None):
    """A one-node tree (node 0) in the kernel's dtypes, for pinning puct_pick."""
    from search.tree import tree_arrays

    T = tree_arrays(1, len(prior))
    T.children_prior[0] = prior
    T.children_legal[0] = legal if legal is not None else True
    T.children_visits[0] = visits
    T.children_value_sum[0] = value_sum
    T.children_virtual[0] = virtual if virtual is not None else 0
    T.node_virtual[0] = sum(virtual or [0])
    T.node_visits[0] = node_visits
    T.node_value_sum[0] = node_value_sum
    return T


def _pick0(tree, c_puct=1.5, fpu_reduction=0.25):
    from search.mcts import puct_pick

    return int(puct_pick(tree, 0, c_puct, fpu_reduction))


def test_puct_pick_pinned_by_hand():
    # N(s)=4 so sqrt=2. score = Q + c*P*2/(1+n):
    # c=1.5: a0 0.5+0.5=1.0, a1 0.8+0.45=1.25, a2 -1+0.3=-0.7 -> a1
    # c=10:  a0 0.5+3.333=3.833, a1 0.8+3.0=3.8, a2 -1+2=1.0  -> a0
    tree = _one_node([0.5, 0.3, 0.2], [2, 1, 1], [1.0, 0.8, -1.0], node_visits=4)
    assert _pick0(tree, c_puct=1.5) == 1
    assert _pick0(tree, c_puct=10.0) == 0
    # An illegal child is never picked, whatever its score.
    tree = _one_node([0.5, 0.3, 0.2], [2, 1, 1], [1.0, 0.8, -1.0], node_visits=4, legal=[True, False, True])
    assert _pick0(tree, c_puct=1.5) == 0


def test_fpu_pinned_by_hand():
    # Parent Q = 0.4/2 = 0.2, visited prior mass 0.5, sqrt(N)=sqrt(2).
    # a0 (visited): 0.2 + 1.5*0.5*1.41421/2 = 0.73033
    # a1 (unvisited): FPU + 1.5*0.4*1.41421 = FPU + 0.84853
    #   reduction 0: FPU 0.2 -> 1.04853 -> a1
    #   reduction 1: FPU 0.2-0.70711=-0.50711 -> 0.34142 -> a0
    #   reduction 5: FPU clamped at -1 -> -0.15147 -> a0
    tree = _one_node([0.5, 0.4, 0.1], [1, 0, 0], [0.2, 0.0, 0.0], node_visits=2, node_value_sum=0.4)
    assert _pick0(tree, fpu_reduction=0.0) == 1
    assert _pick0(tree, fpu_reduction=1.0) == 0
    # Boundary: a1 wins while FPU > 0.73033-0.84853 = -0.1182, i.e. reduction < 0.3182/0.70711 = 0.45.
    assert _pick0(tree, fpu_reduction=0.44) == 1
    assert _pick0(tree, fpu_reduction=0.46) == 0


def test_virtual_loss_pinned_by_hand():
    # No virtual loss: sqrt(2); a0 0.6+0.53033=1.13033, a1 0.5+0.53033=1.03033 -> a0.
    tree = _one_node([0.5, 0.5], [1, 1], [0.6, 0.5], node_visits=2, node_value_sum=1.1)
    assert _pick0(tree) == 0
    # One virtual loss on a0 (and the node): sqrt(3)=1.73205;
    # a0 n=2, Q=(0.6-1)/2=-0.2, U=1.5*0.5*1.73205/3=0.43301 -> 0.23301
    # a1 n=1, Q=0.5,            U=1.5*0.5*1.73205/2=0.64952 -> 1.14952 -> a1
    tree = _one_node([0.5, 0.5], [1, 1], [0.6, 0.5], virtual=[1, 0], node_visits=2, node_value_sum=1.1)
    assert _pick0(tree) == 1
    # SearchParams.virtual_loss weighs it: 0 ignores it (a0 as above); 0.05: sqrt(2.05)=1.43178,
    # a0 n=1.05 Q=0.55/1.05=0.52381 U=0.75*1.43178/2.05=0.52382 -> 1.04763, a1 0.5+0.53692=1.03692 -> a0;
    # 0.25: sqrt(2.25)=1.5, a0 n=1.25 Q=0.35/1.25=0.28 U=0.5 -> 0.78, a1 0.5+0.5625=1.0625 -> a1
    from search.mcts import puct_pick

    assert [int(puct_pick(tree, 0, 1.5, 0.25, w)) for w in (0.0, 0.05, 0.25)] == [0, 0, 1]


def test_leaves_with_stacked_boards_evaluate_as_leaf_by_leaf():
    # The evaluators loop over leaves.stack inside Numba when it is there;
    # the values and planes must be those of the per-leaf path.
    gen = np.random.default_rng(3)
    states = []
    for n_moves in (0, 7, 30):
        s = board.new_game(7, 0.5)
        for _ in range(n_moves):
            s = board.play(s, int(gen.choice(np.flatnonzero(board.legal_moves(s)[:-1]))))
        states.append(s)
    S = board.stacked(states[0].board_tuple, 4, 200)
    views = [board.board_at(S, k) for k in range(len(states))]
    for v, s in zip(views, states):
        board.copy_board(v, s.board_tuple)
    legal = np.stack([board.legal_moves(s) for s in states])
    to_play = np.array([s.to_play for s in states], np.int8)
    seeds = np.array([11, 12, 13], np.int64)
    apart = Leaves([s.board_tuple for s in states], legal, to_play, seeds, 7, 0.5, True, False)
    stacked = Leaves(views, legal, to_play, seeds, 7, 0.5, True, False, S)

    def net_fn(params, planes, legal):  # priors from the planes themselves
        flat = planes.sum(-1).reshape(planes.shape[0], -1)
        return np.concatenate([flat, np.ones((planes.shape[0], 1))], 1), planes.mean((1, 2, 3))

    for sym in (False, True):
        ev = network_evaluator(net_fn, random_symmetry=sym)
        (pa, va), (ps, vs) = ev(None, apart), ev(None, stacked)
        np.testing.assert_array_equal(pa, ps)
        np.testing.assert_array_equal(va, vs)
        assert len(np.unique(va)) == 3  # three different positions seen
    ra = rollout_values(apart, num_rollouts=4)
    rs = rollout_values(stacked, num_rollouts=4)
    np.testing.assert_array_equal(ra, rs)
    assert (np.abs(rs) <= 1.0).all()
