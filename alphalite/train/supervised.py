"""Supervised policy training: pure train/eval steps and the SL loop.

``task="value"`` runs the same loop for a value net (``*_value`` model):
MSE against the game outcome of the mover, games without a winner skipped,
``per_game`` positions per game each epoch (steps in alphalite.train.value);
a ``*_aux_value`` model also learns final ownership and score (KataGo's
loss, ``alphalite.train.value``) where the data has those targets.

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

import numpy as np

from alphalite.nn import checkpoint as ckpt
from alphalite.runtime import config as config_lib
from alphalite.runtime import files
from alphalite.runtime.config import field
from alphalite.train import metrics
from alphalite.train.loop import (GRAD_CLIP, LEGACY_VALUES, GracefulStop, TrainingDiverged, apply_update,
                                  commit, create_state, prefetch, variables_of, with_clipping)


@dataclasses.dataclass(frozen=True)
class SLConfig:
    data: str = field("data/tygem", "dataset folder made by `alphalite data build`")
    model: str = field("b6c64", "network: thesis, clark, clark_tied or a ResNet preset (b6c64, ...)")
    preset: str = field("default", "input feature planes (see alphalite.nn.features.PRESETS)")
    board_size: int = field(19, "board size of the games used")
    batch_size: int = field(128, "positions per step")
    optimizer: str = field("sgd", "optax optimizer", ("sgd", "adam", "adamw", "adagrad", "adadelta"))
    learning_rate: float = field(0.05, "peak learning rate")
    momentum: float = field(0.9, "SGD momentum (0 = plain SGD, as Clark & Storkey)")
    weight_decay: float = field(1e-4, "L2 weight decay (decoupled for adamw)")
    grad_clip: float = field(GRAD_CLIP, "clip each step's gradient to this global norm before the optimizer "
                             "(0 = off): a guard against the rare huge gradient, far above the usual norm")
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
    eval_positions: int = field(4096, "validation positions per evaluation (0 = the whole validation split)")
    checkpoint_every: int = field(500, "steps between checkpoints")
    log_every: int = field(50, "steps between metrics.jsonl lines")
    seed: int = field(0, "seed for init and data order")
    loader_threads: int = field(1, "threads that encode each training batch (the same batches; more only "
                                "where a GPU outruns one core)")
    precision: str = field("float32", "the net's computation dtype in training (its parameters stay float32): "
                           "bfloat16 for a GPU's matrix units", ("float32", "bfloat16"))
    task: str = field("policy", "policy: predict expert moves; value: predict the winner (MSE, "
                      "a *_value model such as b4c32_value); pv: both on one trunk, each position's move and "
                      "its game's outcome (a *_pv model; *_aux_pv adds ownership and score)", ("policy", "value", "pv"))
    value_weight: float = field(1.0, "pv task: weight of the value loss (and of the ownership and score "
                                "terms) beside the policy's cross-entropy")
    per_game: int = field(0, "value and pv tasks: positions drawn per game each epoch (0 = all; AlphaGo: 1)")
    marked_only: bool = field(False, "value task: only the marked position of each game "
                              "(value self-play data: after the random move)")
    init_trunk: str = field("", "checkpoint whose ResNet trunk (same blocks, channels, preset) "
                            "initialises a new run, e.g. the SL policy for a value net")
    init: str = field("", "checkpoint of the same model and preset whose every weight initialises a new "
                      "run (fine-tuning a net on other games), or a net the model extends: for a *_aux_value "
                      "net its *_value net, for a bNcM_pv or bNcM_aux_pv net the bNcM policy net or a bNcM "
                      "value net; the parts it lacks start fresh")
    heads_only: bool = field(False, "aux value task: train only the ownership and score heads, on the games "
                             "with those targets; the trunk and winner head stay as --init gave them")

    def __post_init__(self):
        finite = config_lib.finite
        config_lib.require(self, (
            ("board_size", 2 <= self.board_size <= 25, "in 2..25"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("learning_rate", finite(self.learning_rate) and self.learning_rate > 0, "> 0"),
            ("momentum", finite(self.momentum) and 0 <= self.momentum < 1, "in [0, 1)"),
            ("weight_decay", finite(self.weight_decay) and self.weight_decay >= 0, ">= 0"),
            ("grad_clip", finite(self.grad_clip) and self.grad_clip >= 0, ">= 0 (0: off)"),
            ("warmup_steps", self.warmup_steps >= 0, ">= 0"),
            ("total_steps", self.total_steps >= 1, ">= 1"),
            ("max_minutes", finite(self.max_minutes) and self.max_minutes >= 0, ">= 0 (0: no limit)"),
            ("eval_every", self.eval_every >= 1, ">= 1"),
            ("eval_positions", self.eval_positions >= 0, ">= 0 (0: the whole validation split)"),
            ("checkpoint_every", self.checkpoint_every >= 1, ">= 1"),
            ("log_every", self.log_every >= 1, ">= 1"),
            ("loader_threads", self.loader_threads >= 1, ">= 1"),
            ("value_weight", finite(self.value_weight) and self.value_weight >= 0, ">= 0"),
            ("per_game", self.per_game >= 0, ">= 0 (0: every position)")))


# Fields a resumed run may change; everything else must match config.json.
RESUMABLE_OVERRIDES = ("total_steps", "max_minutes", "eval_every", "eval_positions",
                       "checkpoint_every", "log_every", "data", "loader_threads")
# in-training validation scores the masked policy (illegal points out), whatever --masked
VALIDATION = "masked"


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
    tx = with_clipping(tx, cfg.grad_clip)
    if cfg.heads_only:  # the other weights stay exactly as initialised (no update, no weight decay)
        from alphalite.nn.nets import ResNetValueAux

        labels = lambda params: {k: "train" if k in ResNetValueAux.AUX_HEADS else "fixed" for k in params}  # noqa: E731
        tx = optax.multi_transform({"train": tx, "fixed": optax.set_to_zero()}, labels)
    return tx, schedule


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
        state, m = apply_update(state, grads, updates, loss)
        acc = (jnp.argmax(jnp.where(batch["legal"], logp, -jnp.inf), axis=-1) == batch["moves"]).mean()
        return state, {**m, "accuracy": acc}

    return jax.jit(train_step, donate_argnums=0)


def make_pv_train_step(masked: bool, value_weight: float, aux: bool):
    """jitted ``(state, batch) -> (state, metrics)`` for a policy-value net
    (``*_pv``; ``aux``: ``*_aux_pv``) on expert games: the move's
    cross-entropy plus ``value_weight`` times the value net's loss on the
    game's outcome (MSE, or with ``aux`` KataGo's winner, ownership and score
    terms, ``train.value.aux_loss``), KataGo's way of training both heads on
    one trunk. ``accuracy`` is the policy's top-1, ``value_accuracy`` the
    winner's sign. Batch keys: planes, moves, legal, outcomes (+ to_play,
    ownership, score with ``aux``); state donated."""
    import jax
    import jax.numpy as jnp

    from alphalite.train import value as value_lib

    def train_step(state, batch):
        def loss_fn(params):
            variables = {"params": params, "batch_stats": state.batch_stats}
            (logits, out), updates = state.apply_fn(variables, batch["planes"], train=True, aux=aux,
                                                    mutable=["batch_stats"])
            logp = _log_probs(logits, batch["legal"], masked)
            pol = -jnp.take_along_axis(logp, batch["moves"][:, None], axis=1)[:, 0].mean()
            if aux:
                val, parts = value_lib.aux_loss(out, batch)
                v = out["value"]
            else:
                v = out
                val = jnp.mean((v - batch["outcomes"]) ** 2)
                parts = {"value_loss": val}
            return pol + value_weight * val, (logp, v, {**parts, "policy_loss": pol}, updates)

        (loss, (logp, v, parts, updates)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state, m = apply_update(state, grads, updates, loss)
        acc = (jnp.argmax(jnp.where(batch["legal"], logp, -jnp.inf), axis=-1) == batch["moves"]).mean()
        return state, {**m, **parts, "accuracy": acc,
                       "value_accuracy": jnp.mean((v > 0) == (batch["outcomes"] > 0))}

    return jax.jit(train_step, donate_argnums=0)


def make_predict(model, masked: bool = True):
    """jitted (variables, planes, legal) -> masked log-probabilities [B, A]."""
    import jax

    from alphalite.nn import nets

    pv = isinstance(model, nets.ResNetPolicyValue)

    def predict(variables, planes, legal):
        logits = model.apply(variables, planes, train=False)
        return _log_probs(logits[0] if pv else logits, legal, masked)

    return jax.jit(predict)


def symmetric_predict(predict, symmetries: int):
    """``predict`` averaged over the first ``symmetries`` of the 8 board
    symmetries (the identity first), as the policy engine averages its
    priors (``players.PolicyNet.evaluate``): each image's probabilities
    mapped back to the board and averaged; returns their log."""
    from alphalite.nn import features

    k = features.check_symmetries(symmetries)
    if k == 1:
        return predict

    def averaged(variables, planes, legal):
        xs, ls = features.symmetry_images(planes, legal, k)  # [k, B, ...]: one call for all images
        p = np.exp(np.asarray(predict(variables, xs.reshape(-1, *xs.shape[2:]), ls.reshape(-1, ls.shape[-1]))))
        p = features.mean_of_images(p.reshape(ls.shape), k)
        return np.log(np.maximum(p, np.finfo(np.float32).tiny))

    return averaged


def evaluate(predict, variables, batches, num_actions: int, max_positions: int = 0) -> dict:
    stats = metrics.MovePredictionStats(num_actions)
    seen = 0
    for batch in batches:
        logp = np.asarray(predict(variables, batch["planes"], batch["legal"]))
        stats.update(logp, batch["moves"], batch["move_number"], batch["moves_left"], batch["legal"])
        seen += len(batch["moves"])
        if max_positions and seen >= max_positions:
            break
    return stats.result()


def _check_resume(cfg: SLConfig, workdir: Path) -> int:
    """Refuses a resume whose config differs outside RESUMABLE_OVERRIDES;
    returns the saved run's total_steps."""
    saved = json.loads((workdir / "config.json").read_text())
    saved = saved.get("sl", saved)
    diff = config_lib.changed_fields(cfg, saved, keep=RESUMABLE_OVERRIDES,
                                     legacy=LEGACY_VALUES)
    if diff:
        raise ValueError(f"{workdir} holds a run with a different config ({', '.join(diff)}); "
                         "use another --workdir or the same settings")
    return int(saved.get("total_steps", cfg.total_steps))


