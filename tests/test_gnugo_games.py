"""GNU Go self-play games (alphalite data gnugo): records, resume, variety, build."""

import json

import numpy as np
import pytest

from alphalite.go import board, sgf

from alphalite.data import dataset, gnugo_games
from alphalite.cli import main
from alphalite.go.gtpclient import find_gnugo

GNUGO = find_gnugo()
needs_gnugo = pytest.mark.skipif(GNUGO is None, reason="GNU Go not found on PATH or in /usr/games: install gnugo")


def _records(folder):
    return {p.name: sgf.read_sgf(p.read_bytes()) for p in sorted(folder.glob("game-*.sgf"))}


@pytest.fixture(scope="module")
def games_dir(tmp_path_factory):
    if GNUGO is None:
        pytest.skip("GNU Go not found on PATH or in /usr/games: install gnugo")
    out = tmp_path_factory.mktemp("gnugo") / "games"
    summary = gnugo_games.generate(out, games=4, size=9, levels=(1,), komi=7.5, seed=3, jobs=2, progress=False)
    return out, summary


@pytest.mark.gnugo
def test_random_opening_off_first_line_and_apart():
    rng = np.random.default_rng(0)
    for count in range(7):
        stones = gnugo_games.random_opening(9, count, rng)
        assert len(stones) == count
        assert [c for c, _ in stones] == [board.BLACK, board.WHITE] * (count // 2) + [board.BLACK] * (count % 2)
        pts = [divmod(m, 9) for _, m in stones]
        assert all(1 <= r <= 7 and 1 <= c <= 7 for r, c in pts)
        for i, a in enumerate(pts):
            for b in pts[i + 1:]:
                assert abs(a[0] - b[0]) + abs(a[1] - b[1]) > 1


@pytest.mark.gnugo
def test_game_spec_is_a_function_of_seed_and_index():
    a = gnugo_games.game_spec(5, seed=1, levels=(1, 3))
    assert a == gnugo_games.game_spec(5, seed=1, levels=(1, 3))
    assert a.level == 3 and a.max_moves == 3 * 81
    specs = {(s.gnugo_seed, s.opening) for s in (gnugo_games.game_spec(i, seed=1) for i in range(50))}
    assert len(specs) == 50
    assert gnugo_games.game_spec(5, seed=2).gnugo_seed != a.gnugo_seed


@pytest.mark.gnugo
@needs_gnugo
def test_writes_parseable_9x9_games_with_results(games_dir):
    out, summary = games_dir
    recs = _records(out)
    assert sorted(recs) == [f"game-{i:06d}.sgf" for i in range(4)]
    assert summary["games"] == 4 and summary["new_games"] == 4 and summary["complete"] is True
    assert summary["moves"] == sum(len(r.moves) for r in recs.values()) > 0
    assert summary["unique_games"] == 4
    for name, rec in recs.items():
        spec = gnugo_games.game_spec(int(name[5:11]), seed=3, komi=7.5)
        assert rec.size == 9 and rec.komi == 7.5 and rec.rules == "Chinese"
        assert rec.black_player.startswith("GNU Go ") and rec.black_player.endswith(" level 1")
        assert rec.result_kind in ("score", "resign", "draw") and rec.result
        assert (rec.winner != 0) == (rec.result_kind != "draw")
        # random stones are setup, in the spec's colours; the first mover follows them
        assert rec.setup_black == tuple(sorted(m for c, m in spec.opening if c == board.BLACK))
        assert rec.setup_white == tuple(sorted(m for c, m in spec.opening if c == board.WHITE))
        first = board.WHITE if len(spec.opening) % 2 else board.BLACK
        assert rec.moves[0][0] == first
        assert all(rec.moves[i][0] == -rec.moves[i - 1][0] for i in range(1, len(rec.moves)))
        n, why = sgf.replay(rec)
        assert n == len(rec.moves) and why == ""
        assert rec.result_kind == "resign" or [m for _, m in rec.moves[-2:]] == [81, 81]  # two passes end it


@pytest.mark.gnugo
@needs_gnugo
def test_resume_keeps_finished_games_and_ignores_a_partial_temp_file(games_dir, tmp_path):
    out, _ = games_dir
    work = tmp_path / "games"
    work.mkdir()
    for p in out.iterdir():
        (work / p.name).write_bytes(p.read_bytes())
    (work / "game-000001.sgf").unlink()  # as if killed before game 1 was renamed into place
    partial = work / ".game-000001.sgf.tmp-4242"
    partial.write_bytes(b"(;FF[4]SZ[9];B[ee];W[")
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in work.glob("game-*.sgf")}

    summary = gnugo_games.generate(work, games=5, size=9, levels=(1,), komi=7.5, seed=3, progress=False)
    assert summary["new_games"] == 2 and summary["games"] == 5 and summary["complete"] is True
    assert not partial.exists()
    for name, (mtime, data) in before.items():
        p = work / name
        assert p.stat().st_mtime_ns == mtime and p.read_bytes() == data
    # the same (seed, index) gives the same game: game 1 is replayed exactly
    assert sgf.read_sgf((work / "game-000001.sgf").read_bytes()).moves == \
        sgf.read_sgf((out / "game-000001.sgf").read_bytes()).moves

    again = gnugo_games.generate(work, games=5, size=9, levels=(1,), komi=7.5, seed=3, progress=False)
    assert again["new_games"] == 0 and again["games"] == 5


