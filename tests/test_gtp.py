"""The GTP engine over real pipes: gogui-regress style transcripts
(tests/gtp/*.tst), a fuzz run, a full game against GNU Go; and the pure
parts: framing, time allocation, resigning, passing.

Transcript format (as gogui-regress): a line ``ID command`` is sent; the
``#? [regex]`` line after it must fully match the response text (after
``=ID``, multi-line responses joined by newlines); ``#? [?regex]`` expects a
failure response (``?ID message``). ``$DATA`` is tests/data and ``$TMP`` the
test's tmp_path.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from alphalite.gtp import engine as gtp
from alphalite.gtp import protocol
from alphalite.gtp.commands_analyze import STREAMING
from alphalite.engine import timecontrol as tc
from alphalite.go import board
from alphalite.go.gtpclient import GtpClient, find_gnugo

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TST = sorted((ROOT / "tests" / "gtp").glob("*.tst"))
GNUGO = find_gnugo()
RESPONSE_START = re.compile(rb"([=?])([0-9]*)( |$)")
RESULT = re.compile(r"0|[BW]\+[0-9]+(\.[0-9]+)?")


class FramingError(AssertionError):
    pass


class RawGtp:
    """Our engine as a subprocess, spoken to byte for byte; every response
    is checked for framing (status, id echo, exactly one blank line)."""

    def __init__(self, args: list[str], stderr_path: Path, cwd: Path = ROOT):
        self.stderr = open(stderr_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "alphalite.cli", "gtp", *args], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _line(self, timeout: float) -> bytes:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise FramingError(f"no output within {timeout} s (hang)") from None
        if line is None:
            raise FramingError(f"engine exited (code {self.proc.poll()})")
        if not line.endswith(b"\n") or line.endswith(b"\r\n"):
            raise FramingError(f"bad line ending: {line!r}")
        return line[:-1]

    def response(self, ident: str = "", timeout: float = 60.0) -> tuple[bool, str]:
        first = self._line(timeout)
        m = RESPONSE_START.match(first)
        if not m:
            raise FramingError(f"response starts with {first!r}")
        if m.group(2).decode() != ident:
            raise FramingError(f"id {ident!r} not echoed: {first!r}")
        body = [first[m.end():]]
        while True:
            line = self._line(timeout)
            if line == b"":
                break
            body.append(line)
        return m.group(1) == b"=", b"\n".join(body).decode("utf-8")

    def no_pending_output(self, wait: float = 0.05):
        time.sleep(wait)
        if not self.lines.empty():
            raise FramingError(f"unexpected extra output: {self.lines.get()!r}")

    def ask(self, command: str, timeout: float = 60.0) -> tuple[bool, str]:
        words = command.split()
        ident = words[0] if words and words[0].isdigit() else ""
        self.send_raw(command.encode() + b"\n")
        return self.response(ident, timeout)

    def close(self):
        try:
            self.send_raw(b"quit\n")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = RawGtp(["--engine", "random", "--size", "9", "--seed", "1"],
                 tmp_path_factory.mktemp("gtp") / "stderr.txt")
    yield eng
    eng.close()


# ---------------------------------------------------------------- transcripts


def read_tst(path: Path):
    """[(line number, command, expected or None)]."""
    cases = []
    for i, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith("#?"):
            m = re.fullmatch(r"#\?\s*\[(.*)\]", line)
            assert m and cases and cases[-1][2] is None, f"{path.name}:{i}: stray or bad #? line"
            cases[-1] = (cases[-1][0], cases[-1][1], m.group(1))
        elif line and not line.startswith("#"):
            cases.append((i, line, None))
    return cases


@pytest.mark.subprocess
@pytest.mark.parametrize("path", TST, ids=[p.stem for p in TST])
def test_transcript(engine, path, tmp_path):
    assert engine.ask("clear_board")[0]
    for lineno, command, expected in read_tst(path):
        command = command.replace("$DATA", str(DATA)).replace("$TMP", str(tmp_path))
        ok, body = engine.ask(command)
        if expected is None:
            continue
        want_ok = not expected.startswith("?")
        pattern = expected if want_ok else expected[1:]
        where = f"{path.name}:{lineno}: {command!r} -> {'=' if ok else '?'} {body!r}"
        assert ok == want_ok, where
        assert re.fullmatch(pattern, body.strip() if not pattern.startswith("(?s)\\n") else body), where
    engine.no_pending_output()


@pytest.mark.serial
@pytest.mark.subprocess
def test_startup_answers_at_once(tmp_path):
    """name/protocol_version come back before any warm-up (well under the
    Numba and network start-up), ids echoed, one blank line each."""
    eng = RawGtp(["--engine", "mcts", "--size", "9", "--visits", "32"], tmp_path / "stderr.txt")
    try:
        t0 = time.perf_counter()
        eng.send_raw(b"1 protocol_version\n2 name\n")
        assert eng.response("1", timeout=20) == (True, "2")
        assert eng.response("2", timeout=20) == (True, "alphalite")
        first = time.perf_counter() - t0
        ok, move = eng.ask("3 genmove b")
        assert ok and re.fullmatch(r"[A-HJ][1-9]|pass", move)
        assert first < 3.0, f"first answers took {first:.1f} s"
        # streaming analysis: info lines until the next line arrives
        eng.send_raw(b"4 lz-analyze w 5\n")
        time.sleep(0.5)
        eng.send_raw(b"\n")
        ok, body = eng.response("4")
        infos = [ln for ln in body.split("\n") if ln]
        assert ok and infos, body
        m = re.match(r"info move ([A-HJ][1-9]|pass) visits ([0-9]+) winrate ([0-9]+) prior ([0-9]+) "
                     r"lcb ([0-9]+) order 0 pv ", infos[-1])
        assert m and int(m.group(2)) > 0 and 0 <= int(m.group(3)) <= 10000, infos[-1]
        ok, body = eng.ask("5 lz-genmove_analyze w 10")
        assert ok and re.search(r"(?m)^play ([A-HJ][1-9]|pass)$", body), body
        ok, board = eng.ask("6 showboard")
        assert board.count("O") == 1 and board.count("X") == 1
        # under a clock --visits stays a cap (tests/test_clock.py): 32 visits
        # come back well inside the 0.75 s the clock allows
        assert eng.ask("7 time_settings 300 0 0") == (True, "")
        assert eng.ask("8 time_left b 30 0") == (True, "")
        t0 = time.perf_counter()
        ok, move = eng.ask("9 genmove b")
        took = time.perf_counter() - t0
        assert ok and took < 3.0, took
        assert eng.ask("10 kgs-time_settings byoyomi 0 1 3") == (True, "")
        t0 = time.perf_counter()
        ok, move = eng.ask("11 genmove w")
        assert ok and time.perf_counter() - t0 < 1.0
        eng.no_pending_output()
    finally:
        eng.close()


# ---------------------------------------------------------------- fuzz


COMMANDS = ["protocol_version", "name", "version", "known_command", "list_commands", "boardsize",
            "clear_board", "komi", "play", "genmove", "undo", "showboard", "fixed_handicap",
            "place_free_handicap", "set_free_handicap", "time_settings", "time_left", "kgs-time_settings",
            "kgs-genmove_cleanup", "final_score", "final_status_list", "loadsgf", "reg_genmove",
            "lz-analyze", "gogui-analyze_commands", "alphalite-policy_heatmap", "alphalite-policy_dboard",
            "kata-analyze", "kata-genmove_analyze"]
WORDS = ["b", "w", "black", "WHITE", "pass", "PASS", "a1", "J9", "i5", "z99", "t19", "0", "-1", "2", "9",
         "25", "26", "99999999999999999999999999", "1e308", "nan", "inf", "-0", "7.5", "x", "", "é", "黑",
         "\u2028", "\x00", "\x1b[31m", "#", "\t", "\r", "alive", "dead", "seki", "none", "absolute",
         "byoyomi", "canadian", "interval", "10", "300", "%s%n", "../../etc/passwd", "ownership", "true",
         "maxmoves", "minmoves"]


def fuzz_lines(rng: np.random.Generator, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        kind = rng.integers(6)
        if kind == 0:  # random bytes
            line = bytes(rng.integers(0, 256, size=int(rng.integers(0, 40)), dtype=np.uint8)).replace(b"\n", b"")
        elif kind == 1:  # a known command with garbage arguments
            args = [WORDS[i] for i in rng.integers(0, len(WORDS), size=int(rng.integers(0, 4)))]
            line = " ".join([COMMANDS[rng.integers(len(COMMANDS))], *args]).encode("utf-8", "replace")
        elif kind == 2:  # a sensible move
            v = "ABCDEFGHJ"[rng.integers(9)] + str(rng.integers(1, 10))
            line = f"{rng.choice(['play b', 'play w', 'genmove b', 'genmove w'])} {v}".encode()
            line = line.rsplit(b" ", 1)[0] if line.startswith(b"genmove") else line
        elif kind == 3:  # ids, whitespace, CR, tabs, comments, empty
            line = rng.choice([b"", b"   ", b"\t", b"\r", b"# just a comment", b"12", b"7 name\r",
                               b"\t3\tversion # c", b"00042 protocol_version", b"-5 name", b"1.5 name",
                               b"99999999999999999999999999 name", b"boardsize 9", b"clear_board"])
        elif kind == 4:  # unicode
            line = rng.choice(["名前", "play b ｄ４", "genmove ⚫", "komi ６.５", "boardsize ９", "ünknown"]).encode()
        else:  # huge numbers and long lines
            line = rng.choice([b"komi 1" + b"0" * 400, b"boardsize " + b"9" * 5000, b"x" * 10000,
                               b"time_settings 1e9 1e9 1e9", b"time_left b 1e400 0", b"fixed_handicap 4",
                               b"final_score", b"undo"])
        out.append(bytes(line))
    return out


def expect_response(line: bytes) -> tuple[bool, str, str]:
    """(does the spec call for a response, its id, command name), decided
    independently of the engine's parser."""
    text = line.decode("utf-8", "replace")
    text = "".join(ch for ch in text if ch == "\t" or not (ord(ch) < 32 or 127 <= ord(ch) < 160
                                                             or ch in "\u2028\u2029"))
    text = text.split("#", 1)[0].replace("\t", " ")
    words = text.split()
    if not words:
        return False, "", ""
    ident = words[0] if re.fullmatch(r"[0-9]+", words[0]) else ""
    name = words[1] if ident and len(words) > 1 else (words[0] if not ident else "")
    return True, ident, name


