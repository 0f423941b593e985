"""NN-Influence (Santos et al., 2016): predict the winner from an influence map.

Features (``influence_features``). Every stone spreads influence over the
points within Manhattan distance 4 of it, falling by 2 per step:
``10 - 2 d`` (its own point 10, a neighbour 8, a one-space jump 6, a
two-space jump 4, then 2), black positive, white negative, summed over all
stones. The paper gives the jump values (6 and 4); the linear fall-off
through them is our reading. Inputs, as in the paper, are the ``size*size``
map values plus the prisoners taken by black and by white (363 on 19x19),
scaled by 1/10.

Model (``MLP``): 363 inputs, 200 sigmoid hidden units, one sigmoid output =
P(black wins); > 0.5 predicts black. The paper trains one net per snapshot
move (30, 80, 130, 180); so does ``train_and_evaluate``, each on the
position after that many moves of every decided training game, with Adam on
the cross-entropy and early stopping on a tenth of those games.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from alphalite.data import dataset
from alphalite.train.metrics import WinnerStats

SPREAD = 10.0  # influence at the stone itself
FALLOFF = 2.0  # per Manhattan step
HIDDEN = 200


@functools.lru_cache(maxsize=None)
def influence_kernel(size: int) -> np.ndarray:
    """[N, N] float32: influence of a stone on p at q (N = size*size)."""
    r, c = np.divmod(np.arange(size * size), size)
    d = np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])
    return np.maximum(0.0, SPREAD - FALLOFF * d).astype(np.float32)


def influence_map(stones: np.ndarray) -> np.ndarray:
    """stones [B, H, W] (+1 black, -1 white, 0 empty) -> map [B, H, W] float32."""
    stones = np.asarray(stones)
    b, h, w = stones.shape
    flat = stones.reshape(b, h * w).astype(np.float32)
    return (flat @ influence_kernel(h)).reshape(b, h, w)


def influence_features(stones: np.ndarray, captures: np.ndarray) -> np.ndarray:
    """[B, H*W + 2] float32: the influence map then the prisoners taken by
    black and by white, all scaled by 1/SPREAD."""
    m = influence_map(stones).reshape(len(stones), -1)
    return np.concatenate([m, np.asarray(captures, np.float32).reshape(-1, 2)], axis=1) / SPREAD


def _mlp_fns(seed: int, n_in: int, lr: float):
    import jax
    import jax.numpy as jnp
    import optax

    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    params = {"w1": jax.random.normal(k1, (n_in, HIDDEN)) * (1.0 / n_in) ** 0.5, "b1": jnp.zeros(HIDDEN),
              "w2": jax.random.normal(k2, (HIDDEN, 1)) * (1.0 / HIDDEN) ** 0.5, "b2": jnp.zeros(1)}
    tx = optax.adam(lr)

    def logit(p, x):  # [B, n_in] -> [B]
        return (jax.nn.sigmoid(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])[:, 0]

    def loss(p, x, y):  # y: 1 = black won
        return optax.sigmoid_binary_cross_entropy(logit(p, x), y).mean()

    @jax.jit
    def step(p, opt, x, y):
        val, g = jax.value_and_grad(loss)(p, x, y)
        upd, opt = tx.update(g, opt, p)
        return optax.apply_updates(p, upd), opt, val

    prob = jax.jit(lambda p, x: jax.nn.sigmoid(logit(p, x)))
    return params, tx.init(params), step, jax.jit(loss), prob


def fit_mlp(x: np.ndarray, y_black: np.ndarray, *, seed: int = 0, epochs: int = 40, batch: int = 256,
            lr: float = 1e-3, patience: int = 5):
    """Train the NN-Influence MLP on features x [n, D] and labels y_black
    [n] (1 = black won). Returns ``(predict, info)``: predict(x) -> P(black
    wins) [n]; early stopping on a held-out tenth."""
    rng = np.random.default_rng(seed)
    n = len(x)
    idx = rng.permutation(n)
    n_hold = max(1, n // 10) if n >= 20 else 0
    hold, train = idx[:n_hold], idx[n_hold:]
    params, opt, step, loss, prob = _mlp_fns(seed, x.shape[1], lr)
    best = (np.inf, params, 0)
    y = y_black.astype(np.float32)
    for epoch in range(epochs):
        order = rng.permutation(train)
        for i in range(0, len(order), batch):
            j = order[i:i + batch]
            params, opt, _ = step(params, opt, x[j], y[j])
        val = float(loss(params, x[hold], y[hold])) if n_hold else -epoch
        if val < best[0]:
            best = (val, params, epoch + 1)
        elif epoch + 1 - best[2] >= patience:
            break
    params = best[1]
    return (lambda xs: np.asarray(prob(params, np.asarray(xs, np.float32)))), \
        {"epochs": best[2], "holdout_loss": best[0] if n_hold else None}


def _gather(batches) -> dict[str, np.ndarray]:
    keys = ("stones", "captures", "to_play", "outcomes", "move_number", "game")
    if not batches:
        return {}
    return {k: np.concatenate([b[k] for b in batches]) for k in keys}


def train_and_evaluate(data, test_batches, *, board_size: int, split: str = "train", max_games: int = 0,
                       moves=(30, 80, 130, 180), seed: int = 0, progress: bool = False) -> dict:
    """Train one influence MLP per snapshot move on the decided games of
    ``split`` of the dataset folder ``data`` and test it on the positions of
    ``test_batches`` (dicts from the dataset loaders, with ``stones``,
    ``captures``, ``to_play``, ``outcomes``, ``move_number``).

    Returns ``{"stats": metrics.WinnerStats result on the test positions
    (v_black = 2 P(black) - 1), "train": {...counts, seconds}}``."""
    t0 = time.time()
    train = _gather(list(dataset.iterate_eval(data, split=split, preset="thesis3", board_size=board_size,
                                              max_games=max_games, batch_size=1024, decided_only=True,
                                              move_numbers=moves)))
    test = _gather(list(test_batches))
    stats = WinnerStats()
    per_move = {}
    for m in moves:
        tr = np.flatnonzero(train["move_number"] == m) if train else np.zeros(0, np.int64)
        te = np.flatnonzero(test["move_number"] == m) if test else np.zeros(0, np.int64)
        if len(tr) < 2 or len(te) == 0:
            per_move[str(m)] = {"train_positions": int(len(tr))}
            continue
        x = influence_features(train["stones"][tr], train["captures"][tr])
        y = train["outcomes"][tr] * train["to_play"][tr] > 0  # black won
        predict, info = fit_mlp(x, y, seed=seed + m)
        p = predict(influence_features(test["stones"][te], test["captures"][te]))
        stats.update(2.0 * p - 1.0, test["outcomes"][te] * test["to_play"][te], test["move_number"][te])
        per_move[str(m)] = {"train_positions": int(len(tr)), **info}
        if progress:
            print(f"influence move {m}: {len(tr)} train positions, {info}", flush=True)
    return {"stats": stats.result(),
            "train": {"train_games": int(len(np.unique(train["game"]))) if train else 0,
                      "train_positions": int(sum(v["train_positions"] for v in per_move.values())),
                      "per_move": per_move, "train_seconds": time.time() - t0}}
