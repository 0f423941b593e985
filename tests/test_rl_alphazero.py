"""AlphaZero on Ray (alphalite.zero): a tiny run on a local Ray with two
workers produces games, checkpoints and gating results; a self-play actor
killed with SIGKILL mid-run loses no finished record; a rerun resumes."""

import dataclasses
import json
import logging
import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest

from alphalite.arena import netmatch
from alphalite.nn import nets
from alphalite.runtime import config as config_lib
from alphalite.zero import learner
from alphalite.zero.run import ZeroConfig, round_line, start_ray, train_alphazero
from alphalite.zero.store import Store
from search.multigame import MultiParams
from search.params import SearchParams
from selfplay import alphazero, records
from selfplay.config import SelfPlayConfig

TINY = ZeroConfig(size=5, model="b1c8", init="", init_value="", iterations=1, games_per_iteration=4,
                  train_steps=4, train_batch=16, gate_games=4, gate_visits=4, window_games=100)
TINY_SP = SelfPlayConfig(games_at_once=2, simulations=4, max_considered=4, komi=0.5, max_moves=24)


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray started the way `rl --algo alphazero` starts it, after JAX
    has its threads (as in `make demo`); yields (ray, the warnings it raised)."""
    import jax.numpy as jnp

    pytest.importorskip("ray")
    jnp.ones(1).block_until_ready()  # a live JAX backend: its at-fork hook now warns on every fork
    logged = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: logged.append(record.getMessage())
    logging.getLogger("ray").addHandler(handler)  # Ray's loggers do not propagate to the root
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ray, started = start_ray(None, 2)
    finally:
        logging.getLogger("ray").removeHandler(handler)
    assert started
    yield ray, [str(w.message) for w in caught] + logged
    ray.shutdown()


def test_starting_ray_after_jax_raises_no_fork_warning(local_ray):
    # Ray forks only to exec its processes at once: JAX's deadlock warning does not apply and
    # must not alarm the user (it did in `make demo`).
    assert not [m for m in local_ray[1] if "os.fork()" in m]


def test_starting_a_local_ray_logs_no_token_auth_warning(local_ray):
    # The cluster we start keeps Ray's token auth; only the warning that it is on is gone.
    assert not [m for m in local_ray[1] if "Token authentication" in m]
    assert local_ray[0].is_initialized()


def test_self_play_search_params_come_from_search_params():
    mp = SelfPlayConfig(simulations=8).search_params(9)
    assert mp.num_simulations == 8 and mp.puct.c_puct == SearchParams().c_puct
    # self-play's defaults, by rule, where SearchParams leaves noise and temperature off
    assert mp.puct.dirichlet_alpha == pytest.approx(10 / 81) and mp.puct.temperature == 1.0
    assert mp.puct.temperature_moves == 9
    mp = SelfPlayConfig().search_params(9, SearchParams(c_puct=2.5, dirichlet_alpha=0.3, temperature_moves=4))
    assert (mp.puct.c_puct, mp.puct.dirichlet_alpha, mp.puct.temperature_moves) == (2.5, 0.3, 4)


def test_init_copies_shipped_arrays_where_shapes_match():
    model = learner.build_model(learner.model_info("b4c32", 9, "default"))
    variables, copied = learner.initial_variables(model, 0, "policy9", "value9")
    _, pol = learner.ckpt.load_variables(learner.ckpt.resolve("policy9"))
    assert any(c.startswith("policy9:params/trunk/") for c in copied)
    assert any(c.startswith("value9:params/value_out") for c in copied)
    assert not any(c.startswith("value9:params/trunk") for c in copied)  # the trunk is the policy net's
    np.testing.assert_array_equal(variables["params"]["policy_dense"]["kernel"],
                                  pol["params"]["policy_dense"]["kernel"])


def test_grow_keeps_the_function(tmp_path):
    """``grow``: a b1c8_aux net grown into b3c12_aux computes the same logits,
    value, ownership and score (eval and train mode), its new channels
    carry fresh weights to learn with, and a net cannot shrink."""
    import jax

    small = learner.build_model(learner.model_info("b1c8_aux", 5, "default"))
    src, _ = learner.initial_variables(small, 3, "", "")
    src = jax.tree_util.tree_map(np.asarray, src)
    # a trained net's batch norms are not fresh: every scale, bias, mean and variance drawn at random here
    rng = np.random.default_rng(1)
    src = jax.tree_util.tree_map_with_path(
        lambda p, v: (rng.uniform(0.5, 1.5, v.shape) if "var" in jax.tree_util.keystr(p) or "scale" in
                      jax.tree_util.keystr(p) else rng.normal(0, 0.3, v.shape)).astype(np.float32)
        if v.ndim == 1 else v, src)
    learner.ckpt.export_model(tmp_path / "small", src, {**learner.model_info("b1c8_aux", 5, "default"), "step": 0})
    big = learner.build_model(learner.model_info("b3c12_aux", 5, "default"))
    grown, done = learner.initial_variables(big, 0, str(tmp_path / "small"), "", grow=True)
    assert any("block2: identity" in d for d in done)
    x = (np.random.default_rng(0).random((6, 5, 5, 17)) < 0.4).astype(np.float32)
    a_logits, a = small.apply(src, x, train=False, aux=True)
    b_logits, b = big.apply(grown, x, train=False, aux=True)
    np.testing.assert_allclose(b_logits, a_logits, atol=1e-4)
    for key in ("value", "ownership", "score"):
        np.testing.assert_allclose(b[key], a[key], atol=1e-4)
    (ta, a), _ = small.apply(src, x, train=True, aux=True, mutable=["batch_stats"])
    (tb, b), _ = big.apply(grown, x, train=True, aux=True, mutable=["batch_stats"])
    np.testing.assert_allclose(tb, ta, atol=1e-4)
    for key in ("value", "ownership", "score"):
        np.testing.assert_allclose(b[key], a[key], atol=1e-4)
    stem = grown["params"]["trunk"]["stem"]["kernel"]
    assert np.abs(stem[..., 8:]).sum() > 0  # new channels are fed by the old inputs
    assert not grown["params"]["trunk"]["block0"]["Conv_0"]["kernel"][:, :, 8:, :8].any()  # and feed nothing old
    with pytest.raises(ValueError, match="cannot grow"):
        learner.grow_into(learner.initial_variables(small, 0, "", "")[0], grown)
    other = learner.build_model(learner.model_info("b3c12_aux", 5, "clark7"))  # other input planes
    with pytest.raises(ValueError, match="same kind, board size and preset"):
        learner.initial_variables(other, 0, str(tmp_path / "small"), "", grow=True)
    with pytest.raises(ValueError, match="cannot grow"):  # the run refuses before it starts Ray
        train_alphazero(ZeroConfig(size=5, model="b3c12", init=str(tmp_path / "small"), init_value="", grow=True),
                        TINY_SP, SearchParams(), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="--grow must be used with --init"):
        ZeroConfig(init="az9i", grow=True)


def test_positions_replay_the_record(tmp_path):
    model = learner.build_model(learner.model_info("b1c8", 5, "default"))
    variables, _ = learner.initial_variables(model, 0, "", "")
    net_fn, params = alphazero.pv_net(model, variables, "onnx")
    [path] = alphazero.play_games(net_fn, params, 1, tmp_path, size=5, config=TINY_SP, seed=3)
    game = records.read_game(path)
    planes, legal, targets, z, own, score = learner.replay_positions(game, "default")
    T = len(game.moves)
    assert planes.shape[0] == T and legal[np.arange(T), game.moves].all()
    np.testing.assert_allclose(targets.sum(axis=1), 1.0, atol=1e-3)
    assert set(np.unique(z)) <= {-1.0, 0.0, 1.0} and (z[::2] == game.winner).all() and (z[1::2] == -game.winner).all()
    # the final owners and margin, exact, from each mover's side
    assert game.ownership is not None and np.abs(game.ownership).sum() > 0
    np.testing.assert_array_equal(own[0].ravel(), game.ownership)
    np.testing.assert_array_equal(own[1].ravel(), -game.ownership)
    np.testing.assert_array_equal(score[::2], game.score)
    np.testing.assert_array_equal(score[1::2], -game.score)
    resigned = dataclasses.replace(game, resigned=1)  # not the final position: no targets
    _, _, _, z, own, score = learner.replay_positions(resigned, "default")
    assert np.isnan(score).all() and not own.any() and (z[::2] == -1).all()


def test_an_aux_net_learns_the_records_final_ownership(tmp_path):
    """A ``bNcM_aux`` run trains the policy-value net's ownership and score
    heads on the records' exact final positions beside the policy and value
    (KataGo's terms); its exported net is a ``bNcM_aux_pv`` net the engine
    loads and asks for the ownership head."""
    from alphalite.engine import players

    store = Store(tmp_path / "run").make()
    model = learner.build_model(learner.model_info("b1c8", 5, "default"))
    variables, _ = learner.initial_variables(model, 0, "", "")
    net_fn, params = alphazero.pv_net(model, variables, "onnx")
    alphazero.play_games(net_fn, params, 6, store.games, size=5, config=TINY_SP, seed=5)
    lrn = learner.Learner(store.root, model="b1c8_aux", size=5, preset="default", init="", init_value="",
                          learning_rate=1e-2, weight_decay=0.0, batch_size=64, value_weight=1.0, window_games=100)
    first = lrn.train(5)
    lrn.train(100)
    last = lrn.train(20)
    assert {"ownership_loss", "score_mae", "policy_loss", "value_loss"} <= set(first)
    assert last["ownership_loss"] < 0.85 * first["ownership_loss"], (first, last)  # ~0.74 -> ~0.57
    assert last["score_mae"] < first["score_mae"], (first, last)
    net = players.load_net(lrn.save()["net"], inference="jax")
    assert net.has_ownership and net.model.aux_heads
    # reopened on the store, it goes on from the saved step with batches of its own
    again = learner.Learner(store.root, model="b1c8_aux", size=5, preset="default", init="", init_value="",
                            learning_rate=1e-2, weight_decay=0.0, batch_size=64, value_weight=1.0,
                            window_games=100)
    assert again.step == lrn.step == 125
    assert (again.gen.integers(0, 1 << 30, 8) != np.random.default_rng(0).integers(0, 1 << 30, 8)).all()
    assert not nets.has_ownership(model)  # the plain b1c8_pv that played the games


def test_a_net_against_itself_scores_about_half_and_a_stone_counter_beats_it():
    def uniform(params, planes, legal):
        return legal / legal.sum(axis=1, keepdims=True), np.zeros(len(legal), np.float32)

    def counter(params, planes, legal):  # the same priors, valued by the stones on the board (default planes)
        own, opp = planes[..., 0:4].sum(axis=(1, 2, 3)), planes[..., 4:8].sum(axis=(1, 2, 3))
        return legal / legal.sum(axis=1, keepdims=True), np.tanh((own - opp) / 4.0).astype(np.float32)

    search = MultiParams(num_simulations=4, max_considered=4)
    s = netmatch.play_match(uniform, None, uniform, None, 16, size=5, komi=0.5, search=search,
                            gen=np.random.default_rng(0), max_moves=30)
    assert s.shape == (16,) and set(s) <= {0.0, 1.0} and 0.25 <= s.mean() <= 0.75, s
    deeper = MultiParams(num_simulations=16, max_considered=8)  # enough visits for values to steer
    s = netmatch.play_match(counter, None, uniform, None, 16, size=5, komi=0.5, search=deeper,
                            gen=np.random.default_rng(1), max_moves=30)
    assert s.mean() >= 0.75, s
    res = netmatch.gate(counter, None, uniform, None, size=5, komi=0.5, search=deeper, max_games=4, batch=4,
                        max_moves=30)
    assert res["games"] == 4 and res["wins"] >= 3 and res["decision"] == "continue"
    strict = dataclasses.replace(netmatch.Sprt(), elo1=2000.0)  # decides after a game or two
    assert netmatch.gate(uniform, None, uniform, None, size=5, komi=0.5, search=search, sprt=strict, max_games=8,
                         batch=2, max_moves=30)["games"] < 8
    rated = netmatch.gate(uniform, None, uniform, None, size=5, komi=0.5, search=search, sprt=None, max_games=8,
                          batch=2, max_moves=30)  # a rating match: every game is played
    assert rated["games"] == 8 == rated["wins"] + rated["losses"] + rated["draws"] and "llr" not in rated


def test_an_odd_number_of_gate_games_gives_the_extra_one_to_either_colour_by_seed():
    def uniform(params, planes, legal):
        return legal / legal.sum(axis=1, keepdims=True), np.zeros(len(legal), np.float32)

    search = MultiParams(num_simulations=2, max_considered=2)
    black = {}
    for seed in range(4):  # komi -100: Black wins every game, so the new net's wins are its games as Black
        res = netmatch.gate(uniform, None, uniform, None, size=5, komi=-100.0, search=search, sprt=None, max_games=5,
                            batch=4, seed=seed, max_moves=6)
        black[seed] = res["wins"]
    # the driver's gating seed steps by one a round: the extra game alternates colours (it was always Black)
    assert black == {0: 3, 1: 2, 2: 3, 3: 2}


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.subprocess
def test_run_survives_a_killed_actor_and_resumes(tmp_path, local_ray):
    ray = local_ray[0]
    work = tmp_path / "az"
    store = Store(work)
    out: dict = {}
    # every undecided gate accepts, so the anchor match of iteration 2 has a net to rate against the start
    cfg = dataclasses.replace(TINY, games_per_iteration=16, gate_threshold=0.0, anchor_every=2)
    sp = dataclasses.replace(TINY_SP, games_at_once=1)  # one game after another: the kill lands mid-round
    t = threading.Thread(target=lambda: out.update(train_alphazero(cfg, sp, SearchParams(), work,
                                                                   progress=False)))
    t.start()
    deadline = time.time() + 120
    while time.time() < deadline and not (store.games.is_dir() and store.game_paths()):
        time.sleep(0.02)
    seen = {p.name: p.read_bytes() for p in store.game_paths()}
    assert 0 < len(seen) < cfg.games_per_iteration, "the kill must come while the actor plays"
    [name] = [a for a in ray.util.list_named_actors() if a.startswith("alphalite-selfplay-0-")]
    os.kill(ray.get(ray.get_actor(name).pid.remote()), signal.SIGKILL)
    t.join(180)
    assert not t.is_alive() and out["iteration"] == 1
    for n, data in seen.items():  # every record finished before the kill is there, unchanged
        assert (store.games / n).read_bytes() == data
    n1 = len(store.game_paths())
    assert n1 == cfg.games_per_iteration  # the retried call played only the games the killed one had not
    metrics = store.read_metrics()
    kinds = [m["kind"] for m in metrics if m.get("iteration") == 0]
    assert kinds == ["start", "selfplay", "train", "gate"]
    gate = metrics[-1]
    # 4 gate games cannot decide the SPRT, and an undecided gate accepts at threshold 0
    assert gate["games"] > 0 and gate["decision"] == "continue" and gate["accepted"] is True and "llr" in gate
    assert (work / "ckpt").is_dir() and (store.net_dir(cfg.train_steps) / "model.json").exists()
    assert json.loads((work / "state.json").read_text()) == {"iteration": 1}
    assert store.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # redrawn after the iteration

    # the same command with more iterations resumes: counter, checkpoint, games on disk; gating may be
    # switched off on a rerun, and the anchor match still rates the run with its own game count
    before = {p.name for p in store.game_paths()}
    res = train_alphazero(dataclasses.replace(cfg, iterations=2, gate_games=0, anchor_games=3), sp, SearchParams(),
                          work, progress=False)
    assert res["start_iteration"] == 1 and res["iteration"] == 2
    after = {p.name for p in store.game_paths()}
    assert before < after and len(after) == n1 + cfg.games_per_iteration
    trains = [m for m in store.read_metrics() if m["kind"] == "train"]
    assert [m["step"] for m in trains] == [cfg.train_steps, 2 * cfg.train_steps]
    gate, anchor = store.read_metrics()[-2:]  # iteration 2: the best net against the start, every game played
    assert gate["kind"] == "gate" and gate["games"] == 0 and gate["accepted"] is True
    assert anchor["kind"] == "anchor" and anchor["iteration"] == 2 and anchor["step"] == 2 * cfg.train_steps
    assert anchor["games"] == 3 == anchor["wins"] + anchor["losses"] + anchor["draws"]


def test_max_minutes_stops_the_run_after_the_stage_in_flight(tmp_path, local_ray):
    work = tmp_path / "az"
    res = train_alphazero(dataclasses.replace(TINY, iterations=3, max_minutes=1e-6), TINY_SP, SearchParams(),
                          work, progress=False)
    assert res["stopped"] == "time limit" and res["iteration"] == 0 and "saved" in res
    assert [m["kind"] for m in Store(work).read_metrics()] == ["start", "selfplay"]
    with pytest.raises(ValueError, match="--max-minutes"):
        dataclasses.replace(TINY, max_minutes=-1.0)


def test_a_replayed_round_plays_and_trains_only_what_is_missing(tmp_path, monkeypatch):
    """An actor's call run again (a Ray retry, a resumed round) plays only
    the games of its share not on disk, never one already there; the learner
    trains up to the round's step, so a second call trains nothing; bad
    settings are refused by flag."""
    from alphalite.zero import run

    monkeypatch.setattr(run, "_setup_worker", lambda training=False: None)
    store = Store(tmp_path / "az").make()
    actor = run.SelfPlayer(str(store.root), 0, 5, config_lib.to_dict(TINY_SP), config_lib.to_dict(SearchParams()))
    lrn = run.LearnerActor(str(store.root), config_lib.to_dict(TINY), "default")
    net = lrn.start_net()["net"]
    first = actor.play(net, 3, 0, 11)
    names = sorted(p.name for p in store.game_paths())
    assert first["games"] == 3 and len(names) == 3
    assert actor.play(net, 3, 0, 11)["games"] == 0
    (store.games / names[1]).unlink()  # as if that game had not finished
    again = actor.play(net, 3, 0, 11)
    now = sorted(p.name for p in store.game_paths())
    assert again["games"] == 1 and len(now) == 3 and set(now) - set(names)
    data = {p.name: p.read_bytes() for p in store.game_paths()}
    assert len(set(data.values())) == 3  # the game played again is a new one
    # a round resumed with other actors: only the games it lacks are handed out
    assert run.round_targets(store, 0, 3, 2) == [3, 0] and run.round_targets(store, 0, 6, 2) == [5, 1]
    assert run.round_targets(store, 0, 6, 4) == [4, 1, 1, 0] and run.round_targets(store, 1, 3, 2) == [2, 1]
    tr = lrn.train_to(4)
    assert tr["step"] == 4 and lrn.train_to(4)["step"] == 4 and lrn.step() == 4
    store.set_iteration(0, train_to=4)
    assert store.train_to(0) == 4 and store.train_to(1) is None and store.iteration() == 0
    for bad, flag in ((dict(window_games=0), "--window-games"), (dict(train_batch=0), "--train-batch"),
                      (dict(model="foo"), "--model"), (dict(model="b2c16_value"), "--model"),
                      (dict(learning_rate=-1.0), "--learning-rate"), (dict(gate_sprt="nonsense"), "--gate-sprt"),
                      (dict(value_weight=float("nan")), "--value-weight")):
        with pytest.raises(ValueError, match=flag):
            dataclasses.replace(TINY, **bad)
    with pytest.raises(ValueError, match="--resign-moves"):
        dataclasses.replace(TINY_SP, resign_moves=0)
    assert alphazero.run_games(None, None, 0, size=5, config=TINY_SP)["games"] == 0


def test_best_json_is_relative_so_a_moved_run_resumes_its_own_net(tmp_path):
    import shutil

    from alphalite.nn import checkpoint

    store = Store(tmp_path / "run").make()
    for step in (0, 3):
        store.net_dir(step).mkdir()
        (store.net_dir(step) / "model.json").write_text("{}")
    store.set_best(store.net_dir(3), 3, iteration=0)
    assert json.loads((store.root / "best.json").read_text())["net"] == "nets/step-0000003"
    moved = Store(shutil.copytree(store.root, tmp_path / "moved"))
    shutil.rmtree(store.root)
    assert moved.best() == {"net": str(moved.net_dir(3)), "step": 3, "iteration": 0}
    assert checkpoint.run_best(moved.root) == moved.net_dir(3)  # what GTP plays from a run folder
    # a best.json of an older run names an absolute path: a moved or copied run reads its own net ...
    (moved.root / "best.json").write_text(json.dumps({"net": str(store.net_dir(3)), "step": 3}))
    assert moved.best()["net"] == str(moved.net_dir(3))
    # ... and a net outside the run as written
    (moved.root / "best.json").write_text(json.dumps({"net": "/elsewhere/step-0000009", "step": 9}))
    assert moved.best()["net"] == "/elsewhere/step-0000009"


def test_alphazero_flags_reach_their_own_config():
    from alphalite import cli
    from alphalite.runtime import config as config_lib

    names = [{f.name for f in dataclasses.fields(c)} for c in (ZeroConfig, SelfPlayConfig, SearchParams)]
    assert not (names[0] & names[1]) and not (names[0] & names[2]) and not (names[1] & names[2])
    args = cli.build_parser().parse_args(["rl", "--algo", "alphazero", "--workdir", "w", "--train-batch", "32",
                                          "--batch", "4", "--c-puct", "2.0", "--simulations", "8"])
    assert config_lib.from_args(ZeroConfig, args).train_batch == 32
    assert config_lib.from_args(SearchParams, args) == SearchParams(batch_size=4, c_puct=2.0)
    assert config_lib.from_args(SelfPlayConfig, args).simulations == 8
    # a flag both algorithms read reaches both; one only the other reads is refused, not dropped
    args = cli.build_parser().parse_args(["rl", "--algo", "alphazero", "--workdir", "w", "--max-minutes", "75"])
    assert config_lib.from_args(ZeroConfig, args).max_minutes == 75


@pytest.mark.parametrize("algo,flags,named", [
    ("alphazero", ["--eval-games", "8", "--export", "x"], "--eval-games, --export: only --algo reinforce"),
    ("reinforce", ["--gate-games", "8"], "--gate-games: only --algo alphazero"),
    ("reinforce", ["--batch", "4"], "--batch: only --algo alphazero"),
])
def test_a_flag_only_the_other_algo_reads_is_one_line_and_exit_2(tmp_path, capsys, algo, flags, named):
    from alphalite import cli

    # --games-per-iteration 0, refused by both configs, keeps a run that took the flag from starting
    assert cli.main(["rl", "--algo", algo, "--workdir", str(tmp_path / "w"), "--games-per-iteration", "0",
                     *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1
    assert not (tmp_path / "w").exists()


def test_the_round_line_names_a_gate_only_when_games_were_played():
    tr = {"loss": 1.9104}
    gated = {"games": 40, "score": 0.65, "accepted": True}
    line = round_line(7, 400, 64, tr, gated)
    assert line == "iteration 7/400: 64 games, loss 1.910, gate 0.65 over 40 games -> accepted"
    rejected = {**gated, "score": 0.3, "accepted": False}
    assert round_line(8, 400, 64, tr, rejected).endswith("gate 0.30 over 40 games -> rejected")
    line = round_line(1, 400, 64, tr, {"games": 0, "accepted": True})  # --gate-games 0
    assert line == "iteration 1/400: 64 games, loss 1.910, no gating -> accepted" and "nan" not in line
    assert round_line(2, 400, 64, {}, {"games": 0, "accepted": False}).endswith("loss nan, no new net")
