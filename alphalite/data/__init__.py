"""Training data: SGF archives to game shards and their loader, and GNU Go
games as a data source. Depends on ``nn`` (feature planes) and below."""
