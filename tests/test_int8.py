"""int8 inference (alphalite/nn/int8.py): the quantized shipped nets name
the fp32 nets' moves and values, the quantized graphs are cached, a net
that loses its moves in int8 is refused, and the engine plays on them."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest

from alphalite.engine import players
from alphalite.go import board
from alphalite.nn import checkpoint, features, int8, onnx_export


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHALITE_CACHE", str(tmp_path))
    return tmp_path


def _positions(n: int, size: int = 9, seed: int = 3):
    """``n`` positions of random games, 5 to 40 moves in."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        st = board.new_game(size, 7.0)
        for _ in range(int(rng.integers(5, 40))):
            st = board.play(st, int(rng.choice(np.flatnonzero(board.legal_moves(st)[:-1]))))
        out.append(st)
    return out


def test_int8_policy_value_net_names_the_fp32_moves_and_is_cached(cache, monkeypatch):
    q8 = players.load_net("az9", None, "int8")
    fp = players.load_net("az9", None, "onnx")
    assert q8.inference == "int8" and len(q8.protos) == 1
    assert q8.note.startswith("calibrated now on") and "agrees with fp32 on" in q8.note
    same, dv = 0, []
    states = _positions(60)
    for st in states:
        (p8, v8), (p32, v32) = q8.evaluate(st), fp.evaluate(st)
        assert p8.shape == p32.shape and abs(p8.sum() - 1) < 1e-4
        assert not (p8 > 0)[~board.legal_moves(st).astype(bool)].any()  # illegal moves stay at 0
        same += int(p8.argmax() == p32.argmax())
        dv.append(abs(v8 - v32))
    assert same >= 0.8 * len(states), same
    assert np.median(dv) < 0.1
    # every convolution but the stem really runs on int8 weights and inputs; the dense heads stay fp32
    g = onnx.load_from_string(q8.protos[0]).graph
    made_by = {o: n.op_type for n in g.node for o in n.output}
    convs = [n for n in g.node if n.op_type == "Conv"]
    assert len(convs) > 1 and all(made_by.get(n.input[0]) == made_by.get(n.input[1]) == "DequantizeLinear"
                                  for n in convs[1:])
    assert made_by.get(convs[0].input[1]) != "DequantizeLinear"  # the stem, on the input planes
    assert all(made_by.get(n.input[1]) != "DequantizeLinear" for n in g.node if n.op_type == "Gemm")

    def no_self_play(*a, **k):
        raise AssertionError("quantized again instead of read from the cache")

    monkeypatch.setattr(int8, "self_play_planes", no_self_play)
    again = players.load_net("az9", None, "int8")
    assert again.protos == q8.protos and again.note == "cached"
    # the same cache folder on a host whose int8 kernels differ (AVX2 without VNNI, or, seen from
    # such a host, one with VNNI): checked there anew
    other = "x86_64 avx2" if int8.isa_tag() != "x86_64 avx2" else "x86_64 avx2 avx512_vnni avx512bw"
    monkeypatch.setattr(int8, "isa_tag", lambda: other)
    with pytest.raises(AssertionError, match="quantized again"):
        players.load_net("az9", None, "int8")


def test_int8_policy_with_its_value_net(cache):
    q8 = players.load_net("policy9", "value9", "int8")
    fp = players.load_net("policy9", "value9", "onnx")
    assert len(q8.protos) == 2
    states = _positions(40, seed=5)
    dv = [abs(q8.evaluate(st)[1] - fp.evaluate(st)[1]) for st in states]
    same = sum(q8.evaluate(st)[0].argmax() == fp.evaluate(st)[0].argmax() for st in states)
    assert same >= 0.8 * len(states) and np.median(dv) < 0.1


