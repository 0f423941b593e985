"""Numba's cache goes stale with any kernel file (alphalite.runtime.numba_cache): a
kernel that inlines a board.py kernel is rebuilt after board.py changes,
and kept when a file without kernels changes. Runs a copy of the packages in
fresh processes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# In a subpackage other than board's: stamping must reach kernels at any depth.
PROBE = '''from numba import njit

from alphalite.go import board


@njit(cache=True)
def probe(p, W):
    return board._nb(p, W, 0)  # inlined: the point above p
'''


OLD_NB, NEW_NB = "        return p - W\n", "        return p - 2 * W\n"  # board._nb's first case


def _package_copy(tmp_path: Path) -> None:
    """The three packages plus the probe kernel, without compiled caches."""
    for pkg in ("alphalite", "search", "selfplay"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "alphalite" / "nn" / "probe_kernel.py").write_text(PROBE)


def _run(root: Path) -> tuple[int, int]:
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); from alphalite import runtime; runtime.setup(); "
            "from alphalite.nn import probe_kernel as k; "
            "assert k.__file__.startswith(sys.path[0]); print(k.probe(50, 10), sum(k.probe.stats.cache_hits.values()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    value, hits = out.stdout.split()
    return int(value), int(hits)


@pytest.mark.subprocess
def test_kernels_are_rebuilt_when_board_changes(tmp_path):
    _package_copy(tmp_path)
    assert _run(tmp_path) == (40, 0)  # compiled
    assert _run(tmp_path) == (40, 1)  # from the cache
    board_py = tmp_path / "alphalite" / "go" / "board.py"
    text = board_py.read_text()
    assert text.count(OLD_NB) == 1
    board_py.write_text(text.replace(OLD_NB, NEW_NB))
    assert _run(tmp_path) == (30, 0)  # Numba alone would still load the old code: 40 from the cache
    with open(tmp_path / "alphalite" / "gtp" / "engine.py", "a") as f:
        f.write("# no kernels here\n")
    assert _run(tmp_path) == (30, 1)


LONG_LIVED = '''import sys
sys.path.insert(0, {root!r})
from alphalite import runtime
runtime.setup()  # stamps the sources as they are now
from alphalite.go import board  # the old board.py is what this process runs
p = {board_py!r}
text = open(p).read()
open(p, "w").write(text.replace({old!r}, {new!r}))
from alphalite.nn import probe_kernel as k  # imported after the edit, compiled from the old board
print(k.probe(50, 10))
'''


@pytest.mark.subprocess
def test_kernels_built_from_old_code_are_not_stamped_new(tmp_path):
    """A process that imported board.py before it changed compiles later
    kernels from the old text: the next process must not load them."""
    _package_copy(tmp_path)
    code = LONG_LIVED.format(root=str(tmp_path), board_py=str(tmp_path / "alphalite" / "go" / "board.py"), old=OLD_NB,
                             new=NEW_NB)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["40"]
    assert _run(tmp_path) == (30, 0)
