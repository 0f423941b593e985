"""Self-play: ``games`` (batched policy games, MCTS games), ``records``
(atomic npz + SGF game files), ``rl`` (policy-gradient training against a
pool of snapshots; ``run_rl.py``). Importing does nothing."""
