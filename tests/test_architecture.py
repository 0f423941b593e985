"""The shape of the code: the import contract in pyproject.toml (layers, no
cycles) holds, no module uses another module's private names, and the
README's module table matches the tree."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("alphalite", "search", "selfplay")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = p
    return out


@pytest.mark.subprocess
def test_import_contract_holds():
    """lint-imports (import-linter) sees imports inside functions too."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is in the test extra (make install)"
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "0 broken" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]


def _private_uses(path: Path, mod: str, modules: dict[str, Path]) -> list[str]:
    """Private names (``_x``) of other modules of ours that ``path`` imports
    (``from m import _x``) or reads (``alias._x`` where alias is one of our
    modules)."""
    tree = ast.parse(path.read_text())
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    bad, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] not in PACKAGES:
                continue
            for a in node.names:
                target = f"{base}.{a.name}"
                if target in modules:  # a module: remember its local name
                    aliases[a.asname or a.name] = target
                elif a.name.startswith("_") and base != mod:
                    bad.append(f"{mod}:{node.lineno} imports {base}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in aliases
                and aliases[node.value.id] != mod):
            bad.append(f"{mod}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return bad


def test_no_private_name_crosses_modules():
    """A name with a leading underscore belongs to its module; the package
    code never reaches into another module's (tests may, for the module they
    test)."""
    modules = _modules()
    bad = [b for mod, p in modules.items() for b in _private_uses(p, mod, modules)]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_private_use(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from alphalite.go import board\nfrom alphalite.go.board import _hidden\nboard._nb(1, 2, 3)\n")
    modules = {"alphalite.go.board": ROOT / "alphalite/go/board.py"}
    assert len(_private_uses(p, "alphalite.x.m", modules)) == 2


def test_readme_module_table_matches_the_tree():
    """Every module (``__init__.py`` files with code aside) is in the README's
    table of parts, and every file the table names exists."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## What each part does"):]
    table = table[: table.index("\n## ", 4)]
    named = set(re.findall(r"`((?:alphalite|search|selfplay)/[\w/]+\.py)`", table))
    files = {str(p.relative_to(ROOT)) for p in _modules().values()
             if p.name != "__init__.py" or "def " in p.read_text()}
    assert not files - named, f"modules missing from the README's table: {sorted(files - named)}"
    assert not named - files, f"the README names files that are gone: {sorted(named - files)}"


HEAVY = ("jax", "flax", "optax", "orbax", "numba")  # 0.4-0.8 s each to import here
LIGHT_PATH_PROBE = """
import sys
from alphalite import cli
cli.build_parser()
import alphalite.gtp.engine
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})))
"""


@pytest.mark.subprocess
def test_start_up_paths_import_nothing_heavy():
    """Two paths start up before any real work and must stay quick, which is
    why their modules import JAX, Flax, Orbax and Numba inside functions:
    ``alphalite --help`` (the CLI's parser, built from SLConfig and RLConfig)
    and the GTP engine, which answers a controller's first commands while
    its nets load in a background thread."""
    code = LIGHT_PATH_PROBE.format(heavy=set(HEAVY))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [], f"imported at start-up: {out.stdout.split()[:10]}"
