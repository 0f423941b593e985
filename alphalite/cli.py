"""The ``alphalite`` command. Subcommands import their module lazily, so
``alphalite --help`` is instant and importing this module does nothing."""

from __future__ import annotations

import argparse
import sys


def _data_build(args):
    from alphalite import dataset

    return dataset.cli_build(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="alphalite", description="AlphaGo-style Go engine")
    sub = p.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="build and inspect game datasets")
    dsub = data.add_subparsers(dest="data_command", required=True)
    build = dsub.add_parser("build", help="SGF files/folders/archives -> game shards")
    build.add_argument("src", nargs="+", help=".sgf files, folders, .tar.gz/.tar.bz2/.zip archives")
    build.add_argument("--out", required=True, help="output dataset folder")
    build.add_argument("--jobs", type=int, default=0, help="worker processes (0 = all cores)")
    build.add_argument("--sizes", default="9,13,19", help="board sizes to keep, comma separated")
    build.add_argument("--val-frac", type=float, default=0.02, help="fraction of games for validation")
    build.add_argument("--test-frac", type=float, default=0.02, help="fraction of games for test")
    build.add_argument("--max-games", type=int, default=0, help="stop after this many games (0 = all)")
    build.set_defaults(func=_data_build)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
