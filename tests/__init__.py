"""The test suite. A regular package, so that ``tests.*`` imports find these
files before a ``tests`` package some dependency installs (pgx does)."""
