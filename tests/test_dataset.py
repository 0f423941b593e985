"""Dataset builder (shards, splits, bad input) and the Numba batch loader."""

import gzip
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from alphalite import cli

from alphalite.go import board, sgf

from alphalite.data import dataset

from alphalite.nn import features

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "tygem-sample.tar.gz"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
BAD = ("corrupt.sgf", "truncated.sgf", "binary.sgf")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds")
    summary = dataset.build([SAMPLE], out, jobs=1, val_frac=0.1, test_frac=0.1, progress=False)
    return out, summary


def test_build_sample_summary_and_shards(built):
    out, s = built
    assert s["files"] == 200 and s["games"] == 200 and s["skipped"] == {} and s["complete"]
    assert sum(s["games_by_split"].values()) == 200
    assert all(s["games_by_split"][k] > 5 for k in dataset.SPLITS)
    index = json.loads((out / "index.json").read_text())
    assert index["format"] == dataset.FORMAT and index["complete"]
    total_moves = 0
    for sh in index["shards"]:
        with np.load(out / sh["file"], allow_pickle=False) as z:
            g = len(z["size"])
            assert sh["games"] == g and z["move_offsets"].shape == (g + 1,)
            assert np.array_equal(np.diff(z["move_offsets"]), z["num_moves"])
            assert (z["size"] == 19).all() and (z["komi"] == 6.5).all()
            assert set(np.unique(z["winner"])) <= {-1, 1}
            total_moves += int(z["num_moves"].sum())
            assert str(z["game_id"][0]).startswith(str(SAMPLE) + ":tygem-2011-01/")
    assert total_moves == s["positions"]
    assert not list(out.glob(".*tmp*"))


@pytest.mark.slow
def test_cli_json_line_and_split_by_hash(tmp_path, capsys):
    code = cli.main(["data", "build", str(SAMPLE), "--out", str(tmp_path / "a"), "--jobs", "2", "--quiet",
                     "--val-frac", "0.1", "--test-frac", "0.1", "--shard-games", "50"])
    assert code == 0
    line = capsys.readouterr().out.strip().splitlines()
    assert len(line) == 1
    s = json.loads(line[0])
    for key in ("files", "games", "games_by_split", "positions", "skipped", "seconds"):
        assert key in s
    # the split of each game is a function of its hash alone, and --jobs does not matter
    one = dataset.build([SAMPLE], tmp_path / "b", jobs=1, val_frac=0.1, test_frac=0.1, progress=False)
    assert one["games_by_split"] == s["games_by_split"]
    for split in dataset.SPLITS:
        ga = dataset.load_games(tmp_path / "a", split)
        gb = dataset.load_games(tmp_path / "b", split)
        assert np.array_equal(ga["game_hash"], gb["game_hash"])
        assert np.array_equal(ga["moves"], gb["moves"])
        assert all(dataset.split_of(int(h), 0.1, 0.1) == split for h in ga["game_hash"])


