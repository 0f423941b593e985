"""Self-play RL. Policy gradient (AlphaGo's RL stage, the default):
`python run_rl.py --workdir runs/rl19 --init checkpoints/policy19 [--flags]`;
AlphaZero on Ray: `python run_rl.py --algo alphazero --workdir runs/az9 [--address auto] [--flags]`.

Same as `alphalite rl`; see `python run_rl.py --help` for every config field
(selfplay.rl.RLConfig; alphalite.zero.run.ZeroConfig, SelfPlayConfig and
SearchParams). A rerun with the same --workdir resumes.
"""

import sys

from alphalite.cli import main

if __name__ == "__main__":
    sys.exit(main(["rl", *sys.argv[1:]]))
