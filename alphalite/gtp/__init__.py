"""The GTP engine (``alphalite gtp``): protocol, commands, game state.
Depends on ``engine`` and below (not on ``selfplay``)."""
