"""runtime.files: atomic writes that a kill never leaves behind."""

import os
import signal
import tempfile

import pytest

from alphalite.runtime import files


def test_a_kill_while_the_temporary_file_is_made_leaves_none(tmp_path, monkeypatch):
    """SIGTERM (its handler raising, as data build installs it) arriving
    just as the temporary file is created is raised where the file is
    cleaned up: before, one arrived inside mkstemp and left
    `.train-00001.npz.XXXX.tmp` in a stopped build."""
    real = tempfile.mkstemp

    def mkstemp(**kw):
        out = real(**kw)
        os.kill(os.getpid(), signal.SIGTERM)  # the signal lands as the file exists
        return out

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    try:
        with pytest.raises(KeyboardInterrupt):
            files.write_atomic(tmp_path / "a.bin", lambda f: f.write(b"x"))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
