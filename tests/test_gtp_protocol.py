"""GTP protocol on its own (alphalite.gtp.protocol): dispatch, framing,
errors, readiness and the serve loop, with a fake engine (no board, no
nets, no Numba)."""

from __future__ import annotations

import io
import os
import threading
import time

import pytest

from alphalite.gtp import protocol
from alphalite.gtp.protocol import GtpFailure


class Fake(protocol.Dispatcher):
    """Commands that echo, fail, crash, and one that streams."""

    streaming = ("watch",)

    def __init__(self):
        self.logs: list[str] = []
        self.init_dispatch(self.logs.append)
        self.ready = threading.Event()
        self.ready.set()
        self.seen: list[tuple[str, float]] = []  # (command, arrival stamp)
        self.lines_streamed = 0

    def wait_ready(self):
        self.ready.wait()

    def cmd_name(self):
        return "fake"

    def cmd_echo(self, *words):
        self.seen.append(("echo", self.arrived))
        return " ".join(words)

    def cmd_one(self, word):
        return word.upper()

    def cmd_fail(self):
        raise GtpFailure("nope")

    def cmd_boom(self):
        raise RuntimeError("kaput")

    def cmd_kgs_thing(self):
        return "kgs"

    def cmd_lines(self):
        return "a\n\n\nb\r\n"

    def stream(self, cmd, write, stop, *, arrived=None):
        self.seen.append((cmd.name, arrived))
        write(f"={cmd.id}\n")
        while not stop():
            write(f"tick {self.lines_streamed}\n")
            self.lines_streamed += 1
            time.sleep(0.01)
        write("\n")


def test_dispatch_by_name_and_framing():
    eng = Fake()
    assert eng.handle("7 echo a  b") == "=7 a b\n\n"
    assert eng.handle("one x") == "= X\n\n"
    assert eng.handle("kgs-thing") == "= kgs\n\n"  # cmd_kgs_thing
    assert eng.handle("3 lines") == "=3 a\nb\n\n"  # no blank line inside, no CR
    assert eng.handle("  # a comment only") == ""
    assert eng.handle("4 echo x # comment\r") == "=4 x\n\n"
    assert eng.handle("5 protocol_version") == "=5 2\n\n"
    assert eng.handle("known_command kgs-thing") == "= true\n\n"
    assert eng.handle("known_command thing") == "= false\n\n"
    assert eng.handle("list_commands").split("\n")[0] == "= boom"
    assert "kgs-thing" in eng.handle("list_commands").split()
    assert not eng.quit
    assert eng.handle("9 quit") == "=9\n\n" and eng.quit


def test_errors_answer_with_a_question_mark_and_keep_the_engine():
    eng = Fake()
    assert eng.handle("1 nosuch") == "?1 unknown command\n\n"
    assert eng.handle("2 one") == "?2 syntax error\n\n"  # wrong number of arguments
    assert eng.handle("3 one a b") == "?3 syntax error\n\n"
    assert eng.handle("4 fail") == "?4 nope\n\n"
    assert eng.handle("5 boom") == "?5 internal error: RuntimeError\n\n"
    assert eng.logs == ["gtp: internal error in 'boom': RuntimeError: kaput"]
    assert eng.handle("6 echo still here") == "=6 still here\n\n"


def test_only_immediate_commands_answer_before_ready():
    eng = Fake()
    eng.ready.clear()
    assert eng.handle("name") == "= fake\n\n"  # in Dispatcher.immediate
    answers = []
    t = threading.Thread(target=lambda: answers.append(eng.handle("echo late")))
    t.start()
    t.join(0.2)
    assert answers == []  # waiting for the engine
    eng.ready.set()
    t.join(5)
    assert answers == ["= late\n\n"]


def test_parse():
    assert protocol.parse("") is None and protocol.parse(" # x") is None
    assert protocol.parse("12 genmove\tb") == protocol.Command("12", "genmove", ["b"])
    assert protocol.parse("12") == protocol.Command("12", "", [])
    assert protocol.parse("play\x01 b e5") == protocol.Command("", "play", ["b", "e5"])
    assert protocol.gtp_name("cmd_lz_genmove_analyze") == "lz-genmove_analyze"
    assert protocol.gtp_name("cmd_final_score") == "final_score"


class _Pipe:
    """stdin that hands out lines as the test writes them."""

    def __init__(self):
        r, w = os.pipe()
        self.reader = os.fdopen(r, "rb")
        self.writer = os.fdopen(w, "wb", buffering=0)

    def send(self, text: str):
        """Write ``text``; returns the time just before it was written (the
        reader may stamp the line before write() returns here)."""
        sent = time.perf_counter()
        self.writer.write(text.encode())
        return sent


@pytest.mark.serial
def test_serve_streams_until_the_next_line_and_stamps_arrivals():
    eng = Fake()
    stdin, out = _Pipe(), io.BytesIO()
    done = []
    t = threading.Thread(target=lambda: done.append(protocol.serve(eng, stdin=stdin.reader, stdout=out)))
    t.start()
    sent_watch = stdin.send("1 watch\n")
    deadline = time.time() + 10
    while eng.lines_streamed < 5 and time.time() < deadline:
        time.sleep(0.01)
    assert eng.lines_streamed >= 5  # still streaming: no line has come since
    time.sleep(0.2)
    sent_echo = stdin.send("2 echo next\n")
    stdin.send("3 quit\n4 echo never\n")
    t.join(10)
    assert done == [0]
    text = out.getvalue().decode()
    head, rest = text.split("=1\n", 1)
    assert head == ""
    ticks, after = rest.split("\n\n", 1)
    assert all(line.startswith("tick ") for line in ticks.split("\n"))
    assert after == "=2 next\n\n=3\n\n"  # quit ends the loop: 4 is never answered
    (_, watch_at), (_, echo_at) = eng.seen
    # each command carries the time its line was read, not the time it ran
    assert sent_watch <= watch_at < sent_watch + 0.1
    assert sent_echo <= echo_at < sent_echo + 0.1


def test_serve_ends_at_end_of_input():
    eng = Fake()
    out = io.BytesIO()
    assert protocol.serve(eng, stdin=io.BytesIO(b"1 echo a\n\n2 fail\n"), stdout=out) == 0
    assert out.getvalue() == b"=1 a\n\n?2 nope\n\n"
