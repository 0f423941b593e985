"""alphalite.nn.convtune: the cache key, the cache read back instead of a
new measurement, the faster method chosen (fake measurements: no timing is
asserted), and ``--conv auto`` in a model following the cached choice."""

from __future__ import annotations

import dataclasses
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from alphalite.nn import convtune, native, nets

HOST = "Test CPU #0 | jax 0 | cpu"
TRAIN = convtune.Shape(True, 64, 19, 19, 64, 64)


class FakeMeasure:
    """Returns fixed seconds per call and counts the calls."""

    def __init__(self, times):
        self.times, self.calls = times, []

    def __call__(self, shape, methods):
        self.calls.append(shape)
        return {m: self.times[m] for m in methods}


@pytest.fixture
def tuning():
    """Tuning on (the test session turns it off) and no remembered choices."""
    convtune.forget()
    convtune.set_tuning(True)
    yield
    convtune.set_tuning(None)
    convtune.forget()


@pytest.fixture
def no_tuning():
    convtune.forget()
    convtune.set_tuning(False)
    yield
    convtune.set_tuning(None)
    convtune.forget()


def test_key_names_host_mode_layer_and_dtype():
    keys = {
        convtune.Shape(True, 64, 19, 19, 64, 64).key(HOST),
        convtune.Shape(False, 64, 19, 19, 64, 64).key(HOST),
        convtune.Shape(True, 32, 19, 19, 64, 64).key(HOST),
        convtune.Shape(True, 64, 9, 9, 64, 64).key(HOST),
        convtune.Shape(True, 64, 19, 19, 18, 64).key(HOST),
        convtune.Shape(True, 64, 19, 19, 64, 32).key(HOST),
        convtune.Shape(True, 64, 19, 19, 64, 64, "bfloat16").key(HOST),
        convtune.Shape(True, 64, 19, 19, 64, 64).key("Other CPU #1 | jax 0 | cpu"),
    }
    assert len(keys) == 8
    assert TRAIN.key(HOST) == "Test CPU #0 | jax 0 | cpu | train 64x19x19x64->64 float32"
    host = convtune.host_key()
    assert f"jax {jax.__version__}" in host and "jaxlib" in host and jax.default_backend() in host
    assert host.endswith(f"| native {native.kernel_id()}")  # a new kernel is timed afresh


def test_key_changes_with_the_cores_and_the_winograd_code(tmp_path, monkeypatch):
    """A choice measured on 2 cores is not the one for 16; a changed
    winograd.py (or native kernel) runs at another speed."""
    from alphalite.runtime import cpu

    assert f"| {cpu.cores()} cores |" in convtune.host_key()
    monkeypatch.setattr(cpu, "cores", lambda: 2)
    base = convtune.host_key()
    monkeypatch.setattr(cpu, "cores", lambda: 16)
    sixteen = convtune.host_key()
    assert "| 16 cores |" in sixteen and sixteen.replace("| 16 cores |", "| 2 cores |") == base
    edited = tmp_path / "winograd.py"
    edited.write_bytes(convtune.WINOGRAD_SOURCE.read_bytes() + b"# faster now\n")
    monkeypatch.setattr(convtune, "WINOGRAD_SOURCE", edited)
    assert convtune.host_key() != sixteen
    assert len({TRAIN.key(h) for h in (base, sixteen, convtune.host_key())}) == 3


@pytest.mark.parametrize("times, expected", [
    ({"xla": 0.010, "winograd": 0.030}, "xla"),  # the EPYC case of issue 18
    ({"xla": 0.030, "winograd": 0.010}, "winograd"),
    ({"xla": 0.0102, "winograd": 0.0100}, "xla"),  # within the margin: the preferred one
])
def test_faster_method_is_chosen_and_cached(tmp_path, tuning, times, expected):
    path = tmp_path / "cache" / "convtune.json"
    fake, log = FakeMeasure(times), io.StringIO()
    clock = iter([100.0, 103.5]).__next__
    assert convtune.tune(TRAIN, measure=fake, path=path, host=HOST, log=log, clock=clock) == expected
    entry = json.loads(path.read_text())["entries"][TRAIN.key(HOST)]
    assert entry["method"] == expected
    assert entry["ms"] == {m: pytest.approx(t * 1e3) for m, t in times.items()}
    line = log.getvalue()
    assert line.count("\n") == 1 and "3.5 s" in line and f": {expected} (" in line