@pytest.mark.gnugo
@needs_gnugo
def test_other_options_in_the_same_folder_are_refused(games_dir):
    out, _ = games_dir
    with pytest.raises(gnugo_games.GnugoGamesError, match="other options"):
        gnugo_games.generate(out, games=4, size=9, levels=(2,), komi=7.5, seed=3, progress=False)


@pytest.mark.gnugo
@needs_gnugo
def test_games_differ_across_seeds(games_dir, tmp_path):
    out, _ = games_dir
    mine = [r.moves for r in _records(out).values()]
    gnugo_games.generate(tmp_path / "s4", games=2, size=9, levels=(1,), komi=7.5, seed=4, random_moves=0,
                         progress=False)
    other = [r for r in _records(tmp_path / "s4").values()]
    assert all(not r.setup_black and not r.setup_white for r in other)
    assert other[0].moves != other[1].moves  # no random stones: the GNU Go seed alone varies the game
    assert not {r.moves for r in other} & set(mine)


@pytest.mark.gnugo
@needs_gnugo
def test_build_reads_the_folder(games_dir, tmp_path):
    out, summary = games_dir
    (out / ".game-000009.sgf.tmp-1").write_bytes(b"(;FF[4]SZ[9];B[")  # a temp file is not a game
    try:
        res = dataset.build([out], tmp_path / "ds", jobs=1, sizes=(9,), val_frac=0.0, test_frac=0.5,
                            progress=False)
    finally:
        (out / ".game-000009.sgf.tmp-1").unlink()
    assert res["files"] == 4 and res["games"] == 4 and res["skipped"] == {}
    assert res["positions"] == summary["moves"]
    games = dataset.load_games(tmp_path / "ds", split="all", board_size=9)
    assert len(games) == 4 and set(games["size"].tolist()) == {9}


@pytest.mark.gnugo
@needs_gnugo
def test_cli_prints_one_json_line_and_rejects_bad_input(tmp_path, capsys):
    assert main(["data", "gnugo", "--games", "1", "--out", str(tmp_path / "g"), "--quiet"]) == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and json.loads(line)["games"] == 1
    assert main(["data", "gnugo", "--games", "1", "--out", str(tmp_path / "h"), "--level", "11"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("alphalite: error: --level") and "\n" not in err


@pytest.mark.gnugo
@needs_gnugo
def test_demo_games(tmp_path):
    out = gnugo_games.demo_games(tmp_path / "demo", games=2)
    assert out == tmp_path / "demo" and len(_records(out)) == 2