@pytest.mark.subprocess
def test_fuzz_never_crashes_or_desynchronises(engine):
    rng = np.random.default_rng(2024)
    lines = fuzz_lines(rng, 2500)
    engine.ask("boardsize 9")
    sent = answered = 0
    for i, line in enumerate(lines):
        need, ident, name = expect_response(line)
        if name in ("quit", "loadsgf", "printsgf"):
            continue  # would end the session or touch files outside tmp_path
        ending = [b"\n", b"\r\n", b"\n"][i % 3]
        engine.send_raw(line + ending)
        sent += 1
        if name in STREAMING:
            engine.send_raw(b"\n")  # a GUI stops the analysis with a new line
        if need:
            engine.response(ident, timeout=60)
            answered += 1
        if i % 100 == 99:  # resynchronise check
            ok, body = engine.ask(f"{i} name")
            assert ok and body == "alphalite"
    engine.no_pending_output()
    assert engine.proc.poll() is None
    assert answered > 2000 and sent > answered
    assert engine.ask("777 protocol_version") == (True, "2")


# ---------------------------------------------------------------- GNU Go


@pytest.mark.serial
@pytest.mark.gnugo
@pytest.mark.subprocess
@pytest.mark.skipif(GNUGO is None, reason="GNU Go not found on PATH or in /usr/games: install gnugo")
def test_full_game_against_gnugo(tmp_path):
    size, komi = 9, 7.5
    ours = GtpClient([sys.executable, "-m", "alphalite.cli", "gtp", "--engine", "mcts", "--visits", "64",
                      "--checkpoint", "none", "--no-resign", "--size", str(size), "--seed", "3"], timeout=120,
                     stderr=open(tmp_path / "ours.txt", "w"))
    theirs = GtpClient([GNUGO, "--mode", "gtp", "--level", "1", "--chinese-rules", "--positional-superko"],
                       timeout=60)
    with ours, theirs:
        for eng in (ours, theirs):
            eng.send(f"boardsize {size}")
            eng.send("clear_board")
            eng.send(f"komi {komi}")
        # Our engine plays on a 12-second absolute clock kept by this referee.
        clock = 12.0
        ours.send(f"time_settings {clock:g} 0 0")
        players = {"black": ours, "white": theirs}
        passes, moves, resigned = 0, 0, None
        colour = "black"
        while passes < 2 and moves < 160:
            mover = players[colour]
            other = theirs if mover is ours else ours
            if mover is ours:
                ours.send(f"time_left {colour} {max(clock, 0.0):.2f} 0")
            t0 = time.perf_counter()
            move = mover.send(f"genmove {colour}").lower()
            if mover is ours:
                clock -= time.perf_counter() - t0
                assert clock > 0, f"lost on time at move {moves}"
            if move == "resign":
                resigned = colour
                break
            other.send(f"play {colour} {move}")  # raises GtpError if the engines disagree on legality
            passes = passes + 1 if move == "pass" else 0
            moves += 1
            colour = "white" if colour == "black" else "black"
        assert moves >= 10
        ours_score = ours.send("final_score")
        theirs_score = theirs.send("final_score")
    assert RESULT.fullmatch(ours_score), ours_score
    assert RESULT.fullmatch(theirs_score), theirs_score

    def signed(r):
        return 0.0 if r == "0" else (1 if r[0] == "B" else -1) * float(r[2:])

    a, b = signed(ours_score), signed(theirs_score)
    # neither side resigns (GNU Go never does in GTP mode): the game ends by two passes, and the two
    # counts name the same winner and agree up to dead-stone judgement
    assert passes >= 2 and resigned is None, (moves, resigned)
    assert np.sign(a) == np.sign(b) and abs(a - b) <= 10, (ours_score, theirs_score)


# ---------------------------------------------------------------- policy net


@pytest.mark.slow
@pytest.mark.subprocess
def test_policy_engine_and_fallback(tmp_path):
    import jax

    from alphalite.nn import checkpoint, features, nets

    model = nets.make_model("b1c8", 9, features.num_planes("default"))
    variables = nets.init_variables(model, jax.random.PRNGKey(0))
    path = checkpoint.export_model(tmp_path / "model", variables,
                                   {"model": "b1c8", "board_size": 9, "preset": "default"})
    eng = RawGtp(["--engine", "policy", "--checkpoint", str(path), "--size", "9"], tmp_path / "stderr.txt")
    try:
        assert eng.ask("1 name") == (True, "alphalite")
        seen = set()
        for i, colour in enumerate("bwbw"):
            ok, move = eng.ask(f"{10 + i} genmove {colour}", timeout=120)
            assert ok and re.fullmatch(r"[A-HJ][1-9]", move) and move not in seen
            seen.add(move)
        ok, heat = eng.ask("20 alphalite-policy_heatmap")
        assert ok and heat.startswith("INFLUENCE ") and "\nTEXT pass" in heat
        ok, dboard = eng.ask("21 alphalite-policy_dboard")
        rows = dboard.strip().split("\n")
        assert ok and len(rows) == 9 and all(len(r.split()) == 9 for r in rows)
        assert abs(sum(float(x) for r in rows for x in r.split()) - 100) < 5
        assert eng.ask("22 boardsize 7")[0]
        ok, move = eng.ask("23 genmove b", timeout=120)
        assert ok and re.fullmatch(r"[A-HJ][1-7]|pass", move)
    finally:
        eng.close()
    log = (tmp_path / "stderr.txt").read_text()
    assert f"9x9 nets: policy {path}, value none" in log
    assert log.count("no network plays 7x7 (nets: 9x9-19x19): policy engine using "
                     "rollout MCTS with line priors") == 1


def test_loadsgf_replays_to_a_move_number_and_refuses_what_it_cannot_load_whole(tmp_path):
    (tmp_path / "ok.sgf").write_text("(;SZ[9]KM[6.5];B[ee];W[cc];B[gg])")
    (tmp_path / "illegal.sgf").write_text("(;SZ[9]KM[5.5];B[ee];W[ee];B[cc])")  # W onto B's stone
    (tmp_path / "big.sgf").write_text("(;SZ[26];B[aa])")
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=19), log=lambda m: None, warmup=False)
    assert eng.handle(f"loadsgf {tmp_path / 'ok.sgf'}") == "=\n\n"
    assert (eng.size, eng.state.komi, len(eng.game.moves), eng.state.to_play) == (9, 6.5, 3, board.WHITE)
    assert eng.handle(f"loadsgf {tmp_path / 'ok.sgf'} 3") == "=\n\n"  # the position before move 3
    assert len(eng.game.moves) == 2 and eng.state.to_play == board.BLACK
    before = (len(eng.game.moves), eng.state.hash, eng.state.komi)
    for name in ("illegal.sgf", "big.sgf", "missing.sgf"):
        assert eng.handle(f"7 loadsgf {tmp_path / name}") == "?7 cannot load file\n\n", name
        assert (len(eng.game.moves), eng.state.hash, eng.state.komi) == before, name
    assert eng.handle(f"loadsgf {tmp_path / 'illegal.sgf'} 2") == "=\n\n"  # the legal first move alone
    assert len(eng.game.moves) == 1 and eng.state.komi == 5.5


def test_loadsgf_without_komi_keeps_the_current_komi(tmp_path):
    """Komi is the controller's: a record with KM sets it, one without
    keeps what the controller set (it read as komi 0), as KataGo does."""
    (tmp_path / "none.sgf").write_text("(;SZ[9];B[ee];W[cc])")
    (tmp_path / "half.sgf").write_text("(;SZ[9]KM[0.5];B[ee])")
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=19, komi=7.5), log=lambda m: None, warmup=False)
    assert eng.handle("komi 6.5") == "=\n\n"
    assert eng.handle(f"loadsgf {tmp_path / 'none.sgf'}") == "=\n\n"
    assert (eng.size, eng.state.komi, len(eng.game.moves)) == (9, 6.5, 2)
    assert "KM[6.5]" in eng.handle("printsgf")
    assert eng.handle(f"loadsgf {tmp_path / 'half.sgf'}") == "=\n\n" and eng.state.komi == 0.5
    assert eng.handle(f"loadsgf {tmp_path / 'none.sgf'} 2") == "=\n\n"
    assert eng.state.komi == 0.5 and len(eng.game.moves) == 1
    for empty in ("KM[]", "KM[abc]"):  # no number: komi stated as none
        (tmp_path / "bad.sgf").write_text(f"(;SZ[9]{empty};B[ee])")
        assert eng.handle(f"loadsgf {tmp_path / 'bad.sgf'}") == "=\n\n" and eng.state.komi == 0.5, empty