def _validation_of(meta: dict, masked: bool) -> str:
    """How the policy behind ``meta``'s best was validated: its mark; a run
    saved before the mark validated the policy it trained (``--masked``)."""
    return meta.get("validation", "masked" if masked else "unmasked")


def _schedule_note(cfg: SLConfig, schedule, old_total: int, step: int) -> str:
    """The line a resume prints when a new --total-steps reshapes the run's
    learning-rate schedule (it is a function of total_steps), "" if not."""
    if old_total == cfg.total_steps or cfg.schedule == "constant" or step >= cfg.total_steps:
        return ""
    old_cfg = dataclasses.replace(cfg, total_steps=old_total)
    before = float(make_optimizer(old_cfg)[1](max(step - 1, 0)))
    after = float(schedule(step))
    return (f"--total-steps {old_total} -> {cfg.total_steps}: the {cfg.schedule} schedule now spans "
            f"{cfg.total_steps} steps; the learning rate at step {step} goes from {before:.3g} to {after:.3g}")


def _start_afresh(workdir: Path) -> None:
    """A folder with a config.json but no checkpoint holds an attempt that
    saved nothing (it stopped before its first checkpoint): its config does
    not bind the new start, and its metrics move aside so that the curves
    show one run."""
    if not (workdir / "config.json").exists():
        return
    note = ""
    if (workdir / "metrics.jsonl").exists():
        (workdir / "metrics.jsonl").replace(workdir / "metrics.jsonl.old")
        note = " (its metrics moved to metrics.jsonl.old)"
    print(f"{workdir} held an earlier start but no checkpoint: starting afresh{note}", flush=True)


