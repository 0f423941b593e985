"""Value nets: train/eval steps for the SL loop's ``task="value"``, winner-
prediction metrics, ``alphalite eval-value`` and the demo stage.

A value net (``nets.ResNetValue``, a ``*_value`` model) maps planes
``[B, H, W, C]`` to ``v [B]`` in [-1, 1], the expected outcome for the
player to move (+1 = the mover wins). Training minimises the MSE against the
game's outcome (AlphaGo); the winner prediction of a position is black when
``v * to_play > 0``.

``alphalite eval-value --checkpoint CKPT SRC...`` evaluates a value net on
the positions after exactly 30, 80, 130 and 180 moves of held-out games and,
in the same run, the NN-Influence baseline (``alphalite.train.influence``) trained
on the training games of the same source, on the same positions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from alphalite.data import dataset
from alphalite.go import coords
from alphalite.go.gtpclient import GtpClient, GtpEngineDied, GtpError, colour_word, find_gnugo
from alphalite.nn import checkpoint as ckpt
from alphalite.train import influence, loop, metrics

SNAPSHOT_MOVES = (30, 80, 130, 180)  # NN-Influence's table
PAPER_ACCURACY = {30: 0.521, 80: 0.618, 130: 0.767, 180: 0.893}
VAL_STRIDE = 10  # validation: every 10th position of each val game


def position_filter(marked_only: bool, validation: bool = False) -> dict:
    """``dataset`` selection keywords for value training / validation."""
    if marked_only:
        return {"decided_only": True, "marked_only": True}
    if validation:  # spread over the game; all positions of a game say the same thing
        return {"decided_only": True, "move_numbers": range(VAL_STRIDE, 1000, VAL_STRIDE)}
    return {"decided_only": True}


def make_train_step():
    """jitted ``(state, {"planes" [B,H,W,C], "outcomes" [B]}) -> (state,
    {"loss": MSE, "accuracy": sign agreement, "grad_norm", "finite"})``;
    state donated."""
    import jax
    import jax.numpy as jnp

    def train_step(state, batch):
        def loss_fn(params):
            variables = {"params": params}
            if state.batch_stats:
                variables["batch_stats"] = state.batch_stats
                v, updates = state.apply_fn(variables, batch["planes"], train=True, mutable=["batch_stats"])
            else:
                v, updates = state.apply_fn(variables, batch["planes"], train=True), {}
            return jnp.mean((v - batch["outcomes"]) ** 2), (v, updates)

        (loss, (v, updates)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state, m = loop.apply_update(state, grads, updates, loss)
        return state, {**m, "accuracy": jnp.mean((v > 0) == (batch["outcomes"] > 0))}

    return jax.jit(train_step, donate_argnums=0)


def make_predict(model):
    """jitted ``(variables, planes [B,H,W,C]) -> v [B]``."""
    import jax

    return jax.jit(lambda variables, planes: model.apply(variables, planes, train=False))


def evaluate(predict, variables, batches, max_positions: int = 0) -> dict:
    """Value metrics over batches from the dataset loaders (MSE is on the
    mover's outcome, the same number as from black's side)."""
    stats = metrics.WinnerStats()
    for batch in batches:
        v = np.asarray(predict(variables, batch["planes"]))
        tp = batch["to_play"].astype(np.float64)
        stats.update(v * tp, batch["outcomes"] * tp, batch["move_number"])
        if max_positions and stats.n >= max_positions:
            break
    res = stats.result()
    del res["by_move"]
    return res


def load_value_net(checkpoint: str):
    """(info, variables, predict) of an exported value model or value run."""
    info, model, variables = ckpt.load_model(checkpoint, "value")
    return info, variables, make_predict(model)


def eval_value_checkpoint(checkpoint: str, sources, *, max_games: int = 0, split: str = "test",
                          influence_games: int = 0, seed: int = 0, progress: bool = False,
                          gnugo_games: int = 0) -> dict:
    """The `alphalite eval-value` result (one JSON-able dict).

    SRC is a dataset folder (value net and influence model tested on its
    ``split``, the influence model trained on its train split) or SGF
    sources, built into a temporary dataset split 80/20 by game hash like
    the paper (train / test)."""
    import tempfile

    t0 = time.time()
    info, variables, predict = load_value_net(checkpoint)
    size, preset = int(info["board_size"]), info["preset"]
    with tempfile.TemporaryDirectory(prefix="alphalite-evalv-") as tmp:
        srcs = [str(s) for s in sources]
        if len(srcs) == 1 and (Path(srcs[0]) / "index.json").exists():
            data, test_split = srcs[0], split
        else:
            try:
                dataset.build(srcs, tmp, jobs=1, sizes=(size,), val_frac=0.0, test_frac=0.2, progress=False)
            except dataset.NoGamesKept as e:  # its log is in the temporary folder
                raise dataset.DatasetError(f"{', '.join(srcs)}: {e.detail}") from None
            data, test_split = tmp, "test"
        sel = {"decided_only": True, "move_numbers": SNAPSHOT_MOVES}
        tests = list(dataset.iterate_eval(data, split=test_split, preset=preset, board_size=size,
                                          max_games=max_games, batch_size=256, **sel))
        if not tests:
            raise dataset.DatasetError(f"no decided test games of size {size} reach move {SNAPSHOT_MOVES[0]} "
                                       f"in {', '.join(srcs)}")
        net = metrics.WinnerStats()
        t_net = time.time()
        for b in tests:
            tp = b["to_play"].astype(np.float64)
            net.update(np.asarray(predict(variables, b["planes"])) * tp, b["outcomes"] * tp, b["move_number"])
        t_net = time.time() - t_net
        base = influence.train_and_evaluate(data, tests, board_size=size, max_games=influence_games,
                                            seed=seed, progress=progress)
        ref = (gnugo_reference(data, test_split, size, tests, games=gnugo_games, progress=progress)
               if gnugo_games else None)
    games = len(np.unique(np.concatenate([b["game"] for b in tests])))
    out = {"checkpoint": str(checkpoint), "model": info["model"], "board_size": size,
           "test_games": games, "positions": net.n, "snapshot_moves": list(SNAPSHOT_MOVES),
           "value_net": _summary(net.result()), "influence": {**_summary(base["stats"]), **base["train"]},
           "paper_influence_accuracy": {str(k): v for k, v in PAPER_ACCURACY.items()},
           "value_net_positions_per_s": net.n / max(t_net, 1e-9), "seconds": time.time() - t0}
    if ref is not None:
        out["gnugo_estimate"] = ref
    return out


def gnugo_reference(data, split: str, size: int, tests, *, games: int, gnugo: str | None = None,
                    level: int = 10, progress: bool = False) -> dict:
    """GNU Go's ``estimate_score`` as a winner predictor on the same snapshot
    positions as the value net, for the first ``games`` test games: a strong
    reference that reads life and death, which the net and the influence
    model must learn. Each game is replayed into GNU Go over GTP; games with
    setup stones (GTP cannot place them) or a move GNU Go refuses are
    skipped and counted, as are games where GNU Go crashes (it is restarted)."""
    exe = gnugo or find_gnugo()
    if exe is None:
        raise RuntimeError("--gnugo-games needs GNU Go (apt-get install gnugo)")
    want: dict[int, dict[int, float]] = {}
    for b in tests:  # game -> {move number: black's outcome}
        for g, m, o, tp in zip(b["game"], b["move_number"], b["outcomes"], b["to_play"]):
            want.setdefault(int(g), {})[int(m)] = float(o) * float(tp)
    ids = sorted(want)[:games]
    allg = dataset.load_games(data, split, size)
    stats, skipped, t0 = metrics.WinnerStats(), {"setup": 0, "refused": 0, "crashed": 0}, time.time()
    off, soff = allg["move_offsets"], allg["setup_offsets"]

    def start():
        eng = GtpClient([exe, "--mode", "gtp", "--level", str(level)], timeout=300)
        eng.send(f"boardsize {size}")
        return eng

    gg = start()
    try:
        for n, g in enumerate(ids):
            if soff[g + 1] > soff[g]:
                skipped["setup"] += 1
                continue
            moves, cols = allg["moves"][off[g]:off[g + 1]], allg["colors"][off[g]:off[g + 1]]
            found = {}
            try:
                gg.send("clear_board")
                gg.send(f"komi {float(allg['komi'][g])}")
                for k in range(len(moves) + 1):
                    if k in want[g]:
                        est = gg.send("estimate_score").strip()
                        found[k] = 1.0 if est.startswith("B+") else (-1.0 if est.startswith("W+") else 0.0)
                        if len(found) == len(want[g]):
                            break
                    gg.send(f"play {colour_word(int(cols[k]))} {coords.to_gtp(int(moves[k]), size)}")
            except GtpError:
                skipped["refused"] += 1
                continue
            except GtpEngineDied:  # GNU Go hits an internal assertion on a few positions
                skipped["crashed"] += 1
                gg.close()
                gg = start()
                continue
            ks = sorted(found)
            stats.update([found[k] for k in ks], [want[g][k] for k in ks], ks)
            if progress:
                print(f"gnugo reference: {n + 1}/{len(ids)} games", flush=True)
    finally:
        gg.close()
    res = {k: v for k, v in _summary(stats.result()).items() if not k.startswith("mse")}  # signs only
    return {**res, "games": len(ids) - sum(skipped.values()), "skipped": skipped, "level": level,
            "seconds": time.time() - t0}


def _summary(res: dict) -> dict:
    by = res["by_move"]
    return {"mse": res["mse"], "accuracy": res["accuracy"],
            **{f"acc_{m}": by[str(m)]["accuracy"] if str(m) in by else None for m in SNAPSHOT_MOVES},
            **{f"mse_{m}": by[str(m)]["mse"] if str(m) in by else None for m in SNAPSHOT_MOVES},
            **{f"n_{m}": by[str(m)]["n"] if str(m) in by else 0 for m in SNAPSHOT_MOVES}}


def cli_eval_value(args) -> int:
    res = eval_value_checkpoint(args.checkpoint, args.src, max_games=args.max_games, split=args.split,
                                influence_games=args.influence_games, seed=args.seed,
                                gnugo_games=args.gnugo_games)
    print(json.dumps(res, sort_keys=True), flush=True)
    return 0


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
    return state.replace(params=params, batch_stats=stats, opt_state=state.tx.init(params))