def test_every_engine_counts_with_pattern_rollouts():
    """The policy and mcts engines settle dead stones as the apv engine
    does, by pattern rollouts (``--rollout-policy``): with uniform random
    playouts the policy engine counted W+24.5 where GNU Go, the referee,
    counted B+7.5 (docs/games/policy19ag40b12-apv19, game 3; with seeds
    1, 2 and 3, not 0). No net is loaded: final_score needs none."""
    sgf = ROOT / "docs/games/policy19ag40b12-apv19/games/ag40b12-apv19-0003.sgf"
    for engine in ("policy", "mcts"):
        for seed in (1, 2, 3):
            eng = gtp.Engine(gtp.EngineConfig(engine=engine, size=19, seed=seed), log=lambda m: None, warmup=False)
            assert eng.handle(f"loadsgf {sgf}") == "=\n\n"
            assert eng.handle("final_score") == "= B+7.5\n\n", (engine, seed)


# ---------------------------------------------------------------- shipped nets, refusals


def _gtp_start(args: list[str], cwd: Path, stdin: bytes = b"1 name\n") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "alphalite.cli", "gtp", *args], cwd=cwd, input=stdin,
                          capture_output=True, timeout=120)


def _copy_net(name: str, dest: Path) -> Path:
    import shutil

    from alphalite.nn import checkpoint

    return Path(shutil.copytree(checkpoint.shipped(name), dest))


