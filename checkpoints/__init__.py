"""The shipped nets, installed as the package ``alphalite.checkpoints``
(pyproject.toml maps this folder there): ``alphalite.nn.checkpoint.resolve``
finds one by name, from any working folder."""
