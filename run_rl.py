"""Policy-gradient self-play (AlphaGo's RL stage):
`python run_rl.py --workdir runs/rl19 --init checkpoints/policy19 [--flags]`.

Same as `alphalite rl`; see `python run_rl.py --help` for every config field
(selfplay.rl.RLConfig). A rerun with the same --workdir resumes.
"""

import sys

from alphalite.cli import main

if __name__ == "__main__":
    sys.exit(main(["rl", *sys.argv[1:]]))
