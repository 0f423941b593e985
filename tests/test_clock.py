"""The engine's clock: a move's time counts from its command's arrival,
commands wait for the warm-up, and --visits caps a clocked search."""

from __future__ import annotations

import io
import re
import time

from alphalite import gtp


def _engine(logs, **kw):
    # 7x7: no shipped net, so rollout MCTS with line priors (fast, no JAX).
    cfg = gtp.EngineConfig(**{"engine": "mcts", "size": 7, "komi": 7.5, "seed": 1, **kw})
    return gtp.Engine(cfg, log=logs.append, warmup=False)


def _moves(logs):
    """(visits, seconds, budget) of each move the engine logged."""
    out = []
    for line in logs:
        m = re.search(r"visits ([0-9]+) in ([0-9.]+) s \(budget ([0-9.]+) s\)", line)
        if m:
            out.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    return out


def test_visits_cap_a_clocked_search():
    logs: list[str] = []
    eng = _engine(logs, visits=50)
    assert eng.handle("kgs-time_settings byoyomi 60 5 3").startswith("=")
    assert re.fullmatch(r"= [A-HJ][1-7]\n\n", eng.handle("genmove b"))
    (visits, took, budget), = _moves(logs)
    assert budget > 2.0 and visits <= 50 and took < budget / 2, logs[-1]
    # no cap given: the clock alone ends the search, and it is used
    logs.clear()
    eng = _engine(logs)
    eng.handle("time_settings 0 1 1")
    eng.handle("genmove b")
    (visits, took, budget), = _moves(logs)
    assert visits > 50 and 0.5 * budget < took < budget + 0.15, logs[-1]


def test_move_time_counts_from_the_commands_arrival():
    """A genmove read 0.5 s before it is answered (behind a slow command)
    has only the rest of its budget left."""
    logs: list[str] = []
    eng = _engine(logs)
    eng.handle("time_settings 0 1 1")  # 0.75 s a move
    t0 = time.perf_counter()
    out = eng.execute(gtp.parse("genmove b"), arrived=t0 - 0.5)
    took = time.perf_counter() - t0
    assert out.startswith("= ")
    (_, logged, budget), = _moves(logs)
    assert budget == 0.75 and 0.5 <= logged < 0.75 + 0.15 and took < 0.4, (took, logs[-1])


class _SlowWarmup(gtp.Engine):
    def _warmup(self):
        time.sleep(1.0)
        super()._warmup()


def test_commands_wait_for_the_warm_up_and_the_wait_is_charged():
    """Identity commands answer at once; a genmove sent at once behind them
    waits for the warm-up, and that wait comes off its own budget and the
    clock: the whole move stays near what the clock allowed, not wait + budget."""
    logs: list[str] = []
    cfg = gtp.EngineConfig(engine="mcts", size=7, seed=1)
    eng = _SlowWarmup(cfg, log=logs.append)
    stamps = []

    class Out(io.BytesIO):
        def write(self, b):
            stamps.append((time.perf_counter(), bytes(b)))
            return super().write(b)

    t0 = time.perf_counter()
    stdin = io.BytesIO(b"1 name\n2 time_settings 60 0 0\n3 genmove b\n4 quit\n")
    assert gtp.serve(eng, stdin=stdin, stdout=Out()) == 0
    answers = {re.match(rb"=([0-9]+)", b).group(1): t - t0 for t, b in stamps}
    assert answers[b"1"] < 0.5  # name did not wait for the warm-up
    assert answers[b"2"] >= 1.0  # time_settings did
    (_, logged, budget), = _moves(logs)
    # absolute 60 s: about 2.4 s for the first move, 1 s of it spent waiting
    assert 2.0 < budget < 3.0 and 1.0 <= logged < budget + 0.15, logs
    assert answers[b"3"] < budget + 0.3, answers
    assert eng._clocks[gtp.BLACK].main <= 60.0 - logged + 0.01


def test_max_time_bounds_a_move_with_or_without_a_clock():
    logs: list[str] = []
    eng = _engine(logs, visits=10**6, max_time=0.3)
    eng.handle("genmove b")  # the process's first search loads the kernels (warmup=False)
    t0 = time.perf_counter()
    eng.handle("genmove w")  # no clock: 10**6 visits would take minutes
    assert time.perf_counter() - t0 < 0.3 + 0.15
    logs.clear()
    eng.handle("kgs-time_settings byoyomi 60 5 3")  # 2.65 s allowed: max_time is lower
    eng.handle("genmove b")
    (_, took, budget), = _moves(logs)
    assert budget == 0.3 and took < 0.3 + 0.15, logs[-1]
