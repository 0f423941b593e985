"""AlphaZero self-play on the multi-game search core: sequential halving's
schedule and visits, the completed-Q target on a hand-made tree, the
carried-over evaluations, batching, legal replayable games, records."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from alphalite.go import board
from alphalite.nn import nets, onnx_export
from search import gumbel
from search.multigame import MultiParams, MultiSearch
from search.tree import Tree, tree_arrays
from selfplay import alphazero, records
from selfplay.games import Game


def fake_net(params, planes, legal):
    """Deterministic priors and values from the planes (so a position always
    gets the same answer), uneven enough that the search has preferences."""
    h = planes.reshape(len(planes), -1).sum(1)
    a = np.arange(legal.shape[1])[None]
    priors = legal * (1.0 + (a * (h[:, None] % 7 + 1)) % 5)
    return priors.astype(np.float32), np.tanh(np.sin(h)).astype(np.float32)


def counting(net_fn, sizes):
    def f(params, planes, legal):
        sizes.append(len(planes))
        return net_fn(params, planes, legal)

    return f


def test_considered_visits_pinned_by_hand():
    # m = 4, n = 8: one visit each to 4 actions, then 2 more each to the best 2
    assert gumbel.considered_visits(4, 8) == (0, 0, 0, 0, 1, 1, 2, 2)
    # m = 16, n = 32 (the defaults): 16 x 1, 8 x 1, then the best 4 twice
    assert gumbel.considered_visits(16, 32) == (0,) * 16 + (1,) * 8 + (2, 2, 2, 2, 3, 3, 3, 3)
    assert gumbel.considered_visits(1, 3) == (0, 1, 2)
    table = gumbel.considered_table(4, 8)
    assert table.shape == (5, 8) and tuple(table[4]) == gumbel.considered_visits(4, 8)
    assert tuple(table[2]) == gumbel.considered_visits(2, 8) == (0, 0, 1, 1, 2, 2, 3, 3)


def test_sequential_halving_spends_the_planned_visits():
    ms = MultiSearch(3, 5, 7.5, MultiParams(num_simulations=8, max_considered=4))
    for g in range(3):
        ms.new_game(g)
    sizes = []
    out = ms.search(counting(fake_net, sizes), None, np.ones(3, bool), np.random.default_rng(0))
    for g in range(3):
        r = g * ms.per_game
        visits = np.sort(ms.tree.children_visits[r])[::-1]
        assert list(visits[:5]) == [3, 3, 1, 1, 0]  # 4 considered, halved to 2
        assert ms.tree.node_visits[r] == 9
        assert visits[0] == ms.tree.children_visits[r, out.actions[g]]  # played: one of the most visited
        t = Tree(board.new_game(5), 1)
        t.arrays = ms.game_tree(g)
        t.check()
    assert sizes == [3] * 9  # the roots, then one leaf per game per step


def _tiny_tree():
    T = tree_arrays(1, 4)
    T.children_prior[0] = [0.5, 0.3, 0.2, 0.0]
    T.children_legal[0] = [True, True, True, False]
    T.children_visits[0] = [2, 1, 0, 0]
    T.children_value_sum[0] = [1.0, -0.5, 0.0, 0.0]
    T.node_visits[0] = 4
    T.node_value[0] = 0.2
    T.node_expanded[0] = True
    return T


def test_completed_q_target_by_hand():
    T = _tiny_tree()
    # mixed value: (0.2 + 3 * (0.5 * 0.5 + 0.3 * -0.5) / 0.8) / 4 = 0.14375
    # completed q [0.5, -0.5, 0.14375, 0.14375] -> [1, 0, 0.64375, 0.64375]; scale (50 + 2) * 0.1
    sigma = np.zeros(4)
    value = gumbel.completed_sigma(T, 0, 0.1, 50.0, sigma)
    assert value == pytest.approx(0.14375)
    np.testing.assert_allclose(sigma, [5.2, 0.0, 3.3475, 3.3475], rtol=1e-6)  # float32 priors
    w = np.array([0.5 * math.exp(5.2), 0.3, 0.2 * math.exp(3.3475), 0.0])
    out = np.zeros(4)
    gumbel.improved_policy(T, 0, 0.1, 50.0, np.zeros(4), out)
    np.testing.assert_allclose(out, w / w.sum(), rtol=1e-6)
    # below the root: argmax of improved p minus visit share (2/4, 1/4, 0)
    want = int(np.argmax(w[:3] / w.sum() - np.array([2, 1, 0]) / 4))
    assert gumbel.interior_action(T, 0, 0.1, 50.0, np.zeros(4), np.zeros(4)) == want
    # at the root, among actions with 1 visit only action 1 qualifies; with 0, action 2
    g = np.zeros(4)
    assert gumbel.root_action(T, 0, g, 1, 0.1, 50.0, np.zeros(4)) == 1
    assert gumbel.root_action(T, 0, g, 0, 0.1, 50.0, np.zeros(4)) == 2
    assert gumbel.root_action(T, 0, g, 5, 0.1, 50.0, np.zeros(4)) == -1


def test_completed_q_and_halving_agree_with_mctx():
    import jax.numpy as jnp
    import mctx  # a test dependency (pyproject.toml): the reference, never skipped
    from mctx._src import seq_halving

    for m, n in ((16, 32), (4, 8), (3, 32), (16, 50), (2, 7)):
        assert gumbel.considered_visits(m, n) == seq_halving.get_sequence_of_considered_visits(m, n)
    T = _tiny_tree()
    visits = T.children_visits[0]
    q = np.where(visits > 0, T.children_value_sum[0] / np.maximum(visits, 1), 0.0)
    logits = np.where(T.children_legal[0], np.log(np.maximum(T.children_prior[0], 1e-30)), -1e30)
    one = lambda x: jnp.asarray(np.asarray(x)[None, None], jnp.float32)  # noqa: E731
    tree = mctx.Tree(node_visits=one(4), raw_values=one(0.2), node_values=one(0.0), parents=one(-1).astype(int),
                     action_from_parent=one(-1).astype(int), children_index=one([-1] * 4).astype(int),
                     children_prior_logits=one(logits), children_visits=one(visits).astype(int),
                     children_rewards=one([0.0] * 4), children_discounts=one([1.0] * 4), children_values=one(q),
                     embeddings=jnp.zeros((1, 1)), root_invalid_actions=jnp.asarray([[0, 0, 0, 1]], jnp.float32),
                     extra_data=None)
    theirs = np.asarray(jax.vmap(mctx.qtransform_completed_by_mix_value, in_axes=[0, None])(tree, 0))[0]
    ours = np.zeros(4)
    gumbel.completed_sigma(T, 0, 0.1, 50.0, ours)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


@pytest.mark.parametrize("root", ["gumbel", "puct"])
def test_carried_over_evaluations_change_nothing_but_the_calls(root):
    results = []
    for carry in (True, False):
        ms = MultiSearch(4, 7, 7.5, MultiParams(num_simulations=8, max_considered=4, root=root, carry_over=carry))
        for g in range(4):
            ms.new_game(g)
        live, gen, moves, leaves, targets = np.ones(4, bool), np.random.default_rng(3), [], 0, []
        for _ in range(12):
            out = ms.search(fake_net, None, live, gen)
            assert np.allclose(out.targets.sum(1), 1.0, atol=1e-5)
            ms.play(out.actions, live)
            moves.append(out.actions.copy())
            targets.append(out.targets)
            leaves += out.leaves
        results.append((np.array(moves), np.array(targets), leaves))
    (m1, t1, n1), (m2, t2, n2) = results
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_allclose(t1, t2, atol=1e-6)
    assert n1 < n2 <= 12 * 4 * 9


def test_pv_net_is_one_trunk_with_both_heads():
    pv, pol, val = (nets.param_counts(name, 9, 17) for name in ("b2c16_pv", "b2c16", "b2c16_value"))
    assert pv["trunk"] == pol["trunk"] == val["trunk"]
    assert pv["total"] == pol["total"] + val["total"] - val["trunk"]


@pytest.fixture(scope="module")
def tiny_pv():
    model = nets.make_model("b1c8_pv", 5, 17)
    variables = nets.init_variables(model, jax.random.PRNGKey(0))
    return model, variables


@pytest.mark.slow
def test_pv_net_onnx_matches_jax(tiny_pv):
    model, variables = tiny_pv
    x = np.random.default_rng(0).random((3, 5, 5, 17)).astype(np.float32)
    legal = np.ones((3, 26), bool)
    legal[:, 3] = False
    logits, values = model.apply(variables, x)
    p_onnx, v_onnx = onnx_export.pv_fn(model, variables)(None, x, legal)
    p_jax, v_jax = alphazero.pv_net(model, variables, "jax", pad_to=4)[0](
        {"policy": variables}, x, legal)
    want = np.where(legal, np.asarray(logits), -np.inf)
    want = np.exp(want - want.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(p_onnx, want, atol=1e-5)
    np.testing.assert_allclose(p_jax, want, atol=1e-5)
    np.testing.assert_allclose(v_onnx, values, atol=1e-5)
    np.testing.assert_allclose(v_jax, values, atol=1e-5)
    # two sessions on slices of the batch give the one session's answer
    split = onnx_export.split_runner([onnx_export.session(model, variables, 1) for _ in range(2)])
    logits2, values2 = split(x)
    np.testing.assert_allclose(logits2, logits, atol=1e-5)
    np.testing.assert_allclose(values2, values, atol=1e-5)
    run, label = onnx_export.fastest_runner(model, variables, 4, rounds=1)
    np.testing.assert_allclose(run(x)[0], logits, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("root", ["gumbel", "puct"])
def test_games_are_legal_replayable_and_records_round_trip(tmp_path, tiny_pv, root):
    model, variables = tiny_pv
    net_fn, params = alphazero.pv_net(model, variables, "onnx")
    sizes = []
    cfg = alphazero.SelfPlayConfig(games_at_once=3, simulations=8, max_considered=4, root=root, komi=0.5)
    paths = alphazero.play_games(counting(net_fn, sizes), params, 5, tmp_path, size=5, config=cfg, seed=1)
    assert len(paths) == 5 and max(sizes) == 3  # 3 at once; finished slots start the next game
    assert sorted(p.name for p in paths) == [f"az-{i:06d}.npz" for i in range(5)]
    for p in paths:
        game = records.read_game(p)
        T = len(game.moves)
        B = board.new_game(5, 0.5).copy_tuple(extra_history=T + 1)
        assert board.replay(B, game.moves.astype(np.int64), T) == T
        assert game.ended in ("passes", "move cap")
        if game.ended == "passes":
            assert B.meta[board.M_PASSES] >= 2
        b, w = board.area(B)
        assert game.score == b - w - 0.5
        own = np.zeros(25, np.int8)
        board.owners_into(B, own)
        np.testing.assert_array_equal(game.ownership, own)
        assert game.policy_offsets.shape == (T + 1,) and game.root_values.shape == (T,)
        for t in range(T):
            target = game.policy_target(t)
            assert abs(target.sum() - 1.0) < 2e-2 and target[game.moves[t]] > 0
    # the written record carries what the game had
    game = records.read_game(paths[0])
    again = records.write_game(tmp_path / "copy", "x", game, sgf=False)
    back = records.read_game(again)
    for name in ("moves", "policy_offsets", "policy_moves", "policy_probs", "root_values", "ownership"):
        np.testing.assert_array_equal(getattr(back, name), getattr(game, name))
    assert (back.score, back.winner, back.ended) == (game.score, game.winner, game.ended)


def test_resigned_game_records_its_winner(tmp_path):
    g = Game(5, 0.5, np.array([0, 1], np.int16), np.array([1, -1], np.int8), 3.5, ended="resign",
                       resigned=1)
    assert g.winner == -1 and g.result == "W+R"
    back = records.read_game(records.write_game(tmp_path, "r", g))
    assert back.resigned == 1 and back.winner == -1 and back.ended == "resign"


def test_a_lost_game_is_resigned():
    def black_loses(params, planes, legal):  # plane 11: ones when black is to move
        black = planes[:, 0, 0, 11] > 0.5
        return legal.astype(np.float32), np.where(black, -0.99, 0.99).astype(np.float32)

    games = []
    cfg = alphazero.SelfPlayConfig(games_at_once=2, simulations=4, max_considered=4, resign_below=-0.9,
                                   resign_moves=2)
    alphazero.run_games(black_loses, None, 2, size=5, config=cfg, gen=np.random.default_rng(0),
                        on_game=lambda i, g: games.append(g))
    for g in games:  # Black's first two searches say lost: it resigns instead of its second move
        assert (g.ended, g.resigned, g.winner, g.result, len(g.moves)) == ("resign", 1, -1, "W+R", 2)
        assert len(g.root_values) == 2 and g.policy_offsets.shape == (3,) and g.root_values[0] < -0.9


AREA = """
    . X . X O . .
    X X X X O . .
    . . X O . . .
    X X X O . . .
    . . X O . . .
    . . X O . . .
    . . X O . . .