def init_trunk_from(state, checkpoint: str, preset: str):
    """``state`` with its ``trunk`` params and batch stats taken from another
    model's checkpoint (a policy net with the same blocks, channels and
    input preset); the head stays freshly initialised."""
    import jax

    info, variables = ckpt.load_variables(checkpoint)
    if info.get("preset") != preset:
        raise ValueError(f"--init-trunk {checkpoint} uses preset {info.get('preset')!r}, this run {preset!r}")
    src = variables["params"].get("trunk")
    dst = state.params.get("trunk")
    if src is None or dst is None or jax.tree_util.tree_structure(src) != jax.tree_util.tree_structure(dst) \
            or any(a.shape != b.shape for a, b in zip(jax.tree_util.tree_leaves(src), jax.tree_util.tree_leaves(dst))):
        raise ValueError(f"--init-trunk {checkpoint} ({info.get('model')}) has no trunk shaped like this net's")
    params = {**state.params, "trunk": jax.tree_util.tree_map(np.asarray, src)}
    stats = dict(state.batch_stats)
    if "trunk" in stats and "trunk" in variables.get("batch_stats", {}):
        stats["trunk"] = variables["batch_stats"]["trunk"]
    return commit(state.replace(params=params, batch_stats=stats, opt_state=state.tx.init(params)))


