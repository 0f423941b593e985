"""The GTP engine plays a policy-value net (AlphaZero's ``bNcM_pv``): its
folder or an AlphaZero run folder, valued by its own head in the same
network call, on ONNX Runtime or JAX; the wrong pairings and broken
folders stop it with one line."""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from alphalite.engine import players
from alphalite.go import board
from alphalite.nn import checkpoint, features, nets
from tests import test_gtp as gtp_tests  # imported at collection: rewriting it mid-test hit CPython 3.11's AST depth bug

MODEL = "b1c8_pv"


def _pv_variables(seed: int):
    """A tiny 9x9 pv net with batch statistics and a value head that is not ~0."""
    model = nets.make_model(MODEL, 9, features.num_planes("default"))
    variables = jax.tree_util.tree_map(np.asarray, nets.init_variables(model, jax.random.PRNGKey(seed)))
    rng = np.random.default_rng(seed)
    stats = {k: {**v} for k, v in variables["batch_stats"].items()}  # variances off 1, so folding matters
    stats = jax.tree_util.tree_map_with_path(
        lambda path, a: rng.uniform(0.5, 2.0, a.shape).astype(np.float32) if path[-1].key == "var" else a, stats)
    return model, {"params": variables["params"], "batch_stats": stats}


@pytest.fixture(scope="module")
def pv(tmp_path_factory):
    """(model, variables, net folder, AlphaZero run folder whose best.json points at it)."""
    root = tmp_path_factory.mktemp("pv")
    model, variables = _pv_variables(3)
    info = {"model": MODEL, "board_size": 9, "preset": "default", "kind": "policy_value", "step": 7}
    net = checkpoint.export_model(root / "run" / "nets" / "step-0000007", variables, info)
    (root / "run" / "config.json").write_text("{}")
    (root / "run" / "ckpt").mkdir()
    (root / "run" / "best.json").write_text(json.dumps({"net": str(net), "step": 7}))
    return model, variables, net, root / "run"


def _positions():
    st = board.new_game(9, 7.0)
    out = [st]
    for m in (40, 30, 50, 22, 31):
        st = board.play(st, m)
        out.append(st)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("inference", ["onnx", "jax"])
def test_value_is_the_nets_own_head(pv, inference):
    """PolicyNet.evaluate of a pv net: the priors and value JAX computes with
    the net itself (one apply, both heads), on either runtime."""
    model, variables, net_dir, _ = pv
    net = players.load_net(str(net_dir), None, inference)
    assert net.inference == inference and net.has_value and net.value_model is None
    states = _positions()
    logits, value = model.apply(variables, np.stack([features.encode(st, "default") for st in states]), train=False)
    values = []
    for st, lg, want_v in zip(states, np.asarray(logits), np.asarray(value)):
        want_p = np.exp(np.where(board.legal_moves(players.resume(st)), lg, -np.inf) - lg.max())
        p, v = net.evaluate(st)
        np.testing.assert_allclose(p, want_p / want_p.sum(), atol=1e-5)
        assert abs(v - float(want_v)) < 1e-4, (v, float(want_v))
        values.append(v)
    assert np.ptp(values) > 1e-3 and max(abs(v) for v in values) > 1e-2  # the check above means something


def test_symmetries_average_the_net_over_transformed_boards(pv):
    """evaluate(state, k): the mean of the net's priors on each of the first
    k symmetric images of the board, each mapped back to the board's own
    points, and the mean of its values; on the empty board the 8-fold
    average is itself symmetric, where the net alone is not."""
    model, variables, net_dir, _ = pv
    net = players.load_net(str(net_dir), None, "onnx")
    fwd = features.sym_move_table(9)
    for st in _positions()[1:4]:
        x, legal = features.encode(st, "default"), board.legal_moves(players.resume(st))
        images, want_v = [], []
        for g in range(8):
            lg = np.zeros_like(legal)
            lg[fwd[g]] = legal
            logits, value = model.apply(variables, features.transform_planes(x, g)[None], train=False)
            e = np.exp(np.where(lg, np.asarray(logits)[0], -np.inf) - np.asarray(logits)[0].max())
            images.append((e / e.sum())[fwd[g]])
            want_v.append(float(np.asarray(value)[0]))
        p, v = net.evaluate(st, 8)
        np.testing.assert_allclose(p, np.mean(images, axis=0), atol=2e-6)
        assert abs(v - np.mean(want_v)) < 1e-4
        assert np.ptp(np.array(images), axis=0).max() > 5e-5  # the images differ: the average means something
    p1 = net.priors(board.new_game(9, 7.0))[:81].reshape(9, 9)
    p8 = net.priors(board.new_game(9, 7.0), 8)[:81].reshape(9, 9)
    for img in (p8.T, p8[::-1], p8[:, ::-1], np.rot90(p8)):
        np.testing.assert_allclose(p8, img, atol=1e-6)
    assert np.abs(p1 - p1.T).max() > 5e-5
    with pytest.raises(ValueError, match="symmetries"):
        net.evaluate(board.new_game(9, 7.0), 9)