def test_missing_source_is_one_line_error(tmp_path, capsys):
    code = cli.main(["data", "build", str(tmp_path / "nope.sgf"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "no such file" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag,value", [("--shard-games", "0"), ("--max-games", "-1"), ("--jobs", "-2"),
                                        ("--sizes", "9,30"), ("--sizes", ",")])
def test_values_no_build_can_use_are_refused_naming_the_flag(tmp_path, capsys, flag, value):
    code = cli.main(["data", "build", str(SAMPLE), "--out", str(tmp_path / "o"), flag, value, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"alphalite: error: {flag} must be "), err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_help_and_error_name_every_archive_format_read(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["data", "build", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    src_help = text[text.index("src "):text.index("options:")]
    assert all(suffix in src_help for suffix in dataset.ARCHIVE_SUFFIXES), src_help
    (tmp_path / "a.rar").write_bytes(b"x")
    assert cli.main(["data", "build", str(tmp_path / "a.rar"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert all(suffix in err for suffix in dataset.ARCHIVE_SUFFIXES), err
    members = _members()[:5]
    for suffix, mode in ((".tgz", "w:gz"), (".tbz2", "w:bz2"), (".tbz", "w:bz2"), (".tar.xz", "w:xz"),
                         (".txz", "w:xz"), (".tar", "w")):
        with tarfile.open(tmp_path / f"s{suffix}", mode) as tf:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        s = dataset.build([tmp_path / f"s{suffix}"], tmp_path / suffix[1:], jobs=1, progress=False)
        assert s["games"] == 5, suffix


def _members():
    with tarfile.open(SAMPLE) as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf if m.isfile()]


def test_archives_folders_bad_files_duplicates(tmp_path, capsys):
    members = _members()[:40]
    src = tmp_path / "src"
    (src / "deep" / "er").mkdir(parents=True)
    for n in BAD + ("illegal-move.sgf", "handicap-9x9.sgf", "variations.sgf", "gb18030-no-ca.sgf"):
        shutil.copy(DATA / n, src / "deep" / "er" / n)
    (src / "empty.sgf").write_bytes(b"(;GM[1]SZ[19]KM[6.5]RE[B+R])")
    # a collection: two games in one file, each kept under its own name
    (src / "two.sgf").write_bytes(b"(;SZ[19]RE[B+R];B[pd];W[dp];B[qq])\n(;SZ[19:19]RE[W+R];B[dd];W[pp])")
    (src / "notes.txt").write_text("ignored")
    with zipfile.ZipFile(src / "kgs.zip", "w") as zf:
        for name, data in members[:20]:
            zf.writestr(name, data)
    with tarfile.open(src / "kgs.tar.bz2", "w:bz2") as tf:
        for name, data in members[10:40]:  # 10 games also in the zip: duplicates
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    (tmp_path / "broken.tar.gz").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])  # truncated
    (tmp_path / "garbage.zip").write_bytes(gzip.compress(b"not a zip" * 100))
    s = dataset.build([src, tmp_path / "broken.tar.gz", tmp_path / "garbage.zip"], tmp_path / "out", jobs=1,
                      sizes=(19,), progress=False)
    sk = s["skipped"]
    assert sk["parse_error"] == 3 and sk["empty"] == 1 and sk["duplicate"] >= 10
    assert sk["unsupported_size"] == 2  # the 9x9 and 13x13 records with --sizes 19
    assert s["truncated"] == {"occupied": 1}  # kept up to the illegal move
    assert s["corrupt_archives"] == 2
    err = capsys.readouterr().err.splitlines()  # each damaged archive said at once, on one line
    assert len([e for e in err if e.startswith("warning: ") and "is damaged" in e]) == 2, err
    assert any("broken.tar.gz is damaged" in e for e in err) and any("garbage.zip is damaged" in e for e in err)
    # 40 unique archive games + gb18030 + illegal-move + the collection's two; the broken archive
    # repeats the first 40
    assert s["games"] == 44
    assert s["files"] + 1 == s["games"] + sum(sk.values())  # one file held two games
    # every record not kept, and each corrupt archive, is in skipped.tsv with its reason
    rows = [ln.split("\t") for ln in (tmp_path / "out" / "skipped.tsv").read_text().splitlines()[1:]]
    assert s["skipped_log"] == str(tmp_path / "out" / "skipped.tsv")
    assert len(rows) == sum(sk.values()) + s["corrupt_archives"] and all(len(r) == 3 for r in rows)
    reasons = {Path(r[0]).name: r[1] for r in rows}
    assert all(reasons[n] == "parse_error" for n in BAD) and reasons["empty.sgf"] == "empty"
    assert reasons["handicap-9x9.sgf"] == "unsupported_size" and reasons["garbage.zip"] == "corrupt_archive"
    assert [r[2] for r in rows if r[0].endswith("handicap-9x9.sgf")] == ["board size 9, not in --sizes 19"]
    games = dataset.load_games(tmp_path / "out", "all")
    two = sorted((str(g)[-6:], int(n)) for g, n in zip(games["game_id"], games["num_moves"]) if "two.sgf" in str(g))
    assert two == [(".sgf#1", 3), (".sgf#2", 2)]
    i = [k for k, gid in enumerate(games["game_id"]) if gid.endswith("illegal-move.sgf")][0]
    assert games["num_moves"][i] == 3 and games["total_moves"][i] == 5 and games["stop"][i] == board.OCCUPIED


def test_a_build_that_keeps_no_game_is_an_error_naming_its_log(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    for n in BAD + ("handicap-9x9.sgf",):
        shutil.copy(DATA / n, src / n)
    code = cli.main(["data", "build", str(src), "--out", str(tmp_path / "out"), "--sizes", "19", "--quiet"])
    captured = capsys.readouterr()
    log = tmp_path / "out" / "skipped.tsv"
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1, captured
    assert "kept no game of size 19 from 4 SGF records (parse_error 3, unsupported_size 1)" in captured.err
    assert str(log) in captured.err
    rows = [ln.split("\t") for ln in log.read_text().splitlines()[1:]]
    assert sorted((Path(r[0]).name, r[1]) for r in rows) == sorted(
        [(n, "parse_error") for n in BAD] + [("handicap-9x9.sgf", "unsupported_size")])
    assert all(r[2] for r in rows)  # each with the reader's own words
    # evaluating such sources names them, not a log in a temporary folder
    with pytest.raises(dataset.DatasetError, match="corrupt.sgf: kept no game of size 19") as e:
        dataset.resolve_eval_source([src / "corrupt.sgf"], tmp_path / "tmp")
    assert "skipped.tsv" not in str(e.value)


def test_interrupt_keeps_finished_shards(tmp_path, monkeypatch, capsys):
    real = dataset.process_record
    calls = {"n": 0}

    def flaky(name, data, sizes):
        calls["n"] += 1
        if calls["n"] == 150:
            raise KeyboardInterrupt
        return real(name, data, sizes)

    monkeypatch.setattr(dataset, "process_record", flaky)
    with pytest.raises(KeyboardInterrupt):
        dataset.build([SAMPLE], tmp_path, jobs=1, shard_games=32, val_frac=0, test_frac=0, progress=False,
                      batch_files=16)
    index = json.loads((tmp_path / "index.json").read_text())
    assert not index["complete"]
    assert not [p for p in tmp_path.iterdir() if "tmp" in p.name]
    capsys.readouterr()
    games = dataset.load_games(tmp_path, "train")
    assert len(games) == index["summary"]["games"] >= 128  # the finished batches, none lost
    err = capsys.readouterr().err  # a reader of the partial dataset is told, once
    assert err.count("holds only part of its sources: its build was stopped") == 1, err
    dataset.load_games(tmp_path, "train")
    assert "its build was stopped" not in capsys.readouterr().err
    monkeypatch.setattr(dataset, "process_record", real)
    dataset._WARNED_INCOMPLETE.clear()
    s = dataset.build([SAMPLE], tmp_path, jobs=1, shard_games=32, val_frac=0, test_frac=0, progress=False)
    assert s["games"] == 200 and len(dataset.load_games(tmp_path, "train")) == 200
    assert "its build was stopped" not in capsys.readouterr().err  # not said by the rebuild it asks for


class _KillWhenFreed:
    """A kill that lands while a finaliser runs, as it can while a tar
    member's file object is freed: Python prints and drops what the
    handler raises there."""

    def __init__(self, signum):
        self.signum = signum

    def __del__(self):
        os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_kill_a_finaliser_drops_still_stops_the_build(tmp_path, monkeypatch, capsys, request, signum):
    """Seen once under load: the kill's KeyboardInterrupt raised inside a
    finaliser was printed and lost, and the build went on to the end (exit
    0, every game). Now the loop raises it again: the build stops there.
    Ctrl-C (Python's own SIGINT handler) the same."""
    if signum == signal.SIGINT:  # as in a terminal; a test runner's worker may have set it aside
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    real = dataset.process_record
    calls = {"n": 0}

    def freed_while_killed(name, data, sizes):
        calls["n"] += 1
        if calls["n"] == 40:
            _KillWhenFreed(signum)  # freed at once: its __del__ runs the handler
        return real(name, data, sizes)

    monkeypatch.setattr(dataset, "process_record", freed_while_killed)
    handlers, hook = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)], sys.unraisablehook
    with pytest.raises(dataset.BuildInterrupted):
        dataset.build([SAMPLE], tmp_path, jobs=1, shard_games=16, val_frac=0, test_frac=0, progress=False,
                      batch_files=16)
    index = json.loads((tmp_path / "index.json").read_text())
    assert not index["complete"] and 0 < index["summary"]["games"] < 200
    assert calls["n"] < 64  # stopped at the next batch, not at the end
    assert "KeyboardInterrupt" not in capsys.readouterr().err  # the dropped one is not printed
    assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)] == handlers  # given back
    assert sys.unraisablehook is hook


@pytest.mark.slow
@pytest.mark.subprocess
def test_kill_stops_a_build_as_ctrl_c_does(tmp_path):
    """SIGTERM to the build alone, its workers busy: one line, exit 130, the
    finished games indexed (incomplete), no temporary log, no worker
    traceback; the same command rerun builds it all."""
    members = _members()
    src = tmp_path / "many.tar"  # the sample 30 times over: the workers parse duplicates for seconds
    with tarfile.open(src, "w") as tf:
        for k in range(30):
            for name, data in members:
                info = tarfile.TarInfo(f"{k}/{name}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "alphalite.cli", "data", "build", str(src), "--out", str(out), "--jobs", "2",
            "--shard-games", "20", "--val-frac", "0", "--test-frac", "0", "--quiet"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (out / "train-00000.npz").exists():
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and stdout == "", (proc.returncode, stdout, stderr)
    assert stderr.count("\n") == 1 and stderr.startswith("data build: interrupted; the "), stderr
    assert "rerun the same command" in stderr
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    index = json.loads((out / "index.json").read_text())
    assert not index["complete"] and index["summary"]["games"] == len(dataset.load_games(out, "train")) > 0
    assert (out / "skipped.tsv").exists()
    assert cli.main(argv[3:]) == 0
    assert json.loads((out / "index.json").read_text())["summary"]["games"] == 200


# ------------------------------------------------------------------ loader


@pytest.mark.slow
def test_batches_shapes_labels_and_legality(built):
    out, _ = built
    it = dataset.iterate_batches(out, batch_size=64, seed=3)
    b = next(it)
    C = features.num_planes("default")
    assert b["planes"].shape == (64, 19, 19, C) and b["planes"].dtype == np.float32
    assert b["moves"].dtype == np.int32 and b["legal"].shape == (64, 362) and b["legal"].dtype == np.bool_
    assert b["legal"][np.arange(64), b["moves"]].all()
    assert set(np.unique(b["outcomes"])) <= {-1.0, 1.0}
    assert (b["moves_left"] >= 0).all() and (b["move_number"] >= 0).all()
    assert len(set(b["game"].tolist())) > 20  # shuffled across games
    assert len(set(b["symmetry"].tolist())) > 4


def test_planes_match_an_independent_replay(built):
    """Snapshot + rebuild in the loader == features.encode on a GoState replay."""
    out, _ = built
    games = dataset.load_games(out, "val")
    b = next(dataset.iterate_eval(out, split="val", batch_size=400, max_games=2))
    g = games.select([0, 1])
    for row in (0, 1, 57, 150, 233, 399):
        gi = int(b["game"][row])
        n = int(b["move_number"][row])
        a0 = g["move_offsets"][gi]
        state = board.new_game(19, 6.5)
        for m, c in zip(g["moves"][a0:a0 + n], g["colors"][a0:a0 + n]):
            state = board.play(state, int(m), int(c))
        assert np.array_equal(features.encode(state, "default"), b["planes"][row])
        assert np.array_equal(board.legal_moves(state), b["legal"][row])
        assert b["moves"][row] == g["moves"][a0 + n]
        winner = g["winner"][gi]
        assert b["outcomes"][row] == (1.0 if g["colors"][a0 + n] == winner else -1.0)
        assert b["moves_left"][row] == g["total_moves"][gi] - 1 - n


def test_symmetry_agrees_with_feature_transforms(built):
    out, _ = built
    kw = dict(batch_size=32, seed=5, preset="clark7")
    plain = next(dataset.iterate_batches(out, symmetries=False, **kw))
    sym = next(dataset.iterate_batches(out, symmetries=True, **kw))
    T = features.sym_move_table(19)
    assert np.array_equal(plain["game"], sym["game"]) and (plain["symmetry"] == 0).all()
    for i in range(32):
        k = int(sym["symmetry"][i])
        assert np.array_equal(sym["planes"][i], features.transform_planes(plain["planes"][i], k))
        assert sym["moves"][i] == T[k, plain["moves"][i]]
        assert np.array_equal(sym["legal"][i][T[k]], plain["legal"][i])


def test_deterministic_and_resumable(built):
    out, _ = built
    n = dataset.count_positions(out) // 128
    kw = dict(batch_size=128, seed=11, chunk_games=16, preset="thesis3")
    it = dataset.iterate_batches(out, **kw)
    first = [next(it) for _ in range(n + 2)]  # crosses chunk boundaries and one epoch boundary
    again = dataset.iterate_batches(out, **kw)
    for k in (0, 5, n - 1, n + 1):
        resumed = next(dataset.iterate_batches(out, start_batch=k, **kw))
        for key in first[k]:
            assert np.array_equal(first[k][key], resumed[key], equal_nan=key == "score"), (k, key)
    assert np.array_equal(next(again)["planes"], first[0]["planes"])
    assert not np.array_equal(first[0]["moves"], first[n]["moves"])  # epoch 1 is shuffled anew
    other = next(dataset.iterate_batches(out, **{**kw, "seed": 12}))
    assert not np.array_equal(other["moves"], first[0]["moves"])
    # one epoch covers every position once
    epoch = np.concatenate([np.stack([b["game"], b["move_number"]], 1) for b in first[:n]])
    assert len({tuple(x) for x in epoch.tolist()}) == n * 128
    assert len(list(dataset.iterate_batches(out, epochs=1, **kw))) == n
    # several encoding threads give the same batches (a chunk boundary inside a batch included)
    threaded = dataset.iterate_batches(out, threads=3, **{**kw, "preset": "default"})
    plain = dataset.iterate_batches(out, **{**kw, "preset": "default"})
    for _ in range(n + 1):
        a, b = next(plain), next(threaded)
        for key in a:
            assert np.array_equal(a[key], b[key], equal_nan=key == "score"), key


def test_filters_winner_only_passes_and_size(built, tmp_path):
    out, _ = built
    b = next(dataset.iterate_batches(out, batch_size=256, winner_only=True))
    assert (b["outcomes"] == 1).all()
    assert dataset.count_positions(out, winner_only=True) < dataset.count_positions(out)
    src = tmp_path / "src"
    src.mkdir()
    for n in ("pass-tt.sgf", "handicap-9x9.sgf", "illegal-move.sgf"):
        shutil.copy(DATA / n, src / n)
    dataset.build([src], tmp_path / "o", jobs=1, val_frac=0, test_frac=0, progress=False)
    assert dataset.count_positions(tmp_path / "o", board_size=19) == 5 + 3
    assert dataset.count_positions(tmp_path / "o", board_size=19, include_passes=False) == 5
    nine = next(dataset.iterate_eval(tmp_path / "o", split="train", board_size=9))
    assert nine["planes"].shape[:3] == (4, 9, 9) and list(nine["move_number"]) == [0, 1, 2, 3]
    assert list(nine["outcomes"]) == [1, -1, 1, -1]  # white (to move first) won
    assert list(nine["moves_left"]) == [3, 2, 1, 0]
    with pytest.raises(dataset.DatasetError, match="fewer than one batch"):
        dataset.iterate_batches(tmp_path / "o", board_size=13)
    with pytest.raises(ValueError, match="unknown feature preset"):
        dataset.iterate_batches(out, preset="nope")
    with pytest.raises(dataset.DatasetError, match="not a dataset folder"):
        dataset.iterate_batches(tmp_path)


def test_eval_covers_each_position_once(built):
    out, _ = built
    batches = list(dataset.iterate_eval(out, split="test", batch_size=500))
    total = dataset.count_positions(out, split="test")
    assert sum(len(b["moves"]) for b in batches) == total
    assert all(len(b["moves"]) == 500 for b in batches[:-1])
    games = np.concatenate([b["game"] for b in batches])
    mn = np.concatenate([b["move_number"] for b in batches])
    left = np.concatenate([b["moves_left"] for b in batches])
    assert (np.diff(games) >= 0).all() and (left == 0).sum() == len(set(games.tolist()))
    assert ((mn + left + 1) > 0).all()
    two = list(dataset.iterate_eval(out, split="test", batch_size=500, max_games=2))
    assert set(np.concatenate([b["game"] for b in two]).tolist()) == {0, 1}


def test_resolve_eval_source(built, tmp_path):
    out, _ = built
    assert dataset.resolve_eval_source([str(out)], tmp_path / "t", split="val") == (str(out), "val")
    d, split = dataset.resolve_eval_source([str(SAMPLE)], tmp_path / "t", max_games=7)
    assert split == "test" and len(dataset.load_games(d, "test")) == 7


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data is not here")
def test_shared_tygem_archive_extra_check(tmp_path):
    s = dataset.build([SHARED / "tygem-2011-02.tar.gz"], tmp_path, jobs=1, max_games=300, progress=False)
    assert s["games"] == 300 and s.get("skipped", {}).get("parse_error", 0) == 0
    assert 150 < s["positions"] / 300 < 300
    b = next(dataset.iterate_batches(tmp_path, batch_size=256))
    assert b["legal"][np.arange(256), b["moves"]].all()


def test_sgf_module_and_dataset_agree_on_replay(built):
    out, _ = built
    g = dataset.load_games(out, "test").select([0])
    r = sgf.GameRecord(size=19, komi=6.5, moves=tuple(zip(g["colors"].tolist(), g["moves"].tolist())))
    assert sgf.replay(r) == (int(g["num_moves"][0]), "")