# A net that holds some of another's parts under the same names: suffix of
# the run's model -> suffixes of the nets it may start from (same bNcM).
EXTENDS = {"_aux_value": ("_value",), "_aux_pv": ("", "_pv", "_value", "_aux_value"), "_pv": ("", "_value")}


def extends(model: str, base: str) -> bool:
    """Whether ``model`` extends ``base`` (``EXTENDS``): a ``bNcM_aux_value``
    net its ``bNcM_value`` net; a ``bNcM_pv`` net the ``bNcM`` policy net or
    the ``bNcM_value`` net (trunk and winner head), a ``bNcM_aux_pv`` net
    those, the ``bNcM_pv`` net and the ``bNcM_aux_value`` net."""
    for suffix, bases in EXTENDS.items():
        if model.endswith(suffix):
            return any(base == model[: -len(suffix)] + b for b in bases)
    return False


def init_from(state, checkpoint: str, info: dict):
    """``state`` with every weight and batch statistic of ``checkpoint``, a
    net of the same model, board size and preset (fine-tuning), or a net
    the run's model extends (``extends``: its parts by name; the heads it
    lacks stay fresh); a fresh optimizer state."""
    import jax

    src_info, variables = ckpt.load_variables(checkpoint)
    theirs = {k: src_info.get(k) for k in ("model", "board_size", "preset")}
    ours = {k: info[k] for k in theirs}
    part = extends(str(ours["model"]), str(theirs["model"]))
    if theirs != ours and not (part and theirs["board_size"] == ours["board_size"]
                               and theirs["preset"] == ours["preset"]):
        raise ValueError(f"--init {checkpoint} is {theirs}, this run {ours}: the same model, size and preset needed "
                         "(or a net this model extends)")
    params = jax.tree_util.tree_map(np.asarray, variables["params"])
    stats = variables.get("batch_stats", {})
    if part:  # the smaller net's parts, by name; the heads it lacks keep their fresh weights
        params = {**state.params, **params}
        stats = {**state.batch_stats, **stats}
    shapes = lambda tree: jax.tree_util.tree_map(np.shape, tree)  # noqa: E731
    if shapes(params) != shapes(state.params) or shapes(stats) != shapes(state.batch_stats):
        raise ValueError(f"--init {checkpoint}: its weights do not fit {info['model']}")
    return commit(state.replace(params=params, batch_stats=stats, opt_state=state.tx.init(params)))


