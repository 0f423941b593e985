"""Supervised policy training: `python run_sl.py --workdir runs/sl19 [--flags]`.

Same as `alphalite sl`; see `python run_sl.py --help` for every config field.
"""

import sys

from alphalite.cli import main

if __name__ == "__main__":
    sys.exit(main(["sl", *sys.argv[1:]]))
