"""Value nets: output range, learning a synthetic outcome, the self-play data
protocol (SL to U, one random move, RL after), eval-value's JSON, resume,
GNU Go's estimate as a reference predictor."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from alphalite.go import board

from alphalite.nn import checkpoint, features, nets

from alphalite.data import dataset

from alphalite.train import loop, value
from alphalite.train import supervised as train
from alphalite.go.gtpclient import find_gnugo

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "tygem-sample.tar.gz"


def test_value_net_shape_and_range():
    model = nets.make_model("b1c8_value", 9, features.num_planes("default"))
    variables = nets.init_variables(model, jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (5, 9, 9, 17)) * 50.0  # large inputs saturate tanh
    v = np.asarray(model.apply(variables, x, train=False))
    assert v.shape == (5,)
    assert np.all(v >= -1.0) and np.all(v <= 1.0)


def _synthetic_5x5(n, seed):
    """Black to move; +1 when black has more stones than white, -1 when fewer."""
    rng = np.random.default_rng(seed)
    planes, labels = [], []
    while len(labels) < n:
        b = rng.choice([-1, 0, 1], size=(5, 5), p=[0.25, 0.5, 0.25]).astype(np.int8)
        diff = int((b == 1).sum()) - int((b == -1).sum())
        if diff == 0:
            continue
        try:
            s = board.from_stones(b)
        except ValueError:  # a group without liberties
            continue
        planes.append(features.encode(s, "default"))
        labels.append(1.0 if diff > 0 else -1.0)
    return np.stack(planes), np.array(labels, np.float32)


@pytest.mark.slow
def test_value_loss_decreases_on_synthetic_task():
    planes, y = _synthetic_5x5(512, 0)
    model = nets.make_model("b1c8_value", 5, 17)
    state = loop.create_state(model, optax.adam(3e-3), jax.random.PRNGKey(0))
    step = value.make_train_step()
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(200):
        idx = rng.integers(0, len(y), 64)
        state, m = step(state, {"planes": planes[idx], "outcomes": y[idx]})
        losses.append(float(m["loss"]))
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20]), (losses[:5], losses[-5:])
    v = np.asarray(value.make_predict(model)(loop.variables_of(state), planes))
    assert ((v > 0) == (y > 0)).mean() > 0.85


# ---------------------------------------------------------------- self-play value data


def _bias_policy(path, size, prefer_low: bool):
    """A policy whose logits are a fixed bias: the lowest (or highest) move index wins."""
    model = nets.make_model("b1c4", size, 17)
    variables = jax.tree_util.tree_map(np.asarray, nets.init_variables(model, jax.random.PRNGKey(0)))
    variables["params"]["policy_dense"]["kernel"] = np.zeros_like(variables["params"]["policy_dense"]["kernel"])
    A = size * size + 1
    variables["params"]["policy_dense"]["bias"] = (-np.arange(A) if prefer_low else np.arange(A)).astype(np.float32)
    checkpoint.export_model(path, variables, {"model": "b1c4", "board_size": size, "preset": "default",
                                              "kind": "policy"})
    return str(path)


@pytest.mark.parametrize("flag,value", [("--batch", "0"), ("--games", "-1"), ("--max-minutes", "-1"),
                                        ("--temperature", "nan"), ("--u-max", "-3")])
def test_value_data_refuses_values_no_run_can_use(tmp_path, capsys, flag, value):
    """One line naming the flag, exit 2, nothing written: --batch 0 looped for
    ever playing nothing, --max-minutes -1 stopped at once as at its limit."""
    from alphalite import cli

    code = cli.main(["value-data", "--sl", str(tmp_path / "none"), "--out", str(tmp_path / "vd"), flag, value,
                     "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"alphalite: error: {flag} must be "), err
    assert not (tmp_path / "vd").exists()


@pytest.mark.slow
def test_value_data_follows_the_protocol_and_resumes(tmp_path):
    from selfplay import valuedata
    from selfplay.games import candidates

    size = 5
    sl = _bias_policy(tmp_path / "sl", size, prefer_low=True)
    rl = _bias_policy(tmp_path / "rl", size, prefer_low=False)
    out = tmp_path / "vdata"
    kw = dict(rl_checkpoint=rl, batch=4, u_max=8, temperature=0.0, seed=3, komi=0.5, progress=False)
    res = valuedata.generate(out, sl, games=4, **kw)
    assert res["games"] >= 4
    games = dataset.load_games(out, "all", board_size=size)
    assert len(games) == res["games"]
    assert np.array_equal(games["value_move"], games["random_move"] + 1)
    A = size * size + 1
    differs = 0  # steps where the self-atari ban changed the choices
    for g in range(len(games)):
        a, b = games["move_offsets"][g], games["move_offsets"][g + 1]
        mv = games["moves"][a:b]
        u = int(games["random_move"][g])
        state = board.new_game(size, 0.5)
        for t, m in enumerate(mv):
            strict = candidates(state, no_self_atari=True)  # the default of generate
            differs += bool((strict != candidates(state)).any())
            cand = np.flatnonzero(strict)
            if t < u:  # SL net: lowest candidate
                assert m == cand.min(), (g, t)
            elif t == u:  # uniformly random legal move, never a pass
                assert m != A - 1 and board.legal_moves(state)[m]
            else:  # RL net: highest candidate
                assert m == cand.max(), (g, t)
            state = board.play(state, int(m))
        assert state.is_over or len(mv) == 2 * size * size + 20
        assert games["winner"][g] == np.sign(board.area_score(state))
        # the value targets are the final position's, exact
        assert games["score"][g] == pytest.approx(board.area_score(state))
        from alphalite.engine import players
        np.testing.assert_array_equal(games["ownership"][g], players.owners(state))
    assert differs > 0
    # the stored training position is the one after the random move
    batch = next(dataset.iterate_eval(out, split="all", board_size=size, marked_only=True, batch_size=64))
    assert len(batch["game"]) == len(games)
    for i, g in enumerate(batch["game"]):
        a = games["move_offsets"][g]
        u = int(games["random_move"][g])
        state = board.new_game(size, 0.5)
        for m in games["moves"][a:a + u + 1]:
            state = board.play(state, int(m))
        assert batch["move_number"][i] == u + 1
        np.testing.assert_array_equal(batch["stones"][i], board.stones(state))
        assert batch["outcomes"][i] == games["winner"][g] * state.to_play
    # a rerun continues with the next batch; finished shards stay as they were
    before = json.loads((out / "index.json").read_text())
    res2 = valuedata.generate(out, sl, games=res["games"] + 4, **kw)
    after = json.loads((out / "index.json").read_text())
    assert after["batches_done"] == before["batches_done"] + 1
    assert res2["games"] >= res["games"] + 4
    assert after["shards"][: len(before["shards"])] == before["shards"]
    assert not list(out.glob(".*tmp*"))
    with pytest.raises(ValueError, match="other settings"):
        valuedata.generate(out, sl, games=1, **{**kw, "u_max": 3})
    with pytest.raises(ValueError, match="no_self_atari"):
        valuedata.generate(out, sl, games=1, **{**kw, "no_self_atari": False})


# ---------------------------------------------------------------- on human games


@pytest.fixture(scope="module")
def sample_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "sample"
    dataset.build([SAMPLE], out, jobs=1, val_frac=0.1, test_frac=0.2, progress=False)
    return out


def _value_cfg(data, steps, **kw):
    return train.SLConfig(**{**dict(data=str(data), task="value", model="b1c4_value", batch_size=16,
                                    optimizer="adam", learning_rate=1e-3, schedule="constant", warmup_steps=1,
                                    total_steps=steps, eval_every=1000, eval_positions=64, checkpoint_every=2,
                                    log_every=2, per_game=4), **kw})


@pytest.mark.slow
def test_value_training_resumes_to_the_same_state(sample_data, tmp_path):
    ref = train.train_and_evaluate(_value_cfg(sample_data, 6), tmp_path / "ref", progress=False)
    assert ref["step"] == 6 and "val_mse" in ref and 0.0 <= ref["val_accuracy"] <= 1.0
    part = train.train_and_evaluate(_value_cfg(sample_data, 3), tmp_path / "run", progress=False)
    assert part["step"] == 3
    done = train.train_and_evaluate(_value_cfg(sample_data, 6), tmp_path / "run", progress=False)
    assert done["step"] == 6
    a, b = _latest_state(tmp_path / "ref"), _latest_state(tmp_path / "run")
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["kind"] == "value" and saved["task"] == "value"
    with pytest.raises(ValueError, match="value nets end in _value"):
        train.train_and_evaluate(_value_cfg(sample_data, 2, model="b1c4"), tmp_path / "bad", progress=False)
    # a run saved before the newer fields existed resumes (missing = default)
    for k in ("marked_only", "init_trunk", "init"):
        del saved[k]
    (tmp_path / "run" / "config.json").write_text(json.dumps(saved))
    train._check_resume(_value_cfg(sample_data, 6), tmp_path / "run")


def _latest_state(workdir):
    import orbax.checkpoint as ocp

    mgr = checkpoint.manager(Path(workdir) / "ckpt", max_to_keep=None)
    out = mgr.restore(mgr.latest_step(), args=ocp.args.Composite(state=ocp.args.StandardRestore(),
                                                                 meta=ocp.args.JsonRestore()))
    assert out.meta["step"] == 6
    return {"params": out.state["params"], "opt_state": out.state["opt_state"],
            "batch_stats": out.state["batch_stats"]}


@pytest.mark.slow
def test_eval_value_prints_the_four_move_buckets(sample_data, tmp_path, capsys):
    from alphalite import cli

    model = nets.make_model("b1c4_value", 19, 17)
    variables = jax.tree_util.tree_map(np.asarray, nets.init_variables(model, jax.random.PRNGKey(0)))
    ck = checkpoint.export_model(tmp_path / "v", variables, {"model": "b1c4_value", "board_size": 19,
                                                             "preset": "default", "kind": "value"})
    assert cli.main(["eval-value", "--checkpoint", str(ck), str(sample_data), "--max-games", "12",
                     "--influence-games", "80"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["snapshot_moves"] == [30, 80, 130, 180]
    for who in ("value_net", "influence"):
        for m in (30, 80, 130, 180):
            assert f"acc_{m}" in res[who] and f"mse_{m}" in res[who]
        assert res[who]["n_30"] == res["test_games"] > 0
        assert 0.0 <= res[who]["accuracy"] <= 1.0 and 0.0 <= res[who]["mse"] <= 4.0
    # move 30 recomputed here: the net on those positions against each game's winner (both for the mover)
    b = next(iter(dataset.iterate_eval(sample_data, split="test", board_size=19, max_games=12,
                                       move_numbers=(30,), decided_only=True)))
    v = np.asarray(value.make_predict(model)(variables, b["planes"]))
    assert len(v) == res["value_net"]["n_30"]
    assert res["value_net"]["acc_30"] == pytest.approx(((v > 0) == (b["outcomes"] > 0)).mean())
    assert res["value_net"]["mse_30"] == pytest.approx(np.mean((v - b["outcomes"]) ** 2), rel=1e-5)
    assert res["influence"]["train_games"] == 80
    assert res["paper_influence_accuracy"]["180"] == 0.893
    # nothing to evaluate is an error, not a zero result: a split without
    # games of the net's size, or SGF sources of which no game is kept
    nine = tmp_path / "nine"
    dataset.build([ROOT / "tests" / "data" / "handicap-9x9.sgf"], nine, jobs=1, test_frac=1.0, val_frac=0.0,
                  progress=False)
    bad = ROOT / "tests" / "data" / "corrupt.sgf"
    for src, words in ((nine, "no decided test games of size 19"), (bad, "corrupt.sgf: kept no game of size 19")):
        assert cli.main(["eval-value", "--checkpoint", str(ck), str(src)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and words in captured.err, captured.err
        assert "skipped.tsv" not in captured.err  # the temporary build's log is gone


def test_eval_value_rejects_a_policy_checkpoint():
    with pytest.raises(checkpoint.CheckpointError, match="policy19 is not a value net"):
        value.load_value_net(str(ROOT / "checkpoints" / "policy19"))


def _wall_game(winner_first: bool, result: str, extra: str = "") -> str:
    """9x9, 36 moves (then ``extra``): the first player walls off columns
    A-E (D and E), the second G-J (G and H); the first player is 9 points
    ahead."""
    a, b = ("B", "W") if winner_first else ("W", "B")
    rows = "abcdefghi"
    moves = []
    for ca, cb in (("e", "g"), ("d", "h")):
        for r in rows:
            moves += [f"{a}[{ca}{r}]", f"{b}[{cb}{r}]"]
    return f"(;GM[1]FF[4]SZ[9]KM[0.5]RE[{result}];" + ";".join(moves) + extra + ")"


@pytest.mark.gnugo
@pytest.mark.skipif(find_gnugo() is None, reason="GNU Go not found on PATH or in /usr/games: install gnugo")
def test_gnugo_reference_scores_the_snapshot_positions(tmp_path):
    src = tmp_path / "sgf"
    src.mkdir()
    # black ahead and wins; white ahead and wins; black ahead but the record
    # says white won (one more move, or the dataset drops it as a duplicate)
    for name, first, res, extra in (("b", True, "B+8.5", ""), ("w", False, "W+8.5", ""),
                                    ("upset", True, "W+R", ";B[ai]")):
        (src / f"{name}.sgf").write_text(_wall_game(first, res, extra))
    data = tmp_path / "data"
    dataset.build([src], data, jobs=1, sizes=(9,), val_frac=0.0, test_frac=0.0, progress=False)
    tests = list(dataset.iterate_eval(data, split="train", board_size=9, decided_only=True,
                                      move_numbers=value.SNAPSHOT_MOVES))
    ref = value.gnugo_reference(data, "train", 9, tests, games=5)
    assert ref["games"] == 3 and ref["skipped"] == {"setup": 0, "refused": 0, "crashed": 0}
    assert ref["n_30"] == 3 and ref["n_80"] == 0
    assert ref["acc_30"] == pytest.approx(2 / 3)


# ---------------------------------------------------------------- ownership and score targets, aux heads


def _counted_game(result: str, extra: str = "") -> str:
    """The wall game (black walls D-E, white G-H) then a white stone at B8
    inside black's area, dead: settled, black owns A-E (45 points), white G-J
    (27), column F is dame; with komi 0.5 black wins by 17.5."""
    return _wall_game(True, result, ";W[bb]" + extra)


def test_counted_game_targets_settle_the_dead_stone():
    from alphalite.go import sgf
    from selfplay import valuedata

    rec = sgf.read_sgf(_counted_game("B+17.5").encode())
    sp, sc, mv, cl = sgf.record_arrays(rec)
    state = valuedata.final_position(9, rec.komi, sp, sc, mv, cl)
    assert board.area_score(state) == pytest.approx(18 - 28 - 0.5)  # as it stands, B8 spoils A-C
    own, score, dead = valuedata.settled_targets(state, valuedata.judge_for(64))
    grid = own.reshape(9, 9)
    assert dead == 1 and grid[1, 1] == 1  # B8 is row 1, column 1
    assert (grid[:, :5] == 1).all() and (grid[:, 5] == 0).all() and (grid[:, 6:] == -1).all()
    assert score == pytest.approx(17.5) == rec.winner * rec.margin


def _targets_folder(tmp_path, playouts=32):
    """A 9x9 dataset with the counted game and a resigned one, and its copy with targets."""
    from selfplay import valuedata

    src = tmp_path / "sgf"
    src.mkdir()
    (src / "counted.sgf").write_text(_counted_game("B+17.5"))
    (src / "resigned.sgf").write_text(_counted_game("B+R", ";B[ai]"))
    data = tmp_path / "data"
    dataset.build([src], data, jobs=1, sizes=(9,), val_frac=0.0, test_frac=1.0, progress=False)
    res = valuedata.build_targets(data, tmp_path / "tv", playouts=playouts, progress=False)
    return tmp_path / "tv", res


def test_value_targets_copy_the_dataset_and_the_loader_turns_them_with_the_board(tmp_path):
    tv, res = _targets_folder(tmp_path)
    assert res["stopped"] == "finished" and res["counted_games"] == 1 and res["judged_games"] == 1
    assert res["winner_agrees_with_record"] == 1.0 and res["mean_abs_score_error"] == 0.0
    games = dataset.load_games(tv, "test", 9)
    counted = np.isfinite(games["score"])
    assert counted.sum() == 1 and games["result"][counted][0] == "B+17.5"
    assert (games["ownership"][~counted] == 0).all() and games["ownership"].shape == (2, 81)
    seen = set()
    for b in dataset.iterate_batches(tv, split="test", board_size=9, batch_size=8, epochs=3, preset="default"):
        for st, own, sc, sym in zip(b["stones"], b["ownership"], b["score"], b["symmetry"]):
            if np.isnan(sc):
                assert (own == 0).all()
                continue
            seen.add(int(sym))
            assert (own[st == 1] == 1).all() and (own[st == -1] == -1).all(), sym  # the dead stone comes last
            assert int(own.sum()) == 18 and sc == pytest.approx(17.5)
    assert len(seen) >= 4  # several symmetries, the walls both vertical and horizontal
    # counted_only (what --heads-only trains on): the positions of the counted game alone
    every = dataset.count_positions(tv, split="test", board_size=9, decided_only=True)
    kept = dataset.count_positions(tv, split="test", board_size=9, decided_only=True, counted_only=True)
    assert kept == int(games["num_moves"][counted].sum()) and 0 < kept < every
    with pytest.raises(dataset.DatasetError, match="value targets"):
        dataset.count_positions(tmp_path / "data", split="test", board_size=9, counted_only=True)
    from selfplay import valuedata

    with pytest.raises(ValueError, match="other settings"):
        valuedata.build_targets(tmp_path / "data", tv, playouts=16, progress=False)
    with pytest.raises(ValueError, match="--playouts must be >= 1"):
        valuedata.build_targets(tmp_path / "data", tmp_path / "tv0", playouts=0, progress=False)


def test_value_targets_skip_games_the_judge_contradicts_and_handicap_games(tmp_path):
    """A counted game whose judged winner is not the recorded one, and a
    handicap game, get no ownership or score targets: only the agreeing
    even game does."""
    from selfplay import valuedata

    src = tmp_path / "sgf"
    src.mkdir()
    (src / "counted.sgf").write_text(_counted_game("B+17.5"))
    (src / "contradicted.sgf").write_text(_counted_game("W+3.5", ";B[ai]"))  # the board says B+17.5
    # two handicap stones inside Black's own area: the area count is the same B+17.5
    (src / "handicap.sgf").write_text(_counted_game("B+17.5").replace("KM[0.5]", "KM[0.5]HA[2]AB[aa][ab]"))
    data = tmp_path / "data"
    dataset.build([src], data, jobs=1, sizes=(9,), val_frac=0.0, test_frac=1.0, progress=False)
    res = valuedata.build_targets(data, tmp_path / "tv", playouts=32, progress=False)
    assert (res["counted_games"], res["handicap_games"], res["judged_games"]) == (3, 1, 2)
    assert res["winner_agrees_with_record"] == 0.5 and res["games_with_targets"] == 1
    games = dataset.load_games(tmp_path / "tv", "test", 9)
    has = np.isfinite(games["score"])
    assert has.sum() == 1 and games["result"][has][0] == "B+17.5" and games["handicap"][has][0] == 0
    assert (games["ownership"][~has] == 0).all()


@pytest.mark.slow
def test_aux_loss_masks_unknown_ownership_and_score():
    B, n = 4, 5
    rng = np.random.default_rng(0)
    out = {"value_logit": jnp.asarray(rng.normal(size=B), jnp.float32),
           "ownership_logit": jnp.asarray(rng.normal(size=(B, n, n)), jnp.float32),
           "score": jnp.asarray(rng.normal(size=B) * 5, jnp.float32)}
    batch = {"outcomes": np.array([1, -1, 1, -1], np.float32), "to_play": np.array([1, -1, 1, -1], np.int8),
             "ownership": rng.integers(-1, 2, (B, n, n)).astype(np.int8),
             "score": np.array([3.5, np.nan, -7.5, np.nan], np.float32)}
    loss, parts = value.aux_loss(out, batch)
    assert np.isfinite(float(loss)) and float(parts["known"]) == 0.5
    g = jax.grad(lambda o: value.aux_loss(o, batch)[0])(out)
    own_g, score_g = np.abs(np.asarray(g["ownership_logit"])).sum((1, 2)), np.abs(np.asarray(g["score"]))
    assert (own_g[[1, 3]] == 0).all() and (score_g[[1, 3]] == 0).all()
    assert (own_g[[0, 2]] > 0).all() and (score_g[[0, 2]] > 0).all()
    assert (np.asarray(g["value_logit"]) != 0).all()
    # with every target unknown the loss is KataGo's value term alone
    none = {**batch, "score": np.full(B, np.nan, np.float32)}
    z = np.asarray(out["value_logit"], np.float64)
    y = (1 + batch["outcomes"]) / 2
    ce = np.mean(np.logaddexp(0, 2 * z) - 2 * z * y)
    assert float(value.aux_loss(out, none)[0]) == pytest.approx(value.W_VALUE * ce, rel=1e-5)
    # targets are black's view: the same position seen by white flips ownership and score
    flip = {**batch, "to_play": -batch["to_play"], "ownership": -batch["ownership"], "score": -batch["score"]}
    assert float(value.aux_loss(out, flip)[0]) == pytest.approx(float(loss), rel=1e-6)


@pytest.mark.slow
def test_aux_net_learns_the_synthetic_winner_and_ownership():
    planes, y = _synthetic_5x5(512, 0)
    stones = planes[..., 0:4].sum(-1) - planes[..., 4:8].sum(-1)  # default: own, opp stones by liberties; black moves
    model = nets.make_model("b1c8_aux_value", 5, 17)
    state = loop.create_state(model, optax.adam(3e-3), jax.random.PRNGKey(0))
    step = value.make_aux_train_step()
    rng = np.random.default_rng(0)
    batch_of = lambda idx: {"planes": planes[idx], "outcomes": y[idx], "to_play": np.ones(len(idx), np.int8),
                            "ownership": stones[idx].astype(np.int8),  # each stone owns its point
                            "score": np.where(idx % 2 == 0, stones[idx].sum((1, 2)), np.nan).astype(np.float32)}
    for _ in range(200):
        state, m = step(state, batch_of(rng.integers(0, len(y), 64)))
    v, own, score = (np.asarray(a) for a in value.make_predict_aux(model)(loop.variables_of(state), planes))
    assert ((v > 0) == (y > 0)).mean() > 0.85
    occupied = stones != 0
    assert ((own > 0) == (stones > 0))[occupied].mean() > 0.95


@pytest.mark.slow
def test_aux_net_checkpoint_round_trip_and_predict(tmp_path):
    model = nets.make_model("b1c4_aux_value", 9, 17)
    variables = jax.tree_util.tree_map(np.asarray, nets.init_variables(model, jax.random.PRNGKey(3)))
    ck = checkpoint.export_model(tmp_path / "aux", variables, {"model": "b1c4_aux_value", "board_size": 9,
                                                               "preset": "default", "kind": "value"})
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(4), (3, 9, 9, 17)))
    info, loaded, predict = value.load_aux_net(str(ck))
    v, own, score = (np.asarray(a) for a in predict(loaded, x))
    assert v.shape == (3,) and own.shape == (3, 9, 9) and score.shape == (3,)
    assert np.all(np.abs(v) <= 1) and np.all(np.abs(own) <= 1)
    ref = model.apply(variables, x, train=False, aux=True)
    np.testing.assert_allclose(own, np.asarray(ref["ownership"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(score, np.asarray(ref["score"]), rtol=1e-5, atol=1e-5)
    _, _, v_only = value.load_value_net(str(ck))  # a plain value net's call: v only, the same v
    np.testing.assert_allclose(np.asarray(v_only(loaded, x)), v, rtol=1e-5, atol=1e-6)
    with pytest.raises(checkpoint.CheckpointError, match="no ownership and score heads"):
        value.load_aux_net(str(ROOT / "checkpoints" / "value19"))


def test_symmetric_predict_averages_the_images_back_on_the_board():
    model = nets.make_model("b1c4_aux_value", 9, 17)
    variables = nets.init_variables(model, jax.random.PRNGKey(6))
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(7), (2, 9, 9, 17)))
    one = value.make_predict_aux(model)
    avg = value.symmetric_predict(one, 8, aux=True)
    v, own, score = avg(variables, x)
    # by hand: each image through the net alone, its ownership turned back with numpy
    vs, owns, scores = [], [], []
    for g in range(8):
        vg, og, sg = (np.asarray(a) for a in one(variables, features.transform_planes(x, g)))
        back = np.rot90(og, -(g % 4), axes=(-2, -1))  # g flips the columns, then turns: undo both
        owns.append(np.flip(back, axis=-1) if g >= 4 else back)
        vs.append(vg), scores.append(sg)
    np.testing.assert_allclose(v, np.mean(vs, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(score, np.mean(scores, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(own, np.mean(owns, 0), rtol=1e-5, atol=1e-6)
    # the 8-image average sees a turned board as the same position: equal values, the ownership turned with it
    for g in (1, 5):
        vg, og, sg = avg(variables, features.transform_planes(x, g))
        np.testing.assert_allclose(vg, v, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(og, features.transform_planes(own[..., None], g)[..., 0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(one(variables, x)[0]), v)  # an untrained net is not symmetric alone
    plain = value.symmetric_predict(value.make_predict(model), 3)
    np.testing.assert_allclose(plain(variables, x), np.mean(vs[:3], 0), rtol=1e-5, atol=1e-6)
    assert value.symmetric_predict(one, 1) is one
    with pytest.raises(ValueError, match="symmetries"):
        value.symmetric_predict(one, 9)


@pytest.mark.slow
def test_eval_value_reports_ownership_accuracy_and_score_error(tmp_path, capsys):
    from alphalite import cli

    tv, _ = _targets_folder(tmp_path, playouts=16)
    model = nets.make_model("b1c4_aux_value", 9, 17)
    variables = jax.tree_util.tree_map(np.asarray, nets.init_variables(model, jax.random.PRNGKey(0)))
    ck = checkpoint.export_model(tmp_path / "v", variables, {"model": "b1c4_aux_value", "board_size": 9,
                                                             "preset": "default", "kind": "value"})
    assert cli.main(["eval-value", "--checkpoint", str(ck), str(tv)]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    net = res["value_net"]
    assert res["counted_test_positions"] == 1 and net["n_30"] == 2  # both games reach move 30; one was counted
    assert 0.0 <= net["ownership_accuracy_30"] <= 1.0 and net["ownership_accuracy_80"] is None
    b = next(iter(dataset.iterate_eval(tv, split="test", board_size=9, move_numbers=(30,), decided_only=True)))
    v, own, score = (np.asarray(a) for a in value.make_predict_aux(model)(variables, b["planes"]))
    k = int(np.flatnonzero(np.isfinite(b["score"]))[0])
    tp = float(b["to_play"][k])
    assert net["score_mae_30"] == pytest.approx(abs(score[k] * tp - 17.5), rel=1e-5)
    owned = b["ownership"][k] != 0
    hits = ((own[k] * tp > 0) == (b["ownership"][k] > 0))[owned].mean()
    assert net["ownership_accuracy_30"] == pytest.approx(hits)
    # the winner by the score head's sign, over both games' positions (resigned ones too)
    right = (score > 0) == (b["outcomes"] > 0)  # both for the mover
    assert net["score_head_winner"]["acc_30"] == pytest.approx(right.mean())
    # --symmetries 8: judged by the 8 images' average
    assert cli.main(["eval-value", "--checkpoint", str(ck), str(tv), "--symmetries", "8"]) == 0
    res8 = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    v8, own8, score8 = value.symmetric_predict(value.make_predict_aux(model), 8, aux=True)(variables, b["planes"])
    assert res["symmetries"] == 1 and res8["symmetries"] == 8
    assert res8["value_net"]["score_mae_30"] == pytest.approx(abs(score8[k] * tp - 17.5), rel=1e-5)
    mse8 = np.mean((v8 - b["outcomes"]) ** 2)  # both for the mover
    assert res8["value_net"]["mse_30"] == pytest.approx(mse8, rel=1e-5)
    hits8 = ((own8[k] * tp > 0) == (b["ownership"][k] > 0))[owned].mean()
    assert res8["value_net"]["ownership_accuracy_30"] == pytest.approx(hits8)
    assert cli.main(["eval-value", "--checkpoint", str(ck), str(tv), "--symmetries", "9"]) == 2
    assert "symmetries must be in 1..8" in capsys.readouterr().err
    # --moves: a 9x9 game is judged before move 80 (the paper's numbers are for 19x19)
    assert cli.main(["eval-value", "--checkpoint", str(ck), str(tv), "--moves", "20,10"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["snapshot_moves"] == [10, 20] and "acc_30" not in res["value_net"]
    assert res["value_net"]["n_10"] == res["value_net"]["n_20"] == 2
    assert res["positions"] == 4 and res["value_net"]["ownership_accuracy_10"] is not None
    for bad in ("ten", "0,20"):
        with pytest.raises(SystemExit) as e:
            cli.main(["eval-value", "--checkpoint", str(ck), str(tv), "--moves", bad])
        assert e.value.code == 2 and "--moves" in capsys.readouterr().err


@pytest.mark.slow
def test_aux_heads_train_on_a_fixed_value_net(tmp_path):
    """--heads-only: the value net's trunk and winner head (weights and batch
    statistics) come through training bit for bit, the ownership head learns."""
    planes, _ = _synthetic_5x5(512, 1)
    stones = planes[..., 0:4].sum(-1) - planes[..., 4:8].sum(-1)
    batch_of = lambda idx: {"planes": planes[idx], "outcomes": np.ones(len(idx), np.float32),  # noqa: E731
                            "to_play": np.ones(len(idx), np.int8), "ownership": stones[idx].astype(np.int8),
                            "score": stones[idx].sum((1, 2)).astype(np.float32)}
    step = value.make_aux_train_step()
    rng = np.random.default_rng(0)
    # a value net whose trunk knows the stones: the value parts of an aux net trained whole
    whole = loop.create_state(nets.make_model("b1c8_aux_value", 5, 17), optax.adam(3e-3), jax.random.PRNGKey(5))
    for _ in range(150):
        whole, _m = step(whole, batch_of(rng.integers(0, len(planes), 64)))
    vmodel = nets.make_model("b1c8_value", 5, 17)
    vvars = jax.tree_util.tree_map(np.asarray, {c: {k: v for k, v in tree.items() if k not in nets.ResNetValueAux.AUX_HEADS}
                                                for c, tree in loop.variables_of(whole).items()})
    ck = checkpoint.export_model(tmp_path / "v", vvars, {"model": "b1c8_value", "board_size": 5,
                                                         "preset": "default", "kind": "value"})
    info = {"model": "b1c8_aux_value", "board_size": 5, "preset": "default", "kind": "value"}
    cfg = train.SLConfig(task="value", model=info["model"], board_size=5, init=str(ck), heads_only=True,
                         optimizer="adam", learning_rate=3e-3, schedule="constant", warmup_steps=1)
    tx, _ = train.make_optimizer(cfg)
    state = loop.create_state(nets.make_model(info["model"], 5, 17, heads_only=True), tx, jax.random.PRNGKey(6))
    fresh_own = np.asarray(state.params["own_out"]["kernel"]).copy()
    state = train.init_from(state, str(ck), info)
    for _ in range(150):
        state, _m = step(state, batch_of(rng.integers(0, len(planes), 64)))
    fixed = {k: v for k, v in state.params.items() if k not in nets.ResNetValueAux.AUX_HEADS}
    assert sorted(fixed) == sorted(vvars["params"])
    for a, b in zip(jax.tree_util.tree_leaves((fixed, state.batch_stats["trunk"], state.batch_stats["value_bn"])),
                    jax.tree_util.tree_leaves((vvars["params"], vvars["batch_stats"]["trunk"],
                                               vvars["batch_stats"]["value_bn"]))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(state.params["own_out"]["kernel"]), fresh_own)
    plain = nets.make_model(info["model"], 5, 17)  # as a checkpoint loads it
    v, own, _ = (np.asarray(a) for a in value.make_predict_aux(plain)(loop.variables_of(state), planes))
    np.testing.assert_allclose(v, np.asarray(vmodel.apply(vvars, planes, train=False)), rtol=1e-6, atol=1e-6)
    occupied = stones != 0
    assert ((own > 0) == (stones > 0))[occupied].mean() > 0.9
    # a value net of another shape, and --heads-only without a net to start from, are refused
    small = nets.make_model("b1c4_value", 5, 17)
    ck4 = checkpoint.export_model(tmp_path / "v4", jax.tree_util.tree_map(np.asarray, nets.init_variables(
        small, jax.random.PRNGKey(0))), {"model": "b1c4_value", "board_size": 5, "preset": "default", "kind": "value"})
    with pytest.raises(ValueError, match="--init"):
        train.init_from(state, str(ck4), info)
    with pytest.raises(ValueError, match="--heads-only"):
        train.train_and_evaluate(train.SLConfig(task="value", model="b1c8_aux_value", heads_only=True,
                                                data=str(tmp_path)), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()



def test_pv_net_learns_the_move_and_the_winner_on_one_trunk():
    """--task pv's step: one trunk learns the expert move (here: a corner
    when black is ahead, the centre otherwise), the winner and the
    ownership together."""
    planes, y = _synthetic_5x5(512, 0)
    stones = planes[..., 0:4].sum(-1) - planes[..., 4:8].sum(-1)
    moves = np.where(y > 0, 0, 12).astype(np.int32)
    model = nets.make_model("b1c8_aux_pv", 5, 17)
    state = loop.create_state(model, optax.adam(3e-3), jax.random.PRNGKey(0))
    step = train.make_pv_train_step(masked=True, value_weight=1.0, aux=True)
    rng = np.random.default_rng(0)
    batch_of = lambda idx: {"planes": planes[idx], "moves": moves[idx], "legal": np.ones((len(idx), 26), bool),  # noqa: E731
                            "outcomes": y[idx], "to_play": np.ones(len(idx), np.int8),
                            "ownership": stones[idx].astype(np.int8),
                            "score": np.where(idx % 2 == 0, stones[idx].sum((1, 2)), np.nan).astype(np.float32)}
    for _ in range(400):
        state, m = step(state, batch_of(rng.integers(0, len(y), 64)))
    assert {"policy_loss", "value_loss", "ownership_loss", "accuracy", "value_accuracy"} <= set(m)
    variables = loop.variables_of(state)
    logp = np.asarray(train.make_predict(model)(variables, planes, np.ones((len(y), 26), bool)))
    assert (logp.argmax(-1) == moves).mean() > 0.85
    v, own, _ = (np.asarray(a) for a in value.make_predict_aux(model)(variables, planes))
    assert ((v > 0) == (y > 0)).mean() > 0.85
    assert ((own > 0) == (stones > 0))[stones != 0].mean() > 0.9  # 0.5 by chance
    np.testing.assert_array_equal(np.asarray(value.make_predict(model)(variables, planes)), v)  # the same head
    # the plain *_pv net: MSE on the winner
    plain = loop.create_state(nets.make_model("b1c8_pv", 5, 17), optax.adam(3e-3), jax.random.PRNGKey(0))
    plain_step = train.make_pv_train_step(masked=True, value_weight=1.0, aux=False)
    for _ in range(200):
        plain, m = plain_step(plain, {k: b for k, b in batch_of(rng.integers(0, len(y), 64)).items()
                                      if k in ("planes", "moves", "legal", "outcomes")})
    assert m["value_accuracy"] > 0.85 and m["accuracy"] > 0.85


def test_a_pv_run_starts_from_the_policy_net_it_extends(tmp_path):
    """--init with a bNcM policy net for a bNcM_aux_pv run: its trunk and
    policy head, batch statistics included; the value, ownership and score
    heads keep their fresh weights; from a bNcM_aux_value net, all but the
    policy head. Nets the model does not extend are refused."""
    assert train.extends("b6c64_aux_pv", "b6c64") and train.extends("b6c64_aux_pv", "b6c64_pv")
    assert train.extends("b6c64_pv", "b6c64") and train.extends("b6c64_aux_value", "b6c64_value")
    assert train.extends("b6c64_aux_pv", "b6c64_aux_value") and train.extends("b6c64_pv", "b6c64_value")
    for model, base in (("b6c64_pv", "b6c64_aux_pv"), ("b6c64_pv", "b6c64_aux_value"), ("b6c64_pv", "b4c64"),
                        ("b6c64_aux_value", "b6c64"), ("b6c64", "b6c64_pv")):
        assert not train.extends(model, base), (model, base)
    info = {"model": "b1c8_aux_pv", "board_size": 9, "preset": "default", "kind": "policy_value"}
    state = loop.create_state(nets.make_model("b1c8_aux_pv", 9, 17), optax.sgd(1e-3), jax.random.PRNGKey(0))
    for name, kind, own in (("b1c8", "policy", "own_out"), ("b1c8_aux_value", "value", "policy_dense")):
        src = jax.tree_util.tree_map(np.asarray, nets.init_variables(nets.make_model(name, 9, 17),
                                                                     jax.random.PRNGKey(1)))
        src["batch_stats"] = jax.tree_util.tree_map(lambda x: x + 0.5, src["batch_stats"])
        ck = checkpoint.export_model(tmp_path / name, src, {"model": name, "board_size": 9, "preset": "default",
                                                            "kind": kind})
        got = train.init_from(state, str(ck), info)
        for coll in ("params", "batch_stats"):
            new, fresh = getattr(got, coll), getattr(state, coll)
            for k in new:
                want = src[coll][k] if k in src[coll] else fresh[k]
                for a, b in zip(jax.tree_util.tree_leaves(new[k]), jax.tree_util.tree_leaves(want)):
                    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert set(src["params"]) < set(got.params) and own in got.params and own not in src["params"]
    with pytest.raises(ValueError, match="or a net this model extends"):
        train.init_from(state, str(ck), {**info, "preset": "alphago40"})


@pytest.mark.slow
def test_pv_task_trains_exports_and_is_judged_by_both_evaluations(sample_data, tmp_path, capsys):
    """`alphalite sl --task pv` from a policy net: validation records both
    heads' metrics, the export is a policy-value net, and eval-value and
    eval-policy judge it. A model that is not a *_pv net is refused before
    the work folder is made."""
    from alphalite import cli

    pol = nets.make_model("b1c4", 19, 17)
    src = jax.tree_util.tree_map(np.asarray, nets.init_variables(pol, jax.random.PRNGKey(1)))
    ck = checkpoint.export_model(tmp_path / "p", src, {"model": "b1c4", "board_size": 19, "preset": "default",
                                                       "kind": "policy"})
    run = tmp_path / "run"
    args = ["sl", "--task", "pv", "--data", str(sample_data), "--init", str(ck), "--batch-size", "16",
            "--optimizer", "adam", "--learning-rate", "1e-3", "--schedule", "constant", "--warmup-steps", "1",
            "--total-steps", "6", "--eval-every", "2", "--eval-positions", "64", "--checkpoint-every", "2",
            "--log-every", "2", "--per-game", "4", "--quiet"]
    assert cli.main([*args, "--model", "b1c4_aux_value", "--workdir", str(tmp_path / "bad")]) == 2
    assert "policy-value nets in _pv" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    # a value trained only on the winners' positions would learn a constant
    assert cli.main([*args, "--model", "b1c4_aux_pv", "--winner-only", "--workdir", str(tmp_path / "bad")]) == 2
    assert "--winner-only" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert cli.main([*args, "--model", "b1c4_aux_pv", "--workdir", str(run)]) == 0
    evals = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "val_mse" in r]
    assert [r["step"] for r in evals] == [2, 4, 6] and 0.0 <= evals[-1]["val_top1"] <= 1.0
    assert "val_ownership_accuracy" in evals[-1]
    # the best step by both losses as the run trains them (move NLL + value weight 1 x winner MSE)
    best = max(evals, key=lambda r: -(r["val_nll"] + r["val_mse"]))["step"]
    assert checkpoint.manager(run / "best").latest_step() == best
    assert json.loads((run / "config.json").read_text())["kind"] == "policy_value"
    assert cli.main(["export", str(run), "--out", str(tmp_path / "pv")]) == 0
    capsys.readouterr()
    assert cli.main(["eval-value", "--checkpoint", str(tmp_path / "pv"), str(sample_data), "--max-games", "6",
                     "--influence-games", "20"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["model"] == "b1c4_aux_pv" and res["value_net"]["n_30"] > 0 and "ownership_accuracy" in res["value_net"]
    ev = train.evaluate_checkpoint(str(tmp_path / "pv"), [str(sample_data)], max_games=3)
    assert ev["positions"] > 100 and 0.0 <= ev["top1"] <= 1.0 and ev["illegal_top1"] == 0