def _spoil(case: str, tmp_path: Path) -> tuple[list[str], str]:
    """(gtp flags, what the one stderr line must contain) of a bad start."""
    if case == "value-as-policy":
        net = _copy_net("value9", tmp_path / "v9")
        return ["--engine", "policy", "--checkpoint", str(net)], f"{net} is not a policy or policy_value net"
    if case == "policy-as-value":
        net = _copy_net("policy9", tmp_path / "p9")
        return ["--checkpoint", "policy9", "--value-checkpoint", str(net)], f"{net} is not a value net"
    if case == "policy-as-value-beside-auto":  # 19x19: the shipped policy net there takes a value net
        net = _copy_net("policy19", tmp_path / "p19")
        return ["--value-checkpoint", str(net)], f"{net} is not a value net"
    if case == "value-beside-auto-policy-value":  # 9x9: the shipped net values by its own head
        net = _copy_net("value9", tmp_path / "v9")
        return ["--value-checkpoint", str(net)], f"policy-value net, valued by its own head: no value net beside " \
                                                  f"it (drop --value-checkpoint {net})"
    if case in ("truncated", "zeroed"):
        net = _copy_net("policy9", tmp_path / "p9")
        data_files = [f for f in (net / "variables").rglob("*") if f.is_file() and f.parent.name == "d"]
        assert data_files
        for f in data_files:
            data = f.read_bytes()
            f.write_bytes(data[: len(data) // 3] if case == "truncated" else bytes(len(data)))
        return ["--checkpoint", str(net)], f"{net / 'variables'}: unreadable"
    if case == "empty-folder":
        (tmp_path / "empty").mkdir()
        return ["--checkpoint", str(tmp_path / "empty")], f"{tmp_path / 'empty'} is neither an exported model"
    if case == "no-model-json":
        net = _copy_net("policy9", tmp_path / "p9")
        (net / "model.json").unlink()
        return ["--checkpoint", str(net)], f"{net} is neither an exported model"
    if case == "bad-model-json":
        net = _copy_net("policy9", tmp_path / "p9")
        (net / "model.json").write_text('{"model": "b4c32", "board_si')
        return ["--checkpoint", str(net)], f"{net / 'model.json'}: unreadable"
    if case == "model-json-lies":  # names a bigger net than variables/ holds
        net = _copy_net("policy9", tmp_path / "p9")
        (net / "model.json").write_text('{"board_size": 9, "kind": "policy", "model": "b6c64", "preset": "default"}')
        return ["--checkpoint", str(net)], f"{net}: its variables do not fit model 'b6c64'"
    if case == "sizes-disagree":
        net = _copy_net("value19sp", tmp_path / "v19")
        return (["--checkpoint", "policy9", "--value-checkpoint", str(net)],
                f"{net} beside the policy net policy9: value net is for 19x19, policy for 9x9")
    if case == "unknown-name":
        from alphalite.nn import checkpoint

        return ["--checkpoint", "policy7"], "checkpoint not found: policy7 is neither a path nor a shipped net " \
            f"({', '.join(checkpoint.shipped_names())})"
    flag, value, want = {"komi-nan": ("--komi", "nan", "a finite number"),
                         "komi-inf": ("--komi", "inf", "a finite number"),
                         "resign-threshold": ("--resign-threshold", "5", "in [0, 1]"),
                         "lambda": ("--lambda", "1.5", "in [0, 1]"), "visits": ("--visits", "0", ">= 1"),
                         "batch": ("--batch", "0", ">= 1"), "max-time": ("--max-time", "0", "> 0"),
                         "lag-buffer": ("--lag-buffer", "-1", ">= 0"),
                         "temperature": ("--temperature", "nan", ">= 0"),
                         "resign-moves": ("--resign-moves", "0", ">= 1"), "seed": ("--seed", "-1", ">= 0"),
                         "score-playouts": ("--score-playouts", "-1", ">= 0"),
                         "size": ("--size", "26", "in 2..25")}[case]
    return [flag, value], f"{flag} must be {want}, got "


BAD_STARTS = ["value-as-policy", "policy-as-value", "policy-as-value-beside-auto", "value-beside-auto-policy-value",
              "truncated", "zeroed", "empty-folder", "no-model-json", "bad-model-json", "model-json-lies",
              "sizes-disagree", "unknown-name",
              "komi-nan", "komi-inf", "resign-threshold", "lambda", "visits", "batch", "max-time", "lag-buffer",
              "temperature", "resign-moves", "seed", "score-playouts", "size"]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("case", BAD_STARTS)
def test_bad_start_stops_before_any_command(case, tmp_path):
    """A wrong net or flag: exit status 2 before answering ``name``, and one
    stderr line naming the file (or flag) and what is wrong with it."""
    args, want = _spoil(case, tmp_path)
    out = _gtp_start(args, tmp_path)
    err = out.stderr.decode()
    assert out.returncode == 2 and out.stdout == b"", (out.returncode, out.stdout, err)
    assert err.endswith("\n") and err.count("\n") == 1 and err.startswith("alphalite: error: "), err
    assert want in err, err


_STRAY = r"""
import gc, sys, time
from alphalite.nn import checkpoint
from alphalite.gtp import engine as gtp

class Raises:
    def __del__(self):
        raise RuntimeError("stray error of a good start")

with gtp._stray_errors_held():  # a good start: held, then printed
    Raises()
    print("after the start", file=sys.stderr, flush=True)
for _ in range(5):  # failed restores: Orbax's leftover callbacks raise later, in its threads
    try:
        with gtp._stray_errors_held():
            checkpoint.load_variables(sys.argv[1])
    except checkpoint.CheckpointError:
        pass
time.sleep(1)
gc.collect()
"""


@pytest.mark.subprocess
def test_stray_errors_of_a_failed_load_stay_held(tmp_path):
    """The leftovers of a failed Orbax restore (unraisable errors, asyncio's
    unretrieved futures) add nothing to the one refusal line, however late
    they come; those of a good start are printed after it."""
    net = _copy_net("policy9", tmp_path / "p9")
    for f in (net / "variables").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(bytes(f.stat().st_size))
    out = subprocess.run([sys.executable, "-c", _STRAY, str(net)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.startswith("after the start\n"), out.stderr[:2000]
    assert out.stderr.count("Traceback") == 1 and "stray error of a good start" in out.stderr, out.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.subprocess
def test_no_arguments_plays_the_shipped_nets_of_each_size(tmp_path):
    """``alphalite gtp`` with no flag, started in a folder of its own (as
    GUIs do) that holds a decoy ``policy9`` folder: the shipped 9x9 nets play
    9x9, ``boardsize 19`` switches to the 19x19 ones, 13x13 plays the 19x19
    policy moved there, a size with no net says
    so once and plays rollout MCTS; a net given by name loads from there
    too, while a folder of that name in the working folder wins."""
    from alphalite.nn import checkpoint

    (tmp_path / "policy9").mkdir()
    eng = RawGtp([], tmp_path / "stderr.txt", cwd=tmp_path)
    try:
        assert eng.ask("1 name", timeout=20) == (True, "alphalite")
        for i, size in enumerate((9, 19, 7, 13)):
            assert eng.ask(f"{10 * i + 2} boardsize {size}") == (True, "")
            assert eng.ask(f"{10 * i + 3} clear_board", timeout=120) == (True, "")
            ok, move = eng.ask(f"{10 * i + 4} genmove b", timeout=120)
            assert ok and re.fullmatch(r"[A-HJ-T][1-9][0-9]?", move), move
        assert eng.ask("50 boardsize 7") == (True, "")
        assert eng.ask("51 genmove w", timeout=120)[0]
    finally:
        eng.close()
    assert eng.proc.returncode == 0
    log = (tmp_path / "stderr.txt").read_text()
    shipped = {n: checkpoint.shipped(n) for n in ("az9i", "policy19ag40b12", "value19b12")}
    assert f"9x9 nets: policy {shipped['az9i']}, value its own head (policy-value net)" in log, log
    assert f"19x19 nets: policy {shipped['policy19ag40b12']}, value {shipped['value19b12']}" in log, log
    assert f"13x13 nets: policy {shipped['policy19ag40b12']} (19x19, its policy head moved to 13x13), value none" \
        in log, log
    assert log.count("no network plays 7x7 (nets: 9x9-19x19): apv engine searching "
                     "with its pattern policies alone") == 1, log
    assert re.search(r"B [A-HJ][1-9] winrate [0-9.]+ visits 400 ", log), log  # a value net's winrate

    out = _gtp_start(["--engine", "policy", "--checkpoint", "policy19", "--value-checkpoint", "value19"], tmp_path,
                     b"1 genmove b\n2 quit\n")
    assert out.returncode == 0 and re.fullmatch(rb"=1 [A-HJ-T][0-9]+\n\n=2\n\n", out.stdout), out
    assert out.stderr.decode().startswith("alphalite: 19x19 nets: policy policy19, value value19 ("), out.stderr
    out = _gtp_start(["--checkpoint", "policy9"], tmp_path)  # the empty ./policy9 wins over the shipped net
    assert out.returncode == 2 and "policy9 is neither an exported model" in out.stderr.decode(), out


def test_checkpoint_names_and_paths(tmp_path, monkeypatch):
    """A shipped net by name from any folder; a path that exists wins; a name
    that is neither lists the shipped nets. Every other loader goes through
    the same resolution (here ``load_model``)."""
    from alphalite.nn import checkpoint

    monkeypatch.chdir(tmp_path)
    assert checkpoint.resolve("value19sp") == checkpoint.shipped_dir() / "value19sp"
    assert (checkpoint.resolve("value19sp") / "model.json").is_file()
    (tmp_path / "value19sp").mkdir()
    assert checkpoint.resolve("value19sp") == Path("value19sp")
    with pytest.raises(checkpoint.CheckpointError, match=r"value8 is neither a path nor a shipped net \(az9, az9d, az9g, az9h, az9i, policy19, "):
        checkpoint.resolve("value8")
    info, model, _ = checkpoint.load_model("rl9", "policy", 9)
    assert info["board_size"] == 9 and model.size == 9
    assert set(checkpoint.shipped_names()) >= {p for pair in checkpoint.DEFAULT_NETS.values() for p in pair if p}
    assert set(checkpoint.shipped_names()) >= set(checkpoint.POLICY_ALONE_NETS.values())


@pytest.mark.parametrize("n, openings", [(11, ([2, 2], [2, 3], [3, 3], [2, 4])),  # 11x11: the 3-5 point too
                                         *((n, ([2, 2], [2, 3], [3, 3])) for n in (10, 13, 16, 17))])
def test_a_policy_net_plays_another_board_size_alone(n, openings):
    """``load_net(..., size=n)``: the 19x19 policy moved to each size it
    plays by default opens in a corner."""
    from alphalite.engine import players
    from alphalite.go import board

    net = players.load_net("policy19ag40b12", None, "onnx", size=n)
    assert net.size == n and net.resized_from == 19 and not net.has_value
    p, v = net.evaluate(board.new_game(n, 7.5))
    assert v is None and p.shape == (n * n + 1,) and abs(p.sum() - 1) < 1e-4
    r, c = divmod(int(p.argmax()), n)
    assert sorted((min(r, n - 1 - r), min(c, n - 1 - c))) in openings, (r, c)  # 3-3, 3-4, 4-4 (3-5)


def test_only_a_policy_net_alone_moves_to_another_size():
    """A value net beside the moved policy, or a net with a value head, is
    refused in one line; on its own size the net is not moved."""
    from alphalite.engine import players
    from alphalite.nn import checkpoint

    assert players.load_net("policy19ag40b12", None, "onnx", size=19).resized_from is None
    with pytest.raises(checkpoint.CheckpointError, match="only a policy net alone plays 13x13"):
        players.load_net("policy19ag40b12", "value19b12", "onnx", size=13)
    with pytest.raises(checkpoint.CheckpointError, match="az9 is a 9x9 net and cannot play 13x13: only a ResNet policy"):
        players.load_net("az9", None, "onnx", size=13)


def test_size_list_names_runs_of_sizes_as_ranges():
    from alphalite.gtp.session import size_list

    assert size_list(range(9, 20)) == "9x9-19x19"
    assert size_list([19, 9, 13, 14, 15]) == "9x9, 13x13-15x15, 19x19"
    assert size_list([9, 10]) == "9x9-10x10" and size_list([7]) == "7x7"
    assert size_list({}) == "none (--checkpoint none)"


def test_auto_nets_of_each_engine():
    """``--checkpoint auto``: the searches play ``DEFAULT_NETS``; the policy
    engine plays its 19x19 net alone (``POLICY_ALONE_NETS``: as measured,
    no value net to resign by) and 9x9's az9i like the others. Planned, not loaded."""
    from alphalite.gtp.session import AUTO, EngineConfig, Session
    from alphalite.nn import checkpoint

    def planned(**kw):
        s = Session()
        s.init_session(EngineConfig(checkpoint=AUTO, value_checkpoint=AUTO, **kw), warmup=False)
        return s._nets

    def sh(name):
        return str(checkpoint.shipped(name))

    ag40 = sh("policy19ag40b12")  # on 10x10 to 18x18 too, moved there alone
    moved = {n: (ag40, None) for n in range(10, 19)}
    assert planned(engine="policy") == {9: (sh("az9i"), None), **moved, 19: (ag40, None)}
    for engine in ("apv", "mcts"):
        assert planned(engine=engine) == {9: (sh("az9i"), None), **moved, 19: (ag40, sh("value19b12"))}
    assert checkpoint.read_model_info(checkpoint.shipped("policy19ag40b12"))["preset"] == "alphago40"
    # a named net replaces the shipped ones of its own size only (the others
    # kept their nets: a 9x9 net named left 19x19 to the pattern policies)
    s = gtp.Engine(EngineConfig(engine="apv", checkpoint="policy9", value_checkpoint=AUTO), log=lambda m: None,
                   warmup=False)
    assert s._nets == {9: ("policy9", None), **moved, 19: (ag40, sh("value19b12"))}
    s = Session()
    s.init_session(EngineConfig(engine="apv", checkpoint=AUTO, value_checkpoint=None), warmup=False)
    assert s._nets == {9: (sh("az9i"), None), **moved, 19: (ag40, None)}


def test_package_data_holds_every_shipped_file():
    """pyproject.toml maps checkpoints/ to the package alphalite.checkpoints
    and its package-data globs take every file there, so a wheel carries
    the nets whole (checked by hand: ``pip wheel --no-deps .``, README)."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["package-dir"]["alphalite.checkpoints"] == "checkpoints"
    assert "alphalite.checkpoints" in cfg["packages"]
    folder = ROOT / "checkpoints"
    taken = {p for pattern in cfg["package-data"]["alphalite.checkpoints"] for p in folder.glob(pattern) if p.is_file()}
    files = {p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"}
    assert files and files == taken, sorted(str(p.relative_to(folder)) for p in files ^ taken)


# ---------------------------------------------------------------- in-process


def test_handle_framing_pure():
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9), log=lambda m: None, warmup=False)
    assert eng.handle("") == ""
    assert eng.handle("   # only a comment") == ""
    assert eng.handle("7 name") == "=7 alphalite\n\n"
    assert eng.handle("8 nosuch") == "?8 unknown command\n\n"
    assert eng.handle("9\tboardsize\t1\r") == "?9 unacceptable size\n\n"
    assert eng.handle("play b e5") == "=\n\n"
    before = eng.handle("showboard")
    assert eng.handle("10 play w E5") == "?10 illegal move\n\n"
    assert eng.handle("showboard") == before  # a failed play changes nothing
    out = eng.handle("11 showboard")
    assert out.startswith("=11\n") and out.endswith("\n\n") and "\n\n" not in out[:-2]
    assert protocol.frame("3", True, "a\n\n\nb\r\n") == "=3 a\nb\n\n"
    out = eng.handle("12 lz-analyze w 10")
    assert re.fullmatch(r"=12 (info move [A-HJ][1-9] visits [0-9]+ winrate [0-9]+ prior [0-9]+ lcb [0-9]+ "
                        r"order [0-9]+ pv( [A-HJ][1-9]| pass)+ ?)+\n\n", out), out
    assert eng.handle("13 lz-analyze w 10 bogus") == "?13 syntax error\n\n"


def test_time_settings_parsing():
    assert tc.from_gtp_time_settings(300, 0, 0) == tc.TimeSettings(tc.ABSOLUTE, main=300)
    assert tc.from_gtp_time_settings(0, 10, 0).kind == tc.NONE
    assert tc.from_gtp_time_settings(60, 30, 10) == tc.TimeSettings(tc.CANADIAN, 60, 30, 10)
    assert tc.from_kgs(["byoyomi", "60", "10", "5"]) == tc.TimeSettings(tc.BYOYOMI, 60, 10, 5)
    assert tc.from_kgs(["none"]).kind == tc.NONE
    with pytest.raises(ValueError):
        tc.from_kgs(["fischer", "1", "2"])
    for bad in (["absolute", "inf"], ["canadian", "0", "nan", "5"], ["byoyomi", "-1", "10", "5"]):
        with pytest.raises(ValueError):
            tc.from_kgs(bad)
    # "no limit" announced stays no limit when a controller sends time_left anyway
    logs = []
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9), log=logs.append, warmup=False)
    for cmd in ("time_settings 0 1 0", "time_left b 0 0", "genmove b", "kgs-time_settings none", "time_left w 3 0",
                "genmove w"):
        assert eng.handle(cmd).startswith("="), cmd
    assert "budget" not in "\n".join(logs) and eng._time.kind == tc.NONE, logs
    # a clock nobody announced: time_left alone sets one
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9), log=logs.append, warmup=False)
    assert eng.handle("time_left b 30 0").startswith("=") and eng._time == tc.TimeSettings(tc.ABSOLUTE, main=30)
    s = tc.TimeSettings(tc.CANADIAN, 60, 30, 10)
    assert tc.from_time_left(s, 25, 4) == tc.Clock(0.0, 25, 4, True)
    assert tc.from_time_left(s, 50, 0) == tc.Clock(main=50)
    # no main time left: the next move is the first of a fresh period, so a
    # game of 0/1/1 (what the arena sends first: time_left b 0 0) gets the
    # same second for its first move as for the others
    assert tc.from_time_left(s, 0, 0) == tc.Clock(0.0, 30, 10, True)
    one = tc.from_gtp_time_settings(0, 1, 1)
    first = tc.allocate(one, tc.from_time_left(one, 0, 0), 0, 81)
    assert first == tc.allocate(one, tc.from_time_left(one, 1, 1), 10, 81) > 0.5
    assert tc.from_time_left(tc.from_gtp_time_settings(300, 0, 0), 0, 0) == tc.Clock(main=0)


def test_whole_second_time_left_keeps_the_engines_finer_clock():
    """1 s for 2 stones with time_left in whole seconds (truncated, as the
    arena sends it): the second move of each period got MIN_MOVE (0.6 s
    left arrived as 0); now it gets what is really left."""
    s = tc.from_gtp_time_settings(0, 1, 2)
    clock = tc.from_time_left(s, 0, 0)
    for k in range(6):
        t = tc.allocate(s, clock, k, 361)
        assert 0.2 < t < clock.period_left - tc.LAG, (k, t, clock)
        own = tc.charge(s, clock, t + 0.02)
        clock = tc.from_time_left(s, int(own.period_left), own.stones_left, own=own)
        assert clock == own
    own = tc.Clock(0.0, 0.6, 1, True)
    assert tc.from_time_left(s, 0, 1) == tc.Clock(0.0, 0.0, 1, True)  # no bookkeeping: the report
    assert tc.from_time_left(s, 5, 1, own=own) == tc.Clock(0.0, 5, 1, True)  # not a rounding: the report
    assert tc.from_time_left(s, 0, 2, own=own) == tc.Clock(0.0, 0, 2, True)  # other stones: the report
    assert tc.from_time_left(s, 1, 1, own=own) == own  # rounded to nearest
    b = tc.TimeSettings(tc.BYOYOMI, 0, 10, 3)
    assert tc.from_time_left(b, 9, 3, own=tc.Clock(0.0, 9.5, 3, True)) == tc.Clock(0.0, 9, 3, True)
    # through GTP: the second move of the period is budgeted from the engine's clock
    logs = []
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9), log=logs.append, warmup=False)
    assert eng.handle("genmove w").startswith("=")  # no clock yet: the rules' kernels load
    for cmd in ("time_settings 0 1 2", "time_left b 1 2", "genmove b", "time_left b 0 1", "genmove b"):
        assert eng.handle(cmd).startswith("=")
    budgets = [float(x) for x in re.findall(r"\(budget ([0-9.]+) s\)", "\n".join(logs))]
    # 0.95 s / 2 stones - the lag; then what the first move left (a random move: almost all of it) less its lag
    assert len(budgets) == 2 and budgets[0] == pytest.approx(0.275, abs=0.01) and budgets[1] > 0.5, logs


@pytest.mark.parametrize("size,own_moves", [(9, 120), (19, 220)])
def test_five_minute_game_never_loses_on_time(size, own_moves):
    """Absolute 5 minutes: spending every allocation plus 0.1 s of overhead
    per move, a very long game still ends with time on the clock, and the
    opening moves get a fair share."""
    s = tc.from_gtp_time_settings(300, 0, 0)
    clock = tc.start_clock(s)
    spent = []
    for k in range(own_moves):
        t = tc.allocate(s, clock, 2 * k, size * size)
        assert t is not None and t >= tc.MIN_MOVE
        spent.append(t)
        clock = tc.charge(s, clock, t + 0.1)
        assert clock.main > 0, f"flagged at own move {k}"
    assert 1.0 < spent[0] < 20.0 and spent[0] > spent[-1]
    assert sum(spent[:20]) > 30.0  # the clock is really used, not hoarded


def test_overtime_allocation_stays_inside_the_period():
    s = tc.TimeSettings(tc.CANADIAN, 0, 30, 10)
    clock = tc.start_clock(s)
    for k in range(35):
        t = tc.allocate(s, clock, 100 + 2 * k, 81)
        left_before = clock.period_left
        clock = tc.charge(s, clock, t + 0.1)
        assert t + 0.1 < left_before
        assert clock.stones_left >= 1
    b = tc.TimeSettings(tc.BYOYOMI, 0, 10, 3)
    clock = tc.start_clock(b)
    for k in range(20):
        t = tc.allocate(b, clock, 50 + 2 * k, 361)
        assert 5 < t < 10 - tc.LAG
        clock = tc.charge(b, clock, t + 0.1)
        assert clock.stones_left == 3  # no period lost
    assert tc.allocate(tc.TimeSettings(), tc.Clock(), 0, 81) is None


@pytest.mark.parametrize("period,stones", [(10, 10), (10, 25), (5, 5), (1, 2), (2, 5), (60, 20)])
def test_canadian_period_survives_unseen_latency_and_whole_second_reports(period, stones):
    """A KGS-style Canadian period: every stone costs 0.1 s more than the
    engine sees (the move's travel), and time_left comes in whole seconds.
    The lag is kept back on every stone and our bookkeeping charges it too,
    so the last stone still fits (the lag kept back once a period ran the
    10-stone period out at its last stone)."""
    s = tc.TimeSettings(tc.CANADIAN, 0, period, stones)
    true_left, own = float(period), None
    for k in range(stones):
        clock = tc.from_time_left(s, int(true_left), stones - k, own=own)
        t = tc.allocate(s, clock, 100 + 2 * k, 361)
        true_left -= t + 0.1
        assert true_left > 0, (k, t)
        own = tc.charge(s, clock, t)
    assert true_left < 0.5 * period  # and the period is used, not hoarded


class FakePlayer:
    """Always the first candidate, with a scripted winrate."""

    has_prior = False

    def __init__(self, winrates):
        self.winrates = list(winrates)

    def genmove(self, state, candidates, budget, rng, callback=None):
        from alphalite.engine.players import Decision

        return Decision(int(np.flatnonzero(candidates[:-1])[0]), winrate=self.winrates.pop(0))

    def forget(self):
        pass


def test_engine_resigns_passes_and_cleans_up():
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9, resign_moves=2), log=lambda m: None,
                     warmup=False)
    eng._players[9] = FakePlayer([0.02] * 40)
    replies = []
    for i in range(20):
        replies.append(eng.handle(f"genmove {'bw'[i % 2]}").split()[1])
        if replies[-1] == "resign":
            break
    # the opening (16 of 81 points in moves) is protected; then two bad moves in a row
    assert replies[-1] == "resign" and len(replies) > 16
    # passing: black owns more after white's pass -> black passes; white, behind, plays on
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=7, seed=1), log=lambda m: None, warmup=False)
    for i in range(1, 8):
        eng.handle(f"play b d{i}")
        eng.handle(f"play w e{i}")
    assert eng.handle("komi 0.5") == "=\n\n"
    assert eng.handle("play w pass") == "=\n\n"
    assert eng.handle("genmove b") == "= pass\n\n"
    assert eng.handle("undo") == "=\n\n"
    assert eng.handle("undo") == "=\n\n"
    assert eng.handle("play b pass") == "=\n\n"
    assert eng.handle("genmove w") not in ("= pass\n\n", "= resign\n\n")
    # no move left outside own eyes: pass
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=5), log=lambda m: None, warmup=False)
    all_but = [f"{c}{r}" for c in "ABCDE" for r in range(1, 6) if f"{c}{r}" not in ("A1", "E5")]
    assert eng.handle("set_free_handicap " + " ".join(all_but)) == "=\n\n"
    assert eng.handle("genmove b") == "= pass\n\n"
    assert eng.handle("genmove w") == "= pass\n\n"  # both eyes are suicide for white


def test_a_players_own_pass_is_not_read_as_the_opponents():
    """``play b pass`` then ``genmove b``: the pass was Black's own, so it
    does not pass back as after White's (it did: "the opponent passed and
    passing wins")."""
    logs: list[str] = []
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=7, seed=1, komi=0.5), log=logs.append, warmup=False)
    for i in range(1, 8):
        eng.handle(f"play b d{i}")
        eng.handle(f"play w e{i}")
    assert eng.handle("play b pass") == "=\n\n"
    assert re.fullmatch(r"= [FG][1-7]\n\n", eng.handle("genmove b")), logs[-1]
    assert eng.handle("play w pass") == "=\n\n"
    assert eng.handle("genmove b") == "= pass\n\n" and "the opponent passed" in logs[-1]


def test_policy_engine_resigns_by_its_value_net():
    """Black owns 63 of 81 points with three eyes; White has one eyeless
    column. With the shipped 9x9 value net the policy engine, as White,
    resigns at once (resign_moves=1); without a value net it has no winrate
    and plays on."""
    ckpt = ROOT / "checkpoints"
    logs: list[str] = []
    replies = {}
    for value in (str(ckpt / "value9"), None):
        eng = gtp.Engine(gtp.EngineConfig(engine="policy", checkpoint=str(ckpt / "policy9"), value_checkpoint=value,
                                          size=9, komi=7, resign_moves=1), log=logs.append, warmup=False)
        for c in "ABCDEFG":
            for r in range(1, 10):
                if f"{c}{r}" not in ("B3", "B7", "E5"):
                    assert eng.handle(f"play b {c}{r}") == "=\n\n"
        for r in range(1, 10):
            assert eng.handle(f"play w j{r}") == "=\n\n"
        replies[value] = eng.handle("genmove w")
    assert replies[str(ckpt / "value9")] == "= resign\n\n"
    assert re.fullmatch(r"= H[1-9]\n\n", replies[None])
    w = [float(m) for m in re.findall(r"resigning \(winrate ([0-9.]+)\)", "\n".join(logs))]
    assert len(w) == 1 and w[0] < 0.1
    assert re.search(r"W H[1-9] visits", logs[-1])  # no winrate without a value net


def test_candidates_without_opponent_stones():
    """Regression: with no opponent stone on the board every empty region
    "reaches only our colour", which is not territory: only eyes are left out."""
    from alphalite.go import board
    from alphalite.engine import players

    st = board.play(board.new_game(9, 7.5), 40, 1)  # E5
    st = board.play(st, 81, -1)  # white passes
    cand = players.candidate_moves(st)
    assert cand[:-1].sum() == 80 and not cand[40]
    st = board.from_stones(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], np.int8), to_play=1)
    cand = players.candidate_moves(st)
    assert not cand[0] and cand[4] and cand[8]  # A3 is a one-point eye


def test_search_flags_are_search_params_and_reach_the_search():
    """The search's flags of ``alphalite gtp`` are SearchParams' fields,
    generated from it, and a ``--c-puct`` given on the command line reaches
    the selection: more exploration spreads the root visits wider."""
    import argparse
    import dataclasses

    from alphalite import cli
    from search.params import SearchParams

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["gtp"]
    group = next(g for g in sub._action_groups if g.title.startswith("search"))
    assert [a.dest for a in group._group_actions] == [f.name for f in dataclasses.fields(SearchParams)]
    spread = []
    for c in ("0.05", "50"):
        args = parser.parse_args(["gtp", "--engine", "mcts", "--checkpoint", "none", "--value-checkpoint", "none",
                                  "--size", "5", "--c-puct", c, "--batch", "4", "--lambda", "0.3",
                                  "--virtual-loss", "2"])
        cfg = gtp.config_from_args(args)
        assert cfg.search == SearchParams(c_puct=float(c), batch_size=4, lam=0.3, virtual_loss=2.0)
        eng = gtp.Engine(cfg, log=lambda m: None, warmup=False)
        player = eng._player()
        assert player.search_params is cfg.search
        out = player.run(eng.state, np.random.default_rng(0), max_visits=200)
        spread.append(int((out.tree.children_visits[0] > 0).sum()))
    assert spread[0] < spread[1], spread


def test_batch_flag_reaches_the_apv_search():
    """``--batch`` is the apv search's network batch too (it reached only
    mcts); without it apv takes 32 positions a call, mcts 8 leaves."""
    from alphalite import cli

    parser = cli.build_parser()
    seen = {}
    for engine, flags in (("apv", ["--batch", "4"]), ("apv", []), ("mcts", [])):
        args = parser.parse_args(["gtp", "--engine", engine, "--size", "9", *flags])
        eng = gtp.Engine(gtp.config_from_args(args), log=lambda m: None, warmup=False)
        player = eng._player()
        seen[engine, len(flags)] = player.search.batch if engine == "apv" else player.search_params.batch_size
        getattr(player, "close", lambda: None)()
    assert seen == {("apv", 2): 4, ("apv", 0): 32, ("mcts", 0): 8}, seen
    # an engine configured in code gets the same defaults as from the flags
    assert gtp.EngineConfig(engine="apv").search.batch_size == 32
    assert gtp.EngineConfig(engine="mcts").search.batch_size == 8


@pytest.mark.serial
def test_tree_reuse_counts_against_the_clock():
    """Regression: advancing a large reused tree (0.7 s for 66k nodes on
    19x19) ran before the timed search and overshot byo-yomi budgets."""
    from alphalite.go import board
    from alphalite.engine import players
    from search.evaluators import rollout_evaluator

    p = players.MctsPlayer(rollout_evaluator(players.line_prior_fn(9)), visits=10**6)
    st = board.new_game(9, 7.5)
    p.run(st, np.random.default_rng(0), max_visits=64)
    slow = p._reused_tree

    def slow_reuse(state):
        time.sleep(0.3)
        return slow(state)

    p._reused_tree = slow_reuse
    t0 = time.perf_counter()
    p.run(st, np.random.default_rng(1), max_seconds=0.5)
    assert time.perf_counter() - t0 < 0.65

    class Huge:  # a previous tree too big to advance inside the budget
        num_nodes = 10**6

    p._reused_tree = slow
    p.tree = Huge()
    out = p.run(st, np.random.default_rng(2), max_seconds=0.2)
    assert out.tree is p.tree and out.tree.root_state.move_number == 0


class PassingPlayer:
    """A search that likes passing (as Tromp-Taylor terminal scoring can)."""

    has_prior = False

    def genmove(self, state, candidates, budget, rng, callback=None):
        from alphalite.engine.players import Decision

        n2 = state.size * state.size
        first = int(np.flatnonzero(candidates[:-1])[0])
        return Decision(n2, winrate=0.75, analysis=[dict(move=n2, visits=90), dict(move=first, visits=10)])

    def prior(self, state):
        return np.full(state.size * state.size + 1, 1.0 / (state.size * state.size + 1), np.float32)

    def forget(self):
        pass


def test_genmove_plays_on_rather_than_end_a_lost_game_and_passes_after_undo():
    """Regression: after the opponent's pass, a search pass (Tromp-Taylor
    at two passes) ended games the judge (dead stones off) scores lost."""
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9), log=lambda m: None, warmup=False)
    eng._players[9] = PassingPlayer()
    for i in range(1, 10):
        assert eng.handle(f"play b e{i}") == "=\n\n"
        assert eng.handle(f"play w g{i}") == "=\n\n"
    assert eng.handle("play b pass") == "=\n\n"
    reply = eng.handle("genmove w").split()[1]
    assert reply not in ("pass", "resign")
    assert eng.handle("undo") == "=\n\n"
    assert eng.handle("undo") == "=\n\n"  # black's pass: white's pass no longer ends the game
    assert eng.handle("genmove w") == "= pass\n\n"


