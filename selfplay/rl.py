"""Policy-gradient self-play: AlphaGo's RL stage.

``train_rl(config, workdir)`` starts from a supervised policy (an exported
model folder such as ``checkpoints/policy19``, or an SL run folder). Each
iteration:

1. an opponent is drawn uniformly from the pool (the SL policy, then a
   snapshot of the learner every ``pool_every`` iterations);
2. the learner plays ``games_per_iteration`` games against it, half as
   Black, in one batch (``selfplay.games.play_policy_games``), both sides
   sampling from their policies at ``temperature``;
3. REINFORCE on the learner's moves only: loss ``-mean_t A_g * log
   pi(a_t | s_t)`` over the learner's positions (or ``train_positions`` of
   them drawn at random: the same gradient in expectation), one optimizer
   step per iteration. ``A_g = z_g - b``: ``z_g`` = +1 win / -1 loss of the
   game for the learner, baseline ``b`` (``baseline``): ``colour`` = the
   learner's mean outcome in this batch with the same colour (takes out the
   komi bias of a colour), ``mean`` = its mean outcome over the batch,
   ``none`` = 0. Batch norm stays in inference mode (running statistics of
   the SL net), so the gradient is that of the very policy that played.

Every ``eval_every`` iterations the learner plays ``eval_games`` games
against the SL start (half with each colour, both sampling at
``eval_temperature``; the random numbers are the same at every evaluation,
so the curve compares like with like). The win rate goes to metrics.jsonl
and ``plots/winrate.png``; the best policy so far is exported to
``best_model/`` with ``winrate.json``.

The SL start is copied to ``pool/sl`` when the run begins; evaluations and
a resumed run use that copy, so replacing the ``init`` folder later changes
nothing. Run folder: config.json, metrics.jsonl (``kind`` "train" or "eval",
``step`` = iteration), ``ckpt/`` (Orbax: params, optimizer state, meta with
the iteration and the pool), ``pool/<name>/`` (exported snapshots),
``games/`` (the RL games as npz records + SGF, if ``keep_games``),
``best_model/``, ``plots/``. A rerun after ``kill -9`` resumes from the last
finished iteration with the same pool (metrics past it are dropped);
Ctrl-C (or SIGTERM) abandons the iteration in progress and exits,
everything finished being already saved.
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
from alphalite.train import loop, metrics
from alphalite.train.loop import GRAD_CLIP, LEGACY_VALUES, with_clipping


@dataclasses.dataclass(frozen=True)
class RLConfig:
    init: str = field("checkpoints/policy19", "SL policy to start from: exported model folder or SL run folder")
    iterations: int = field(100, "policy-gradient iterations (one optimizer step each)")
    games_per_iteration: int = field(32, "games per iteration, half with the learner as Black (even)")
    optimizer: str = field("adam", "optax optimizer", ("adam", "sgd"))
    learning_rate: float = field(1e-4, "step size")
    momentum: float = field(0.0, "SGD momentum")
    grad_clip: float = field(GRAD_CLIP, "clip each update's gradient to this global norm (0 = off), "
                             "as SL training does")
    baseline: str = field("colour", "REINFORCE baseline: the learner's mean outcome in the batch with the "
                          "same colour, over the whole batch, or none", ("colour", "mean", "none"))
    temperature: float = field(1.0, "sampling temperature of both players in training games")
    train_positions: int = field(0, "learner positions per update, drawn at random (0 = all of them)")
    micro_batch: int = field(256, "positions per gradient pass (gradients are summed; memory only)")
    pool_every: int = field(5, "iterations between snapshots joining the opponent pool (K)")
    eval_every: int = field(5, "iterations between win-rate measurements against the SL start (M)")
    eval_games: int = field(64, "games per win-rate measurement (even; half as Black)")
    eval_temperature: float = field(1.0, "sampling temperature in evaluation games (0 = argmax)")
    komi: float = field(7.5, "komi of every game")
    max_moves: int = field(0, "move cap per game (0 = 3*size*size+20, board.default_max_moves); capped games are "
                              "scored as they stand")
    keep_games: bool = field(True, "write the training games as npz records + SGF under games/")
    max_minutes: float = field(0.0, "stop after this many minutes (0 = no limit)")
    seed: int = field(0, "seed of games and sampling")

    def __post_init__(self):
        finite = config_lib.finite
        config_lib.require(self, (
            ("iterations", self.iterations >= 1, ">= 1"),
            ("games_per_iteration", self.games_per_iteration >= 2 and self.games_per_iteration % 2 == 0,
             "even and >= 2"),
            ("games_per_iteration", self.baseline != "colour" or self.games_per_iteration >= 4,
             ">= 4 with --baseline colour (one game a colour leaves every advantage 0; or use --baseline mean)"),
            ("learning_rate", finite(self.learning_rate) and self.learning_rate > 0, "> 0"),
            ("momentum", finite(self.momentum) and 0 <= self.momentum < 1, "in [0, 1)"),
            ("grad_clip", finite(self.grad_clip) and self.grad_clip >= 0, ">= 0 (0: off)"),
            ("temperature", finite(self.temperature) and self.temperature > 0,
             "> 0 (training games sample their moves)"),
            ("train_positions", self.train_positions >= 0, ">= 0 (0: all of them)"),
            ("micro_batch", self.micro_batch >= 1, ">= 1"),
            ("pool_every", self.pool_every >= 1, ">= 1"),
            ("eval_every", self.eval_every >= 1, ">= 1"),
            ("eval_games", self.eval_games >= 0 and self.eval_games % 2 == 0, "even and >= 0"),
            ("eval_temperature", finite(self.eval_temperature) and self.eval_temperature >= 0, ">= 0 (0: argmax)"),
            ("komi", finite(self.komi), "a finite number"),
            ("max_moves", self.max_moves >= 0, ">= 0 (0: the board's default)"),
            ("max_minutes", finite(self.max_minutes) and self.max_minutes >= 0, ">= 0 (0: no limit)"),
            ("seed", self.seed >= 0, ">= 0")))


# Fields a resumed run may change; the rest must match config.json.
RESUMABLE_OVERRIDES = ("iterations", "max_minutes", "eval_every", "keep_games", "micro_batch",
                       "train_positions")


# ---------------------------------------------------------------- gradient


def advantages(outcome: np.ndarray, learner_black: np.ndarray, baseline: str) -> np.ndarray:
    """Per-game advantage ``z - b`` (float32 [G]); ``outcome`` +1/-1/0 for the learner."""
    z = np.asarray(outcome, np.float32)
    if baseline == "none":
        return z
    if baseline == "mean":
        return z - z.mean()
    out = np.empty_like(z)
    for side in (True, False):
        sel = learner_black == side
        if sel.any():
            out[sel] = z[sel] - z[sel].mean()
    return out


def make_grad_fn(model):
    """jitted (params, batch_stats, planes uint8 [B,H,W,C], mask [B,A], moves
    [B], weight [B], inv_temp) -> (grads of sum_i -weight_i * log pi(move_i),
    the loss, each row's entropy and log-prob [B]). Padding rows carry weight 0
    (so does a real position whose advantage is 0: the caller knows which are real)."""
    import jax
    import jax.numpy as jnp

    from alphalite.nn import nets

    def fn(params, batch_stats, planes, mask, moves, weight, inv_temp):
        def loss_fn(p):
            variables = {"params": p}
            if batch_stats:
                variables["batch_stats"] = batch_stats
            logits = model.apply(variables, planes.astype(jnp.float32), train=False)
            logp = nets.masked_log_softmax(logits * inv_temp, mask)
            lp = jnp.take_along_axis(logp, moves[:, None], axis=1)[:, 0]
            ent = -jnp.sum(jnp.where(mask, jnp.exp(logp) * jnp.where(mask, logp, 0.0), 0.0), axis=1)
            return -jnp.sum(weight * lp), (ent, lp)

        (loss, (ent, lp)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        return grads, loss, ent, lp

    return jax.jit(fn)


def policy_gradient(grad_fn, params, batch_stats, positions, weights: np.ndarray, inv_temp: float,
                    micro_batch: int):
    """Gradient of ``sum_i -weights_i * log pi(a_i | s_i)`` over ``positions``
    (a ``selfplay.games.Positions``), in padded micro-batches so one shape
    compiles. Returns (grads, stats dict of sums)."""
    import jax

    n = len(positions.moves)
    total = None
    ent = lp = 0.0
    B = micro_batch
    A = positions.mask.shape[1]
    for s in range(0, n, B):
        e = min(n, s + B)
        k = e - s
        planes = np.zeros((B,) + positions.planes.shape[1:], np.uint8)
        mask = np.ones((B, A), np.bool_)
        moves = np.zeros(B, np.int32)
        w = np.zeros(B, np.float32)
        planes[:k] = positions.planes[s:e]
        mask[:k] = positions.mask[s:e]
        moves[:k] = positions.moves[s:e]
        w[:k] = weights[s:e]
        g, _, e_sum, lp_sum = grad_fn(params, batch_stats, planes, mask, moves, w, np.float32(inv_temp))
        total = g if total is None else jax.tree_util.tree_map(lambda a, b: a + b, total, g)
        ent += float(np.sum(np.asarray(e_sum)[:k]))  # the k real rows, whatever their advantage
        lp += float(np.sum(np.asarray(lp_sum)[:k]))
    return total, {"entropy_sum": ent, "logp_sum": lp}


def make_optimizer(cfg: RLConfig):
    import optax

    if cfg.optimizer == "adam":
        return with_clipping(optax.adam(cfg.learning_rate), cfg.grad_clip)
    return with_clipping(optax.sgd(cfg.learning_rate, momentum=cfg.momentum or None), cfg.grad_clip)


# ---------------------------------------------------------------- run folder


def _load_init(path: str):
    info, _, variables = ckpt.load_model(path, "policy")  # CheckpointError unless a policy that fits its model
    info = {"model": info["model"], "board_size": int(info["board_size"]),
            "preset": info.get("preset", "default"), "kind": "policy"}
    return info, variables


def _check_resume(cfg: RLConfig, workdir: Path) -> None:
    path = workdir / "config.json"
    if not path.exists():
        return
    saved = json.loads(path.read_text())
    diff = config_lib.changed_fields(cfg, saved, keep=RESUMABLE_OVERRIDES, legacy=LEGACY_VALUES)
    if diff:
        raise ValueError(f"{workdir} holds an RL run with a different config ({', '.join(diff)}); "
                         "use another workdir or the same settings")


def _trim_metrics(path: Path, iteration: int) -> None:
    """Drop records a killed run wrote past its last checkpoint."""
    recs = files.read_jsonl(path)
    keep = [r for r in recs if r.get("step", 0) <= iteration]
    if len(keep) != len(recs):
        files.write_jsonl(path, keep)


def plot_run(workdir: Path) -> None:
    recs = files.read_jsonl(workdir / "metrics.jsonl")
    evals = [r for r in recs if r.get("kind") == "eval"]
    trains = [r for r in recs if r.get("kind") == "train"]
    if evals:
        metrics.plot_curves(evals, workdir / "plots" / "winrate.png", ["winrate_vs_sl"], "win rate vs SL start")
    if trains:
        metrics.plot_curves(trains, workdir / "plots" / "training.png",
                            ["winrate_vs_pool", "entropy", "mean_logp"], "per iteration")


# ---------------------------------------------------------------- evaluation


def winrate(model, learner_vars, opponent_vars, size: int, komi: float, n_games: int, seed: int, *,
            temperature: float, preset: str = "default", max_moves: int = 0, stop=None) -> dict | None:
    """Learner vs opponent over ``n_games`` (half as Black), both sampling at
    ``temperature`` with a fixed seed. None if ``stop()`` interrupted it."""
    from selfplay.games import NetPlayer, play_policy_games

    half = n_games // 2
    players = [NetPlayer("learner", model, learner_vars, preset, temperature),
               NetPlayer("opponent", model, opponent_vars, preset, temperature)]
    black = [0] * half + [1] * (n_games - half)
    white = [1 - b for b in black]
    games, _ = play_policy_games(players, black, white, size, komi, np.random.default_rng(seed),
                                 max_moves=max_moves or None, stop=stop)
    if not games:
        return None
    lb = np.array(black) == 0
    win = np.array([(g.winner == 1) == b if g.winner != 0 else 0.5 for g, b in zip(games, lb)], np.float64)
    return {"winrate_vs_sl": float(win.mean()), "eval_games": n_games,
            "eval_winrate_as_black": float(win[lb].mean()) if lb.any() else None,
            "eval_winrate_as_white": float(win[~lb].mean()) if (~lb).any() else None,
            "eval_mean_moves": float(np.mean([len(g.moves) for g in games]))}


# ---------------------------------------------------------------- the loop


def train_rl(cfg: RLConfig, workdir: str | Path, *, progress: bool = True) -> dict:
    """Run (or resume) RL in ``workdir``; returns the last metrics."""
    import jax
    import jax.numpy as jnp
    from tqdm import tqdm

    # Numba (features, games) and JAX (nets) load here, not at import: the
    # CLI's parser imports RLConfig from this module (`alphalite --help`).
    from alphalite.nn import features, nets
    from selfplay import records
    from selfplay.games import NetPlayer, play_policy_games

    workdir = Path(workdir)
    _check_resume(cfg, workdir)
    info, sl_vars = _load_init(cfg.init)
    workdir.mkdir(parents=True, exist_ok=True)
    size, preset = info["board_size"], info["preset"]
    files.write_json_atomic(workdir / "config.json", {**config_lib.to_dict(cfg), **info})
    model = nets.make_model(info["model"], size, features.num_planes(preset))
    tx = make_optimizer(cfg)
    sl_vars = jax.tree_util.tree_map(jnp.asarray, sl_vars)
    batch_stats = sl_vars.get("batch_stats", {})
    state = loop.new_state(model, tx, sl_vars)
    mgr = ckpt.manager(workdir / "ckpt", max_to_keep=2)
    pool_dir = workdir / "pool"
    meta = {"iteration": 0, "pool": [], "best_winrate": -1.0, "best_iteration": -1, "seconds": 0.0}
    restored = ckpt.restore(mgr, state)
    if restored is not None:
        state, meta = restored
        # The run's own copies rule: --init may have been replaced since.
        batch_stats = state.batch_stats
        print(f"resumed {workdir} at iteration {meta['iteration']} (pool: {len(meta['pool'])})", flush=True)
    else:
        ckpt.export_model(pool_dir / "sl", sl_vars, info)
        meta["pool"] = ["sl"]
        ckpt.save(mgr, 0, state, dict(meta))
    it = int(meta["iteration"])
    _trim_metrics(workdir / "metrics.jsonl", it)
    # An evaluation finished after the last checkpoint is kept; the best so
    # far comes from the records, which may be newer than the checkpoint.
    evals = [r for r in files.read_jsonl(workdir / "metrics.jsonl") if r.get("kind") == "eval"]
    for r in evals:
        if r["winrate_vs_sl"] > meta["best_winrate"]:
            meta["best_winrate"], meta["best_iteration"] = r["winrate_vs_sl"], r["step"]
    evaluated_at = max([r["step"] for r in evals], default=-1)

    cache: dict[str, dict] = {}

    def pool_vars(name):
        if name not in cache:
            _, v = ckpt.load_variables(pool_dir / name)
            cache[name] = jax.tree_util.tree_map(jnp.asarray, v)
        return cache[name]

    def current_vars():
        v = {"params": state.params}
        if batch_stats:
            v["batch_stats"] = batch_stats
        return v

    grad_fn = make_grad_fn(model)
    inv_temp = 1.0 / cfg.temperature
    G = cfg.games_per_iteration
    stop = loop.GracefulStop()
    start = time.time()
    seconds0 = float(meta.get("seconds", 0.0))
    bar = tqdm(total=cfg.iterations, initial=it, desc="rl", unit="it", disable=not progress,
               dynamic_ncols=True, mininterval=2.0)
    last: dict = {}
    stopped = "finished"

    def save():
        meta["iteration"] = it
        meta["seconds"] = seconds0 + time.time() - start
        ckpt.save(mgr, it, state, dict(meta))

    def evaluate():
        res = winrate(model, current_vars(), pool_vars("sl"), size, cfg.komi, cfg.eval_games,
                      cfg.seed + 7919, temperature=cfg.eval_temperature, preset=preset,
                      max_moves=cfg.max_moves, stop=lambda: stop.requested)
        if res is None:
            return None
        rec = {"kind": "eval", "step": it, **res}
        if res["winrate_vs_sl"] > meta["best_winrate"]:
            meta["best_winrate"] = res["winrate_vs_sl"]
            meta["best_iteration"] = it
            ckpt.export_model(workdir / "best_model", jax.tree_util.tree_map(np.asarray, current_vars()),
                              {**info, "rl_iteration": it},
                              extra={"winrate.json": {"winrate_vs_sl": res["winrate_vs_sl"], "iteration": it,
                                                      "eval_games": cfg.eval_games,
                                                      "eval_temperature": cfg.eval_temperature,
                                                      "sl_start": cfg.init, **res}})
        files.append_jsonl(workdir / "metrics.jsonl", rec)
        plot_run(workdir)
        nonlocal evaluated_at
        evaluated_at = it
        return rec

    try:
        while it < cfg.iterations:
            if stop.requested:
                stopped = "interrupted"
                break
            if cfg.max_minutes and time.time() - start > 60 * cfg.max_minutes:
                stopped = "time limit"
                break
            t0 = time.time()
            if cfg.eval_games and it % cfg.eval_every == 0 and evaluated_at != it:
                rec = evaluate()
                if rec is None:
                    stopped = "interrupted"
                    break
                last.update(rec)
                bar.set_postfix(winrate_vs_sl=f"{rec['winrate_vs_sl']:.2f}")
            gen = np.random.default_rng([cfg.seed, it])
            opp = meta["pool"][int(gen.integers(len(meta["pool"])))]
            players = [NetPlayer("learner", model, current_vars(), preset, cfg.temperature),
                       NetPlayer(f"pool:{opp}", model, pool_vars(opp), preset, cfg.temperature)]
            black = np.array([0] * (G // 2) + [1] * (G // 2))
            white = 1 - black
            games, pos = play_policy_games(players, black, white, size, cfg.komi, gen,
                                           max_moves=cfg.max_moves or None, collect=0,
                                           stop=lambda: stop.requested)
            if not games:
                stopped = "interrupted"
                break
            t_play = time.time() - t0
            learner_black = black == 0
            winners = np.array([g.winner for g in games])
            outcome = np.where(learner_black, winners, -winners).astype(np.float32)
            adv = advantages(outcome, learner_black, cfg.baseline)
            n_all = len(pos.moves)
            if cfg.train_positions and n_all > cfg.train_positions:
                idx = np.sort(gen.choice(n_all, cfg.train_positions, replace=False))
                pos = type(pos)(pos.planes[idx], pos.mask[idx], pos.moves[idx], pos.game[idx])
            n = len(pos.moves)
            weights = adv[pos.game] / max(n, 1)
            grads, st = policy_gradient(grad_fn, state.params, batch_stats, pos, weights, inv_temp,
                                        cfg.micro_batch)
            gnorm = float(jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads))))
            new_state = state.apply_gradients(grads=grads)
            if not (np.isfinite(gnorm) and bool(loop.all_finite(new_state.params))):
                raise loop.TrainingDiverged(
                    f"training diverged: iteration {it + 1} gave a non-finite gradient (norm {gnorm:.4g}) or "
                    f"parameters, not applied; the run stays at iteration {it} ({workdir / 'ckpt'})")
            state = new_state
            it += 1
            if it % cfg.pool_every == 0:
                name = f"iter_{it:06d}"
                ckpt.export_model(pool_dir / name, jax.tree_util.tree_map(np.asarray, current_vars()), info)
                if name not in meta["pool"]:
                    meta["pool"] = meta["pool"] + [name]
            if cfg.keep_games:
                for g, game in enumerate(games):
                    records.write_game(workdir / "games", f"iter{it - 1:06d}_g{g:03d}", game)
            last = {"kind": "train", "step": it, "opponent": opp, "pool_size": len(meta["pool"]),
                    "winrate_vs_pool": float(np.mean(np.where(outcome == 0, 0.5, outcome > 0))),
                    "learner_black_wins": float(np.mean(outcome[learner_black] > 0)),
                    "learner_white_wins": float(np.mean(outcome[~learner_black] > 0)),
                    "positions": int(n), "positions_played": int(n_all),
                    "mean_moves": float(np.mean([len(g.moves) for g in games])),
                    "capped_games": int(sum(g.ended != "passes" for g in games)),
                    "entropy": st["entropy_sum"] / max(n, 1), "mean_logp": st["logp_sum"] / max(n, 1),
                    "grad_norm": gnorm, "seconds_play": t_play, "seconds": time.time() - t0,
                    "games_seen": it * G}
            # metrics first: a kill before the checkpoint leaves a record
            # past it, which the resumed run drops and writes again
            files.append_jsonl(workdir / "metrics.jsonl", last)
            save()
            plot_run(workdir)
            bar.update(1)
            bar.set_postfix(pool=f"{last['winrate_vs_pool']:.2f}", ent=f"{last['entropy']:.2f}")
        # the win rate of the policy the run ends with (not after Ctrl-C)
        if stopped != "interrupted" and cfg.eval_games and evaluated_at != it and not stop.requested:
            rec = evaluate()
            if rec is not None:
                last.update(rec)
    except KeyboardInterrupt:  # a second Ctrl-C
        stopped = "interrupted"
    finally:
        stop.restore()
        bar.close()
        if mgr.latest_step() != it:
            save()
    print(f"{stopped} at iteration {it}; run folder {workdir}", flush=True)
    return {**last, "iteration": it, "stopped": stopped, "best_winrate": meta["best_winrate"],
            "best_iteration": meta["best_iteration"], "pool": list(meta["pool"]),
            "seconds": seconds0 + time.time() - start}


def demo_rl(sl_checkpoint: str, workdir: str | Path, iterations: int = 2, *, games: int = 8,
            eval_games: int = 8, max_moves: int | None = None, learning_rate: float = 5e-4,
            train_positions: int = 512, seed: int = 0, progress: bool = False) -> dict:
    """A few quick RL iterations (for ``make demo``; about a minute on 2
    busy cores): ``games`` games per iteration, a snapshot joining the pool
    after every iteration, the win rate against the SL start measured
    before the first and after the last iteration (``eval_games`` games:
    far too few to mean much, it shows the machinery). Games are capped at
    ``min(2*size*size, 200)`` moves unless ``max_moves`` says otherwise.
    Rerunning with the same ``workdir`` resumes (or returns at once when
    done). Returns train_rl's metrics plus ``evals`` (the eval records) and
    ``plots`` (PNG paths)."""
    info, _ = _load_init(sl_checkpoint)
    size = int(info["board_size"])
    cap = int(max_moves) if max_moves is not None else min(2 * size * size, 200)
    cfg = RLConfig(init=str(sl_checkpoint), iterations=int(iterations), games_per_iteration=int(games),
                   learning_rate=float(learning_rate), pool_every=1, eval_every=max(int(iterations), 1),
                   eval_games=int(eval_games), max_moves=cap, train_positions=int(train_positions),
                   keep_games=True, seed=int(seed), micro_batch=128)
    res = train_rl(cfg, workdir, progress=progress)
    workdir = Path(workdir)
    res["evals"] = [r for r in files.read_jsonl(workdir / "metrics.jsonl") if r.get("kind") == "eval"]
    res["plots"] = [str(p) for p in sorted((workdir / "plots").glob("*.png"))]
    return res


def export_best(workdir: str | Path, out: str | Path) -> Path:
    """Copy a run's ``best_model/`` (with winrate.json and config.json) to ``out``."""
    from alphalite.go import board

    workdir = Path(workdir)
    src = workdir / "best_model"
    if not (src / "model.json").exists():
        raise ValueError(f"{workdir} has no evaluated policy yet (best_model/ missing)")
    info, variables = ckpt.load_variables(src)
    config = json.loads((workdir / "config.json").read_text())
    recs = files.read_jsonl(workdir / "metrics.jsonl")
    trains = [r for r in recs if r.get("kind") == "train"]
    win = json.loads((src / "winrate.json").read_text())
    win.update({
        "eval_history": [{"iteration": r["step"], "winrate_vs_sl": r["winrate_vs_sl"]}
                         for r in recs if r.get("kind") == "eval"],
        "max_moves": config.get("max_moves") or board.default_max_moves(int(info["board_size"])),
        "games_per_iteration": config.get("games_per_iteration"),
        "training_games_before_best": int(win["iteration"]) * int(config.get("games_per_iteration", 0)),
        "iterations_run": max([r["step"] for r in trains], default=0),
        "run_seconds": sum(r.get("seconds", 0.0) for r in trains),
    })
    extra = {"winrate.json": win, "config.json": config}
    return ckpt.export_model(out, variables, info, extra=extra)


__all__ = ["RLConfig", "advantages", "demo_rl", "export_best", "make_grad_fn", "policy_gradient", "train_rl",
           "winrate"]
