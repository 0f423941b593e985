"""Supervised policy training: pure train/eval steps and the SL loop.

``task="value"`` runs the same loop for a value net (``*_value`` model):
MSE against the game outcome of the mover, games without a winner skipped,
``per_game`` positions per game each epoch (steps in alphalite.value).

``train_step(state, batch) -> (state, metrics)`` is jitted once per shape.
``train_and_evaluate(config, workdir)`` runs (or resumes) a run folder.
Batches are dicts of host arrays: planes [B, H, W, C] float32, moves [B]
int32, legal [B, A] bool.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from alphalite import checkpoint as ckpt
from alphalite.config import field


@dataclasses.dataclass(frozen=True)
class SLConfig:
    data: str = field("data/tygem", "dataset folder made by `alphalite data build`")
    model: str = field("b6c64", "network: thesis, clark, clark_tied or a ResNet preset (b6c64, ...)")
    preset: str = field("default", "input feature planes (see alphalite.features.PRESETS)")
    board_size: int = field(19, "board size of the games used")
    batch_size: int = field(128, "positions per step")
    optimizer: str = field("sgd", "optax optimizer", ("sgd", "adam", "adamw", "adagrad", "adadelta"))
    learning_rate: float = field(0.05, "peak learning rate")
    momentum: float = field(0.9, "SGD momentum (0 = plain SGD, as Clark & Storkey)")
    weight_decay: float = field(1e-4, "L2 weight decay (decoupled for adamw)")
    schedule: str = field("cosine", "learning-rate schedule; clark = 1x for 70%, 1/5 for 20%, "
                          "1/10 for the last 10% of steps", ("constant", "cosine", "clark"))
    warmup_steps: int = field(200, "linear warm-up steps (cosine and constant)")
    total_steps: int = field(20000, "training steps")
    max_minutes: float = field(0.0, "stop (and checkpoint) after this many minutes; 0 = no limit")
    masked: bool = field(True, "remove illegal points before the softmax (Clark & Storkey)")
    symmetries: bool = field(True, "random board symmetry per training position")
    winner_only: bool = field(False, "train only on the winner's moves (the thesis)")
    include_passes: bool = field(True, "train on positions whose expert move is a pass")
    eval_every: int = field(1000, "steps between validation runs")
    eval_positions: int = field(4096, "validation positions per evaluation")
    checkpoint_every: int = field(500, "steps between checkpoints")
    log_every: int = field(50, "steps between metrics.jsonl lines")
    seed: int = field(0, "seed for init and data order")
    task: str = field("policy", "policy: predict expert moves; value: predict the winner (MSE, "
                      "a *_value model such as b4c32_value)", ("policy", "value"))
    per_game: int = field(0, "value task: positions drawn per game each epoch (0 = all; AlphaGo: 1)")
    marked_only: bool = field(False, "value task: only the marked position of each game "
                              "(value self-play data: after the random move)")
    init_trunk: str = field("", "checkpoint whose ResNet trunk (same blocks, channels, preset) "
                            "initialises a new run, e.g. the SL policy for a value net")


# Fields a resumed run may change; everything else must match config.json.
RESUMABLE_OVERRIDES = ("total_steps", "max_minutes", "eval_every", "eval_positions",
                       "checkpoint_every", "log_every", "data")


def make_optimizer(cfg: SLConfig):
    import optax

    lr = cfg.learning_rate
    n = max(cfg.total_steps, 1)
    if cfg.schedule == "clark":
        schedule = optax.piecewise_constant_schedule(lr, {int(0.7 * n): 0.2, int(0.9 * n): 0.5})
    elif cfg.schedule == "cosine":
        schedule = optax.warmup_cosine_decay_schedule(0.0, lr, min(cfg.warmup_steps, n // 2), n,
                                                      end_value=lr * 0.01)
    else:
        schedule = optax.join_schedules([optax.linear_schedule(0.0, lr, max(cfg.warmup_steps, 1)),
                                         optax.constant_schedule(lr)], [cfg.warmup_steps])
    wd = cfg.weight_decay
    if cfg.optimizer == "sgd":
        tx = optax.chain(optax.add_decayed_weights(wd) if wd else optax.identity(),
                         optax.sgd(schedule, momentum=cfg.momentum or None, nesterov=cfg.momentum > 0))
    elif cfg.optimizer == "adam":
        tx = optax.chain(optax.add_decayed_weights(wd) if wd else optax.identity(), optax.adam(schedule))
    elif cfg.optimizer == "adamw":
        tx = optax.adamw(schedule, weight_decay=wd)
    elif cfg.optimizer == "adagrad":
        tx = optax.chain(optax.add_decayed_weights(wd) if wd else optax.identity(), optax.adagrad(schedule))
    else:
        tx = optax.chain(optax.add_decayed_weights(wd) if wd else optax.identity(), optax.adadelta(schedule))
    return tx, schedule


def _train_state_cls():
    from flax.training import train_state

    class TrainState(train_state.TrainState):
        batch_stats: Any = None

    return TrainState


def create_state(model, tx, rng, sample_planes):
    import jax

    variables = model.init(rng, sample_planes, train=False)
    return _train_state_cls().create(apply_fn=model.apply, params=variables["params"], tx=tx,
                                     batch_stats=variables.get("batch_stats", {}))


def _log_probs(logits, legal, masked: bool):
    import jax
    import jax.numpy as jnp

    logits = logits.astype(jnp.float32)
    if masked:
        logits = jnp.where(legal, logits, -1e9)
    return jax.nn.log_softmax(logits, axis=-1)


def make_train_step(masked: bool):
    import jax
    import jax.numpy as jnp

    def train_step(state, batch):
        def loss_fn(params):
            variables = {"params": params}
            if state.batch_stats:
                variables["batch_stats"] = state.batch_stats
                logits, updates = state.apply_fn(variables, batch["planes"], train=True,
                                                 mutable=["batch_stats"])
            else:
                logits, updates = state.apply_fn(variables, batch["planes"], train=True), {}
            logp = _log_probs(logits, batch["legal"], masked)
            nll = -jnp.take_along_axis(logp, batch["moves"][:, None], axis=1)[:, 0]
            return nll.mean(), (logp, updates)

        (loss, (logp, updates)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads)
        if updates:
            state = state.replace(batch_stats=updates["batch_stats"])
        acc = (jnp.argmax(jnp.where(batch["legal"], logp, -jnp.inf), axis=-1) == batch["moves"]).mean()
        return state, {"loss": loss, "accuracy": acc}

    return jax.jit(train_step, donate_argnums=0)


def make_predict(model, masked: bool = True):
    """jitted (variables, planes, legal) -> masked log-probabilities [B, A]."""
    import jax

    def predict(variables, planes, legal):
        logits = model.apply(variables, planes, train=False)
        return _log_probs(logits, legal, masked)

    return jax.jit(predict)


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


class _GracefulStop:
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


def evaluate(predict, variables, batches, num_actions: int, max_positions: int = 0) -> dict:
    from alphalite.metrics import MovePredictionStats

    stats = MovePredictionStats(num_actions)
    seen = 0
    for batch in batches:
        logp = np.asarray(predict(variables, batch["planes"], batch["legal"]))
        stats.update(logp, batch["moves"], batch["move_number"], batch["moves_left"], batch["legal"])
        seen += len(batch["moves"])
        if max_positions and seen >= max_positions:
            break
    return stats.result()


def _check_resume(cfg: SLConfig, workdir: Path) -> None:
    from alphalite import config as config_lib

    path = workdir / "config.json"
    if not path.exists():
        return
    saved = json.loads(path.read_text())
    saved_cfg = saved.get("sl", saved)
    mine = config_lib.to_dict(cfg)
    defaults = config_lib.to_dict(SLConfig())  # runs saved before a field existed used its default
    diff = [k for k in mine if k not in RESUMABLE_OVERRIDES and saved_cfg.get(k, defaults[k]) != mine[k]]
    if diff:
        raise ValueError(f"{workdir} holds a run with a different config ({', '.join(diff)}); "
                         "use another --workdir or the same settings")


def train_and_evaluate(cfg: SLConfig, workdir: str | Path, *, progress: bool = True) -> dict:
    """Train (or resume) the run in ``workdir``; returns the last metrics."""
    import jax
    import jax.numpy as jnp
    from tqdm import tqdm

    from alphalite import config as config_lib
    from alphalite import dataset, features, metrics, nets

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    _check_resume(cfg, workdir)
    size = cfg.board_size
    num_actions = size * size + 1
    planes = features.num_planes(cfg.preset)
    is_value = cfg.task == "value"
    if is_value != cfg.model.endswith("_value"):
        raise ValueError(f"task {cfg.task} cannot train model {cfg.model!r}: value nets end in _value")
    info = {"model": cfg.model, "board_size": size, "preset": cfg.preset, "kind": cfg.task}
    ckpt.write_json_atomic(workdir / "config.json", {**config_lib.to_dict(cfg), **info})

    model = nets.make_model(cfg.model, size, planes)
    tx, schedule = make_optimizer(cfg)
    rng = jax.random.PRNGKey(cfg.seed)
    state = create_state(model, tx, rng, jnp.zeros((1, size, size, planes), jnp.float32))
    mgr = ckpt.manager(workdir / "ckpt", max_to_keep=3)
    best_mgr = ckpt.manager(workdir / "best", max_to_keep=1)
    best_key = "best_val_neg_mse" if is_value else "best_val_top1"
    meta = {"step": 0, best_key: -1e9 if is_value else -1.0, "seconds": 0.0}
    restored = ckpt.restore(mgr, state)
    if restored is not None:
        state, meta = restored
        print(f"resumed {workdir} at step {meta['step']}", flush=True)
    elif cfg.init_trunk:
        from alphalite import value as value_lib

        state = value_lib.init_trunk_from(state, cfg.init_trunk, cfg.preset)
    step = int(meta["step"])

    if is_value:
        from alphalite import value as value_lib

        train_step, predict = value_lib.make_train_step(), value_lib.make_predict(model)
        batch_keys = ("planes", "outcomes")
        select = value_lib.position_filter(cfg.marked_only)
    else:
        train_step, predict = make_train_step(cfg.masked), make_predict(model, cfg.masked)
        batch_keys, select = ("planes", "moves", "legal"), {}
    loader = prefetch(dataset.iterate_batches(
        cfg.data, split="train", batch_size=cfg.batch_size, preset=cfg.preset, seed=cfg.seed,
        symmetries=cfg.symmetries, winner_only=cfg.winner_only, include_passes=cfg.include_passes,
        board_size=size, start_batch=step, per_game=cfg.per_game, **select))

    def val_batches():
        extra = value_lib.position_filter(cfg.marked_only, validation=True) if is_value else {}
        return dataset.iterate_eval(cfg.data, split="val", batch_size=256, preset=cfg.preset,
                                    board_size=size, **extra)

    def save(kind_mgr):
        meta.update(step=step)
        if step in kind_mgr.all_steps():  # a finished run rerun: this very state is saved already
            return
        ckpt.save(kind_mgr, step, state, dict(meta))

    def run_eval():
        if is_value:
            res = value_lib.evaluate(predict, variables_of(state), val_batches(), cfg.eval_positions)
            rec = {"step": step, "val_mse": res["mse"], "val_accuracy": res["accuracy"],
                   "val_positions": res["positions"]}
            score, curves = -res["mse"], (["loss", "val_mse"], ["accuracy", "val_accuracy"])
        else:
            res = evaluate(predict, variables_of(state), val_batches(), num_actions, cfg.eval_positions)
            rec = {"step": step, "val_top1": res["top1"], "val_top5": res["top5"], "val_nll": res["nll"],
                   "val_mean_rank": res["mean_rank"], "val_positions": res["positions"]}
            score, curves = res["top1"], (["loss", "val_nll"], ["accuracy", "val_top1", "val_top5"])
        ckpt.append_jsonl(workdir / "metrics.jsonl", rec)
        if score > meta[best_key]:
            meta[best_key] = score
            save(best_mgr)
        records = ckpt.read_jsonl(workdir / "metrics.jsonl")
        metrics.plot_curves(records, workdir / "plots" / "loss.png", curves[0], "loss")
        metrics.plot_curves(records, workdir / "plots" / "accuracy.png", curves[1], "accuracy")
        return rec

    start = time.time()
    seconds0 = float(meta.get("seconds", 0.0))
    window = {"loss": 0.0, "accuracy": 0.0, "n": 0, "t": time.time()}
    last = {}
    bar = tqdm(total=cfg.total_steps, initial=step, desc="sl", unit="step", disable=not progress,
               dynamic_ncols=True, mininterval=2.0)
    stopped = "finished"
    stop = _GracefulStop()
    try:
        while step < cfg.total_steps:
            if stop.requested:
                stopped = "interrupted"
                break
            batch = next(loader)
            state, m = train_step(state, {k: batch[k] for k in batch_keys})
            step += 1
            bar.update(1)
            window["loss"] += float(m["loss"])
            window["accuracy"] += float(m["accuracy"])
            window["n"] += 1
            if step % cfg.log_every == 0 or step == cfg.total_steps:
                dt = time.time() - window["t"]
                n = window["n"]
                last = {"step": step, "loss": window["loss"] / n, "accuracy": window["accuracy"] / n,
                        "lr": float(schedule(step)), "positions_per_s": n * cfg.batch_size / max(dt, 1e-9),
                        "positions_seen": step * cfg.batch_size}
                ckpt.append_jsonl(workdir / "metrics.jsonl", last)
                bar.set_postfix(loss=f"{last['loss']:.3f}", acc=f"{last['accuracy']:.3f}")
                window = {"loss": 0.0, "accuracy": 0.0, "n": 0, "t": time.time()}
            if step % cfg.eval_every == 0:
                last = {**last, **run_eval()}
            if step % cfg.checkpoint_every == 0:
                meta["seconds"] = seconds0 + time.time() - start
                save(mgr)
            if cfg.max_minutes and time.time() - start > 60 * cfg.max_minutes:
                stopped = "time limit"
                break
    except KeyboardInterrupt:  # a second Ctrl-C; the state may be mid-step
        stopped = "interrupted"
    finally:
        stop.restore()
        bar.close()
        meta["seconds"] = seconds0 + time.time() - start
        if mgr.latest_step() != step:
            save(mgr)
    if stopped != "interrupted" and (not ckpt.read_jsonl(workdir / "metrics.jsonl")
                                     or step % cfg.eval_every != 0):
        last = {**last, **run_eval()}
    print(f"{stopped} at step {step}; checkpoint in {workdir / 'ckpt'}", flush=True)
    return {**last, "step": step, "stopped": stopped, "seconds": meta["seconds"]}


def evaluate_checkpoint(checkpoint: str, sources: list[str], *, max_games: int = 0, split: str = "test",
                        batch_size: int = 256, plot_dir: str | None = None) -> dict:
    """The `alphalite eval-policy` metrics for a checkpoint on SGF sources or
    a built dataset folder (its ``split``)."""
    import tempfile

    from alphalite import dataset, metrics, nets

    info, variables = ckpt.load_variables(checkpoint)
    size, preset = int(info["board_size"]), info["preset"]
    from alphalite import features

    model = nets.make_model(info["model"], size, features.num_planes(preset))
    predict = make_predict(model, masked=True)
    with tempfile.TemporaryDirectory(prefix="alphalite-eval-") as tmp:
        data_dir, use_split = dataset.resolve_eval_source(sources, tmp, split=split, board_size=size,
                                                          max_games=max_games)
        batches = dataset.iterate_eval(data_dir, split=use_split, batch_size=batch_size, preset=preset,
                                       board_size=size, max_games=max_games)
        res = evaluate(predict, variables, batches, size * size + 1)
    res = {"checkpoint": str(checkpoint), "model": info["model"], "board_size": size, "preset": preset,
           "split": use_split, **res}
    if plot_dir:
        metrics.plot_topk(res["topk_curve"], Path(plot_dir) / "topk.png",
                          f"{info['model']} top-k accuracy ({res['positions']} positions)")
        metrics.plot_by_move_number(res["by_move_number"], Path(plot_dir) / "by_move_number.png")
        res["plots"] = [str(Path(plot_dir) / "topk.png"), str(Path(plot_dir) / "by_move_number.png")]
    return res