# ---------------------------------------------------------------- kata-analyze

KATA_KEYS = ["move", "visits", "edgeVisits", "utility", "winrate", "scoreMean", "scoreStdev", "scoreLead",
             "scoreSelfplay", "prior", "lcb", "utilityLcb", "order", "pv"]
ROOT_KEYS = ["visits", "utility", "winrate", "scoreMean", "scoreStdev", "scoreLead", "scoreSelfplay"]
VERTEX9 = re.compile(r"[A-HJ][1-9]|pass")


def parse_kata(line: str, size: int) -> dict:
    """A ``kata-analyze`` line as {"infos": [{key: value}], "keys": [[keys in
    order]], "root": {...}, "ownership": [...]}, following KataGo's
    description (``pv`` runs over vertices, ``pvVisits`` over integers,
    ``movesOwnership``/``ownership`` take size*size numbers)."""
    words = line.split()
    out: dict = {"infos": [], "keys": [], "root": None, "ownership": None}
    cur = keys = None
    i = 0
    while i < len(words):
        key = words[i]
        i += 1
        if key in ("info", "rootInfo"):
            cur, keys = {}, []
            if key == "info":
                out["infos"].append(cur)
                out["keys"].append(keys)
            else:
                out["root"] = cur
            continue
        if key in ("ownership", "movesOwnership"):
            vals, i = words[i:i + size * size], i + size * size
            assert len(vals) == size * size and all("." in v for v in vals), line
            if key == "ownership":
                out["ownership"] = [float(v) for v in vals]
                continue
            cur[key] = [float(v) for v in vals]
        elif key in ("pv", "pvVisits"):
            j = i
            while j < len(words) and (VERTEX9.fullmatch(words[j]) if key == "pv" else words[j].isdigit()):
                j += 1
            cur[key], i = words[i:j], j
        else:
            cur[key], i = words[i], i + 1
        keys.append(key)
    return out