"""


def test_own_area_stays_open_while_other_moves_are_left():
    """``moves="area"`` (the default): Black may play inside its own
    territory while the right side is open to it, never in an own true eye,
    and passes only when nothing but own area and eyes is left; with
    ``"candidates"`` the inside of its area is closed."""
    st = board.parse_diagram(AREA, komi=0.5, to_play=board.BLACK)
    n2 = 49
    a5, a3, f3 = (board.coords.from_gtp(v, 7) for v in ("A5", "A3", "F3"))
    area, cand = board.candidates(st, own_area=True), board.candidates(st)
    assert area[a5] and area[f3] and not area[n2]
    assert not board.candidates(st, own_area=True)[board.coords.from_gtp("A7", 7)]  # an own true eye
    assert not cand[a5] and cand[f3] and not cand[n2]
    assert (area >= cand).all()
    # White's side filled: nothing is left but Black's area and eyes, so pass
    full = board.parse_diagram("""
        . X . X O . O
        X X X X O O O
        . . X O O . O
        X X X O O O O
        . . X O . O .
        . . X O O O O
        . . X O O . O
    """, komi=0.5, to_play=board.BLACK)
    closed = board.candidates(full, own_area=True)
    assert closed[n2] and not closed[:n2].any(), board.coords.to_gtp(int(np.flatnonzero(closed)[0]), 7)
    for moves in ("area", "candidates"):
        ms = MultiSearch(1, 7, 0.5, MultiParams(num_simulations=4, max_considered=4, moves=moves))
        board.copy_board(ms.board(0), st.board_tuple)
        ms.search(fake_net, None, np.ones(1, bool), np.random.default_rng(0))
        assert ms.tree.children_legal[0, a5] == (moves == "area")
    with pytest.raises(ValueError):
        MultiParams(moves="territory")


def test_puct_root_noise_leaves_the_clean_priors_for_ties():
    """With PUCT's root noise the visits follow the noise, but a visit tie is
    broken by the network's clean priors, which go back into the root."""
    from search.params import SearchParams

    def ranked(params, planes, legal):  # clean priors grow with the move index
        a = np.arange(legal.shape[1], dtype=np.float32)[None]
        return (legal * (1.0 + a)).astype(np.float32), np.zeros(len(planes), np.float32)

    puct = SearchParams(dirichlet_alpha=0.03, dirichlet_fraction=1.0)
    ties = 0
    for seed in range(20):
        ms = MultiSearch(1, 7, 7.5, MultiParams(num_simulations=2, root="puct", puct=puct))
        out = ms.search(ranked, None, np.ones(1, bool), np.random.default_rng(seed))
        legal = ms.tree.children_legal[0]
        clean = np.where(legal, np.arange(legal.size) + 1.0, 0.0)
        np.testing.assert_allclose(ms.tree.children_prior[0], clean / clean.sum(), rtol=1e-5)
        visits = ms.tree.children_visits[0]
        tied = np.flatnonzero(visits == visits.max())
        if len(tied) > 1:
            ties += 1
            assert out.actions[0] == tied.max()
    assert ties >= 3
