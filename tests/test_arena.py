"""The arena: games between GTP engines, voids, resume, SGF, SPRT gating.

Most games are between a tiny scripted GTP engine (below) whose behaviour is
chosen on its command line, so that crashes, hangs, garbage, resignations
and illegal moves happen on cue; a few use our random engine and GNU Go
(skipped, visibly, where GNU Go is not installed).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from alphalite import cli

from alphalite.arena import tournament as arena

from alphalite.go import sgf
from alphalite.arena.tournament import EngineSpec, Tournament
from alphalite.go.gtpclient import find_gnugo, find_pachi
from tests.conftest import popen_interruptible

FAKE = r"""
import os, sys, time
mode = sys.argv[1]
log = open(sys.argv[2], "a") if len(sys.argv) > 2 else None
size = 19
genmoves = 0
cols = "ABCDEFGHJKLMNOPQRSTUVWXYZ"
def answer(text=""):
    sys.stdout.write(("= " + text if text else "=") + "\n\n"); sys.stdout.flush()
for line in sys.stdin:
    if log: log.write(line); log.flush()
    w = line.split()
    if not w:
        continue
    cmd = w[0]
    if cmd == "quit":
        answer(); break
    if cmd == "name":
        answer("fake-" + mode)
    elif cmd == "boardsize":
        size = int(w[1]); answer()
    elif cmd == "fixed_handicap":
        answer("C3 G7" if size == 9 else "")
    elif cmd == "final_score":
        if mode == "badscore":
            answer("B+100")
        else:
            sys.stdout.write("? cannot score\n\n"); sys.stdout.flush()
    elif cmd == "genmove":
        genmoves += 1
        if mode == "crash" or (mode.startswith("crash-once:") and not os.path.exists(mode[11:])):
            if mode != "crash":
                open(mode[11:], "w").close()
            print("fake: crashing as asked", file=sys.stderr, flush=True)
            sys.exit(1)
        if mode == "hang":
            time.sleep(60)
        if mode == "garbage":
            answer("xyzzy")
        elif mode == "resign":
            answer("resign")
        elif mode == "illegal":
            answer("A1")
        elif mode == "slowwalk":
            time.sleep(0.2)
            answer("pass" if genmoves > 3 else cols[genmoves - 1] + "1")
        elif mode == "walk":  # a new point every move, then pass
            answer(cols[(genmoves - 1) % size] + str(size - (genmoves - 1) // size) if genmoves <= 3 else "pass")
        else:
            answer("pass")
    else:
        answer()
"""


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_engine.py"
    script.write_text(FAKE)

    def spec(name, mode, log=None):
        cmd = f"{sys.executable} {script} {mode}" + (f" {log}" if log else "")
        return EngineSpec(name, cmd)

    return spec


def results(out):
    return arena.read_results(out / "results.jsonl")


def one_game_against_random(out, engine):
    """The result of one 7x7 game, our random engine (Black) against ``engine``."""
    t = Tournament(engines=(EngineSpec("random", "@alphalite --engine random --size 7 --seed {seed}"), engine),
                   games=1, size=7, komi=5.5)
    arena.run_tournament(t, out, progress=False, say=lambda m: None)
    (r,) = results(out)
    return r


@pytest.mark.slow
@pytest.mark.subprocess
def test_games_sgf_and_resume(tmp_path, fake):
    out = tmp_path / "t"
    t = Tournament(engines=(fake("a", "walk"), fake("b", "pass")), games=2, size=5, komi=0.5, referee="none")
    res = arena.run_tournament(t, out, progress=False, say=lambda m: None)
    assert res["played"] == 2 and res["void"] == 0
    recs = results(out)
    assert [r["black"] for r in recs] == ["a", "b"]  # colours alternate
    for r in recs:
        rec = sgf.read_sgf((out / r["sgf"]).read_bytes())
        assert (rec.black_player, rec.white_player) == (r["black"], r["white"])
        assert rec.size == 5 and rec.komi == 0.5 and rec.result == r["result"]
        assert sgf.replay(rec) == (rec.num_moves, "")
    # a walks 3 stones then passes: as Black it wins the empty 5x5 by area
    assert recs[0]["result"] == "B+24.5" and recs[0]["winner"] == "a"
    assert recs[1]["result"] == "W+25.5" and recs[1]["winner"] == "a"
    assert (out / "report.md").exists() and (out / "ratings.png").stat().st_size > 1000
    # a torn last line from a kill is skipped and cut; finished games are not replayed
    with open(out / "results.jsonl", "a") as f:
        f.write('{"game": "a-b-0002", "sta')
    t4 = Tournament(**{**t.__dict__, "games": 4})
    res = arena.run_tournament(t4, out, progress=False, say=lambda m: None)
    assert res["played"] == 2
    ids = [r["game"] for r in results(out)]
    assert ids == ["a-b-0000", "a-b-0001", "a-b-0002", "a-b-0003"]
    # nothing left to play
    assert arena.run_tournament(t4, out, progress=False, say=lambda m: None)["played"] == 0


@pytest.mark.subprocess
def test_other_settings_in_same_folder_refused(tmp_path, fake):
    t = Tournament(engines=(fake("a", "pass"), fake("b", "pass")), games=1, size=5, referee="none")
    arena.run_tournament(t, tmp_path, progress=False, say=lambda m: None)
    with pytest.raises(arena.ArenaError, match="other settings"):
        arena.run_tournament(Tournament(**{**t.__dict__, "komi": 3.5}), tmp_path, progress=False)


@pytest.mark.subprocess
def test_one_arena_per_folder(tmp_path, fake):
    t = Tournament(engines=(fake("a", "pass"), fake("b", "pass")), games=1, size=5, referee="none")
    held = arena._lock(tmp_path)
    with pytest.raises(arena.ArenaError, match="another arena is running"):
        arena.run_tournament(t, tmp_path, progress=False)
    held.close()
    assert arena.run_tournament(t, tmp_path, progress=False, say=lambda m: None)["played"] == 1


@pytest.mark.subprocess
def test_void_is_replayed(tmp_path, fake):
    flag = tmp_path / "crashed"
    t = Tournament(engines=(fake("a", f"crash-once:{flag}"), fake("b", "pass")), games=1, size=5, referee="none")
    said = []
    res = arena.run_tournament(t, tmp_path / "t", progress=False, say=said.append)
    assert res["void"] == 1 and res["played"] == 1 and not res["stopped_pairings"]
    recs = results(tmp_path / "t")
    assert [r["status"] for r in recs] == ["void", "done"]
    assert [r["attempt"] for r in recs] == [0, 1]
    assert "exited" in recs[0]["error"]
    # the void names the engine's last words and its log
    assert "its last words: 'fake: crashing as asked' (log " in recs[0]["error"], recs[0]["error"]
    assert (tmp_path / "t" / "void" / "a-b-0000.0.sgf").exists()
    assert any("void a-b-0000" in m for m in said)


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("mode,why", [("crash", "exited"), ("hang", "no complete answer"),
                                      ("garbage", "answered genmove with 'xyzzy'")])
def test_two_voids_stop_the_pairing_not_the_run(tmp_path, fake, mode, why):
    t = Tournament(engines=(fake("good", "walk"), fake("bad", mode), fake("other", "pass")), games=2, size=5,
                   gauntlet="good", referee="none", timeout=1.0)
    said = []
    res = arena.run_tournament(t, tmp_path, progress=False, say=said.append)
    assert res["stopped_pairings"] == [["good", "bad"]]
    assert res["played"] == 2  # good vs other went on
    recs = results(tmp_path)
    bad = [r for r in recs if r.get("pairing") == ["good", "bad"]]
    assert [r["status"] for r in bad] == ["void", "void", "stopped"]
    assert why in bad[0]["error"]
    assert any("pairing good vs bad stopped after two void games" in m for m in said)
    assert "stopped after two voids" in (tmp_path / "report.md").read_text()


@pytest.mark.subprocess
def test_resign_illegal_and_final_score_disagreement(tmp_path, fake):
    out = tmp_path / "r"
    t = Tournament(engines=(fake("res", "resign"), fake("ill", "illegal")), games=2, size=5, referee="none")
    arena.run_tournament(t, out, progress=False, say=lambda m: None)
    r0, r1 = results(out)
    assert (r0["black"], r0["result"], r0["end"], r0["winner"]) == ("res", "W+R", "resign", "ill")
    # ill (Black) plays A1, res (White) resigns
    assert (r1["result"], r1["winner"]) == ("B+R", "ill")
    out = tmp_path / "i"
    t = Tournament(engines=(fake("ill", "illegal"), fake("p", "pass")), games=1, size=5, referee="none")
    arena.run_tournament(t, out, progress=False, say=lambda m: None)
    (r,) = results(out)
    assert (r["result"], r["end"], r["winner"]) == ("W+F", "illegal move", "p")
    assert "A1 (occupied)" in r["illegal"]
    out = tmp_path / "d"
    t = Tournament(engines=(fake("liar", "badscore"), fake("p", "pass")), games=1, size=5, komi=5.5,
                   referee="none")
    arena.run_tournament(t, out, progress=False, say=lambda m: None)
    (r,) = results(out)
    assert r["result"] == "W+5.5" and r["final_score"] == {"liar": "B+100", "p": None}
    assert r["disagree"] == ["liar"]
    assert "liar 1" in (out / "report.md").read_text()


@pytest.mark.subprocess
def test_time_settings_and_handicap_sent(tmp_path, fake):
    log = tmp_path / "gtp.log"
    a = fake("a", "pass", log)
    t = Tournament(engines=(EngineSpec("a", a.command, time="30/2/5"), fake("b", "pass")), games=1, size=9,
                   handicap=2, komi=0.5, referee="none")
    arena.run_tournament(t, tmp_path / "t", progress=False, say=lambda m: None)
    sent = log.read_text().splitlines()
    assert "time_settings 30 2 5" in sent and "fixed_handicap 2" in sent
    assert any(s.startswith("time_left black 30 0") for s in sent)
    (r,) = results(tmp_path / "t")
    rec = sgf.read_sgf((tmp_path / "t" / r["sgf"]).read_bytes())
    assert rec.handicap == 2 and len(rec.setup_black) == 2 and rec.moves[0][0] == -1
    assert r["time_overruns"] == {"a": 0}


def test_clock():
    c = arena._Clock(1.0, 2.0, 2)
    c.charge(0.5)
    assert c.time_left() == (0.5, 0)
    c.charge(1.0)  # 0.5 s of overtime: period 1.5 s left for 1 stone
    assert c.time_left() == (1.5, 1)
    c.charge(1.0)  # period done: a fresh one
    assert c.time_left() == (2.0, 2) and c.overruns == 0
    c.charge(3.0)
    assert c.overruns == 1


@pytest.mark.subprocess
def test_sprt_stops_early(tmp_path, fake):
    t = Tournament(engines=(fake("cand", "walk"), fake("best", "resign")), games=40, size=5, referee="none",
                   sprt="elo0=0,elo1=200,alpha=0.05,beta=0.05")
    said = []
    res = arena.run_tournament(t, tmp_path, progress=False, say=said.append)
    assert res["sprt"]["decision"] == "accept H1"
    assert res["played"] < 40 // 2
    assert any("SPRT stops early" in m for m in said)
    assert "accept H1" in (tmp_path / "report.md").read_text()
    # a rerun does not play on
    assert arena.run_tournament(t, tmp_path, progress=False, say=said.append)["played"] == 0


def test_engine_names_that_spell_one_game_id_two_ways_are_refused(fake):
    t = Tournament(engines=(fake("a", "walk"), fake("b-c", "walk"), fake("a-b", "walk"), fake("c", "walk")),
                   games=2, size=5, referee="none")
    with pytest.raises(arena.ArenaError, match="both name game a-b-c-0000"):
        t.validate()


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert cli.main(["arena", "--engine", "x", "--engine", "y=z", "--out", str(tmp_path)]) == 2
    assert "NAME=COMMAND" in capsys.readouterr().err
    assert cli.main(["arena", "--engine", "x=/no/such/engine", "--engine", "y=/no/such/engine", "--out",
                     str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "program not found" in err and len(err.strip().splitlines()) == 1
    for args, says in ((["--time", "z=1/1/1"], "unknown engine 'z'"), (["--sprt", "elo0=5,elo1=1"], "elo1 > elo0"),
                       (["--time", "6/0.5/1"], "whole seconds")):
        assert cli.main(["arena", "--engine", "x=a", "--engine", "y=b", *args, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, (args, err)


@pytest.mark.slow
@pytest.mark.subprocess
def test_our_random_engine_in_parallel_workers(tmp_path):
    """Real engines, two games at once in worker processes; the report is
    rebuilt from the results file by --report-only."""
    t = Tournament(engines=(EngineSpec("r1", "@alphalite --engine random --size 5 --seed {seed}"),
                            EngineSpec("r2", "@alphalite --engine random --size 5 --seed {seed}")),
                   games=2, size=5, komi=0.5)
    res = arena.run_tournament(t, tmp_path, jobs=2, progress=False, say=lambda m: None)
    assert res["played"] == 2
    for r in results(tmp_path):
        assert r["end"] == "two passes" and r["engine_names"] == {"r1": "alphalite", "r2": "alphalite"}
        assert r["referee"] == ("gnugo" if find_gnugo() else "none")
        assert all(v is None or v > 0 for v in r["cpu"].values())
        rec = sgf.read_sgf((tmp_path / r["sgf"]).read_bytes())
        assert sgf.replay(rec) == (r["moves"], "")
    assert cli.main(["arena", "--out", str(tmp_path), "--report-only"]) == 0
    assert json.loads((tmp_path / "ratings.json").read_text())["anchor"] == "r2"


@pytest.mark.gnugo
@pytest.mark.subprocess
@pytest.mark.skipif(find_gnugo() is None, reason="GNU Go not installed (apt-get install gnugo)")
def test_gnugo_beats_random_and_referees(tmp_path):
    r = one_game_against_random(tmp_path, EngineSpec("gnugo", "@gnugo --level 0 --seed {seed}"))
    assert r["status"] == "done" and r["winner"] == "gnugo" and r["referee"] == "gnugo"
    assert r["final_score"]["gnugo"].startswith("W+")


def test_demo_match_without_gnugo(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(arena, "find_gnugo", lambda: None)
    assert arena.demo_match(tmp_path) == {"skipped": "gnugo not installed"}
    assert "GNU Go is not installed" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("sig,code,jobs", [(signal.SIGINT, 130, 1), (signal.SIGKILL, -9, 1), (signal.SIGTERM, 130, 2)])
def test_stopped_run_resumes(tmp_path, fake, sig, code, jobs):
    """Ctrl-C (to the whole process group, as a terminal sends it), kill -9,
    or kill (SIGTERM to the arena alone, its workers playing) mid-tournament:
    finished games stay, no game is played on after the arena stops, and a
    rerun plays only the rest."""
    slow = fake("slow", "slowwalk")
    argv = [sys.executable, "-m", "alphalite.cli", "arena", "--engine", f"a={slow.command}",
            "--engine", f"b={fake('b', 'pass').command}", "--games", "6", "--size", "5",
            "--referee", "none", "--quiet", "--jobs", str(jobs), "--out", str(tmp_path)]
    # Ctrl-C as from a terminal, also in a test run started in the background (nohup cmd &)
    proc = popen_interruptible(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    path = tmp_path / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and len(arena.read_results(path)) < 2:
        time.sleep(0.05)
    if sig == signal.SIGTERM:
        os.kill(proc.pid, sig)  # the arena alone, not its process group
    else:
        os.killpg(proc.pid, sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == code
    if sig != signal.SIGKILL:
        assert "rerun the same command to resume" in out
    kept = [r["game"] for r in arena.read_results(path)]
    assert 2 <= len(kept) < 6
    if sig == signal.SIGTERM:  # its workers stopped with it: no game record appears afterwards
        records = sorted(p.name for p in (tmp_path / "games").glob("*.sgf"))
        time.sleep(3)
        assert sorted(p.name for p in (tmp_path / "games").glob("*.sgf")) == records
    assert cli.main(argv[3:]) == 0
    ids = [r["game"] for r in arena.read_results(path)]
    assert ids[:len(kept)] == kept and sorted(ids) == [f"a-b-{i:04d}" for i in range(6)]


def test_pachi_gets_every_core_and_no_pondering_unless_told(monkeypatch):
    monkeypatch.setattr(arena, "find_pachi", lambda: "/opt/pachi")
    cores = f"threads={os.cpu_count() or 1},pondering=0"
    assert EngineSpec("p", "@pachi -s {seed}").argv(7) == ["/opt/pachi", "-r", "chinese", "-s", "7", cores]
    assert EngineSpec("p", "@pachi -t =500").argv() == ["/opt/pachi", "-r", "chinese", "-t", "=500", cores]
    assert EngineSpec("p", "@pachi threads=1").argv() == ["/opt/pachi", "-r", "chinese", "threads=1"]
    monkeypatch.setattr(arena, "find_pachi", lambda: None)
    with pytest.raises(arena.ArenaError, match="make pachi"):
        EngineSpec("p", "@pachi").argv()


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.skipif(find_pachi() is None, reason="Pachi not built (make pachi)")
def test_pachi_plays_a_whole_game(tmp_path):
    """The Pachi `make pachi` builds, over GTP: it beats random play on 7x7."""
    r = one_game_against_random(tmp_path, EngineSpec("pachi", "@pachi -s {seed} -t =1000"))
    assert r["status"] == "done" and r["winner"] == "pachi", r
    assert r["engine_names"]["pachi"] == "Pachi UCT"