def check_kata_info(info: dict, keys: list[str], order: int):
    """KataGo's items in KataGo's order; floats written with a decimal point
    (Sabaki tells kata's floats from Leela Zero's integers by it)."""
    assert keys[: len(KATA_KEYS)] == KATA_KEYS, keys
    assert int(info["order"]) == order and info["visits"] == info["edgeVisits"]
    for k in ("utility", "winrate", "scoreMean", "scoreStdev", "scoreLead", "scoreSelfplay", "prior", "lcb",
              "utilityLcb"):
        assert "." in info[k], (k, info[k])
    wr, lcb, util = float(info["winrate"]), float(info["lcb"]), float(info["utility"])
    assert 0.0 <= lcb <= wr <= 1.0 and 0.0 <= float(info["prior"]) <= 1.0
    assert abs(util - (2 * wr - 1)) < 2e-6 and abs(float(info["utilityLcb"]) - (2 * lcb - 1)) < 2e-6
    assert info["scoreMean"] == info["scoreLead"] == info["scoreSelfplay"]
    assert float(info["scoreStdev"]) >= 0.0
    assert info["pv"] and info["pv"][0] == info["move"]


def test_kata_analyze_format_and_perspective():
    """kata-analyze items in KataGo's order and units; ownership and scores
    from the analysed side's view, rows from the top; lz-analyze unchanged
    (pvVisits only when asked); minmoves/maxmoves; bad keys refused."""
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9, visits=64), log=lambda m: None, warmup=False)
    # Black: a solid wall on column D with the A-C side to itself; White has
    # two stones on the far side.
    for r in range(1, 10):
        assert eng.handle(f"play b d{r}") == "=\n\n"
    assert eng.handle("play w g3") == "=\n\n" and eng.handle("play w g7") == "=\n\n"
    lines = {}
    for color in ("b", "w"):
        out = eng.handle(f"1 kata-analyze {color} 10 maxmoves 3 ownership true rootInfo true pvVisits true "
                         "movesOwnership true")
        assert out.startswith("=1 info move ") and out.endswith("\n\n") and out.count("\n") == 2, out
        lines[color] = parse_kata(out[3:-2], 9)
    for color, parsed in lines.items():
        assert 1 <= len(parsed["infos"]) <= 3
        for order, (info, keys) in enumerate(zip(parsed["infos"], parsed["keys"])):
            check_kata_info(info, keys, order)
            assert keys[len(KATA_KEYS):] == ["pvVisits", "movesOwnership"]
            assert len(info["pvVisits"]) == len(info["pv"]) and int(info["pvVisits"][0]) == int(info["visits"])
        assert list(parsed["root"]) == ROOT_KEYS
        assert int(parsed["root"]["visits"]) > sum(int(i["visits"]) for i in parsed["infos"]) > 0
        own = np.array(parsed["ownership"]).reshape(9, 9)
        assert np.all(np.abs(own) <= 1.0)
        sign = 1 if color == "b" else -1
        # the wall is Black's, and mostly what it encloses (random playouts
        # invade it); row 0 is the top line (row 9), column 3 is D
        assert (sign * own[:, 3] > 0.9).all() and (sign * own[:, :3] > 0.5).all(), own
        assert (sign * own[:, :4]).mean() > (sign * own[:, 5:]).mean() + 0.3, own
        assert sign * float(parsed["root"]["scoreLead"]) > 10, parsed["root"]
    # ownership of D9 (top row, 4th column) is the 4th number
    assert lines["b"]["ownership"][3] > 0.9 and lines["w"]["ownership"][3] < -0.9
    # the score is the playouts' mean area margin: each playout's margin
    # adds up to the ownership counts
    from alphalite.engine import players

    black, white, margins = players.playout_outcomes(eng.state, 64, 5)
    assert margins.shape == (64,) and np.all(margins == np.round(margins - 0.5) + 0.5)  # komi 7.5
    assert np.isclose(margins.mean(), (black - white).sum() / 64 - eng.state.komi)
    assert (players.ownership_counts(eng.state, 64, 5)[0] == black).all()

    # Leela Zero's format is unchanged; pvVisits is added only when asked for
    out = eng.handle("2 lz-analyze b 10")
    assert re.fullmatch(r"=2 (info move [A-HJ][1-9] visits [0-9]+ winrate [0-9]+ prior [0-9]+ lcb [0-9]+ "
                        r"order [0-9]+ pv( [A-HJ][1-9]| pass)+ ?)+\n\n", out), out
    out = eng.handle("3 lz-analyze b pvVisits true maxmoves 1")
    assert re.fullmatch(r"=3 info move \S+ visits ([0-9]+) winrate [0-9]+ prior [0-9]+ lcb [0-9]+ order 0 "
                        r"pv( \S+)+ pvVisits \1( [0-9]+)*\n\n", out), out

    out = eng.handle("4 kata-analyze minmoves 30 maxmoves 30")
    parsed = parse_kata(out[3:-2], 9)
    assert len(parsed["infos"]) == 30 and parsed["ownership"] is None and parsed["root"] is None
    for order, (info, keys) in enumerate(zip(parsed["infos"], parsed["keys"])):
        check_kata_info(info, keys, order)
    assert [int(i["visits"]) for i in parsed["infos"]] == sorted((int(i["visits"]) for i in parsed["infos"]),
                                                                  reverse=True)
    moves = [i["move"] for i in parsed["infos"]]
    assert len(set(moves)) == 30 and not {f"D{r}" for r in range(1, 10)} & set(moves)

    for bad in ("kata-analyze ownership maybe", "kata-analyze maxmoves", "kata-analyze b 10 bogus true",
                "kata-analyze minmoves -1", "lz-genmove_analyze 10", "kata-analyze avoid b d4",
                "kata-analyze avoid x d4 1", "kata-analyze allow b d4,i4 1", "lz-analyze avoid b d4 -1", "kata-analyze avoid w t19 1"):
        assert eng.handle(f"5 {bad}") == "?5 syntax error\n\n", bad