def train_and_evaluate(cfg: SLConfig, workdir: str | Path, *, progress: bool = True) -> dict:
    """Train (or resume) the run in ``workdir``; returns the last metrics.

    Everything that can refuse the run (model, data, a different config in
    the folder) does so before anything is written. A step with a non-finite
    loss, gradient or parameters raises TrainingDiverged; the checkpoints
    saved before it are kept and nothing of it is saved."""
    import jax
    import jax.numpy as jnp
    from tqdm import tqdm

    # Numba (dataset, features) and JAX (nets) load here, not at import: the
    # CLI's parser imports SLConfig from this module (`alphalite --help`).
    from alphalite.data import dataset
    from alphalite.nn import features, nets

    workdir = Path(workdir)
    size = cfg.board_size
    num_actions = size * size + 1
    planes = features.num_planes(cfg.preset)
    is_value, is_pv = cfg.task == "value", cfg.task == "pv"
    if is_value != cfg.model.endswith("_value") or is_pv != cfg.model.endswith("_pv"):
        raise ValueError(f"task {cfg.task} cannot train model {cfg.model!r}: value nets end in _value, "
                         "policy-value nets in _pv")
    if cfg.init and cfg.init_trunk:
        raise ValueError("--init and --init-trunk both initialise the trunk: give one")
    if cfg.winner_only and (is_value or is_pv):
        raise ValueError("--winner-only keeps only positions whose mover won: the value would learn a constant")
    if cfg.heads_only and not (cfg.model.endswith("_aux_value") and cfg.init):
        raise ValueError("--heads-only trains the ownership and score heads of a *_aux_value model on a net "
                         "given by --init (a *_value net or an aux net)")
    info = {"model": cfg.model, "board_size": size, "preset": cfg.preset,
            "kind": "policy_value" if is_pv else cfg.task}

    opts = {"dtype": jnp.bfloat16} if cfg.precision == "bfloat16" else {}
    model = nets.make_model(cfg.model, size, planes, **opts, **({"heads_only": True} if cfg.heads_only else {}))
    tx, schedule = make_optimizer(cfg)
    rng = jax.random.PRNGKey(cfg.seed)
    state = create_state(model, tx, rng)
    aux = nets.has_ownership(model)
    if is_value or is_pv:
        from alphalite.train import value as value_lib

        predict = value_lib.make_predict_any(model)
        value_keys = value_lib.AUX_BATCH_KEYS if aux else ("planes", "outcomes")
        select = value_lib.position_filter(cfg.marked_only, counted_only=cfg.heads_only)
        val_select = value_lib.position_filter(cfg.marked_only, validation=True, counted_only=cfg.heads_only)
    if is_pv:
        train_step = make_pv_train_step(cfg.masked, cfg.value_weight, aux)
        # validation scores the masked policy whatever the training loss (as eval-policy and the engine do)
        predict_moves, batch_keys = make_predict(model), ("moves", "legal") + value_keys
    elif is_value:
        train_step = value_lib.make_aux_train_step() if aux else value_lib.make_train_step()
        batch_keys = value_keys
    else:
        train_step, predict = make_train_step(cfg.masked), make_predict(model)
        batch_keys, select, val_select = ("planes", "moves", "legal"), {}, {}
    train_games = dataset.load_games(cfg.data, "train", size)
    train_opts = dict(winner_only=cfg.winner_only, include_passes=cfg.include_passes, board_size=size,
                      per_game=cfg.per_game, **select)
    dataset.iterate_batches(train_games, batch_size=cfg.batch_size, preset=cfg.preset, **train_opts)  # checks
    if not dataset.count_positions(cfg.data, split="val", board_size=size, **val_select):
        raise dataset.DatasetError(f"{cfg.data} has no validation positions of size {size} for this task "
                                   "(split 'val'); rebuild it with --val-frac > 0")

    if ckpt.latest_step(workdir / "ckpt") is None:
        # A new run: a net it starts from is read (and refused) before anything is written.
        if cfg.init_trunk:
            state = init_trunk_from(state, cfg.init_trunk, cfg.preset)
        if cfg.init:
            state = init_from(state, cfg.init, info)
    workdir.mkdir(parents=True, exist_ok=True)
    mgr = ckpt.manager(workdir / "ckpt", max_to_keep=3)
    best_mgr = ckpt.manager(workdir / "best", max_to_keep=1)
    old_total = cfg.total_steps
    if mgr.latest_step() is not None and (workdir / "config.json").exists():
        old_total = _check_resume(cfg, workdir)
    # the best net: by validation MSE, top-1, (the winner fixed) ownership accuracy, or for a
    # policy-value net both its losses as it trains them (either head may have started fresh)
    best_key = ("best_val_ownership" if cfg.heads_only else "best_val_neg_pv_loss" if is_pv
                else "best_val_neg_mse" if is_value else "best_val_top1")
    no_best = -1e9 if is_value or is_pv else -1.0
    # how the policy in the best's score was validated, saved with it: a resume compares like with like
    scored = None if is_value or cfg.heads_only else VALIDATION
    meta = {"step": 0, best_key: no_best, "seconds": 0.0, **({"validation": scored} if scored else {})}
    restored = ckpt.restore(mgr, state)
    if restored is not None:
        state, meta = restored
        meta.setdefault(best_key, -1e9)  # a pv run saved before its key changed: its next evaluation sets it
        print(f"resumed {workdir} at step {meta['step']}", flush=True)
        # the last checkpoint is saved before the run's last evaluation, which may have set a new best;
        # a best validated another way (an older run's unmasked policy) is not compared with this one's
        stored = [m for m in (meta, ckpt.restore_meta(best_mgr)) if m is not None and m.get(best_key) is not None]
        alike = [m for m in stored if scored is None or _validation_of(m, cfg.masked) == scored]
        unlike = [m for m in stored if m not in alike and m[best_key] > no_best]
        if unlike:
            print(f"the stored best ({best_key} {max(m[best_key] for m in unlike):.4g}) was validated on the "
                  f"{_validation_of(unlike[0], cfg.masked)} policy, not the {scored} one: the next validation "
                  "replaces it", flush=True)
        meta[best_key] = max([m[best_key] for m in alike], default=no_best)
        if scored is not None:
            meta["validation"] = scored
        note = _schedule_note(cfg, schedule, old_total, int(meta["step"]))
        if note:
            print(note, flush=True)
    else:
        _start_afresh(workdir)
    files.write_json_atomic(workdir / "config.json", {**config_lib.to_dict(cfg), **info})
    step = int(meta["step"])
    loader = prefetch(dataset.iterate_batches(train_games, batch_size=cfg.batch_size, preset=cfg.preset,
                                              seed=cfg.seed, symmetries=cfg.symmetries, start_batch=step,
                                              threads=cfg.loader_threads, **train_opts))

    def val_batches():
        return dataset.iterate_eval(cfg.data, split="val", batch_size=256, preset=cfg.preset,
                                    board_size=size, **val_select)

    def save(kind_mgr):
        meta.update(step=step)
        if step in kind_mgr.all_steps():  # a finished run rerun: this very state is saved already
            return
        ckpt.save(kind_mgr, step, state, dict(meta))

    def run_eval():
        if is_value or is_pv:
            res = value_lib.evaluate(predict, variables_of(state), val_batches(), cfg.eval_positions, aux=aux)
            rec = {"step": step, "val_mse": res["mse"], "val_accuracy": res["accuracy"],
                   "val_positions": res["positions"]}
            if aux:
                rec.update(val_ownership_accuracy=float(res["ownership_accuracy"]),
                           val_score_mae=float(res["score_mae"]), val_aux_positions=res["aux_positions"])
            score, curves = -res["mse"], (["loss", "val_mse"], ["accuracy", "val_accuracy"])
            if cfg.heads_only:
                score, curves = res["ownership_accuracy"], (["ownership_loss"], ["val_ownership_accuracy"])
            if is_pv:
                pol = evaluate(predict_moves, variables_of(state), val_batches(), num_actions, cfg.eval_positions)
                rec.update(val_top1=pol["top1"], val_top5=pol["top5"], val_nll=pol["nll"])
                score = -(pol["nll"] + cfg.value_weight * res["mse"])
                curves = (["policy_loss", "value_loss", "val_mse", "val_nll"],
                          ["accuracy", "value_accuracy", "val_accuracy", "val_top1"])
        else:
            res = evaluate(predict, variables_of(state), val_batches(), num_actions, cfg.eval_positions)
            rec = {"step": step, "val_top1": res["top1"], "val_top5": res["top5"], "val_nll": res["nll"],
                   "val_mean_rank": res["mean_rank"], "val_positions": res["positions"]}
            score, curves = res["top1"], (["loss", "val_nll"], ["accuracy", "val_top1", "val_top5"])
        files.append_jsonl(workdir / "metrics.jsonl", rec)
        if score > meta[best_key]:
            meta[best_key] = score
            save(best_mgr)
        records = files.read_jsonl(workdir / "metrics.jsonl")
        metrics.plot_curves(records, workdir / "plots" / "loss.png", curves[0], "loss")
        metrics.plot_curves(records, workdir / "plots" / "accuracy.png", curves[1], "accuracy")
        return rec

    start = time.time()
    seconds0 = float(meta.get("seconds", 0.0))
    sums = ("loss", "accuracy", "grad_norm") + (("value_loss", "ownership_loss", "score_mae", "known") if aux else ()) \
        + (("policy_loss", "value_accuracy") + (() if aux else ("value_loss",)) if is_pv else ())
    window = {**dict.fromkeys(sums, 0.0), "n": 0, "t": time.time()}
    last = {}
    bar = tqdm(total=cfg.total_steps, initial=step, desc="sl", unit="step", disable=not progress,
               dynamic_ncols=True, mininterval=2.0)
    stopped = "finished"
    diverged = ""
    stop = GracefulStop()
    pending = []  # metrics still on the device: reading them every step would wait for each step

    def drain():
        """Read the pending steps' metrics; the message of the first non-finite one, else ""."""
        nonlocal window
        first_step = step - len(pending) + 1
        for i, dev in enumerate(pending):
            m = {k: float(dev[k]) for k in (*sums, "finite")}
            if not m["finite"]:
                pending.clear()
                return (f"step {first_step + i} gave a non-finite loss, gradient or parameters "
                        f"(loss {m['loss']:.4g}, gradient norm {m['grad_norm']:.4g})")
            for k in sums:
                window[k] += m[k]
            window["n"] += 1
        pending.clear()
        return ""

    try:
        while step < cfg.total_steps:
            if stop.requested:
                stopped = "interrupted"
                break
            batch = next(loader)
            state, m = train_step(state, {k: batch[k] for k in batch_keys})
            step += 1
            pending.append(m)
            bar.update(1)
            out_of_time = cfg.max_minutes and time.time() - start > 60 * cfg.max_minutes
            if not (step % cfg.log_every == 0 or step % cfg.eval_every == 0 or step % cfg.checkpoint_every == 0
                    or step == cfg.total_steps or out_of_time or stop.requested):
                continue
            diverged = drain()
            if diverged:
                break
            if step % cfg.log_every == 0 or step == cfg.total_steps:
                dt = time.time() - window["t"]
                n = window["n"]  # >= 1: this step's metrics were just read
                # lr: the rate this step used (optax counts from 0)
                last = {"step": step, **{k: window[k] / n for k in sums}, "lr": float(schedule(step - 1)),
                        "positions_per_s": n * cfg.batch_size / max(dt, 1e-9),
                        "positions_seen": step * cfg.batch_size}
                files.append_jsonl(workdir / "metrics.jsonl", last)
                bar.set_postfix(loss=f"{last['loss']:.3f}", acc=f"{last['accuracy']:.3f}")
                window = {**dict.fromkeys(sums, 0.0), "n": 0, "t": time.time()}
            if step % cfg.eval_every == 0:
                last = {**last, **run_eval()}
            if step % cfg.checkpoint_every == 0:
                meta["seconds"] = seconds0 + time.time() - start
                save(mgr)
            if out_of_time:
                stopped = "time limit"
                break
    except KeyboardInterrupt:  # a second Ctrl-C; the state may be mid-step
        stopped = "interrupted"
    finally:
        stop.restore()
        bar.close()
        if not diverged and pending:  # a stop between read-outs: the last steps are checked before saving
            diverged = drain()
        meta["seconds"] = seconds0 + time.time() - start
        if not diverged and mgr.latest_step() != step:
            save(mgr)
    if diverged:
        good = mgr.latest_step()
        kept = (f"the last good checkpoint, step {good}, is kept in {workdir / 'ckpt'}; start again in "
                "another --workdir" if good is not None else "no checkpoint was saved; start again")
        raise TrainingDiverged(f"training diverged: {diverged}; {kept} with a lower --learning-rate or "
                               f"--grad-clip (now {cfg.grad_clip:g})")
    if stopped != "interrupted" and (not files.read_jsonl(workdir / "metrics.jsonl")
                                     or step % cfg.eval_every != 0):
        last = {**last, **run_eval()}
    print(f"{stopped} at step {step}; checkpoint in {workdir / 'ckpt'}", flush=True)
    return {**last, "step": step, "stopped": stopped, "seconds": meta["seconds"]}


