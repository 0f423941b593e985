"""Evaluators for ``run_mcts``: ``evaluate_fn(params, leaves) -> (priors [B, A], values [B])``.

All values are from the point of view of the player to move at the leaf.

* ``uniform_evaluator(value=0.0)``: uniform priors over legal moves, a
  constant value (tests, search speed).
* ``value_evaluator(value_fn, prior_fn=None)``: ``value_fn(state: GoState)
  -> float`` on a copy of each leaf (slow; tests and experiments).
* ``rollout_evaluator(prior_fn=None, num_rollouts=1, max_moves=None)``:
  uniform (or ``prior_fn(params, leaves)``) priors, value = mean of Numba
  random rollouts to the end, Tromp-Taylor with komi. Usable before any
  value net exists.
* ``mix_rollouts(evaluate_fn, lam)``: AlphaGo's leaf value ``lam * v +
  (1 - lam) * rollout``, priors from ``evaluate_fn``.
* ``network_evaluator(net_fn, preset=..., pad_to=...)`` with
  ``policy_value_fn(policy_model, value_model=None)``: ``features.encode``
  of each leaf into a reused ``[B, H, W, C]`` buffer, padded to a fixed batch
  so the one jitted function compiles once, masked softmax priors and the
  value head (zeros without a value model: combine with ``mix_rollouts``,
  e.g. ``lam=0``, to get rollout values with network priors).
* ``net_evaluator(net_fn, has_value=..., lam=...)``: the two above as the
  engine and self-play use them, the one place lambda is applied (no value
  net: rollout values whatever ``lam``).

JAX is imported only inside the network helpers, never at import time.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from search.rollout import RolloutScratch, rollout_values


def uniform_evaluator(value: float = 0.0) -> Callable:
    def evaluate(params, leaves):
        return leaves.legal.astype(np.float32), np.full(len(leaves), value, np.float32)

    return evaluate


def value_evaluator(value_fn: Callable, prior_fn: Callable | None = None) -> Callable:
    """``value_fn(state) -> float`` for the player to move; ``prior_fn(state)
    -> [A]`` weights (default uniform)."""

    def evaluate(params, leaves):
        states = leaves.states()
        values = np.array([value_fn(s) for s in states], np.float32)
        if prior_fn is None:
            priors = leaves.legal.astype(np.float32)
        else:
            priors = np.stack([np.asarray(prior_fn(s), np.float32) for s in states])
        return priors, values

    return evaluate


def rollout_evaluator(prior_fn: Callable | None = None, *, num_rollouts: int = 1,
                      max_moves: int | None = None) -> Callable:
    """Priors from ``prior_fn(params, leaves) -> [B, A]`` (default uniform
    over legal moves); values from ``num_rollouts`` random rollouts per leaf
    (seeded from ``leaves.seeds``)."""
    scratch = RolloutScratch()

    def evaluate(params, leaves):
        priors = leaves.legal.astype(np.float32) if prior_fn is None else prior_fn(params, leaves)
        return priors, rollout_values(leaves, max_moves, num_rollouts, scratch)

    return evaluate


def mix_rollouts(evaluate_fn: Callable, lam: float = 0.5, *, num_rollouts: int = 1,
                 max_moves: int | None = None) -> Callable:
    """AlphaGo's mixed leaf value: ``lam * value(evaluate_fn) + (1 - lam) * rollout``."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    scratch = RolloutScratch()

    def evaluate(params, leaves):
        priors, values = evaluate_fn(params, leaves)
        values = np.asarray(values, np.float32)
        if lam < 1.0:
            values = lam * values + (1.0 - lam) * rollout_values(leaves, max_moves, num_rollouts, scratch)
        return priors, values

    return evaluate