def test_avoid_and_allow_ban_root_moves():
    """KataGo's ``avoid``/``allow`` in the analysis commands: banned points
    get no visits and are not listed, ``allow`` leaves its points (and
    pass), the analysed side's clauses only count, a clause that reaches
    deeper plies is said to be honoured at the root; genmove_analyze plays
    an allowed point; allow twice, or with avoid, is refused."""
    said = []
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9, visits=64), log=said.append, warmup=False)

    def moves(out):
        return [i["move"] for i in parse_kata(out.split(" ", 1)[1].strip(), 9)["infos"]]

    top = moves(eng.handle("1 kata-analyze b minmoves 20 maxmoves 20"))[:10]
    got = moves(eng.handle(f"2 kata-analyze b avoid b {','.join(top)} 1 minmoves 40 maxmoves 40"))
    assert len(got) == 40 and not set(top) & set(got), (top, got)
    # the opponent's clause does not touch the root; a deep one is said once
    got = moves(eng.handle(f"3 kata-analyze b avoid w {','.join(top)} 3 minmoves 40"))
    assert set(top) <= set(got) and said.count("alphalite: avoid/allow ban moves at the search's root only, "
                                               "not deeper in the tree") == 1, said
    got = moves(eng.handle("4 kata-analyze b allow b c3,e5 1 minmoves 10"))
    assert {"C3", "E5"} <= set(got) <= {"C3", "E5", "pass"}, got
    out = eng.handle("5 kata-genmove_analyze b allow b g7 1")
    assert out.endswith("play G7\n\n") and eng.handle("6 showboard").count("X") >= 1, out
    for bad in ("kata-analyze b allow b c3 1 allow b d4 1", "kata-analyze b avoid b c3 1 allow b d4 1"):
        assert eng.handle(f"7 {bad}").startswith("?7 syntax error"), bad
    every = ",".join(f"{c}{r}" for c in "ABCDEFGHJ" for r in range(1, 10)) + ",pass"
    assert eng.handle(f"8 kata-analyze w avoid w {every} 1") == "?8 avoid/allow leave no legal move\n\n"
    # an avoided pass: the rules that pass by themselves (nothing left but own eyes) play on instead
    small = gtp.Engine(gtp.EngineConfig(engine="random", size=5, visits=16), log=said.append, warmup=False)
    for v in (f"{c}{r}" for c in "ABCDE" for r in range(1, 6)):
        if v not in ("A1", "E1", "A5", "E5", "C3"):
            assert small.handle(f"play b {v}") == "=\n\n"
    assert small.handle("9 kata-genmove_analyze b").endswith("play pass\n\n")
    small.handle("undo")
    out = small.handle("10 kata-genmove_analyze b avoid b pass 1")
    assert re.search(r"play (A1|E1|A5|E5|C3)\n\n$", out), out


