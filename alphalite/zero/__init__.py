"""AlphaZero-style training on Ray: the run folder (store), the learner, the actors and the driver (run)."""
