"""Gumbel root selection and the completed-Q policy target (Danihelka et
al. 2022, "Policy improvement by planning with Gumbel"), as
``mctx.gumbel_muzero_policy`` computes them, over one node of a
``search.tree.TreeArrays`` tree.

At the root: Gumbel noise ``g`` is drawn once per move; the search visits
only the ``m`` actions (``max_considered``) with the top ``g + logits`` and
halves them by ``g + logits + sigma(completedQ)`` (sequential halving: the
simulation ``i`` goes to the best action whose visit count equals
``considered_visits(m, n)[i]``). The action played is the best of the most
visited by the same score. Below the root the choice is deterministic:
``argmax(softmax(logits + sigma(completedQ)) - N(a) / (1 + sum N))``.

``completedQ``: an action's mean value where it was visited, the node's
mixed value elsewhere (``(v_net + sum N * Q_visited_by_prior) / (1 + sum
N)``), rescaled to [0, 1] by its min and max over the actions. ``sigma(q) =
(maxvisit_init + max N) * value_scale * q`` (mctx's defaults: 50 and 0.1).
The improved policy, the training target, is ``softmax(logits +
sigma(completedQ))`` over the legal moves.

Logits are ``log(children_prior)`` (the tree keeps the masked softmax of the
network's logits, the same up to a constant, which none of this sees).
Only legal actions (``children_legal``) are ever chosen or given mass.
"""

from __future__ import annotations

import math

import numpy as np

from alphalite.runtime.kernels import njit

LOW_LOGIT = -1e9  # mctx's floor on g + logits + sigma


def considered_visits(max_considered: int, num_simulations: int) -> tuple[int, ...]:
    """The visit count an action must have to get simulation ``i``, for
    ``i < num_simulations`` (mctx ``get_sequence_of_considered_visits``):
    each phase visits every considered action ``max(1, n / (ceil(log2 m) *
    k))`` times, then ``k`` halves (never below 2)."""
    if max_considered <= 1:
        return tuple(range(num_simulations))
    log2max = int(math.ceil(math.log2(max_considered)))
    seq: list[int] = []
    visits = [0] * max_considered
    k = max_considered
    while len(seq) < num_simulations:
        extra = max(1, int(num_simulations / (log2max * k)))
        for _ in range(extra):
            seq.extend(visits[:k])
            for i in range(k):
                visits[i] += 1
        k = max(2, k // 2)
    return tuple(seq[:num_simulations])


def considered_table(max_considered: int, num_simulations: int) -> np.ndarray:
    """int32 [max_considered + 1, num_simulations]: row ``k`` is
    ``considered_visits(k, num_simulations)`` (a root with ``k`` legal
    actions, fewer than ``max_considered``, uses row ``k``)."""
    out = np.zeros((max_considered + 1, max(num_simulations, 1)), np.int32)
    for k in range(max_considered + 1):
        out[k, :num_simulations] = considered_visits(k, num_simulations)
    return out


@njit(cache=True)
def logit_of(p):
    return math.log(p) if p > 1e-30 else -69.0


@njit(cache=True)
def completed_sigma(T, node, value_scale, maxvisit_init, out):
    """Fill ``out[A]`` with ``sigma(completedQ)`` of ``node``'s actions
    (legal or not: an illegal action counts as unvisited, as in mctx, whose
    min and max run over every action)."""
    cp, cv, cw = T.children_prior, T.children_visits, T.children_value_sum
    A = cp.shape[1]
    total = 0
    maxv = 0
    sum_probs = 0.0
    for a in range(A):
        n = cv[node, a]
        total += n
        if n > maxv:
            maxv = n
        if n > 0:
            sum_probs += max(cp[node, a], 1e-38)
    weighted = 0.0
    if total > 0:
        for a in range(A):
            n = cv[node, a]
            if n > 0:
                weighted += max(cp[node, a], 1e-38) * (cw[node, a] / n) / sum_probs
    value = (T.node_value[node] + total * weighted) / (total + 1)
    lo = 1e300
    hi = -1e300
    for a in range(A):
        n = cv[node, a]
        q = cw[node, a] / n if n > 0 else value
        out[a] = q
        lo = min(lo, q)
        hi = max(hi, q)
    scale = (maxvisit_init + maxv) * value_scale
    span = max(hi - lo, 1e-8)
    for a in range(A):
        out[a] = scale * (out[a] - lo) / span
    return value


@njit(cache=True)
def improved_policy(T, node, value_scale, maxvisit_init, sigma, out):
    """Fill ``out[A]`` with ``softmax(logits + sigma(completedQ))`` over the
    legal actions (0 elsewhere); ``sigma`` is scratch [A]."""
    cp, cl = T.children_prior, T.children_legal
    A = cp.shape[1]
    completed_sigma(T, node, value_scale, maxvisit_init, sigma)
    top = -1e300
    for a in range(A):
        if cl[node, a]:
            out[a] = logit_of(cp[node, a]) + sigma[a]
            top = max(top, out[a])
    total = 0.0
    for a in range(A):
        if cl[node, a]:
            out[a] = math.exp(out[a] - top)
            total += out[a]
        else:
            out[a] = 0.0
    for a in range(A):
        out[a] /= total


@njit(cache=True)
def interior_action(T, node, value_scale, maxvisit_init, sigma, probs):
    """mctx's non-root choice: the legal action with the largest improved
    probability minus its share of the visits (ties: the lower index)."""
    improved_policy(T, node, value_scale, maxvisit_init, sigma, probs)
    cv, cl = T.children_visits, T.children_legal
    A = cv.shape[1]
    total = 0
    for a in range(A):
        total += cv[node, a]
    best = -1e300
    best_a = -1
    for a in range(A):
        if cl[node, a]:
            s = probs[a] - cv[node, a] / (1.0 + total)
            if s > best:
                best = s
                best_a = a
    return best_a


@njit(cache=True)
def root_action(T, node, gumbel, considered_visit, value_scale, maxvisit_init, sigma):
    """The legal action with visit count ``considered_visit`` and the largest
    ``max(LOW_LOGIT, g + logits - max logits + sigma)`` (sequential halving
    during the search; with ``considered_visit`` = the most visits, the move
    to play). -1 if no legal action has that count."""
    cp, cv, cl = T.children_prior, T.children_visits, T.children_legal
    A = cp.shape[1]
    completed_sigma(T, node, value_scale, maxvisit_init, sigma)
    top = -1e300
    for a in range(A):
        if cl[node, a]:
            top = max(top, logit_of(cp[node, a]))
    best = -1e300
    best_a = -1
    for a in range(A):
        if cl[node, a] and cv[node, a] == considered_visit:
            s = max(LOW_LOGIT, gumbel[a] + logit_of(cp[node, a]) - top + sigma[a])
            if s > best:
                best = s
                best_a = a
    return best_a


@njit(cache=True)
def legal_count(T, node):
    n = 0
    for a in range(T.children_legal.shape[1]):
        if T.children_legal[node, a]:
            n += 1
    return n
