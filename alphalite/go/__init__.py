"""Go itself: rules on a Numba board, coordinates, SGF, scoring, random
playouts, and a GTP client for outside engines (GNU Go is our rules oracle
and referee). Depends on ``runtime`` only."""