def test_cache_is_reused_and_keys_kept_apart(tmp_path, tuning):
    path = tmp_path / "convtune.json"
    fake = FakeMeasure({"xla": 0.03, "winograd": 0.01})
    assert convtune.choose(TRAIN, measure=fake, path=path, host=HOST, log=None) == "winograd"
    assert len(fake.calls) == 1
    # Same process, then a new one (memory dropped): no new measurement.
    assert convtune.choose(TRAIN, measure=fake, path=path, host=HOST, log=None) == "winograd"
    convtune.forget()
    assert convtune.choose(TRAIN, measure=fake, path=path, host=HOST, log=None) == "winograd"
    assert len(fake.calls) == 1
    # Another CPU, or inference, is measured anew; the entries live side by side.
    slow_wino = FakeMeasure({"xla": 0.01, "winograd": 0.03})
    assert convtune.choose(TRAIN, measure=slow_wino, path=path, host="Other #1", log=None) == "xla"
    infer = dataclasses.replace(TRAIN, train=False)
    assert convtune.choose(infer, measure=slow_wino, path=path, host=HOST, log=None) == "xla"
    assert slow_wino.calls == [TRAIN, infer]
    entries = convtune.read_cache(path)
    assert {e["method"] for e in entries.values()} == {"winograd", "xla"} and len(entries) == 3


def test_no_tuning_falls_back_and_writes_nothing(tmp_path, no_tuning):
    fake = FakeMeasure({"xla": 0.03, "winograd": 0.01})
    path = tmp_path / "convtune.json"
    assert convtune.choose(dataclasses.replace(TRAIN, train=False), measure=fake, path=path, host=HOST) == "xla"
    # a measurement would pick Winograd here: untuned, XLA's (the preferred) all the same
    assert convtune.choose(TRAIN, measure=fake, path=path, host=HOST) == "xla"
    assert fake.calls == [] and not path.exists()


def test_broken_or_old_cache_is_ignored(tmp_path, tuning):
    path = tmp_path / "convtune.json"
    path.write_text("{not json")
    assert convtune.read_cache(path) == {}
    path.write_text(json.dumps({"version": 0, "entries": {TRAIN.key(HOST): {"method": "xla"}}}))
    fake = FakeMeasure({"xla": 0.03, "winograd": 0.01})
    assert convtune.choose(TRAIN, measure=fake, path=path, host=HOST, log=None) == "winograd"
    assert len(fake.calls) == 1


@pytest.mark.slow
@pytest.mark.parametrize("cached", ["xla", "winograd"])
def test_auto_model_follows_the_cached_choice(tmp_path, monkeypatch, no_tuning, cached):
    """A b2c16 9x9 net with conv=auto runs the cached method in its 3x3 convs
    (XLA's convolution shows in the jaxpr as conv_general_dilated)."""
    if jax.default_backend() != "cpu":
        pytest.skip("auto tunes on the CPU only")
    convtune.forget()
    path = tmp_path / "convtune.json"
    monkeypatch.setattr(convtune, "cache_file", lambda: path)
    model = nets.make_model("b2c16", 9, 3)
    variables = nets.init_variables(model, jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(0).random((2, 9, 9, 3)) < 0.3, jnp.float32)
    host = convtune.host_key()
    entries = {convtune.Shape(False, 2, 9, 9, c, 16).key(host): {"method": cached} for c in (3, 16)}
    path.write_text(json.dumps({"version": convtune.CACHE_VERSION, "entries": entries}))
    jaxpr = str(jax.make_jaxpr(lambda v, x: model.apply(v, x, train=False))(variables, x))
    assert ("conv_general_dilated" in jaxpr) == (cached == "xla")
    forced = nets.make_model("b2c16", 9, 3, conv="xla")
    np.testing.assert_allclose(model.apply(variables, x), forced.apply(variables, x), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_real_measurement_times_every_method(tmp_path, tuning):
    shape = convtune.Shape(True, 1, 9, 9, 2, 3)
    times = convtune.measure_conv(shape, rounds=1, round_s=0.0)
    assert set(times) == set(convtune.METHODS) and all(0 < t < float("inf") for t in times.values())
    method = convtune.tune(shape, path=tmp_path / "c.json", host=HOST, log=None)
    assert convtune.read_cache(tmp_path / "c.json")[shape.key(HOST)]["method"] == method


def test_small_layers_are_timed_several_to_a_call():
    assert convtune.reps(TRAIN) == 1  # 1.7 GFLOP a call already
    assert convtune.reps(convtune.Shape(False, 1, 19, 19, 32, 32)) == 8
    middle = convtune.Shape(False, 8, 19, 19, 32, 32)  # 53 MFLOP
    assert convtune.reps(middle) == 4
    assert convtune.reps(middle) * 53_231_616 >= convtune.MIN_CALL_FLOP


def test_environment_turns_tuning_off_unless_set_in_process(monkeypatch):
    convtune.set_tuning(None)
    monkeypatch.setenv("ALPHALITE_CONV_TUNE", "0")
    assert not convtune.tuning()
    monkeypatch.setenv("ALPHALITE_CONV_TUNE", "1")
    assert convtune.tuning()
    monkeypatch.delenv("ALPHALITE_CONV_TUNE")
    assert convtune.tuning()
    monkeypatch.setenv("ALPHALITE_CONV_TUNE", "0")
    convtune.set_tuning(True)
    try:
        assert convtune.tuning()
    finally:
        convtune.set_tuning(None)
