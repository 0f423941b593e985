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

from alphalite.runtime import numba_cache

ROOT = Path(__file__).resolve().parent.parent

# In a subpackage other than board's: stamping must reach kernels at any depth.
PROBE = '''from alphalite.go import board
from alphalite.runtime.kernels import njit


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


def _run(root: Path, setup: bool = True) -> tuple[int, int]:
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); "
            + ("from alphalite import runtime; runtime.setup(); " if setup else "")
            + "from alphalite.nn import probe_kernel as k; "
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
    # a process that never calls runtime.setup() (a notebook, a probe) stamps
    # alike: it loads the kernel, and leaves the index to the next process
    assert _run(tmp_path, setup=False) == (40, 1)
    assert _run(tmp_path) == (40, 1)
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


EVERY_KERNEL = '''import importlib, pkgutil, sys
from numba.core.registry import CPUDispatcher
import alphalite, search, selfplay
for pkg in (alphalite, search, selfplay):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if not m.name.endswith((".__main__", ".demo")):
            importlib.import_module(m.name)
kinds = {}
for name, mod in list(sys.modules.items()):
    if name.split(".")[0] in ("alphalite", "search", "selfplay"):
        for k, v in vars(mod).items():
            if isinstance(v, CPUDispatcher) and v.__module__ == name and getattr(v, "_cache", None) is not None:
                impl = getattr(v._cache, "_impl", None)
                kinds[f"{name}.{k}"] = type(getattr(impl, "_locator", None)).__name__
print(len(kinds), sorted(k for k, t in kinds.items() if t != "_PackageLocator"))
'''


@pytest.mark.subprocess
def test_every_kernel_is_stamped_without_setup():
    """A process that imports our modules and never calls runtime.setup() (a
    notebook, a probe) stamps every cached kernel as the entry points do:
    with Numba's own stamps it would find the cache stale, compile all again
    and write over the index the next engine start reads."""
    out = subprocess.run([sys.executable, "-c", EVERY_KERNEL], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    count, rest = out.stdout.strip().split(" ", 1)
    assert int(count) > 100 and rest == "[]", out.stdout
    # the locator is global once in place, so each kernel file must bring it
    # itself: any of them may be the first a process imports
    kernel_files = [ROOT / name for name, _ in numba_cache.package_stamp()]
    assert len(kernel_files) >= 10
    for path in kernel_files:
        text = path.read_text()
        assert "from alphalite.runtime.kernels import njit" in text and "from numba import njit" not in text, path
