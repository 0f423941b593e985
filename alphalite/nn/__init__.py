"""Networks: input feature planes, Flax models and their fast CPU kernels,
checkpoints (Orbax run folders, exported and shipped models) and JAX's
compile cache. Depends on ``go`` and ``runtime``."""

# Where the nets run (``alphalite gtp --inference``), here so that the CLI and
# the GTP config can name them without loading the engine.
INFERENCE = ("auto", "jax", "onnx", "int8")
