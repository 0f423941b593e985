"""`alphalite value-targets` stopped by Ctrl-C or kill: it stops at once
(not after the shard in progress, which takes minutes), says so in one
line, keeps every shard judged before and resumes with the rest; values
it cannot use are refused before it starts."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alphalite import cli
from alphalite.data import dataset
from selfplay import valuedata
from tests.conftest import popen_interruptible

SAMPLE = Path(__file__).parent / "data" / "tygem-sample.tar.gz"


def _counted(path) -> int:
    a = dataset.read_shard(path)
    return sum(valuedata.is_counted(a, g) and a["handicap"][g] < 2 for g in range(len(a["size"])))


def test_a_kill_mid_shard_stops_at_once_and_a_rerun_judges_the_rest(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    dataset.build([SAMPLE], data, jobs=1, shard_games=50, val_frac=0, test_frac=0, progress=False)
    first = _counted(data / "train-00000.npz")
    assert _counted(data / "train-00001.npz") > 2
    real, seen = valuedata._targets_work, {"games": 0, "sent": 0}

    def work(items, playouts, seed):
        out = real(items, playouts, seed)
        seen["games"] += len(items)
        if seen["games"] > first and not seen["sent"]:  # a game into the second shard: kill
            seen["sent"] = seen["games"]
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(valuedata, "_targets_work", work)
    argv = ["value-targets", str(data), "--out", str(tmp_path / "tv"), "--playouts", "8", "--quiet"]
    assert cli.main(argv) == 130
    captured = capsys.readouterr()
    assert captured.err == (f"value-targets: interrupted; 1 of 4 shards judged are kept in {tmp_path / 'tv'} (the one "
                            "in progress is dropped); rerun the same command to continue\n")
    assert json.loads(captured.out)["stopped"] == "interrupted"
    assert seen["games"] == seen["sent"]  # no game judged after the kill
    index = json.loads((tmp_path / "tv" / "index.json").read_text())
    assert list(index["value_targets"]["judged"]) == ["train-00000.npz"]
    monkeypatch.setattr(valuedata, "_targets_work", real)
    assert cli.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["stopped"] == "finished" and res["shards_judged"] == 4


@pytest.mark.slow
@pytest.mark.subprocess
def test_ctrl_c_stops_the_workers_job_at_once_without_tracebacks(tmp_path):
    """Ctrl-C to the process group, as a terminal sends it, with --jobs 2:
    the workers' SIGINT killed them mid-task and the build waited forever."""
    data = tmp_path / "data"
    dataset.build([SAMPLE], data, jobs=1, val_frac=0, test_frac=0, progress=False)  # one shard
    out = tmp_path / "tv"
    argv = [sys.executable, "-m", "alphalite.cli", "value-targets", str(data), "--out", str(out), "--jobs", "2",
            "--playouts", "3000", "--quiet"]  # many playouts: a shard takes a minute
    proc = popen_interruptible(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and not (out / "index.json").exists():  # the copy is made: judging begins
        time.sleep(0.05)
    time.sleep(1.0)
    t0 = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        stdout, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"still running 30 s after Ctrl-C: {stderr[-2000:]}")
    assert time.time() - t0 < 10 and proc.returncode == 130, (proc.returncode, stderr)
    assert stderr.count("\n") == 1 and stderr.startswith("value-targets: interrupted; 0 of 1 "), stderr
    assert json.loads(stdout)["stopped"] == "interrupted"


def test_a_kill_while_copying_says_so_and_a_rerun_starts_again(tmp_path, monkeypatch, capsys):
    """The copy before any judging (every shard, targets unknown) stopped by
    kill: one line and exit 130, no index (so nothing half-copied is taken
    for a dataset), and the rerun copies and judges it all."""
    data = tmp_path / "data"
    dataset.build([SAMPLE], data, jobs=1, shard_games=50, val_frac=0, test_frac=0, progress=False)
    real, calls = dataset.write_arrays, []

    def write(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(dataset, "write_arrays", write)
    argv = ["value-targets", str(data), "--out", str(tmp_path / "tv"), "--playouts", "8", "--quiet"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert err.startswith("value-targets: interrupted while copying the dataset") and err.count("\n") == 1, err
    assert not (tmp_path / "tv" / "index.json").exists()
    monkeypatch.setattr(dataset, "write_arrays", real)
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["shards_judged"] == 4


@pytest.mark.parametrize("flag,value", [("--max-minutes", "-1"), ("--jobs", "0"), ("--jobs", "-2"),
                                        ("--playouts", "0")])
def test_values_no_run_can_use_are_refused_naming_the_flag(tmp_path, capsys, flag, value):
    """As `data build` refuses them: --max-minutes -1 stopped at once as at its
    time limit (exit 0), --jobs 0 or below ran on one process unsaid."""
    code = cli.main(["value-targets", str(tmp_path / "data"), "--out", str(tmp_path / "tv"), flag, value, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"alphalite: error: {flag} must be "), err
    assert not (tmp_path / "tv").exists()  # refused before anything was written