def test_a_net_that_loses_its_moves_in_int8_is_refused_or_run_in_fp32(cache, monkeypatch):
    monkeypatch.setattr(int8, "MIN_AGREE", 1.01)  # no int8 net can pass
    with pytest.raises(checkpoint.CheckpointError, match="agrees with fp32 on .* use --inference onnx"):
        players.load_net("az9", None, "int8")  # asked for by name: refused
    assert not (cache / "int8").exists() or not list((cache / "int8").glob("*.onnx"))
    net = players.load_net("az9", None, "auto")  # the default: fp32 on ONNX Runtime, and it says why
    assert net.inference == "onnx" and net.protos is None
    assert net.note.startswith("not int8: the int8 net agrees with fp32 on")

    def no_self_play(*a, **k):
        raise AssertionError("calibrated again instead of remembering the failure")

    monkeypatch.setattr(int8, "self_play_planes", no_self_play)  # the next start knows at once
    again = players.load_net("az9", None, "auto")
    assert again.inference == "onnx" and again.note.startswith("not int8: the int8 net agrees with fp32 on")
    assert again.note.endswith("(remembered)")
    monkeypatch.setattr(int8, "MIN_AGREE", 0.5)  # another bar is another question: asked again
    with pytest.raises(AssertionError, match="calibrated again"):
        players.load_net("az9", None, "int8")


def test_a_policy_and_a_value_net_of_other_planes_each_read_their_own(cache, tmp_path, monkeypatch):
    """A policy of AlphaGo's planes beside ``value9`` (default planes): the
    search's planes are the pair, each net reads its own channels; of the
    pair, a value net that fails its int8 check alone stays fp32 and says so."""
    import jax

    from alphalite.nn import nets

    model = nets.make_model("b1c8", 9, 40)
    checkpoint.export_model(tmp_path / "ag40", nets.init_variables(model, jax.random.PRNGKey(1)),
                            {"model": "b1c8", "board_size": 9, "preset": "alphago40", "kind": "policy"})
    pair = players.load_net(str(tmp_path / "ag40"), "value9", "onnx")
    alone = players.load_net(str(tmp_path / "ag40"), None, "onnx")
    default = players.load_net("policy9", "value9", "onnx")
    assert pair.preset == "alphago40+default" and pair.split == 40
    for st in _positions(6, seed=9):
        (p, v), (p1, _), (_, v1) = pair.evaluate(st, 8), alone.evaluate(st, 8), default.evaluate(st, 8)
        np.testing.assert_allclose(p, p1, atol=1e-6)
        assert v == pytest.approx(v1, abs=1e-5)

    agreement = int8.agreement
    monkeypatch.setattr(int8, "agreement", lambda a, b, x: 0.5 if x.shape[-1] == 17 else agreement(a, b, x))
    q8 = players.load_net(str(tmp_path / "ag40"), "value9", "int8")
    assert q8.inference == "int8" and "value net in fp32: int8 agreed on 50.0%" in q8.note
    st = _positions(1, seed=2)[0]
    assert q8.evaluate(st)[1] == pytest.approx(pair.evaluate(st)[1], abs=1e-5)  # the fp32 graph
    assert q8.protos[0] != onnx_export.to_onnx(pair.model, pair.variables).SerializeToString()  # int8
    monkeypatch.setattr(int8, "agreement", agreement)
    again = players.load_net(str(tmp_path / "ag40"), "value9", "int8")
    assert again.protos == q8.protos and again.note.startswith("cached (value net in fp32")
    monkeypatch.setattr(int8, "agreement", lambda a, b, x: 0.5)  # both fail: refused, as one net is
    with pytest.raises(checkpoint.CheckpointError, match="agrees with fp32 on 50.0% and 50.0%"):
        players.load_net("policy9", "value9", "int8")


