"""GtpClient against a tiny scripted engine (no GNU Go needed)."""

import sys

import pytest

from alphalite.go.gtpclient import GtpClient, GtpEngineDied, GtpError, GtpTimeout

FAKE = r"""
import sys, time
for line in sys.stdin:
    cmd = line.split()
    if not cmd:
        continue
    if cmd[0] == "quit":
        print("=\n", flush=True); break
    elif cmd[0] == "name":
        print("= fake\n", flush=True)
    elif cmd[0] == "multi":
        print("=7 one\ntwo\n", flush=True)
    elif cmd[0] == "die":
        sys.exit(3)
    elif cmd[0] == "sleep":
        time.sleep(1.5)
    else:
        print("? unknown command\n", flush=True)
"""


@pytest.fixture
def fake():
    eng = GtpClient([sys.executable, "-c", FAKE], timeout=10)
    yield eng
    eng.close()


@pytest.mark.subprocess
def test_answers_errors_and_close(fake):
    assert fake.send("name") == "fake"
    assert fake.send("multi") == "one\ntwo"
    with pytest.raises(GtpError, match="unknown command"):
        fake.send("bogus")
    assert fake.send("name") == "fake"  # still in step after an error
    with pytest.raises(ValueError):
        fake.send("name\nname")
    fake.close()
    assert not fake.alive


@pytest.mark.subprocess
def test_dead_engine(fake):
    with pytest.raises(GtpEngineDied):
        fake.send("die")
    with pytest.raises(GtpEngineDied):
        fake.send("name")


@pytest.mark.subprocess
def test_timeout(fake):
    with pytest.raises(GtpTimeout):
        fake.send("sleep", timeout=0.3)


@pytest.mark.subprocess
def test_missing_program():
    with pytest.raises(FileNotFoundError):
        GtpClient(["/nonexistent/engine"])


@pytest.mark.slow
@pytest.mark.subprocess
def test_multiline_answer_keeps_indentation(tmp_path):
    """showboard answers '=' then an indented board: the indentation stays."""
    script = tmp_path / "engine.py"
    script.write_text(
        "import sys\n"
        "for line in sys.stdin:\n"
        "    sys.stdout.write('=\\n   A B\\n 2 . . 2\\n\\n'); sys.stdout.flush()\n")
    with GtpClient([sys.executable, str(script)], timeout=10) as gtp:
        assert gtp.send("showboard") == "   A B\n 2 . . 2"
