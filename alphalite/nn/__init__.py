"""Networks: input feature planes, Flax models and their fast CPU kernels,
checkpoints (Orbax run folders, exported and shipped models) and JAX's
compile cache. Depends on ``go`` and ``runtime``."""
