"""What every training loop here shares (supervised policy and value
training, policy-gradient RL): the train state, the update at the end of
each step with its divergence check, gradient clipping, a prefetching
loader thread and a graceful stop on Ctrl-C/SIGTERM."""

from __future__ import annotations

from typing import Any


# Global-norm gradient clipping, a guard against the rare huge gradient. KataGo
# caps at 5500 on a loss summed over the batch (about 20 per position at batch
# 256), Leela Chess Zero at 10000; both sit far above the usual norm and only
# catch spikes, and so does ours (on the mean loss): the b6c64 19x19 SL recipe
# runs at a norm of 0.7-1 after its first steps (9 at the start), the
# thesis CNN at 2-4 (p90 10), with spikes of 50-700 when Adam at a constant
# 3e-3 throws it out of its minimum (tests/test_train.py).
GRAD_CLIP = 10.0


# What a run saved before a field existed did, where that is not the field's
# default: runs before gradient clipping trained without it.
LEGACY_VALUES = {"grad_clip": 0.0}


class TrainingDiverged(ValueError):
    """A step gave a non-finite loss, gradient or parameters; nothing of it is saved."""


def with_clipping(tx, max_norm: float):
    """``tx`` behind global-norm gradient clipping (``max_norm`` 0: ``tx``
    itself, so the optimizer state of runs without clipping still loads)."""
    import optax

    return optax.chain(optax.clip_by_global_norm(max_norm), tx) if max_norm > 0 else tx


def train_state_cls():
    from flax.training import train_state

    class TrainState(train_state.TrainState):
        batch_stats: Any = None

    return TrainState


def new_state(model, tx, variables):
    """A TrainState of ``model`` from ``variables``, committed to the default
    device. Why committed: a train step's outputs are, and so is a state
    Orbax restores; an uncommitted fresh state made the first step a program
    of its own (XLA compiled the step twice in a new run and a third time in
    a resumed one, about 10 s each for a b1c8 net on a 2-core EPYC)."""
    state = train_state_cls().create(apply_fn=model.apply, params=variables["params"], tx=tx,
                                     batch_stats=variables.get("batch_stats", {}))
    return commit(state)


def commit(state):
    """``state`` (any pytree) on JAX's default device, committed (see
    ``new_state``)."""
    import jax

    return jax.device_put(state, jax.config.jax_default_device or jax.devices()[0])


def create_state(model, tx, rng):
    """A fresh TrainState of ``model`` (``nets.init_variables``)."""
    from alphalite.nn import nets

    return new_state(model, tx, nets.init_variables(model, rng))


def apply_update(state, grads, updates: dict, loss):
    """The end of every train step (policy and value): the optimizer update
    (clipping included, see ``with_clipping``), the new batch statistics, and
    the metrics ``loss``, ``grad_norm`` (before clipping) and ``finite``
    (loss, gradient and new parameters all finite; the loop stops on False)."""
    import jax.numpy as jnp
    import optax

    grad_norm = optax.tree.norm(grads)
    state = state.apply_gradients(grads=grads)
    if updates:
        state = state.replace(batch_stats=updates["batch_stats"])
    finite = jnp.isfinite(loss) & all_finite(grads) & all_finite(state.params)
    return state, {"loss": loss, "grad_norm": grad_norm, "finite": finite}


def all_finite(tree):
    """Whether every value in ``tree`` is finite (a JAX bool; not by the
    norm, whose squares overflow for large finite values)."""
    import jax
    import jax.numpy as jnp

    return jnp.all(jnp.stack([jnp.isfinite(x).all() for x in jax.tree_util.tree_leaves(tree)]))


def prefetch(iterator, depth: int = 4):
    """Run ``iterator`` in a daemon thread, ``depth`` items ahead. The loader's
    Numba kernels release the GIL, so replay overlaps the train step."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work():
        try:
            for item in iterator:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as e:  # handed to the consumer
            q.put(e)

    threading.Thread(target=work, daemon=True).start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


class GracefulStop:
    """The first Ctrl-C (SIGINT) or SIGTERM (``kill``, a service manager, a
    job under ``nohup``) only sets ``requested``; the loop stops between
    steps. A KeyboardInterrupt inside the jitted step would leave the state
    pointing at donated, deleted buffers, so nothing could be saved. A
    second signal raises KeyboardInterrupt as usual."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self):
        import signal
        import threading

        self.requested = False
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sig = getattr(signal, name)
                self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def restore(self):
        import signal

        for sig, prev in self._previous.items():
            signal.signal(sig, prev)
        self._previous = {}


def variables_of(state) -> dict:
    v = {"params": state.params}
    if state.batch_stats:
        v["batch_stats"] = state.batch_stats
    return v
