"""Players that choose moves (random, policy, MCTS) and the clock that
budgets them. Depends on ``search`` and ``train``'s layers and below."""