def policy_value_fn(policy_model, value_model=None, *, jit: bool = True, split: int | None = None,
                    ownership: bool = False) -> Callable:
    """The one jitted network function of the search:
    ``net_fn(params, planes [B, H, W, C], legal bool [B, A]) -> (priors [B, A],
    values [B])`` with ``params = {"policy": variables, "value": variables}``
    (``"value"`` unused without a value model; values are then zeros). A
    policy-value net (``nets.ResNetPolicyValue``) as ``policy_model`` gives
    both from its one call. ``split``: the planes are a preset pair
    (``features.pair``), the policy reads channels ``[:split]``, the value
    net the rest. ``ownership``: a third output, the ownership head of the
    value net (``nets.ResNetValueAux``) or of the policy-value net (a
    ``*_aux_pv`` model) as ``[B, H*W]``, mover's view (what ``search.apv``
    takes).
    Models are ``alphalite.nn.nets`` models (``model.apply(variables, x, train=False)``)."""
    import jax
    import jax.numpy as jnp

    from alphalite.nn import features, nets

    nets.check_ownership(policy_model, value_model, ownership)
    pv = isinstance(policy_model, nets.ResNetPolicyValue)  # both heads from one call

    def net_fn(params, planes, legal):
        planes, vplanes = features.split_planes(planes, split)
        out = policy_model.apply(params["policy"], planes, train=False, **({"aux": True} if pv and ownership else {}))
        logits = jnp.where(legal, (out[0] if pv else out).astype(jnp.float32), -1e30)
        priors = jax.nn.softmax(logits, axis=-1)
        if pv and ownership:
            heads = out[1]
            return priors, heads["value"], heads["ownership"].reshape(planes.shape[0], -1).astype(jnp.float32)
        if pv:
            values = out[1].astype(jnp.float32)
        elif value_model is None:
            values = jnp.zeros(planes.shape[0], jnp.float32)
        elif ownership:
            out = value_model.apply(params["value"], vplanes, train=False, aux=True)
            own = out["ownership"].reshape(planes.shape[0], -1)
            return priors, out["value"].astype(jnp.float32), own.astype(jnp.float32)
        else:
            values = value_model.apply(params["value"], vplanes, train=False).astype(jnp.float32)
        return priors, values

    return jax.jit(net_fn) if jit else net_fn


def _next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _encode_leaves(leaves, pid: int, out: np.ndarray) -> None:
    """Each leaf's planes into ``out[i]``: one Numba call over the stacked
    boards when the leaves carry them, else one per leaf."""
    from alphalite.nn import features

    if leaves.stack is not None:
        features.encode_stacked_into(leaves.stack, len(leaves), pid, out)
    else:
        for i, b in enumerate(leaves.boards):
            features.encode_into(b, pid, out[i])


def network_evaluator(net_fn: Callable, *, preset: str = "default", pad_to: int | None = None,
                      random_symmetry: bool = False) -> Callable:
    """``evaluate_fn`` over a network function ``net_fn(params, planes,
    legal) -> (priors, values)`` (see ``policy_value_fn``). Leaves are
    encoded with ``features.encode_into`` (preset ``preset``) into a reused
    buffer padded to ``pad_to`` rows (default: the next power of two), so a
    jitted ``net_fn`` sees at most a few shapes. Padding rows are empty
    boards with every move legal. ``random_symmetry``: each leaf is shown
    to the net under one of the 8 board symmetries (drawn from
    ``leaves.seeds``) and its policy mapped back, as Leela Zero does."""
    from alphalite.nn import features

    pid = features.preset_id(preset)
    C = features.num_planes(preset)
    buf: dict[str, Any] = {}

    def evaluate(params, leaves):
        B = len(leaves)
        n = leaves.size
        rows = pad_to if pad_to is not None and pad_to >= B else _next_pow2(B)
        key = (rows, n)
        if buf.get("key") != key:
            buf["key"] = key
            buf["planes"] = np.zeros((rows, n, n, C), np.float32)
            buf["legal"] = np.ones((rows, n * n + 1), np.bool_)
            buf["tmp"] = np.zeros((rows, n, n, C), np.float32)
        planes, legal = buf["planes"], buf["legal"]
        ks = None
        if random_symmetry:
            table = features.sym_move_table(n)  # a stone on m lands on table[k, m]
            ks = (np.asarray(leaves.seeds) >> 7) % 8
            tmp = buf["tmp"]
            _encode_leaves(leaves, pid, tmp)
            for i in range(B):
                features.transform_planes_into(tmp[i], int(ks[i]), planes[i])
                legal[i, table[ks[i]]] = leaves.legal[i]
        else:
            _encode_leaves(leaves, pid, planes)
            legal[:B] = leaves.legal
        planes[B:] = 0.0
        legal[B:] = True
        priors, values = net_fn(params, planes, legal)
        priors = np.asarray(priors)[:B]
        if ks is not None:  # back to the leaf's own orientation
            priors = np.take_along_axis(priors, table[ks], axis=1)
        return priors, np.asarray(values)[:B]

    return evaluate


def net_evaluator(net_fn: Callable, *, has_value: bool, lam: float, preset: str = "default",
                  pad_to: int | None = None) -> Callable:
    """Network priors; leaf values ``lam * value net + (1 - lam) * rollout``,
    rollouts alone without a value net (``has_value`` False), the net alone
    at ``lam`` 1. What the GTP players and self-play search with."""
    evaluate = network_evaluator(net_fn, preset=preset, pad_to=pad_to)
    lam = lam if has_value else 0.0
    return evaluate if lam >= 1.0 else mix_rollouts(evaluate, lam)
