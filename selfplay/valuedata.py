"""Value-net training data the AlphaGo way: one position per self-play game.

Each game draws ``U`` uniformly from ``0..u_max``; moves ``0..U-1`` are
sampled from the SL policy, move ``U`` is a uniformly random legal move
(not a pass), and the RL policy plays every later move to the end (two
passes, or the move cap). The game is scored by Tromp-Taylor area with komi,
and the position after move ``U`` (``U + 1`` moves played) is the training
example, labelled with the winner. Without an RL checkpoint the SL policy
stands in for it. A game that ends before its random move is dropped.

Policy moves follow ``selfplay.games``: sampled from the masked softmax at
``temperature`` over the candidate moves (legal, no own eye, nothing inside
own territory; pass only when nothing else is). By default self-atari is
also off the list (``no_self_atari``: no move that leaves its group with one
liberty, ko captures included, captures of two or more stones allowed):
without it the 19x19 policies fill their own liberties and fight kos until
81% of games hit the move cap; with it 32 of 32 test games ended by two
passes, at a median of 392 moves.

Games are played in lock step, ``batch`` at a time: at each move step every
policy is called once (one jitted call, padded to ``batch``) for the games
where it is to move; with the SL net standing in for the RL net, one call
serves both.

Output: a dataset folder (``alphalite.data.dataset`` format, readable by its
loaders and by ``alphalite sl --task value --marked-only``), one shard per
batch, with extra per-game fields::

    random_move [G] int32    index of the uniformly random move (= U)
    value_move  [G] int32    moves played before the training position (= U + 1)
    score [G] float32, ownership [G, size*size] int8
                             the value targets of ``*_aux_value`` nets: the
                             final Tromp-Taylor score (black - white - komi)
                             and owner of each point, exact as the games are
                             scored (folders begun before them have none)

Shards are written to a temporary name and renamed; ``index.json`` (also
atomic) lists only finished shards, so readers never see a half-written
one. Batch ``i`` uses the random stream ``(seed, i)``: a rerun after
``kill -9`` continues with the next batch; Ctrl-C or SIGTERM writes the
games that already finished in the batch in progress, then stops.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from alphalite.data import dataset
from alphalite.go import board, sgf
from alphalite.nn import checkpoint as ckpt
from alphalite.nn import features
from alphalite.runtime import config, files
from alphalite.train.loop import GracefulStop

FORMAT_NOTE = "alphalite value self-play data (SL to U, random move U, RL after)"


def load_policy(path: str, size: int | None = None):
    info, model, variables = ckpt.load_model(path, "policy", size)
    return {"path": str(path), "model": model, "variables": variables, "preset": info.get("preset", "default"),
            "size": int(info["board_size"])}


def default_rl_checkpoint(size: int) -> str | None:
    """The shipped RL policy ``rl<size>`` (the RL stage's export) when there is one, else None."""
    name = f"rl{size}"
    return str(ckpt.shipped(name)) if name in ckpt.shipped_names() else None


def play_value_games(sl: dict, rl: dict, n_games: int, komi: float, rng: np.random.Generator, *,
                     u_max: int, temperature: float = 1.0, max_moves: int | None = None,
                     no_self_atari: bool = True, stop=None) -> list[dict]:
    """Play ``n_games`` games in lock step under the protocol above.

    Returns one dict per game that finished (dropped games left out), with
    ``moves`` int16 [T], ``random_move`` U, ``score`` (black - white -
    komi), ``ended``. ``stop()`` is polled between move steps; when it
    returns True, the games already finished are returned."""
    from selfplay.games import policy_moves

    size = sl["size"]
    if rl["size"] != size:
        raise ValueError("SL and RL policies are for different board sizes")
    max_moves = board.default_max_moves(size) if max_moves is None else int(max_moves)
    A = size * size + 1
    U = rng.integers(0, u_max + 1, n_games)
    boards = [board.new_game(size, komi).copy_tuple(extra_history=max_moves + 1) for _ in range(n_games)]
    moves = np.full((n_games, max_moves), -1, np.int16)
    n_played = np.zeros(n_games, np.int64)
    live = np.ones(n_games, np.bool_)
    dropped = np.zeros(n_games, np.bool_)
    finished_at = np.full(n_games, -1, np.int64)
    own = np.zeros(size * size, np.int8)
    legal = np.zeros(A, np.bool_)
    same = sl["path"] == rl["path"]
    nets = [sl] if same else [sl, rl]
    planes = [np.zeros((n_games, size, size, features.num_planes(p["preset"])), np.float32) for p in nets]
    masks = [np.ones((n_games, A), np.bool_) for _ in nets]
    pids = [features.preset_id(p["preset"]) for p in nets]
    step = 0
    while live.any():
        if stop is not None and stop():
            break
        colour = 1 if step % 2 == 0 else -1
        chosen = np.full(n_games, -1, np.int64)
        rand = np.flatnonzero(live & (U == step))
        for g in rand:  # the uniformly random legal move (not a pass)
            board.legal_mask(boards[g], legal)
            pts = np.flatnonzero(legal[:-1])
            if pts.size == 0:
                dropped[g] = True
                live[g] = False
                continue
            chosen[g] = int(pts[rng.integers(pts.size)])
        groups = [np.flatnonzero(live & (U != step))] if same else \
            [np.flatnonzero(live & (U > step)), np.flatnonzero(live & (U < step))]
        for i, rows in enumerate(groups):
            if rows.size == 0:
                continue
            chosen[rows] = policy_moves(boards, rows, pids[i], own, planes[i], masks[i], False,
                                        nets[i]["model"], nets[i]["variables"], temperature, rng,
                                        no_self_atari)
        for g in np.flatnonzero(live):
            m = int(chosen[g])
            if board.play_flat(boards[g], m, colour) != board.LEGAL:
                raise RuntimeError(f"value self-play chose an illegal move {m}")
            moves[g, n_played[g]] = m
            n_played[g] += 1
            if boards[g].meta[board.M_PASSES] >= 2 or n_played[g] >= max_moves:
                live[g] = False
                finished_at[g] = step
                # the training position (before move U+1) must exist in the record
                if n_played[g] <= U[g] + 1:
                    dropped[g] = True
        step += 1
    out = []
    for g in np.flatnonzero((finished_at >= 0) & ~dropped):
        t = int(n_played[g])
        final = np.zeros(size * size, np.int8)
        board.owners_into(boards[g], final)  # Tromp-Taylor, the rule the games are scored by
        b, w = int((final == 1).sum()), int((final == -1).sum())
        over = boards[g].meta[board.M_PASSES] >= 2
        out.append({"moves": moves[g, :t].copy(), "random_move": int(U[g]), "score": float(b - w - komi),
                    "ownership": final, "ended": "passes" if over else "move cap"})
    return out


def _game_dict(size: int, komi: float, g: dict, name: str) -> dict:
    mv = g["moves"].astype(np.int16)
    cl = np.where(np.arange(len(mv)) % 2 == 0, 1, -1).astype(np.int8)
    sp, sc = np.zeros(0, np.int16), np.zeros(0, np.int8)
    s = g["score"]
    winner = 1 if s > 0 else (-1 if s < 0 else 0)
    result = sgf.result_string(s)
    return {"size": size, "komi": komi, "handicap": 0, "winner": winner, "margin": abs(s) if s else 0.0,
            "num_moves": len(mv), "total_moves": len(mv), "stop": 0, "moves": mv, "colors": cl,
            "setup_points": sp, "setup_colors": sc, "game_hash": dataset.game_hash(size, sp, sc, mv, cl),
            "game_id": name, "result": result, "black_player": "value-selfplay", "white_player": "value-selfplay",
            "black_rank": "", "white_rank": "", "date": "", "rules": "Tromp-Taylor"}


def _read_index(out: Path) -> dict | None:
    try:
        return json.loads((out / "index.json").read_text())
    except (OSError, ValueError):
        return None


def write_shard(out: Path, batch_no: int, games: list[dict], size: int, komi: float, index: dict,
                val_frac: float, test_frac: float) -> None:
    """One shard per split for the games of one batch, then the index."""
    by_split: dict[str, list[dict]] = {s: [] for s in dataset.SPLITS}
    for k, g in enumerate(games):
        d = _game_dict(size, komi, g, f"batch{batch_no:05d}-game{k:03d}")
        d["random_move"] = g["random_move"]
        d["final_score"], d["final_ownership"] = g["score"], g["ownership"]
        by_split[dataset.split_of(d["game_hash"], val_frac, test_frac)].append(d)
    for split, gs in by_split.items():
        if not gs:
            continue
        random_move = np.array([g["random_move"] for g in gs], np.int32)
        extra = {"random_move": random_move, "value_move": random_move + 1}
        if index.get("targets"):  # final score and ownership, exact (folders from before them have none)
            extra["score"] = np.array([g["final_score"] for g in gs], np.float32)
            extra["ownership"] = np.stack([g["final_ownership"] for g in gs]).astype(np.int8)
        index["shards"].append(dataset.write_shard(out, f"{split}-{batch_no:05d}.npz", split, gs, extra))
    index["batches_done"] = batch_no + 1
    index["summary"]["games"] = sum(s["games"] for s in index["shards"])
    files.write_json_atomic(out / "index.json", index)


def generate(out, sl_checkpoint: str, *, rl_checkpoint: str | None = None, games: int = 256, batch: int = 64,
             komi: float = 7.5, u_max: int | None = None, temperature: float = 1.0, seed: int = 0,
             val_frac: float = 0.05, test_frac: float = 0.1, max_seconds: float = 0.0,
             max_moves: int | None = None, no_self_atari: bool = True, progress: bool = True) -> dict:
    """Generate (or continue) a value data folder until it holds ``games``
    games (or ``max_seconds`` pass). Returns a summary dict."""
    from tqdm import tqdm

    # values no run can use, refused before anything is loaded or written
    config.refuse((
            ("--games", games >= 0, ">= 0", games),
            ("--batch", batch >= 1, ">= 1", batch),  # 0 looped for ever, playing nothing
            ("--temperature", np.isfinite(temperature) and temperature >= 0, ">= 0 (0: the likeliest move)",
             temperature),
            ("--u-max", u_max is None or u_max >= 0, ">= 0", u_max),
            ("--max-minutes", np.isfinite(max_seconds) and max_seconds >= 0, ">= 0 (0: no limit)",
             max_seconds / 60)))  # < 0 stopped at once
    sl = load_policy(sl_checkpoint)
    size = sl["size"]
    rl_checkpoint = rl_checkpoint or default_rl_checkpoint(size)
    rl = load_policy(rl_checkpoint, size) if rl_checkpoint else sl
    u_max = (3 * size * size) // 4 if u_max is None else int(u_max)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    opts = {"sl": str(sl_checkpoint), "rl": str(rl_checkpoint or sl_checkpoint), "komi": komi, "u_max": u_max,
            "temperature": temperature, "seed": seed, "batch": batch, "val_frac": val_frac, "test_frac": test_frac,
            "size": size, "max_moves": max_moves, "no_self_atari": no_self_atari}
    index = _read_index(out)
    if index is not None:  # folders from before the option were made with self-atari allowed
        index.get("options", {}).setdefault("no_self_atari", False)
    if index is None:
        index = {"format": dataset.FORMAT, "complete": True, "shards": [], "batches_done": 0, "targets": True,
                 "summary": {"games": 0}, "options": opts, "note": FORMAT_NOTE}
    elif index.get("options") != opts:
        diff = [k for k in opts if index.get("options", {}).get(k) != opts[k]]
        hint = " (--allow-self-atari)" if "no_self_atari" in diff else ""
        raise ValueError(f"{out} holds value data made with other settings ({', '.join(diff)}){hint}; "
                         "use another --out or the same settings")
    t0 = time.time()
    have = index["summary"]["games"]
    bar = tqdm(total=games, initial=min(have, games), desc="value data", unit="game", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    stop = GracefulStop()
    played = dropped = 0
    stopped = "finished"
    try:
        while index["summary"]["games"] < games:
            if max_seconds and time.time() - t0 > max_seconds:
                stopped = "time limit"
                break
            b = index["batches_done"]
            rng = np.random.default_rng([seed, b, 0x7A1])
            done = play_value_games(sl, rl, batch, komi, rng, u_max=u_max, temperature=temperature,
                                    max_moves=max_moves, no_self_atari=no_self_atari,
                                    stop=lambda: stop.requested)
            if stop.requested:
                stopped = "interrupted"
            played += batch
            dropped += batch - len(done)
            if done:
                write_shard(out, b, done, size, komi, index, val_frac, test_frac)
            else:
                index["batches_done"] = b + 1
                files.write_json_atomic(out / "index.json", index)
            bar.update(len(done))
            if stop.requested:
                break
    finally:
        stop.restore()
        bar.close()
    secs = time.time() - t0
    return {"out": str(out), "games": index["summary"]["games"], "games_this_run": played - dropped,
            "dropped_this_run": dropped, "seconds": secs, "games_per_hour": 3600 * (played - dropped) / max(secs, 1e-9),
            "sl": opts["sl"], "rl": opts["rl"], "stopped": stopped}


def cli_value_data(args) -> int:
    res = generate(args.out, args.sl, rl_checkpoint=args.rl, games=args.games, batch=args.batch, komi=args.komi,
                   u_max=args.u_max, temperature=args.temperature, seed=args.seed, max_seconds=60 * args.max_minutes,
                   no_self_atari=not args.allow_self_atari, progress=not args.quiet)
    print(json.dumps(res, sort_keys=True), flush=True)
    return 130 if res["stopped"] == "interrupted" else 0


# ---------------------------------------------------------------- recorded games: final ownership and score
#
# ``build_targets`` copies a dataset folder and gives each game that ended by
# count (a finite margin, like RE W+3.5) KataGo's auxiliary targets: the final
# owner of every point and the final score. The record stops at the last move
# with the dead stones still on the board; ``engine.decisions.Judge`` settles
# them (a chain is dead when the opponent owns its points at the end of
# ``playouts`` pattern rollouts, ``checkpoints/rollout19``, by ``players.DEAD``
# on average), then the settled
# position is counted by area (Tromp-Taylor): ownership +1/-1 per point, 0 for
# dame and seki, score = black - white - komi. Games that ended otherwise keep
# score NaN and ownership 0 (unknown; the loss masks them), and so do counted
# games whose judged winner is not the recorded one (the judge misread a group:
# the targets would contradict the winner the same positions learn) and
# handicap games (an area count overstates Black by about the handicap under
# territory rules, and area rules give White a compensation we cannot know).

TARGET_PLAYOUTS = 128
# 2: no targets for disagreeing or handicap games (1 gave them targets); 3: dead stones by whole
# chains (players.DEAD), not stone by stone; 4: rollouts without bad self-ataris (a seki stands);
# 5: a chain in seki by the judge's own reading (tactics.in_seki) is never dead
TARGETS_VERSION = 5
TARGETS_NOTE = "alphalite dataset with value targets (final ownership and score of counted games)"
_judges: dict = {}


def final_position(size: int, komi: float, setup_points, setup_colors, moves, colors) -> board.GoState:
    """The position after every move of a record (moves legal, as the dataset keeps them)."""
    s = board.new_game(size, komi)
    if len(setup_points):
        s = board.setup(s, black=[int(p) for p, c in zip(setup_points, setup_colors) if c == board.BLACK],
                        white=[int(p) for p, c in zip(setup_points, setup_colors) if c == board.WHITE])
    b = s.copy_tuple(extra_history=len(moves) + 1)
    for m, c in zip(moves, colors):
        board.set_to_play(b, int(c))
        if board.play_flat(b, int(m), int(c)) != board.LEGAL:
            raise board.IllegalMove(int(m), size, "replaying a dataset game")
    return board.GoState(size, s.komi, s.superko, s.suicide, b)


def judge_for(playouts: int, seed: int = 0):
    """One ``decisions.Judge`` with the pattern rollout policy per process."""
    from alphalite.engine.decisions import Judge
    from search.rollout import PatternPolicy

    key = (playouts, seed)
    if key not in _judges:
        _judges[key] = Judge(playouts, seed, capacity=1, policy=PatternPolicy.load("rollout19"))
    return _judges[key]


def settled_targets(state: board.GoState, judge) -> tuple[np.ndarray, float, int]:
    """(ownership int8 [size*size], score, dead stones) of a finished game:
    the judge's dead stones taken off, then the area count with komi."""
    from alphalite.engine import players

    _, dead = judge(state)
    settled = board.setup(state, empty=[int(p) for p in dead]) if len(dead) else state
    own = players.owners(settled)
    return own, float(int(own.sum()) - state.komi), int(len(dead))


def is_counted(a: dict, g: int) -> bool:
    """Game ``g`` of shard arrays ended by count and its record was kept whole."""
    return bool(np.isfinite(a["margin"][g]) and a["winner"][g] != 0 and a["stop"][g] == 0
                and a["num_moves"][g] == a["total_moves"][g])


def _targets_work(items, playouts, seed):
    judge = judge_for(playouts, seed)
    out = []
    for size, komi, sp, sc, mv, cl in items:
        try:
            own, score, dead = settled_targets(final_position(size, komi, sp, sc, mv, cl), judge)
        except (board.IllegalMove, ValueError):
            out.append(None)
            continue
        out.append((own, score, dead))
    return out


def shard_targets(a: dict, width: int, *, playouts: int = TARGET_PLAYOUTS, seed: int = 0, pool=None,
                  chunk: int = 16, stop=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """(score [G] float32, ownership [G, width] int8, stats) for the games of
    one shard's arrays; ``pool``: a process pool (None: this process).
    KeyboardInterrupt as soon as ``stop()`` is true (between games, or while
    waiting for the pool): a shard takes minutes."""
    G = int(a["size"].shape[0])
    score = np.full(G, np.nan, np.float32)
    own = np.zeros((G, width), np.int8)
    counted = [g for g in range(G) if is_counted(a, g)]
    todo = [g for g in counted if a["handicap"][g] < 2]
    mo, so = a["move_offsets"], a["setup_offsets"]
    items = [(int(a["size"][g]), float(a["komi"][g]), a["setup_points"][so[g]:so[g + 1]],
              a["setup_colors"][so[g]:so[g + 1]], a["moves"][mo[g]:mo[g + 1]], a["colors"][mo[g]:mo[g + 1]])
             for g in todo]
    stop = stop or (lambda: False)
    results = []
    if pool is None:
        for item in items:
            if stop():
                raise KeyboardInterrupt
            results += _targets_work([item], playouts, seed)
    else:
        for res in [pool.apply_async(_targets_work, (items[i:i + chunk], playouts, seed))
                    for i in range(0, len(items), chunk)]:
            while not res.ready():
                if stop():
                    raise KeyboardInterrupt
                res.wait(0.1)
            results += res.get()
    st = {"counted": len(counted), "handicap": len(counted) - len(todo), "judged": 0, "failed": 0,
          "winner_agrees": 0, "abs_error_sum": 0.0, "dead_stones": 0}
    for g, r in zip(todo, results):
        if r is None:
            st["failed"] += 1
            continue
        o, s, dead = r
        recorded = float(a["winner"][g]) * float(a["margin"][g])
        st["judged"] += 1
        agrees = bool(np.sign(s) == np.sign(recorded))
        st["winner_agrees"] += int(agrees)
        st["abs_error_sum"] += abs(s - recorded)
        st["dead_stones"] += dead
        if agrees:  # else no targets: they would contradict the recorded winner
            n = int(a["size"][g]) ** 2
            own[g, :n] = o
            score[g] = s
    return score, own, st


def build_targets(src, out, *, playouts: int = TARGET_PLAYOUTS, seed: int = 0, jobs: int = 1,
                  max_minutes: float = 0.0, progress: bool = True) -> dict:
    """Copy the dataset folder ``src`` to ``out`` with value targets (see above).

    First every shard is copied with its targets unknown, so ``out`` is a
    complete dataset at once; then the shards are judged one at a time (test,
    val, then train) and rewritten. Each judged shard is recorded in the index
    (``value_targets``); a rerun continues with the next one. Ctrl-C or
    SIGTERM stops at once (``stopped``: interrupted), dropping the shard in
    progress: a rerun judges it again."""
    from tqdm import tqdm

    from alphalite.runtime import interrupt_on_sigterm, process_pool

    src, out = Path(src), Path(out)
    # values no run can use, refused before anything is written
    config.refuse((
            ("--playouts", playouts >= 1, ">= 1 (the rollouts that settle the dead stones)", playouts),
            ("--jobs", jobs >= 1, ">= 1", jobs),  # 0 and below ran on one process, unsaid
            ("--max-minutes", max_minutes >= 0, ">= 0 (0: no limit)", max_minutes)))  # < 0 stopped at once
    if src.resolve() == out.resolve():
        raise dataset.DatasetError("--out must be another folder than the source dataset")
    index_src = dataset.read_index(src)
    width = max([int(k) ** 2 for s in index_src["shards"] for k in s["sizes"]] or [0])
    out.mkdir(parents=True, exist_ok=True)
    opts = {"source": str(src), "playouts": playouts, "seed": seed, "width": width, "version": TARGETS_VERSION}
    index = _read_index(out)
    if index is not None and index.get("value_targets", {}).get("options") != opts:
        raise ValueError(f"{out} holds targets made with other settings; use another --out or the same settings")
    if index is None:
        index = {**index_src, "note": TARGETS_NOTE, "shards": [],
                 "value_targets": {"options": opts, "judged": {}}}
        undo = interrupt_on_sigterm()  # stopped here, nothing is indexed: a rerun copies again
        try:
            for s in index_src["shards"]:  # targets unknown until judged
                a = dataset.read_shard(src / s["file"])
                G = a["size"].shape[0]
                a["score"], a["ownership"] = np.full(G, np.nan, np.float32), np.zeros((G, width), np.int8)
                index["shards"].append(dataset.write_arrays(out, s["file"], s["split"], a))
        finally:
            undo()
        files.write_json_atomic(out / "index.json", index)
    order = {"test": 0, "val": 1, "train": 2}
    todo = sorted((s for s in index["shards"] if s["file"] not in index["value_targets"]["judged"]),
                  key=lambda s: (order.get(s["split"], 3), s["file"]))
    t0 = time.time()
    stopped = "finished"
    pool = process_pool(jobs, initializer=dataset.pool_worker_init) if jobs > 1 else None
    stop = GracefulStop()
    try:
        for s in tqdm(todo, desc="value targets", unit="shard", disable=not progress, file=sys.stderr):
            if stop.requested:
                raise KeyboardInterrupt
            if max_minutes and time.time() - t0 > 60 * max_minutes:
                stopped = "time limit"
                break
            a = dataset.read_shard(out / s["file"])
            # Ctrl-C or SIGTERM drops the shard in progress at once (it is judged again on resume)
            a["score"], a["ownership"], st = shard_targets(a, width, playouts=playouts, seed=seed, pool=pool,
                                                           stop=lambda: stop.requested)
            dataset.write_arrays(out, s["file"], s["split"], a)
            index["value_targets"]["judged"][s["file"]] = {**st, "split": s["split"]}
            files.write_json_atomic(out / "index.json", index)
    except KeyboardInterrupt:  # a second signal may have cut the last write short: the index on disk says
        stopped = "interrupted"
        index = _read_index(out) or index
    finally:
        stop.restore()
        if pool is not None:
            pool.terminate()
            pool.join()
    return {"out": str(out), "stopped": stopped, "seconds": time.time() - t0, **targets_summary(index)}


def targets_summary(index: dict) -> dict:
    """How many games have targets, and how the judged score agrees with the records."""
    judged = index.get("value_targets", {}).get("judged", {})
    tot = {k: sum(v.get(k, 0) for v in judged.values())
           for k in ("counted", "handicap", "judged", "failed", "winner_agrees", "abs_error_sum", "dead_stones")}
    n = max(tot["judged"], 1)
    return {"shards_judged": len(judged), "shards": len(index.get("shards", [])),
            "counted_games": tot["counted"], "handicap_games": tot["handicap"], "judged_games": tot["judged"],
            "failed_games": tot["failed"], "games_with_targets": tot["winner_agrees"],
            "winner_agrees_with_record": tot["winner_agrees"] / n,
            "mean_abs_score_error": tot["abs_error_sum"] / n, "dead_stones_per_game": tot["dead_stones"] / n}


def cli_value_targets(args) -> int:
    try:  # bad input (DatasetError, ValueError) is cli.main's one line
        res = build_targets(args.src, args.out, playouts=args.playouts, seed=args.seed, jobs=args.jobs,
                            max_minutes=args.max_minutes, progress=not args.quiet)
    except KeyboardInterrupt:  # while copying the dataset, before any shard was judged
        print(f"value-targets: interrupted while copying the dataset into {args.out}; nothing is judged yet: "
              "rerun the same command to start again", file=sys.stderr)
        return 130
    if res["stopped"] == "interrupted":
        print(f"value-targets: interrupted; {res['shards_judged']} of {res['shards']} shards judged are kept in "
              f"{res['out']} (the one in progress is dropped); rerun the same command to continue",
              file=sys.stderr, flush=True)
    print(json.dumps(res, sort_keys=True), flush=True)
    return 130 if res["stopped"] == "interrupted" else 0
