"""Value nets: train/eval steps for the SL loop's ``task="value"``, winner-
prediction metrics, ``alphalite eval-value`` and the demo stage.

A value net (``nets.ResNetValue``, a ``*_value`` model) maps planes
``[B, H, W, C]`` to ``v [B]`` in [-1, 1], the expected outcome for the
player to move (+1 = the mover wins). Training minimises the MSE against the
game's outcome (AlphaGo); the winner prediction of a position is black when
``v * to_play > 0``.

A value net with KataGo's auxiliary heads (``nets.ResNetValueAux``, a
``*_aux_value`` model) also predicts the final ownership of every point and
the final score, all for the player to move; the batches carry those
targets for the games that ended by count (``selfplay.valuedata``). Its loss
is KataGo's (``python/katago/train/metrics_pytorch.py``), per position:

    1.20 * CE(winner)                                   (loss_value_samplewise)
  + 1.5 * mean over the points of BCE(ownership)        (loss_ownership_samplewise:
        the sum over the board divided by its area, i.e. 1.5 / size^2 per point;
        logits 2 * pre-tanh, target (1 + o) / 2)
  + 0.0015 * Huber(score, delta 12)                     (loss_scoremean_samplewise)

the last two only where the targets are known. The winner is one logit z
with v = tanh(z) and P(win) = sigmoid(2 z), KataGo's pre-tanh convention.

``alphalite eval-value --checkpoint CKPT SRC...`` evaluates a value net on
the positions after exactly 30, 80, 130 and 180 moves of held-out games and,
in the same run, the NN-Influence baseline (``alphalite.train.influence``) trained
on the training games of the same source, on the same positions; for a net
with auxiliary heads also the ownership accuracy (sign agreement over owned
points) and the score error (MAE, points) on the counted test games, and
the winner as the score head's sign on every test position.
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
# KataGo's loss weights (see the module docstring) and its score Huber delta.
W_VALUE, W_OWNERSHIP, W_SCORE, SCORE_DELTA = 1.20, 1.5, 0.0015, 12.0
AUX_BATCH_KEYS = ("planes", "outcomes", "to_play", "ownership", "score")
VAL_STRIDE = 10  # validation: every 10th position of each val game


def position_filter(marked_only: bool, validation: bool = False, counted_only: bool = False) -> dict:
    """``dataset`` selection keywords for value training / validation;
    ``counted_only``: only games with ownership and score targets."""
    sel = {"decided_only": True, **({"counted_only": True} if counted_only else {})}
    if marked_only:
        return {**sel, "marked_only": True}
    if validation:  # spread over the game; all positions of a game say the same thing
        return {**sel, "move_numbers": range(VAL_STRIDE, 1000, VAL_STRIDE)}
    return sel


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


def is_aux(model_name: str) -> bool:
    """Whether a model name is a value net with ownership and score heads."""
    return str(model_name).endswith("_aux_value")


def aux_loss(out: dict, batch: dict):
    """KataGo's value + ownership + score loss (module docstring) and its
    parts: ``out`` from ``ResNetValueAux(aux=True)``; ``batch``: outcomes
    [B] (mover), to_play [B], ownership [B, H, W] (black's view), score [B]
    (black's view, NaN = unknown). Returns (mean loss, parts dict)."""
    import jax.numpy as jnp
    import optax

    tp = batch["to_play"].astype(jnp.float32)
    l_value = optax.sigmoid_binary_cross_entropy(2.0 * out["value_logit"], (1.0 + batch["outcomes"]) / 2.0)
    own_t = batch["ownership"].astype(jnp.float32) * tp[:, None, None]
    l_aux, parts = ownership_score_loss(out, own_t, batch["score"] * tp)
    return (W_VALUE * l_value + l_aux).mean(), {"value_loss": l_value.mean(), **parts}


def ownership_score_loss(out: dict, ownership, score):
    """KataGo's ownership and score terms per position (weights included),
    0 where the score is NaN (targets unknown), and their parts: ``out``
    with ``ownership_logit`` [B, H, W] and ``score`` [B]; targets from the
    mover's view, ``ownership`` [B, H, W] in {-1, 0, 1}, ``score`` [B] in
    points. Returns (loss [B], parts dict)."""
    import jax.numpy as jnp
    import optax

    known = jnp.isfinite(score)
    kf = known.astype(jnp.float32)
    l_own = optax.sigmoid_binary_cross_entropy(2.0 * out["ownership_logit"], (1.0 + ownership) / 2.0).mean((1, 2))
    score_t = jnp.where(known, score, 0.0)
    l_score = optax.huber_loss(out["score"], score_t, delta=SCORE_DELTA)  # 0.5 d^2, then linear: KataGo's
    n_known = jnp.maximum(kf.sum(), 1.0)
    parts = {"ownership_loss": (kf * l_own).sum() / n_known,
             "score_mae": (kf * jnp.abs(out["score"] - score_t)).sum() / n_known, "known": kf.mean()}
    return kf * (W_OWNERSHIP * l_own + W_SCORE * l_score), parts


def make_aux_train_step():
    """jitted ``(state, batch with AUX_BATCH_KEYS) -> (state, metrics)`` for
    a ``*_aux_value`` net: ``aux_loss`` plus the winner accuracy; state donated."""
    import jax
    import jax.numpy as jnp

    def train_step(state, batch):
        def loss_fn(params):
            variables = {"params": params, "batch_stats": state.batch_stats}
            out, updates = state.apply_fn(variables, batch["planes"], train=True, aux=True, mutable=["batch_stats"])
            loss, parts = aux_loss(out, batch)
            return loss, (out["value"], parts, updates)

        (loss, (v, parts, updates)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state, m = loop.apply_update(state, grads, updates, loss)
        return state, {**m, **parts, "accuracy": jnp.mean((v > 0) == (batch["outcomes"] > 0))}

    return jax.jit(train_step, donate_argnums=0)


def make_predict(model):
    """jitted ``(variables, planes [B,H,W,C]) -> v [B]``: a value net's, or a
    policy-value net's value head."""
    import jax

    from alphalite.nn import nets

    pv = isinstance(model, nets.ResNetPolicyValue)

    def predict(variables, planes):
        out = model.apply(variables, planes, train=False)
        return out[1] if pv else out

    return jax.jit(predict)


def make_predict_any(model):
    """``make_predict_aux``'s for a net with ownership and score heads (what
    ``evaluate(..., aux=True)`` and ``update`` take), else ``make_predict``'s."""
    from alphalite.nn import nets

    return make_predict_aux(model) if nets.has_ownership(model) else make_predict(model)


def make_predict_aux(model):
    """jitted ``(variables, planes [B,H,W,C]) -> (v [B], ownership [B,H,W],
    score [B])`` of a ``*_aux_value`` net (or a ``*_aux_pv`` net's heads),
    all for the player to move: v and ownership in [-1, 1] (+1: the mover
    wins / owns the point), score in points (the mover's area minus the
    opponent's, komi included)."""
    import jax

    from alphalite.nn import nets

    pv = isinstance(model, nets.ResNetPolicyValue)

    def predict(variables, planes):
        out = model.apply(variables, planes, train=False, aux=True)
        out = out[1] if pv else out
        return out["value"], out["ownership"], out["score"]

    return jax.jit(predict)


def symmetric_predict(predict, symmetries: int, aux: bool = False):
    """``predict`` (``make_predict``'s, or ``make_predict_aux``'s with
    ``aux``) averaged over the first ``symmetries`` of the 8 board
    symmetries (the identity first), all images in one network call: the
    values and scores averaged, each image's ownership mapped back to the
    board before its average."""
    from alphalite.nn import features

    k = features.check_symmetries(symmetries)
    if k == 1:
        return predict

    def averaged(variables, planes):
        xs = np.stack([features.transform_planes(planes, g) for g in range(k)])  # [k, B, H, W, C]
        out = predict(variables, xs.reshape(-1, *xs.shape[2:]))
        if not aux:
            return np.asarray(out).reshape(k, -1).mean(0)
        v, own, score = (np.asarray(a).reshape(k, -1, *np.shape(a)[1:]) for a in out)
        own = np.stack([features.transform_planes(own[g][..., None], features.inverse(g))[..., 0] for g in range(k)])
        return v.mean(0), own.mean(0), score.mean(0)

    return averaged


def load_aux_net(checkpoint: str):
    """(info, variables, predict) of a value net with ownership and score
    heads; ``predict`` as ``make_predict_aux``. CheckpointError for another net."""
    info, model, variables = ckpt.load_model(checkpoint, "value")
    if not is_aux(info["model"]):
        raise ckpt.CheckpointError(f"{checkpoint} ({info['model']}) has no ownership and score heads")
    return info, variables, make_predict_aux(model)


def evaluate(predict, variables, batches, max_positions: int = 0, aux: bool = False) -> dict:
    """Value metrics over batches from the dataset loaders (MSE is on the
    mover's outcome, the same number as from black's side). ``aux``:
    ``predict`` is ``make_predict_aux``'s, and the result adds
    ``ownership_accuracy``, ``score_mae`` and ``aux_positions``."""
    stats, extra = metrics.WinnerStats(), metrics.OwnershipScoreStats()
    for batch in batches:
        update(stats, extra if aux else None, predict(variables, batch["planes"]), batch)
        if max_positions and stats.n >= max_positions:
            break
    res = stats.result()
    del res["by_move"]
    if aux:
        r = extra.result()
        res.update(ownership_accuracy=r["ownership_accuracy"], score_mae=r["score_mae"], aux_positions=r["positions"])
    return res


def update(stats, extra, out, batch, by_score=None) -> None:
    """Add one batch's predictions (``v`` or ``(v, ownership, score)`` for
    the mover) to WinnerStats and, when given, OwnershipScoreStats (black's
    view) and a WinnerStats of the score head's sign (``by_score``)."""
    tp = batch["to_play"].astype(np.float64)
    v = np.asarray(out[0] if isinstance(out, tuple) else out)
    stats.update(v * tp, batch["outcomes"] * tp, batch["move_number"])
    if extra is not None:
        own, score = np.asarray(out[1]), np.asarray(out[2])
        extra.update(own * tp[:, None, None], batch["ownership"], score * tp, batch["score"], batch["move_number"])
    if by_score is not None:
        by_score.update(np.sign(np.asarray(out[2])) * tp, batch["outcomes"] * tp, batch["move_number"])


def load_value_net(checkpoint: str):
    """(info, variables, predict) of an exported value model or value run."""
    info, model, variables = ckpt.load_model(checkpoint, "value")
    return info, variables, make_predict(model)


def eval_value_checkpoint(checkpoint: str, sources, *, max_games: int = 0, split: str = "test",
                          influence_games: int = 0, seed: int = 0, progress: bool = False,
                          gnugo_games: int = 0, moves=SNAPSHOT_MOVES, symmetries: int = 1) -> dict:
    """The `alphalite eval-value` result (one JSON-able dict).

    SRC is a dataset folder (value net and influence model tested on its
    ``split``, the influence model trained on its train split) or SGF
    sources, built into a temporary dataset split 80/20 by game hash like
    the paper (train / test). ``moves``: the move numbers judged (the
    paper's by default; a 9x9 game is over before move 80). ``symmetries``
    > 1 judges by the net's outputs averaged over that many board symmetries."""
    import tempfile

    from alphalite.nn import nets

    t0 = time.time()
    info, model, variables = ckpt.load_model(checkpoint, ("value", "policy_value"))
    aux = nets.has_ownership(model)
    predict = symmetric_predict(make_predict_any(model), symmetries, aux)
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
        moves = tuple(sorted(int(m) for m in moves))
        sel = {"decided_only": True, "move_numbers": moves}
        tests = list(dataset.iterate_eval(data, split=test_split, preset=preset, board_size=size,
                                          max_games=max_games, batch_size=256, **sel))
        if not tests:
            raise dataset.DatasetError(f"no decided test games of size {size} reach move {moves[0]} "
                                       f"in {', '.join(srcs)}")
        net, extra, by_score = metrics.WinnerStats(), metrics.OwnershipScoreStats(), metrics.WinnerStats()
        t_net = time.time()
        for b in tests:
            update(net, extra if aux else None, predict(variables, b["planes"]), b, by_score if aux else None)
        t_net = time.time() - t_net
        base = influence.train_and_evaluate(data, tests, board_size=size, max_games=influence_games,
                                            moves=moves, seed=seed, progress=progress)
        ref = (gnugo_reference(data, test_split, size, tests, games=gnugo_games, moves=moves, progress=progress)
               if gnugo_games else None)
    games = len(np.unique(np.concatenate([b["game"] for b in tests])))
    out = {"checkpoint": str(checkpoint), "model": info["model"], "board_size": size, "symmetries": int(symmetries),
           "test_games": games, "positions": net.n, "snapshot_moves": list(moves),
           "value_net": _summary(net.result(), moves),
           "influence": {**_summary(base["stats"], moves), **base["train"]},
           "paper_influence_accuracy": {str(k): v for k, v in PAPER_ACCURACY.items()},
           "value_net_positions_per_s": net.n / max(t_net, 1e-9), "seconds": time.time() - t0}
    # positions whose game has ownership and score targets (ended by count)
    out["counted_test_positions"] = int(sum(np.isfinite(b["score"]).sum() for b in tests))
    if aux:
        r = extra.result()
        out["value_net"].update(ownership_accuracy=r["ownership_accuracy"], score_mae=r["score_mae"],
                                **{f"ownership_accuracy_{m}": r["by_move"].get(str(m), {}).get("ownership_accuracy")
                                   for m in moves},
                                **{f"score_mae_{m}": r["by_move"].get(str(m), {}).get("score_mae")
                                   for m in moves})
        # The winner as the sign of the score head (komi included), on every decided test game.
        by = _summary(by_score.result(), moves)
        out["value_net"]["score_head_winner"] = {k: by[k] for k in by if k == "accuracy" or k.startswith("acc_")}
    if ref is not None:
        out["gnugo_estimate"] = ref
    return out


def gnugo_reference(data, split: str, size: int, tests, *, games: int, gnugo: str | None = None,
                    level: int = 10, moves=SNAPSHOT_MOVES, progress: bool = False) -> dict:
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
            played, cols = allg["moves"][off[g]:off[g + 1]], allg["colors"][off[g]:off[g + 1]]
            found = {}
            try:
                gg.send("clear_board")
                gg.send(f"komi {float(allg['komi'][g])}")
                for k in range(len(played) + 1):
                    if k in want[g]:
                        est = gg.send("estimate_score").strip()
                        found[k] = 1.0 if est.startswith("B+") else (-1.0 if est.startswith("W+") else 0.0)
                        if len(found) == len(want[g]):
                            break
                    gg.send(f"play {colour_word(int(cols[k]))} {coords.to_gtp(int(played[k]), size)}")
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
    res = {k: v for k, v in _summary(stats.result(), moves).items() if not k.startswith("mse")}  # signs only
    return {**res, "games": len(ids) - sum(skipped.values()), "skipped": skipped, "level": level,
            "seconds": time.time() - t0}


def _summary(res: dict, moves) -> dict:
    by = res["by_move"]
    return {"mse": res["mse"], "accuracy": res["accuracy"],
            **{f"acc_{m}": by[str(m)]["accuracy"] if str(m) in by else None for m in moves},
            **{f"mse_{m}": by[str(m)]["mse"] if str(m) in by else None for m in moves},
            **{f"n_{m}": by[str(m)]["n"] if str(m) in by else 0 for m in moves}}


def cli_eval_value(args) -> int:
    res = eval_value_checkpoint(args.checkpoint, args.src, max_games=args.max_games, split=args.split,
                                influence_games=args.influence_games, seed=args.seed,
                                gnugo_games=args.gnugo_games, moves=args.moves or SNAPSHOT_MOVES,
                                symmetries=args.symmetries)
    print(json.dumps(res, sort_keys=True), flush=True)
    return 0
