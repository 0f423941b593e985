"""AlphaZero-style training on Ray: ``alphalite rl --algo alphazero``.

::

    alphalite rl --algo alphazero --workdir runs/az9 --size 9 --iterations 20
    alphalite rl --algo alphazero --workdir /shared/az9 --address auto     # on a running cluster

Ray does the distribution: a local Ray on this machine's cores when no
``--address`` is given (``ray.init(num_cpus=...)``, no dashboard, quiet
logs), else it joins the cluster at that address. On it run

* self-play actors (``SelfPlayer``, one per core but the learner's): each
  round, each loads the best net from the store and calls
  ``selfplay.alphazero.play_games`` for its share of the games; records go
  straight into ``<workdir>/games``, and a retried call or a resumed round
  plays only the share not yet there;
* one learner actor (``learner.Learner``): ``train_steps`` optimizer steps
  on the newest ``window_games`` records (up to the step state.json names
  for the round, so a resumed round does not train twice), then an Orbax
  checkpoint and an exported net (``store``);
* a gating task: the new net against the best (``alphalite.arena.netmatch``,
  ``gate_visits`` visits a move, SPRT of ``alphalite.arena.ratings``);
  accepted: ``best.json`` points to it.

The driver (this process) runs the rounds in order and logs each to
metrics.jsonl (``kind``: selfplay, train, gate) with the iteration number,
then bumps the counter in state.json and redraws ``plots/zero.png``
(``alphalite.zero.plots``: loss, gating, the best net's rating).

Faults: actors and the learner are created with ``max_restarts=-1`` and
``max_task_retries=-1``: a killed one (``kill -9``) is restarted by Ray and
its call retried; games it finished are already on disk, the learner
restarts from its last checkpoint. A killed run rerun with the same command
resumes from the store (iteration counter, best pointer, checkpoint,
games). Ctrl-C or SIGTERM (``kill``; a job started with ``nohup ... &``
ignores SIGINT) stops the run after the stage in flight and saves a
checkpoint of the learner; a second one stops it at once. ``max_minutes``
stops it the same way once that time has passed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import time
from pathlib import Path

from alphalite.runtime import config as config_lib
from alphalite.runtime.config import field, finite, require
from alphalite.zero import plots
from alphalite.zero.store import Store
from search.params import SearchParams
from selfplay.config import SelfPlayConfig


@dataclasses.dataclass(frozen=True)
class ZeroConfig:
    size: int = field(9, "board size")
    model: str = field("b4c32", "policy-value net bNcM (blocks, channels), or bNcM_aux: with KataGo's ownership "
                                "and score heads, trained on the games' exact final positions; b4c32 takes the "
                                "shipped 9x9 nets' arrays")
    init: str = field("policy9", "start from this policy net's arrays where names and shapes match "
                                 "(trunk + policy head); empty: a fresh net")
    init_value: str = field("value9", "and from this value net's value head where shapes match; empty: none")
    grow: bool = field(False, "init is a smaller policy-value net of this kind (fewer blocks or channels): grow "
                              "it into --model computing the same function (needs --init-value '')")
    iterations: int = field(20, "rounds of self-play, training and gating (a rerun continues the count)")
    games_per_iteration: int = field(32, "self-play games a round, shared among the actors")
    train_steps: int = field(200, "learner steps a round; a checkpoint after each round")
    train_batch: int = field(128, "positions per learner step")
    learning_rate: float = field(1e-3, "AdamW step size")
    weight_decay: float = field(1e-4, "AdamW weight decay")
    value_weight: float = field(1.0, "weight of the value MSE beside the policy cross-entropy")
    window_games: int = field(2000, "the learner trains on this many newest games")
    gate_games: int = field(40, "at most this many gating games a round (0: every new net is accepted)")
    gate_visits: int = field(16, "search visits a move in gating games")
    gate_sprt: str = field("elo0=0,elo1=35,alpha=0.05,beta=0.05", "SPRT of the gating")
    gate_threshold: float = field(0.55, "undecided SPRT: accept at this score or better")
    anchor_every: int = field(5, "every this many rounds the best net plays the start net (step 0) all "
                                 "anchor_games games at gate_visits: its rating against a fixed opponent (0: never)")
    anchor_games: int = field(0, "games of each anchor match (0: gate_games; set it to rate a run without gating)")
    actors: int = field(0, "self-play actors; 0: the cores Ray has, less one for the learner (at least 1)")
    max_minutes: float = field(0.0, "stop after the stage in flight once this many minutes have passed, and "
                                    "save the learner (0 = no limit)")
    seed: int = field(0, "seed of the net's start, the games and the sampling")

    def __post_init__(self):
        require(self, (
            ("model", re.fullmatch(r"b[1-9][0-9]*c[1-9][0-9]*(_aux)?", self.model) is not None,
             "bNcM or bNcM_aux (blocks, channels: a policy-value net)"),
            ("size", 2 <= self.size <= 25, "in 2..25"),
            ("iterations", self.iterations >= 0, ">= 0"),
            ("games_per_iteration", self.games_per_iteration >= 1, ">= 1"),
            ("train_steps", self.train_steps >= 0, ">= 0"),
            ("train_batch", self.train_batch >= 1, ">= 1"),
            ("window_games", self.window_games >= 1, ">= 1"),
            ("gate_games", self.gate_games >= 0, ">= 0 (0: no gating)"),
            ("gate_visits", self.gate_visits >= 1, ">= 1"),
            ("gate_threshold", 0.0 <= self.gate_threshold <= 1.0, "in [0, 1]"),
            ("anchor_every", self.anchor_every >= 0, ">= 0 (0: never)"),
            ("anchor_games", self.anchor_games >= 0, ">= 0 (0: gate_games)"),
            ("actors", self.actors >= 0, ">= 0 (0: the cores Ray has)"),
            ("learning_rate", finite(self.learning_rate) and self.learning_rate > 0, "> 0"),
            ("weight_decay", finite(self.weight_decay) and self.weight_decay >= 0, ">= 0"),
            ("value_weight", finite(self.value_weight) and self.value_weight >= 0, ">= 0"),
            ("max_minutes", finite(self.max_minutes) and self.max_minutes >= 0, ">= 0 (0: no limit)"),
            ("seed", self.seed >= 0, ">= 0"),
            ("grow", not self.grow or bool(self.init and not self.init_value),
             "used with --init (the smaller net) and --init-value ''")))
        from alphalite.arena.ratings import Sprt

        try:
            Sprt.parse(self.gate_sprt)
        except ValueError as e:
            raise ValueError(f"--gate-sprt: {e}") from None


def _setup_worker(training: bool = False) -> None:
    from alphalite import runtime
    from alphalite.nn import jitcache

    runtime.setup(training=training)
    jitcache.enable()  # an actor restarted after a crash, or a resumed run, reads its compiles back


class SelfPlayer:
    """A self-play actor: plays its share of a round with the best net."""

    def __init__(self, workdir: str, index: int, size: int, config: dict, search: dict):
        _setup_worker()
        self.store = Store(workdir)
        self.index, self.size = index, size
        self.config = config_lib.from_dict(SelfPlayConfig, config)
        self.search = config_lib.from_dict(SearchParams, search)

    def pid(self) -> int:
        return os.getpid()

    def play(self, net_dir: str, n_games: int, iteration: int, seed: int) -> dict:
        """Play until this actor has ``n_games`` records of round ``iteration`` on disk."""
        from alphalite.zero.learner import load_net
        from selfplay.alphazero import play_games, pv_net

        t0 = time.perf_counter()
        # a retried call or a resumed round plays only the games not yet on
        # disk, under names and seeds of their own (never the same game twice)
        prefix = f"it{iteration:05d}-w{self.index}"
        done = self.store.round_games(prefix)
        if done >= n_games:
            return {"games": 0, "on_disk": done, "seconds": time.perf_counter() - t0}
        model, variables = load_net(net_dir)
        net_fn, params = pv_net(model, variables, pad_to=min(self.config.games_at_once, n_games - done))
        paths = play_games(net_fn, params, n_games - done, self.store.games, size=self.size, config=self.config,
                           search=self.search, seed=[seed, done], prefix=f"{prefix}-p{done:05d}")
        return {"games": len(paths), "on_disk": done + len(paths), "seconds": time.perf_counter() - t0}


class LearnerActor:
    def __init__(self, workdir: str, cfg: dict, preset: str):
        _setup_worker(training=True)
        from alphalite.zero.learner import Learner

        c = config_lib.from_dict(ZeroConfig, cfg)
        self.learner = Learner(workdir, model=c.model, size=c.size, preset=preset, init=c.init,
                               init_value=c.init_value, grow=c.grow, learning_rate=c.learning_rate,
                               weight_decay=c.weight_decay,
                               batch_size=c.train_batch, value_weight=c.value_weight, window_games=c.window_games,
                               seed=c.seed)

    def pid(self) -> int:
        return os.getpid()

    def start_net(self) -> dict:
        return {**self.learner.start_net(), "copied": self.learner.copied}

    def step(self) -> int:
        return self.learner.step

    def train_to(self, step: int) -> dict:
        """Train until the learner's step is ``step`` (a retried or resumed
        round does only what its last checkpoint lacks), then save."""
        t0 = time.perf_counter()
        m = self.learner.train(max(int(step) - self.learner.step, 0))
        return {**m, **self.learner.save(), "seconds": time.perf_counter() - t0}

    def save(self) -> dict:
        return self.learner.save()


def gate_nets(new_net: str, best_net: str, size: int, cfg: dict, sp: dict, search: dict, seed: int,
              rating: bool = False) -> dict:
    """The gating task: the new net against the best (``netmatch.gate``).
    With ``rating``, all ``anchor_games`` (else ``gate_games``) are played
    and nothing is accepted (the anchor match of the best net against the start)."""
    _setup_worker()
    from alphalite.arena import netmatch
    from alphalite.arena.ratings import Sprt
    from alphalite.zero.learner import load_net
    from selfplay.alphazero import pv_net

    c = config_lib.from_dict(ZeroConfig, cfg)
    spc = config_lib.from_dict(SelfPlayConfig, sp)
    t0 = time.perf_counter()
    games = (c.anchor_games or c.gate_games) if rating else c.gate_games
    batch = min(8, games)
    nets = [pv_net(*load_net(d), pad_to=batch) for d in (new_net, best_net)]
    params = dataclasses.replace(spc, simulations=c.gate_visits).search_params(
        size, config_lib.from_dict(SearchParams, search))
    res = netmatch.gate(*nets[0], *nets[1], size=size, komi=spc.komi, search=params,
                        sprt=None if rating else Sprt.parse(c.gate_sprt),
                        max_games=games, batch=batch, seed=seed, threshold=c.gate_threshold,
                        max_moves=spc.max_moves or None, preset=spc.preset)
    if rating:
        res = {k: res[k] for k in ("wins", "losses", "draws", "games", "score")}
    return {**res, "seconds": time.perf_counter() - t0}


class OutOfTime(Exception):
    """``max_minutes`` has passed: the run stops as at Ctrl-C, but by plan."""


def check_resume(store: Store, saved: dict) -> None:
    path = store.root / "config.json"
    if path.exists():
        old = json.loads(path.read_text())
        keep = {"zero": ("iterations", "games_per_iteration", "train_steps", "actors", "gate_games", "anchor_every",
                         "anchor_games", "max_minutes")}
        diffs = []
        for part, cls in (("zero", ZeroConfig), ("selfplay", SelfPlayConfig), ("search", SearchParams)):
            now = config_lib.from_dict(cls, saved[part])
            diffs += [f"{part}.{d}" for d in config_lib.changed_fields(now, old.get(part, {}), keep=keep.get(part, ()))]
        if diffs:
            raise ValueError(f"{store.root} was started with other settings: {', '.join(diffs)}")


def round_targets(store: Store, iteration: int, games: int, n_actors: int) -> list[int]:
    """Records of round ``iteration`` each actor is to have on disk: what
    it has, plus its share of the games the round still lacks (a resumed
    round, whatever actors played the rest, hands out only those)."""
    left = max(games - store.round_games(f"it{iteration:05d}"), 0)
    return [store.round_games(f"it{iteration:05d}-w{i}") + left // n_actors + (i < left % n_actors)
            for i in range(n_actors)]


def start_ray(address: str | None, num_cpus: int | None):
    """Join ``address`` or start a local Ray (quiet, no dashboard); returns
    (ray, whether we started it)."""
    import logging
    import warnings

    import ray

    if ray.is_initialized():
        return ray, False
    kw = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
              configure_logging=True)
    with warnings.catch_warnings():
        # Ray starts its processes by fork+exec (subprocess with a preexec_fn); nothing
        # runs in the child before exec, so JAX's at-fork deadlock warning does not apply.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        if address:
            ray.init(address=address, **kw)
        else:
            # A cluster we start gets Ray's default token auth; its WARNING saying so (and how
            # to opt out) alarmed every run's first line and changed nothing.
            auth = logging.getLogger("ray._private.authentication.authentication_token_setup")
            level = auth.level
            auth.setLevel(logging.ERROR)
            try:
                ray.init(num_cpus=num_cpus or os.cpu_count() or 1, **kw)
            finally:
                auth.setLevel(level)
    return ray, True


def round_line(it: int, iterations: int, games: int, tr: dict, g: dict) -> str:
    """The progress line of a finished round; a round with no gating games
    (``--gate-games 0``, or no new net) says so rather than "gate nan"."""
    if g["games"]:
        gate = f"gate {g['score']:.2f} over {g['games']} games -> {'accepted' if g['accepted'] else 'rejected'}"
    else:
        gate = "no gating -> accepted" if g["accepted"] else "no new net"
    return f"iteration {it}/{iterations}: {games} games, loss {tr.get('loss', float('nan')):.3f}, {gate}"


def train_alphazero(cfg: ZeroConfig, sp: SelfPlayConfig, search: SearchParams, workdir: str | os.PathLike, *,
                    address: str | None = None, num_cpus: int | None = None, progress: bool = True) -> dict:
    """Run (or resume) ``cfg.iterations`` rounds; returns a summary."""
    store = Store(workdir)
    saved = {"zero": config_lib.to_dict(cfg), "selfplay": config_lib.to_dict(sp), "search": config_lib.to_dict(search)}
    check_resume(store, saved)
    if cfg.grow and store.best() is None:  # refused here, in one line, not inside the learner actor
        from alphalite.nn import features
        from alphalite.zero.learner import check_grow_source

        check_grow_source(cfg.init, cfg.size, features.num_planes(sp.preset), cfg.model.endswith("_aux"))
    store.make()
    from alphalite.runtime import files

    files.write_json_atomic(store.root / "config.json", saved)
    say = (lambda s: print(s, flush=True)) if progress else (lambda s: None)
    ray, started = start_ray(address, num_cpus)
    cores = int(ray.cluster_resources().get("CPU", 1))
    n_actors = cfg.actors or max(1, cores - 1)
    opts = dict(max_restarts=-1, max_task_retries=-1)
    root, token = str(store.root), secrets.token_hex(3)
    # One core each; the gating task reserves none: it runs while the actors wait for its result.
    learner = ray.remote(num_cpus=1, **opts)(LearnerActor).options(name=f"alphalite-learner-{token}").remote(
        root, saved["zero"], sp.preset)
    # max_concurrency 2: pid() answers while play() runs (tests and operators kill by pid)
    player = ray.remote(num_cpus=1, max_concurrency=2, **opts)(SelfPlayer)
    actors = [player.options(name=f"alphalite-selfplay-{i}-{token}").remote(
        root, i, cfg.size, saved["selfplay"], saved["search"]) for i in range(n_actors)]
    gate_task = ray.remote(num_cpus=0, max_retries=3)(gate_nets)
    it = store.iteration()
    t_start = time.perf_counter()
    summary = {"workdir": root, "actors": n_actors, "start_iteration": it}
    from alphalite.train.loop import GracefulStop

    # SIGTERM too, and SIGINT even where the shell ignores it (a job started with `&`):
    # the run stops after the stage in flight; a second signal at once
    stop = GracefulStop()

    def check():
        if stop.requested:
            raise KeyboardInterrupt
        if cfg.max_minutes and time.perf_counter() - t_start > 60 * cfg.max_minutes:
            raise OutOfTime

    try:
        best = ray.get(learner.start_net.remote())
        if it == 0 and not any(r.get("kind") == "start" for r in store.read_metrics()):
            store.log({"kind": "start", "iteration": 0, "net": best["net"], "copied": best.get("copied", [])})
        while it < cfg.iterations:
            best = store.best()
            due = round_targets(store, it, cfg.games_per_iteration, n_actors)
            t0 = time.perf_counter()
            res = ray.get([a.play.remote(best["net"], n, it, cfg.seed * 100003 + it * 1009 + i)
                           for i, (a, n) in enumerate(zip(actors, due)) if n > 0])
            store.log({"kind": "selfplay", "iteration": it, "games": sum(r["games"] for r in res),
                       "seconds": time.perf_counter() - t0, "best_step": best["step"],
                       "games_on_disk": len(store.game_paths())})
            check()
            target = store.train_to(it)
            if target is None:  # kept, so a resumed round does not train twice
                target = ray.get(learner.step.remote()) + cfg.train_steps
                store.set_iteration(it, train_to=target)
            tr = ray.get(learner.train_to.remote(target))
            store.log({"kind": "train", "iteration": it, **tr})
            check()
            if cfg.gate_games > 0 and tr["step"] != best["step"]:
                g = ray.get(gate_task.remote(tr["net"], best["net"], cfg.size, saved["zero"], saved["selfplay"],
                                             saved["search"], cfg.seed * 7919 + it))
            else:
                g = {"accepted": tr["step"] != best["step"], "games": 0}
            if g["accepted"]:
                store.set_best(tr["net"], tr["step"], iteration=it)
            store.log({"kind": "gate", "iteration": it, "new_step": tr["step"], "best_step": best["step"], **g})
            it += 1
            store.set_iteration(it)
            start = store.start_net()
            if cfg.anchor_every > 0 and (cfg.anchor_games or cfg.gate_games) > 0 and it % cfg.anchor_every == 0 \
                    and start:
                now = store.best()
                if now["net"] != start:
                    # seed by anchor count: its parity (the odd game's colour, netmatch.gate) alternates
                    a = ray.get(gate_task.remote(now["net"], start, cfg.size, saved["zero"], saved["selfplay"],
                                                 saved["search"], cfg.seed * 7919 + it // cfg.anchor_every + 104729,
                                                 True))
                    store.log({"kind": "anchor", "iteration": it, "step": now["step"], **a})
            plots.plot_run(store.read_metrics(), store.plot_path)
            say(round_line(it, cfg.iterations, sum(r["games"] for r in res), tr, g))
            check()
    except (KeyboardInterrupt, OutOfTime) as e:
        summary["stopped"] = "time limit" if isinstance(e, OutOfTime) else "interrupted"
        try:
            summary["saved"] = ray.get(learner.save.remote(), timeout=120)
        except Exception as e:  # noqa: BLE001 - Ctrl-C may have reached the workers too; report, do not hide
            summary["save_error"] = f"{type(e).__name__}: {e}"
    finally:
        stop.restore()
        for a in [learner, *actors]:
            ray.kill(a, no_restart=True)
        if started:
            ray.shutdown()
    summary.update(iteration=store.iteration(), best=store.best(), games=len(store.game_paths()),
                   seconds=time.perf_counter() - t_start)
    return summary


def demo_zero(workdir: str | Path, *, iterations: int = 2, num_cpus: int | None = None) -> dict:
    """A few small rounds on 9x9 for ``make demo``."""
    cfg = ZeroConfig(size=9, iterations=iterations, games_per_iteration=8, train_steps=30, train_batch=64,
                     gate_games=8, gate_visits=8)
    sp = SelfPlayConfig(games_at_once=8, simulations=16, max_considered=8)
    return train_alphazero(cfg, sp, SearchParams(), workdir, num_cpus=num_cpus, progress=True)
