"""Policy-gradient RL: the REINFORCE sign, baselines, a one-iteration run,
Ctrl-C, and resume after kill -9 at the same iteration with the same pool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from alphalite.go import board

from alphalite.nn import checkpoint, features, nets
from selfplay import rl
from selfplay.games import Positions
from alphalite.runtime import config as config_lib
from alphalite.runtime import files

ROOT = Path(__file__).resolve().parent.parent


def _export_tiny(path, size=5):
    model = nets.make_model("b1c8", size, 17)
    v = nets.init_variables(model, jax.random.PRNGKey(0))
    checkpoint.export_model(path, v, {"model": "b1c8", "board_size": size, "preset": "default", "kind": "policy"})
    return model, v


def test_advantages_baselines():
    z = np.array([1, 1, -1, 1, -1, -1], np.float32)
    black = np.array([True, True, True, False, False, False])
    np.testing.assert_allclose(rl.advantages(z, black, "none"), z)
    np.testing.assert_allclose(rl.advantages(z, black, "mean"), z)  # mean is 0 here
    a = rl.advantages(z, black, "colour")
    np.testing.assert_allclose(a[:3], z[:3] - 1 / 3)
    np.testing.assert_allclose(a[3:], z[3:] + 1 / 3)
    np.testing.assert_allclose(rl.advantages(np.ones(4), np.ones(4, bool), "colour"), 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_reinforce_moves_probability_the_right_way(sign):
    """A move rewarded (+1) gains probability after one step; punished (-1) loses it."""
    size, move = 5, 7
    model = nets.make_model("b1c8", size, 17)
    v = nets.init_variables(model, jax.random.PRNGKey(0))
    s = board.play(board.new_game(size), 12)
    planes = np.repeat(features.encode(s)[None], 6, 0).astype(np.uint8)
    mask = np.repeat(board.legal_moves(s)[None], 6, 0)
    pos = Positions(planes, mask, np.full(6, move, np.int32), np.zeros(6, np.int32))

    def prob(params):
        logp = model.apply({"params": params, "batch_stats": v["batch_stats"]}, planes[:1].astype(np.float32))
        return float(jax.nn.softmax(jnp.where(mask[:1], logp, -1e30))[0, move])

    grad_fn = rl.make_grad_fn(model)
    weights = np.full(6, sign / 6, np.float32)
    grads, st = rl.policy_gradient(grad_fn, v["params"], v["batch_stats"], pos, weights, 1.0, micro_batch=4)
    tx = optax.sgd(0.5)
    updates, _ = tx.update(grads, tx.init(v["params"]), v["params"])
    after = optax.apply_updates(v["params"], updates)
    before = prob(v["params"])
    assert np.isclose(st["logp_sum"] / 6, np.log(before), atol=1e-4)
    assert (prob(after) - before) * sign > 0.002
    # positions whose advantage is 0 still count in the logged entropy and log-prob (not as padding)
    _, st0 = rl.policy_gradient(grad_fn, v["params"], v["batch_stats"], pos, np.zeros(6, np.float32), 1.0,
                                micro_batch=4)
    assert st0 == pytest.approx(st)


@pytest.mark.slow
def test_one_iteration_writes_metrics_checkpoint_pool(tmp_path):
    _export_tiny(tmp_path / "sl")
    cfg = rl.RLConfig(init=str(tmp_path / "sl"), iterations=1, games_per_iteration=4, eval_games=4,
                      eval_every=1, pool_every=1, learning_rate=1e-3, micro_batch=64)
    res = rl.train_rl(cfg, tmp_path / "run", progress=False)
    run = tmp_path / "run"
    assert res["iteration"] == 1 and res["stopped"] == "finished"
    # the run's config.json (its config and the net's description) reads back as `rl --config` takes it
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"] and config_lib.from_dict(rl.RLConfig, config_lib.file_values(rl.RLConfig, saved)) == cfg
    recs = files.read_jsonl(run / "metrics.jsonl")
    assert [(r["kind"], r["step"]) for r in recs] == [("eval", 0), ("train", 1), ("eval", 1)]
    assert 0.0 <= recs[0]["winrate_vs_sl"] <= 1.0 and recs[1]["positions"] > 0
    assert res["pool"] == ["sl", "iter_000001"]
    assert (run / "pool" / "iter_000001" / "model.json").exists()
    assert (run / "plots" / "winrate.png").exists() and (run / "plots" / "training.png").exists()
    assert len(list((run / "games").glob("*.npz"))) == 4
    assert checkpoint.manager(run / "ckpt").latest_step() == 1
    info, _ = checkpoint.load_variables(run / "best_model")
    assert info["board_size"] == 5
    out = rl.export_best(run, tmp_path / "rl5")
    assert json.loads((out / "winrate.json").read_text())["eval_games"] == 4
    # the learner's weights moved
    _, a = checkpoint.load_variables(run / "pool" / "sl")
    _, b = checkpoint.load_variables(run / "pool" / "iter_000001")
    assert not np.allclose(a["params"]["policy_dense"]["kernel"], b["params"]["policy_dense"]["kernel"])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_a_non_finite_update_stops_the_run_unapplied(tmp_path):
    """An absurd learning rate (inf in float32): the update is refused, the
    run stays at its last good iteration, clipping is in the chain."""
    from alphalite.train import loop

    _export_tiny(tmp_path / "sl")
    cfg = rl.RLConfig(init=str(tmp_path / "sl"), iterations=2, games_per_iteration=2, baseline="mean", eval_games=0,
                      learning_rate=1e39, micro_batch=64, max_moves=20)
    assert cfg.grad_clip == loop.GRAD_CLIP and len(rl.make_optimizer(cfg).init({"w": jnp.zeros(1)})) == 2
    with pytest.raises(loop.TrainingDiverged, match="iteration 1 gave a non-finite .* stays at iteration 0"):
        rl.train_rl(cfg, tmp_path / "run", progress=False)
    state, meta = checkpoint.restore(checkpoint.manager(tmp_path / "run" / "ckpt"), _abstract_state(tmp_path / "sl"))
    assert meta["iteration"] == 0
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree_util.tree_leaves(state.params))


def test_bad_config_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="--games-per-iteration must be even and >= 2, got 3"):
        rl.RLConfig(games_per_iteration=3)
    # one game a colour: the colour baseline leaves every advantage 0
    assert not rl.advantages(np.array([1.0, -1.0]), np.array([True, False]), "colour").any()
    with pytest.raises(ValueError, match="--games-per-iteration must be >= 4 with --baseline colour"):
        rl.RLConfig(games_per_iteration=2)
    rl.RLConfig(games_per_iteration=2, baseline="mean")
    with pytest.raises(Exception, match="not found"):
        rl.train_rl(rl.RLConfig(init=str(tmp_path / "nope")), tmp_path / "run", progress=False)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -1e-4])
def test_learning_rate_must_be_finite_and_positive(bad):
    # NaN compares false with everything: "<= 0" alone let it through
    with pytest.raises(ValueError, match="--learning-rate must be > 0"):
        rl.RLConfig(learning_rate=bad)


def test_non_finite_floats_are_refused_through_the_config_file_path():
    for key in ("temperature", "komi", "grad_clip", "max_minutes", "eval_temperature", "momentum"):
        with pytest.raises(ValueError, match="--" + key.replace("_", "-")):
            config_lib.from_dict(rl.RLConfig, {key: float("nan")})


def _abstract_state(sl):
    from alphalite.train import loop

    info, v = checkpoint.load_variables(sl)
    model = nets.make_model(info["model"], info["board_size"], 17)
    return loop.train_state_cls().create(apply_fn=model.apply, params=v["params"],
                                           tx=rl.make_optimizer(rl.RLConfig()), batch_stats=v["batch_stats"])


def _wait_for(path, pred, proc, timeout=240):
    t = time.time()
    while time.time() - t < timeout:
        recs = files.read_jsonl(path)
        if pred(recs):
            return recs
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    raise AssertionError("timed out")


def _trains(recs):
    return [r["step"] for r in recs if r.get("kind") == "train"]


def test_ctrl_c_stops_cleanly_with_the_iteration_saved(tmp_path):
    import threading

    _export_tiny(tmp_path / "sl")
    run = tmp_path / "run"
    cfg = rl.RLConfig(init=str(tmp_path / "sl"), iterations=1000, games_per_iteration=2, baseline="mean", eval_games=0,
                      pool_every=2, micro_batch=64, max_moves=30)

    def interrupt():  # Ctrl-C once the first iteration is on disk
        t = time.time()
        while time.time() - t < 120 and not _trains(files.read_jsonl(run / "metrics.jsonl")):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    res = rl.train_rl(cfg, run, progress=False)
    assert res["stopped"] == "interrupted"
    done = max(_trains(files.read_jsonl(run / "metrics.jsonl")))
    assert res["iteration"] == done and checkpoint.manager(run / "ckpt").latest_step() == done


@pytest.mark.slow
@pytest.mark.subprocess
def test_kill9_then_resume_same_iteration_and_pool(tmp_path):
    _export_tiny(tmp_path / "sl")
    run = tmp_path / "run"
    argv = [sys.executable, str(ROOT / "run_rl.py"), "--workdir", str(run), "--init", str(tmp_path / "sl"),
            "--iterations", "1000", "--games-per-iteration", "2", "--baseline", "mean", "--eval-games", "0", "--pool-every", "2",
            "--micro-batch", "64", "--quiet", "--max-moves", "30"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for(run / "metrics.jsonl", lambda r: len(_trains(r)) >= 4, proc)
    proc.kill()  # SIGKILL, in the middle of an iteration or of its checkpoint
    proc.wait()
    mgr = checkpoint.manager(run / "ckpt")
    last = mgr.latest_step()
    assert last >= 3  # metrics are written just before the checkpoint
    _, meta = checkpoint.restore(mgr, _abstract_state(tmp_path / "sl"), last)
    assert meta["iteration"] == last
    cfg = rl.RLConfig(init=str(tmp_path / "sl"), iterations=last + 1, games_per_iteration=2, baseline="mean", eval_games=0,
                      pool_every=2, micro_batch=64, max_moves=30)
    res = rl.train_rl(cfg, run, progress=False)
    assert res["iteration"] == last + 1
    assert meta["pool"] == ["sl"] + [f"iter_{k:06d}" for k in range(2, last + 1, 2)]
    assert res["pool"] == ["sl"] + [f"iter_{k:06d}" for k in range(2, last + 2, 2)]
    steps = _trains(files.read_jsonl(run / "metrics.jsonl"))
    assert steps == list(range(1, last + 2))  # nothing past the checkpoint kept, nothing repeated