def test_analysis_with_a_net_that_cannot_load_is_answered_with_a_failure(monkeypatch):
    from alphalite.engine import players
    from alphalite.nn import checkpoint

    def broken(*args, **kwargs):  # the 19x19 nets, loaded on the first move there, turn out unreadable
        raise checkpoint.CheckpointError("variables: unreadable")

    eng = gtp.Engine(gtp.EngineConfig(engine="policy", size=9, checkpoint="auto"), log=lambda m: None,
                     warmup=False)
    monkeypatch.setattr(players, "load_net", broken)
    assert eng.handle("boardsize 19") == "=\n\n"
    for cmd in ("lz-genmove_analyze b 10", "kata-genmove_analyze 10", "lz-analyze 10", "kata-analyze 10"):
        out = []  # the streamed answer, as the stdin loop writes it: a failure, no "=5" opening a stream
        eng.stream(protocol.parse(f"5 {cmd}"), out.append, lambda: False)
        assert "".join(out) == "?5 cannot load the 19x19 network\n\n", (cmd, out)
    assert eng.handle("5 genmove b") == "?5 cannot load the 19x19 network\n\n"
    assert len(eng.game.moves) == 0


@pytest.mark.subprocess
def test_kata_analyze_streams(engine):
    """Over real pipes: kata-analyze streams info lines until the next line
    arrives; kata-genmove_analyze (colour optional, as KataGo) ends with the
    move played."""
    assert engine.ask("clear_board") == (True, "")
    assert engine.ask("play b e5") == (True, "")
    engine.send_raw(b"21 kata-analyze 5 ownership true\n")
    # Stop it only once two lines have come: a line with ownership takes
    # 0.2-0.3 s of rollouts on 9x9 when idle, seconds on a loaded CI host.
    head = engine._line(60.0)
    m = RESPONSE_START.match(head)
    assert m and m.group(1) == b"=" and m.group(2) == b"21", head
    raw = [head[m.end():]]
    while sum(1 for ln in raw if ln) < 2:
        raw.append(engine._line(60.0))
        assert raw[-1] != b"", raw  # the stream ended before it was told to
    engine.send_raw(b"\n")
    while raw[-1] != b"":
        raw.append(engine._line(60.0))
    lines = [ln.decode() for ln in raw if ln]
    assert len(lines) >= 2, lines
    for ln in lines:
        parsed = parse_kata(ln, 9)
        assert parsed["infos"] and len(parsed["ownership"]) == 81
        for order, (info, keys) in enumerate(zip(parsed["infos"], parsed["keys"])):
            check_kata_info(info, keys, order)
        assert parsed["ownership"][4 * 9 + 4] < 0  # White analyses: E5 is Black's stone
    assert sum(int(i["visits"]) for i in parse_kata(lines[-1], 9)["infos"]) \
        > sum(int(i["visits"]) for i in parse_kata(lines[0], 9)["infos"])
    ok, body = engine.ask("22 kata-genmove_analyze 10")
    assert ok and re.search(r"(?m)^play ([A-HJ][1-9]|pass)$", body), body
    ok, board = engine.ask("showboard")
    assert board.count("O") == 1 and board.count("X") == 1
    engine.no_pending_output()


# ---------------------------------------------------------------- @sabaki/gtp

JS = ROOT / "tests" / "js"
NODE = shutil.which("node")


@pytest.mark.slow
@pytest.mark.subprocess
def test_sabaki_gtp_drives_the_engine(tmp_path):
    """The engine as Sabaki runs it: @sabaki/gtp's Controller starts it in
    another working folder, sends commands, reads analysis lines through
    sendCommand's subscriber and stops the analysis with the next command
    (tests/js/drive_engine.js prints what it saw as JSON)."""
    if NODE is None:
        pytest.skip("node not found: install Node.js and npm, then `make sabaki-gtp`, to test through @sabaki/gtp")
    if not (JS / "node_modules" / "@sabaki" / "gtp" / "package.json").is_file():
        pytest.skip("@sabaki/gtp not installed: run `make sabaki-gtp` (npm ci --prefix tests/js)")
    # The installed command, as a GUI is told to start it (README), with the
    # shipped nets it picks by itself; --visits only keeps the test short.
    script = Path(sys.executable).with_name("alphalite")
    engine = [str(script)] if script.is_file() else [sys.executable, "-m", "alphalite.cli"]
    cmd = [NODE, str(JS / "drive_engine.js"), "9", *engine, "gtp", "--size", "9", "--visits", "64"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    log = "\n".join(out["stderr"])
    assert re.search(r"9x9 nets: policy \S*az9i, value its own head", log), log
    assert "Traceback" not in log and "internal error" not in log, log

    assert out["name"] == {"error": False, "id": 1, "content": "alphalite"}
    assert out["protocol"] == {"error": False, "id": 2, "content": "2"}
    assert {"lz-analyze", "kata-analyze", "kata-genmove_analyze", "undo"} <= set(out["commands"])
    for key in ("boardsize", "clear", "komi", "play", "undo"):
        assert out[key] == {"error": False, "id": None, "content": ""}, key
    assert out["illegal"] == {"error": True, "id": None, "content": "illegal move"}
    assert out["genmoveOnBoard"], out["genmove"]
    assert out["boardAfterGenmove"].count("O") == 1 and out["boardAfterGenmove"].count("X") == 1
    assert "O" not in out["boardAfterUndo"] and out["boardAfterUndo"].count("X") == 1

    lz = out["lz"]
    assert not lz["error"] and lz["id"] == 10 and len(lz["parsed"]) >= 2, lz
    assert lz["stoppedBy"] == {"error": False, "content": "2"}
    for parsed in lz["parsed"]:
        for order, info in enumerate(parsed["infos"]):
            assert set(info) == {"move", "visits", "winrate", "prior", "lcb", "order", "pv"}, info
            assert int(info["order"]) == order and info["pv"][0] == info["move"]
            assert "." not in info["winrate"] and 0 <= int(info["winrate"]) <= 10000
    kata = out["kata"]
    assert not kata["error"] and kata["id"] == 11 and len(kata["parsed"]) >= 2, kata
    assert kata["stoppedBy"] == {"error": False, "content": "2"}
    for parsed in kata["parsed"]:
        assert len(parsed["ownership"]) == 81 and all(-1 <= x <= 1 for x in parsed["ownership"])
        assert parsed["ownership"][4 * 9 + 4] < 0  # White analyses: E5 is Black's stone
        for order, info in enumerate(parsed["infos"]):
            assert set(KATA_KEYS) <= set(info) and int(info["order"]) == order, info
            assert "." in info["winrate"] and 0 <= float(info["winrate"]) <= 1
    gen = out["kataGenmove"]
    assert not gen["error"] and gen["id"] == 12 and VERTEX9.fullmatch(gen["play"]), gen
    assert gen["parsed"] and len(gen["parsed"][-1]["ownership"]) == 81
    assert out["after"]["content"].count("O") == 1 and out["after"]["content"].count("X") == 1


def test_undo_restarts_the_resign_streak():
    """A takeback (GUIs send undo) clears the streak of low winrates: it
    may hold moves no longer on the board."""
    eng = gtp.Engine(gtp.EngineConfig(engine="random", size=9), log=lambda m: None, warmup=False)
    assert eng.handle("play b e5") == "=\n\n"
    eng.resign_policy.streak = 2
    assert eng.handle("undo") == "=\n\n" and eng.resign_policy.streak == 0
    eng.resign_policy.streak = 2
    assert eng.handle("undo").startswith("? cannot undo") and eng.resign_policy.streak == 2


@pytest.mark.parametrize("nets", ["auto", None])
def test_a_finished_game_keeps_a_group_with_two_eyes_alive(nets):
    """An arena game's end (Pachi 11.99 against the default 9x9 engine,
    docs/games/default9-pachi-1130, game 31): White's big group has two
    real eyes (G2, J1) and nothing else to play. The judge's search from
    the final position ends most lines at two passes; its other moves fill
    an eye and lose the group. When only the lines that did not end were
    played out, the estimate read the group dead (ownership -0.29 for
    White) and ``final_score`` said B+74 where the referee counted B+2;
    without a net (the tree policy's priors) it said so even then, until
    the tree stopped searching own eyes."""
    eng = gtp.Engine(gtp.EngineConfig(engine="apv", checkpoint=nets, value_checkpoint=nets), log=lambda m: None,
                     warmup=False)  # auto: alphalite gtp's defaults (az9 at 9x9); None: the pattern policies alone
    assert eng.handle(f"loadsgf {DATA / 'two-eyes-9x9.sgf'}").startswith("=")
    assert eng.state.is_over and eng.state.size == 9
    assert eng.handle("final_status_list dead").strip() == "="
    assert eng.handle("final_score").strip() == "= B+2"