def test_a_run_folder_plays_its_best_net_even_when_moved(pv, tmp_path):
    _, _, net_dir, run = pv
    assert checkpoint.run_best(run) == net_dir
    moved = Path(shutil.copytree(run, tmp_path / "moved"))  # best.json still names the old path ...
    shutil.rmtree(moved / "nets" / "step-0000007" / "variables")
    shutil.copytree(net_dir / "variables", moved / "nets" / "step-0000007" / "variables")
    (moved / "best.json").write_text(json.dumps({"net": "/gone/nets/step-0000007", "step": 7}))
    assert checkpoint.run_best(moved) == moved / "nets" / "step-0000007"  # ... found under its nets/
    st = _positions()[3]
    a, b = players.load_net(str(run), None, "onnx"), players.load_net(str(net_dir), None, "onnx")
    assert a.evaluate(st)[1] == b.evaluate(st)[1]
    # export --step N takes the run's net of that step; another step is one line naming those it has
    want = checkpoint.load_variables(net_dir)[1]["params"]
    got = checkpoint.load_variables(moved, step=7)[1]["params"]
    assert all(jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.array_equal, got, want)))
    with pytest.raises(checkpoint.CheckpointError, match=r"has no net of step 8 \(nets: 7\)"):
        checkpoint.load_variables(moved, step=8)
    (moved / "best.json").write_text(json.dumps({"net": "/gone/nets/step-0000009"}))
    with pytest.raises(checkpoint.CheckpointError, match="its best net /gone/nets/step-0000009 is not there"):
        players.load_net(str(moved))
    # a relative pointer is the run's own: never a folder of that name under the working directory
    (moved / "best.json").write_text(json.dumps({"net": "nets/step-0000009"}))
    shutil.copytree(net_dir, tmp_path / "nets" / "step-0000009")
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        with pytest.raises(checkpoint.CheckpointError, match="its best net nets/step-0000009 is not there"):
            checkpoint.run_best(moved)
    finally:
        os.chdir(cwd)


def _spoilt(case: str, net_dir: Path, tmp_path: Path) -> tuple[list[str], str]:
    """(gtp flags, what the one error line says) for a pv net that cannot play."""
    net = Path(shutil.copytree(net_dir, tmp_path / "run" / "nets" / net_dir.name))
    if case == "value-beside":  # given as a run folder: still one line
        (tmp_path / "run" / "best.json").write_text(json.dumps({"net": str(net), "step": 7}))
        return (["--checkpoint", str(tmp_path / "run"), "--value-checkpoint", "value9"],
                "is a policy-value net, valued by its own head: no value net beside it "
                "(drop --value-checkpoint value9)")
    if case == "size":  # model.json says 7x7, the arrays are 9x9 ones
        info = json.loads((net / "model.json").read_text())
        (net / "model.json").write_text(json.dumps({**info, "board_size": 7}))
        return ["--checkpoint", str(net)], f"{net}: its variables do not fit model '{MODEL}' for 7x7"
    assert case == "corrupt"
    data = [f for f in (net / "variables").rglob("*") if f.is_file() and f.parent.name == "d"]
    assert data
    for f in data:
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
    return ["--checkpoint", str(net)], f"{net / 'variables'}: unreadable"


@pytest.mark.parametrize("case", ["value-beside", "size", "corrupt"])
def test_load_net_refuses(pv, tmp_path, case, monkeypatch):
    """Refused with the reason; the reads a failed restore leaves in flight
    raise nothing later ("Event loop is closed" once a read, printed by
    Python or charged by pytest to a later test)."""
    args, want = _spoilt(case, pv[2], tmp_path)
    value = args[3] if len(args) > 2 else None
    stray = []
    monkeypatch.setattr(sys, "unraisablehook", stray.append)
    with pytest.raises(checkpoint.CheckpointError) as e:
        players.load_net(args[1], value, "onnx")
    assert want in str(e.value)
    if case == "corrupt":  # the one whose restore fails with reads in flight
        time.sleep(1.0)  # the reads of local files complete within milliseconds
    gc.collect()
    assert [repr(u.exc_value) for u in stray] == []


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("case", ["value-beside", "size", "corrupt"])
def test_gtp_refuses_with_one_line(pv, tmp_path, case):
    args, want = _spoilt(case, pv[2], tmp_path)
    out = gtp_tests._gtp_start(["--engine", "apv", "--size", "9", *args], tmp_path)
    err = out.stderr.decode()
    assert out.returncode == 2 and out.stdout == b"", (out.returncode, out.stdout, err)
    assert err.count("\n") == 1 and err.startswith("alphalite: error: ") and want in err, err


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("engine", ["apv", "mcts", "policy"])
def test_gtp_plays_a_run_folder(pv, tmp_path, engine):
    """Over a real pipe: the run folder's best net plays legal 9x9 moves; the
    engine says once which net it took and that the net's head values."""
    _, _, net_dir, run = pv
    eng = gtp_tests.RawGtp(["--engine", engine, "--checkpoint", str(run), "--size", "9", "--visits", "24",
                  "--no-resign"], tmp_path / "stderr.txt")
    st = board.new_game(9, 7.5)
    try:
        assert eng.ask("1 komi 7.5")[0]
        for i, colour in enumerate("bwbwbw"):
            ok, move = eng.ask(f"{10 + i} genmove {colour}", timeout=120)
            assert ok and re.fullmatch(r"[A-HJ][1-9]|pass", move), move
            if move != "pass":
                col = "ABCDEFGHJ".index(move[0])
                m = (9 - int(move[1:])) * 9 + col
                assert board.is_legal(st, m)
                st = board.play(st, m)
            else:
                st = board.play(st, 81)
    finally:
        eng.close()
    log = (tmp_path / "stderr.txt").read_text()
    assert log.count(f"{run} is an AlphaZero run: playing its best net {net_dir}") == 1, log
    assert f"9x9 nets: policy {net_dir}, value its own head (policy-value net)" in log, log
