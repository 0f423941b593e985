"""Training: the shared loop machinery (``loop``), supervised policy and
value training, their metrics, and the NN-Influence baseline. Beside
``search`` (neither imports the other); depends on ``data`` and below."""