def _evaluate_patterns(checkpoint, model_dir, sources, *, max_games: int, split: str) -> dict:
    # A pattern softmax policy needs each game's previous moves and captures,
    # so it replays whole games (train.patterns) rather than encoded batches.
    import tempfile

    from alphalite.data import dataset
    from alphalite.train import patterns

    info = ckpt.read_model_info(model_dir)
    size = int(info["board_size"])
    with tempfile.TemporaryDirectory(prefix="alphalite-eval-") as tmp:
        data_dir, use_split = dataset.resolve_eval_source(sources, tmp, split=split, board_size=size,
                                                          max_games=max_games)
        res = patterns.evaluate(model_dir, info, data_dir, use_split, max_games=max_games)
    if not res["positions"]:
        raise dataset.DatasetError(f"nothing to evaluate: split {use_split!r} of {data_dir} holds no "
                                   f"position of size {size}")
    return {"checkpoint": str(checkpoint), **res}


def evaluate_checkpoint(checkpoint: str, sources: list[str], *, max_games: int = 0, split: str = "test",
                        batch_size: int = 256, plot_dir: str | None = None, symmetries: int = 1) -> dict:
    """The `alphalite eval-policy` metrics for a checkpoint on SGF sources or
    a built dataset folder (its ``split``); ``symmetries`` > 1 scores the
    net's probabilities averaged over that many board symmetries."""
    import tempfile

    from alphalite.data import dataset

    model_dir = ckpt.find_model_dir(checkpoint)
    if (model_dir / "model.json").exists() and ckpt.read_model_info(model_dir)["model"] == "patterns":
        if symmetries != 1:
            raise ValueError(f"{checkpoint} is a pattern policy: symmetries are averaged for networks only")
        return _evaluate_patterns(checkpoint, model_dir, sources, max_games=max_games, split=split)
    info, model, variables = ckpt.load_model(checkpoint, ("policy", "policy_value"))
    size, preset = int(info["board_size"]), info.get("preset", "default")
    predict = symmetric_predict(make_predict(model, masked=True), symmetries)
    with tempfile.TemporaryDirectory(prefix="alphalite-eval-") as tmp:
        data_dir, use_split = dataset.resolve_eval_source(sources, tmp, split=split, board_size=size,
                                                          max_games=max_games)
        batches = dataset.iterate_eval(data_dir, split=use_split, batch_size=batch_size, preset=preset,
                                       board_size=size, max_games=max_games)
        res = evaluate(predict, variables, batches, size * size + 1)
        if not res["positions"]:
            raise dataset.DatasetError(f"nothing to evaluate: split {use_split!r} of {data_dir} holds no "
                                       f"position of size {size}")
    res = {"checkpoint": str(checkpoint), "model": info["model"], "board_size": size, "preset": preset,
           "split": use_split, "symmetries": int(symmetries), **res}
    if plot_dir:
        metrics.plot_topk(res["topk_curve"], Path(plot_dir) / "topk.png",
                          f"{info['model']} top-k accuracy ({res['positions']} positions)")
        metrics.plot_by_move_number(res["by_move_number"], Path(plot_dir) / "by_move_number.png")
        res["plots"] = [str(Path(plot_dir) / "topk.png"), str(Path(plot_dir) / "by_move_number.png")]
    return res
