"""The command line itself: --version, and every flag of every subcommand
documented with its default in --help."""

import argparse
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from alphalite import cli

from alphalite.gtp import session as gtp

ROOT = Path(__file__).resolve().parents[1]


def _parsers(parser, path=("alphalite",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _options():
    for path, parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            if not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                yield " ".join(path), parser, action


def test_version_is_pyprojects(capsys):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert metadata.version("alphalite") == version  # else the install is stale: make install
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"alphalite {version}\n"
    assert gtp.VERSION == version  # what the GTP `version` command answers


def test_a_source_tree_without_pip_install_still_runs(monkeypatch, capsys):
    """`python -m alphalite.cli` from a checkout that pip never installed (a
    GPU box with its own Python): no package metadata, yet the CLI starts."""
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == "alphalite unknown (not installed)\n"


def test_every_option_is_documented_with_its_default():
    undocumented, no_default = [], []
    options = list(_options())
    for where, parser, action in options:
        name = "/".join(action.option_strings) or action.dest
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if not (choice.help or "").strip():
                    undocumented.append(f"{where} {choice.dest}")
            continue
        text = parser._get_formatter()._expand_help(action) if action.help else ""
        # config.add_arguments appends "(default: X)" itself: that alone is no help.
        if not re.sub(r"\(default: [^)]*\)", "", text).strip():
            undocumented.append(f"{where} {name}")
        elif action.default not in (None, "", []) and "default" not in text:
            no_default.append(f"{where} {name}: {text!r}")
    assert len(options) > 100  # the walk reached every subcommand
    assert not undocumented, "options without help: " + ", ".join(undocumented)
    assert not no_default, "defaults not shown: " + "; ".join(no_default)


@pytest.mark.parametrize("argv, shown", [
    (["gtp"], "--komi KOMI komi until a GTP komi command changes it (default: 7.5)"),
    (["sl"], "(default: 0.05)"),  # --learning-rate, from SLConfig's field
    (["data", "gnugo"], "(default: 9)"),
])
def test_help_output_shows_defaults(capsys, argv, shown):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    assert shown in " ".join(capsys.readouterr().out.split())