def test_the_check_covers_every_output_ownership_included():
    """The int8 check is the least agreement over a net's outputs: the top
    move of the policy, and within 0.1 for the value and for each point of
    an ownership head (a net whose ownership int8 spoils fails)."""
    from types import SimpleNamespace

    def fake(outputs):
        return SimpleNamespace(get_outputs=lambda: [SimpleNamespace(name=n) for n in outputs],
                               run=lambda _, feed: list(outputs.values()))

    logits = np.eye(4, 5, dtype=np.float32)
    value = np.zeros(4, np.float32)
    own = np.zeros((4, 81), np.float32)
    ref = fake({"logits": logits, "value": value, "ownership": own})
    x = np.zeros((4, 9, 9, 17), np.float32)
    assert int8.agreement(ref, ref, x) == 1.0
    moved = own.copy()
    moved[:, :27] = 0.5  # a third of the points off by 0.5
    assert int8.agreement(ref, fake({"logits": logits, "value": value, "ownership": moved}), x) == pytest.approx(2 / 3)
    value2 = value.copy()
    value2[0] = 0.2
    assert int8.agreement(ref, fake({"logits": logits, "value": value2, "ownership": own}), x) == 0.75
    top = logits.copy()
    top[:2] = np.roll(top[:2], 1, axis=1)  # two of four top moves differ
    assert int8.agreement(ref, fake({"logits": top, "value": value, "ownership": own}), x) == 0.5


def test_two_engines_starting_together_calibrate_once(cache, monkeypatch):
    import threading
    import time

    calls = []

    def slow_calibration(protos, planes_fn, split, paths, failed, kept):
        calls.append(1)
        time.sleep(0.5)
        for p in paths:
            p.write_bytes(b"int8")
        return [b"int8"] * len(paths), "calibrated now"

    monkeypatch.setattr(int8, "_calibrate", slow_calibration)
    notes = []
    starts = [threading.Thread(target=lambda: notes.append(int8.quantized([b"graph"], lambda: None)[1]))
              for _ in range(2)]
    for t in starts:
        t.start()
    for t in starts:
        t.join()
    assert len(calls) == 1 and sorted(notes) == ["cached", "calibrated now"]


def test_an_unwritable_cache_costs_the_cache_only(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ALPHALITE_CACHE", str(blocker))
    net = players.load_net("az9", None, "int8")
    assert net.inference == "int8" and "not cached" in net.note


def test_calibration_takes_any_number_of_positions():
    """Self-play on 13x13 keeps 272 calibration positions, not a multiple
    of the calibration's batch: every size's nets quantize."""
    proto = onnx_export.to_onnx(*checkpoint.load_model("az9", "policy_value")[1:]).SerializeToString()
    fp = onnx_export.session_of(proto)
    planes = int8.self_play_planes(lambda x: fp.run(None, {"planes": x})[0], 9, "default", games=3, every=2)
    assert len(planes) % 64 != 0
    q = int8.quantize(proto, planes)
    assert int8.agreement(fp, onnx_export.session_of(q), planes) > 0.8


def test_self_play_planes_cover_the_game(cache):
    fp = onnx_export.session(*checkpoint.load_model("az9", "policy_value")[1:])
    planes = int8.self_play_planes(lambda x: fp.run(None, {"planes": x})[0], 9, "default", games=4, every=2)
    # 4 games of 64 moves (0.8 * 81), every 2nd position
    assert planes.shape == (4 * 32, 9, 9, features.num_planes("default")) and planes.dtype == np.float32
    stones = planes[:, :, :, :8].sum(axis=(1, 2, 3))  # own and opponent stones
    assert stones.min() == 0 and stones.max() >= 20  # empty boards and full-ish ones


def test_engine_plays_on_int8_nets(cache, tmp_path):
    env = {**os.environ, "ALPHALITE_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "alphalite.cli", "gtp", "--checkpoint", "az9", "--inference", "int8",
           "--size", "9", "--visits", "64"]
    out = subprocess.run(cmd, input="genmove b\nquit\n", capture_output=True,
                         text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "= " in out.stdout and "?" not in out.stdout
    # the calibration (ORT's histogram calibrator prints) leaves nothing but GTP answers on stdout
    assert all(line == "" or line.startswith("=") for line in out.stdout.splitlines()), out.stdout
    assert re.search(r"9x9 nets: policy \S*az9, .*\(loaded in [\d.]+ s, int8: calibrated now on \d+ positions",
                     out.stderr), out.stderr
