"""The ``alphalite`` command. Subcommands import their module lazily, so
``alphalite --help`` is instant and importing this module does nothing."""

from __future__ import annotations

import argparse
import sys

from alphalite import runtime
from alphalite.nn import INFERENCE


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to an option's help unless the help already
    speaks of its default or it has none worth showing (None, "", [])."""

    def _get_help_string(self, action):
        help_ = action.help or ""
        if action.default is None or action.default in ("", []) or "default" in help_:
            return help_
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    # Subparsers are made with the parent's class, so every one formats the same.
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def _data_build(args):
    from alphalite.data import dataset

    return dataset.cli_build(args)


def _data_gnugo(args):
    from alphalite.data import gnugo_games

    return gnugo_games.cli(args)


def _sl(args):
    import json

    from alphalite.runtime import config as config_lib
    from alphalite.train import supervised as train

    base = config_lib.file_values(train.SLConfig, json.loads(open(args.config).read())) if args.config else {}
    cfg = config_lib.from_args(train.SLConfig, args, base)
    res = train.train_and_evaluate(cfg, args.workdir, progress=not args.quiet)
    print(json.dumps(res, sort_keys=True))
    return 130 if res.get("stopped") == "interrupted" else 0


def _rl_plot(args):
    from alphalite.zero import plots

    print(plots.plot_workdir(args.run, args.out))


def _rl(args):
    import json

    from alphalite.runtime import config as config_lib

    base = json.loads(open(args.config).read()) if args.config else {}
    _refuse_other_algo(args)
    if args.algo == "alphazero":
        from alphalite.zero import run as zero
        from search.params import SearchParams
        from selfplay.config import SelfPlayConfig

        parts = {name: config_lib.from_args(cls, args, base.get(name, {}))
                 for name, cls in (("zero", zero.ZeroConfig), ("selfplay", SelfPlayConfig), ("search", SearchParams))}
        res = zero.train_alphazero(parts["zero"], parts["selfplay"], parts["search"], args.workdir,
                                   address=args.address, num_cpus=args.num_cpus, progress=not args.quiet)
        print(json.dumps(res, sort_keys=True))
        return 130 if res.get("stopped") == "interrupted" else 0
    from selfplay import rl

    cfg = config_lib.from_args(rl.RLConfig, args, config_lib.file_values(rl.RLConfig, base))
    res = rl.train_rl(cfg, args.workdir, progress=not args.quiet)
    if args.export:
        res["exported"] = str(rl.export_best(args.workdir, args.export))
    print(json.dumps(res, sort_keys=True))
    return 130 if res.get("stopped") == "interrupted" else 0


def _refuse_other_algo(args) -> None:
    """A flag only the other --algo reads is an error, not silently dropped
    (an alphazero run given the reinforce --max-minutes once ran on)."""
    import dataclasses

    from alphalite.runtime.config import flag_of
    from alphalite.zero.run import ZeroConfig
    from search.params import SearchParams
    from selfplay.config import SelfPlayConfig
    from selfplay.rl import RLConfig

    def flags(*classes):
        return {f.name: flag_of(f) for c in classes for f in dataclasses.fields(c)}

    zero, reinforce = flags(ZeroConfig, SelfPlayConfig, SearchParams), flags(RLConfig)
    only = {"reinforce": {**{n: f for n, f in reinforce.items() if n not in zero}, "export": "--export"},
            "alphazero": {**{n: f for n, f in zero.items() if n not in reinforce},
                          "address": "--address", "num_cpus": "--num-cpus"}}
    other = "reinforce" if args.algo == "alphazero" else "alphazero"
    given = [f for n, f in only[other].items() if getattr(args, n, None) is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: only --algo {other} reads {'it' if len(given) == 1 else 'them'}")


def _train_patterns(args):
    import json

    from alphalite.train import patterns

    res = patterns.train(args.data, args.workdir, size=args.size, games=args.games, lr=args.lr, seed=args.seed,
                         save_every_s=args.save_every, log=lambda s: print(s, flush=True))
    for policy in ("rollout", "tree"):
        out = getattr(args, f"export_{policy}")
        if out:
            res[f"{policy}_keys"] = patterns.export(args.workdir, out, policy=policy, size=args.size,
                                                    min_count=args.min_count)
    print(json.dumps(res, sort_keys=True))
    return 0


def _eval_policy(args):
    import json

    from alphalite.train import supervised as train

    res = train.evaluate_checkpoint(args.checkpoint, args.src, max_games=args.max_games,
                                    split=args.split, plot_dir=args.plots, symmetries=args.symmetries)
    print(json.dumps(res, sort_keys=True))
    return 0


def _move_list(text: str) -> tuple[int, ...]:
    try:
        moves = tuple(int(m) for m in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma separated list of move numbers: {text!r}") from None
    if not moves or min(moves) < 1:
        raise argparse.ArgumentTypeError(f"move numbers start at 1: {text!r}")
    return moves


def _eval_value(args):
    from alphalite.train import value

    return value.cli_eval_value(args)


def _value_data(args):
    from selfplay import valuedata

    return valuedata.cli_value_data(args)


def _value_targets(args):
    from selfplay import valuedata

    return valuedata.cli_value_targets(args)


def _export(args):
    from alphalite.nn import checkpoint

    info, variables = checkpoint.load_variables(args.run, step=args.step)
    out = checkpoint.export_model(args.out, variables, info)
    print(out)
    return 0


def _gtp(args):
    from alphalite.gtp import engine as gtp

    return gtp.run(args)


def _arena(args):
    from alphalite.arena import tournament as arena

    return arena.cli(args)


def _add_gtp_arguments(p) -> None:
    # Kept here, not imported from alphalite.gtp.engine, so `alphalite --help` stays instant.
    p.add_argument("--engine", choices=("random", "policy", "mcts", "apv"), default="apv",
                   help="move chooser: apv = AlphaGo's asynchronous search (pattern rollouts on every core, the "
                        "nets in batches beside them; the strongest), mcts = PUCT with batched net leaves and "
                        "uniform rollouts, policy = the policy net's move, random")
    p.add_argument("--tree-policy", default="tree19", help="apv: the pattern tree policy (priors of new leaves)")
    p.add_argument("--rollout-policy", default="rollout19",
                   help="the pattern rollout policy: apv's rollouts and every engine's dead-stone playouts")
    p.add_argument("--checkpoint", default="auto",
                   help="policy net: a shipped net's name (policy9, policy19, rl9, rl19), an exported model folder "
                        "or a run folder (a path that exists wins); or a policy-value net (AlphaZero's: its folder, "
                        "or an AlphaZero run folder for its best.json net), valued by its own head; auto: the "
                        "shipped net of the board size in play (9x9: the policy-value net az9i, 19x19: policy19ag40b12, "
                        "alone for --engine policy; other sizes rollout MCTS); none: rollout MCTS only")
    p.add_argument("--value-checkpoint", default="auto",
                   help="value net, the same forms (value9, value19, value19sp): mcts mixes it with rollouts by "
                        "--lambda; policy reports its winrate and resigns by it; auto: with --checkpoint auto the "
                        "shipped one (19x19: value19b12; 9x9's az9i has its own head), else none (a policy-value net: "
                        "its own head; naming a value net beside one is an error)")
    p.add_argument("--visits", type=int, default=None,
                   help="mcts visits per move, a cap with or without a clock (default: 400 without a clock; "
                        "under one, no cap but the time)")
    p.add_argument("--max-time", type=float, default=None,
                   help="seconds a move may take at most, with or without a GTP clock (default: no limit without "
                        "a clock; with one, what the clock allows)")
    p.add_argument("--lag-buffer", type=float, default=0.2,
                   help="seconds kept back on every move under a clock for pipes, servers and process scheduling")
    p.add_argument("--inference", choices=INFERENCE, default="auto",
                   help="where the nets run: int8 = ONNX Runtime with the nets quantized to 8 bits (2-3x fp32's "
                        "speed on the CPU; calibrated on the net's own self-play at the first start, then cached); "
                        "onnx = ONNX Runtime in fp32; jax; auto = int8 on the CPU (onnx if the int8 nets fail "
                        "their check), JAX on a GPU")
    p.add_argument("--resign-threshold", type=float, default=0.1, help="resign below this winrate (0..1)")
    p.add_argument("--resign-moves", type=int, default=3, help="... for this many own moves in a row")
    p.add_argument("--no-resign", action="store_true", help="never resign")
    p.add_argument("--komi", type=float, default=7.5, help="komi until a GTP komi command changes it")
    p.add_argument("--size", type=int, default=19, help="initial board size (boardsize changes it)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random generator (sampling, search, playouts)")
    p.add_argument("--score-playouts", type=int, default=128, help="pattern rollouts per dead-stone estimate")
    from alphalite.runtime import config as config_lib
    from search.params import SearchParams

    config_lib.add_arguments(p.add_argument_group("search (also the policy engine's temperature)"), SearchParams)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="alphalite", description="AlphaGo-style Go engine")
    p.add_argument("--version", action="version", version=f"%(prog)s {runtime.version()}")
    sub = p.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="build and inspect game datasets")
    dsub = data.add_subparsers(dest="data_command", required=True)
    build = dsub.add_parser("build", help="SGF files/folders/archives -> game shards")
    build.add_argument("src", nargs="+", help=".sgf files, archives of them (.tar.gz/.tgz, .tar.bz2/.tbz2/.tbz, "
                       ".tar.xz/.txz, .tar, .zip) and folders (searched for both)")
    build.add_argument("--out", required=True, help="output dataset folder")
    build.add_argument("--jobs", type=int, default=0, help="worker processes (0 = all cores)")
    build.add_argument("--sizes", default="9,13,19", help="board sizes to keep, comma separated")
    build.add_argument("--val-frac", type=float, default=0.02, help="fraction of games for validation")
    build.add_argument("--test-frac", type=float, default=0.02, help="fraction of games for test")
    build.add_argument("--max-games", type=int, default=0, help="stop after this many games (0 = all)")
    build.add_argument("--shard-games", type=int, default=4096, help="games per shard file")
    build.add_argument("--quiet", action="store_true", help="no progress bar")
    build.set_defaults(func=_data_build)
    gg = dsub.add_parser("gnugo", help="GNU Go self-play games -> SGF folder (resumable)")
    gg.add_argument("--out", required=True, help="output folder of game-NNNNNN.sgf files")
    gg.add_argument("--games", type=int, required=True, help="games wanted in the folder (a rerun continues)")
    gg.add_argument("--size", type=int, default=9, help="board size")
    gg.add_argument("--level", default="1", help="GNU Go level 1..10, or a comma list cycled by game")
    gg.add_argument("--komi", type=float, default=7.0, help="komi of every game")
    gg.add_argument("--seed", type=int, default=0, help="seed for the per-game GNU Go seeds and openings")
    gg.add_argument("--random-moves", type=int, default=4,
                    help="up to this many random opening stones per game (written as setup)")
    gg.add_argument("--max-moves", type=int, default=0, help="move cap per game (0 = 3 * size * size)")
    gg.add_argument("--jobs", type=int, default=1, help="games played in parallel")
    gg.add_argument("--quiet", action="store_true", help="no progress bar")
    gg.set_defaults(func=_data_gnugo)

    from alphalite.runtime import config as config_lib
    from alphalite.train.supervised import SLConfig

    sl = sub.add_parser("sl", help="supervised policy training (run_sl.py)")
    sl.add_argument("--workdir", required=True, help="run folder (created, or resumed if it exists)")
    sl.add_argument("--config", help="JSON file with config values (flags override it)")
    sl.add_argument("--quiet", action="store_true", help="no progress bar")
    config_lib.add_arguments(sl, SLConfig)
    sl.set_defaults(func=_sl, training=True)

    from selfplay.rl import RLConfig

    rl = sub.add_parser("rl", help="self-play RL (run_rl.py): policy gradient from an SL policy, or AlphaZero "
                        "on Ray (--algo alphazero)")
    rl.add_argument("--algo", choices=("reinforce", "alphazero"), default="reinforce",
                    help="reinforce: policy gradient (selfplay.rl); alphazero: self-play actors, a learner and "
                         "SPRT gating on Ray (alphalite.zero.run)")
    rl.add_argument("--workdir", required=True, help="run folder (created, or resumed if it exists)")
    rl.add_argument("--config", help="JSON file with config values (flags override it); alphazero: "
                    '{"zero": {...}, "selfplay": {...}, "search": {...}}')
    rl.add_argument("--export", help="reinforce: afterwards, copy the best evaluated policy to this model folder")
    rl.add_argument("--quiet", action="store_true", help="no progress bar")
    config_lib.add_arguments(rl.add_argument_group("reinforce"), RLConfig)
    rl.add_argument("--address", help="alphazero: join the Ray cluster at this address ('auto': the one started "
                    "on this machine by `ray start`); default: a local Ray on this machine's cores")
    rl.add_argument("--num-cpus", type=int, help="alphazero, local Ray: cores to use (default: all)")
    from alphalite.zero.run import ZeroConfig
    from search.params import SearchParams
    from selfplay.config import SelfPlayConfig

    for title, cls in (("alphazero (flags also in reinforce mean the same there: komi, seed, ...)", ZeroConfig),
                       ("alphazero self-play", SelfPlayConfig), ("alphazero search (PUCT root)", SearchParams)):
        config_lib.add_arguments(rl.add_argument_group(title), cls, skip_existing=True)
    rl.set_defaults(func=_rl, training=True)

    rp = sub.add_parser("rl-plot", help="redraw an AlphaZero run's plot (loss, gating, rating) from its "
                        "metrics.jsonl")
    rp.add_argument("run", help="the run folder (--workdir of `alphalite rl --algo alphazero`)")
    rp.add_argument("--out", help="PNG to write (default: RUN/plots/zero.png)")
    rp.set_defaults(func=_rl_plot)

    tp = sub.add_parser("train-patterns", help="train the pattern rollout and tree policies on a dataset "
                        "(resumable from WORKDIR/state.npz)")
    tp.add_argument("data", help="a built dataset folder (its train split)")
    tp.add_argument("--workdir", required=True, help="run folder (created, or resumed if it holds state.npz)")
    tp.add_argument("--games", type=int, default=0, help="train games to use, in a seeded order (0 = all)")
    tp.add_argument("--lr", type=float, default=0.05, help="Adagrad learning rate")
    tp.add_argument("--size", type=int, default=19, help="board size")
    tp.add_argument("--seed", type=int, default=0, help="seed of the game order")
    tp.add_argument("--save-every", type=float, default=300.0, help="seconds between checkpoints")
    tp.add_argument("--export-rollout", help="afterwards, write the rollout policy to this folder")
    tp.add_argument("--export-tree", help="afterwards, write the tree policy to this folder")
    tp.add_argument("--min-count", type=int, default=20, help="export keys seen at least this often")
    tp.set_defaults(func=_train_patterns)

    ev = sub.add_parser("eval-policy", help="move-prediction metrics of a policy checkpoint")
    ev.add_argument("--checkpoint", required=True, help="exported model folder or run folder, or a shipped "
                    "name (pattern policies too: rollout19, tree19)")
    ev.add_argument("src", nargs="+", help="SGF files/folders/archives, or a dataset folder")
    ev.add_argument("--max-games", type=int, default=0, help="use at most this many games (0 = all)")
    ev.add_argument("--split", default="test", help="split to use when SRC is a dataset folder")
    ev.add_argument("--plots", help="folder for the top-k and by-move-number plots")
    ev.add_argument("--symmetries", type=int, default=1, help="score the net's probabilities averaged over this "
                    "many of the 8 board symmetries, as the policy engine plays them (1 = the net alone)")
    ev.set_defaults(func=_eval_policy)

    ev = sub.add_parser("eval-value", help="winner prediction of a value net at moves 30/80/130/180 (or --moves), "
                        "beside the NN-Influence baseline trained in the same run")
    ev.add_argument("--checkpoint", required=True, help="value net: exported model folder or run folder")
    ev.add_argument("src", nargs="+", help="a dataset folder (test split; the baseline trains on its "
                    "train split) or SGF files/folders/archives (split 80/20 by game)")
    ev.add_argument("--max-games", type=int, default=0, help="test games to use (0 = all)")
    ev.add_argument("--split", default="test", help="split to test on when SRC is a dataset folder")
    ev.add_argument("--influence-games", type=int, default=0, help="training games for the baseline (0 = all)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the baseline's training")
    ev.add_argument("--gnugo-games", type=int, default=0,
                    help="also score this many test games with GNU Go's estimate_score, a reference "
                    "that reads life and death (about 1 s a position on 19x19; 0 = off)")
    ev.add_argument("--moves", type=_move_list, default=None,
                    help="move numbers to judge, comma separated (default: 30,80,130,180; "
                    "on 9x9 e.g. 10,20,30,40)")
    ev.add_argument("--symmetries", type=int, default=1, help="judge by the net's outputs averaged over this many "
                    "of the 8 board symmetries, in one network call (1 = the net alone)")
    ev.set_defaults(func=_eval_value)

    vd = sub.add_parser("value-data", help="value-net self-play data: SL policy to move U, one random "
                        "move, RL policy to the end; one position per game")
    vd.add_argument("--sl", required=True, help="SL policy checkpoint (exported model or run folder)")
    vd.add_argument("--rl", help="RL policy checkpoint (default: the shipped rl<size> if there is one, else --sl)")
    vd.add_argument("--out", required=True, help="output dataset folder (continued if it exists)")
    vd.add_argument("--games", type=int, default=1024, help="games the folder should hold")
    vd.add_argument("--batch", type=int, default=64, help="games played at once")
    vd.add_argument("--komi", type=float, default=7.5, help="komi of every game")
    vd.add_argument("--u-max", type=int, default=None, help="U is uniform on 0..u_max (default 3/4 of the points)")
    vd.add_argument("--temperature", type=float, default=1.0, help="policy sampling temperature")
    vd.add_argument("--allow-self-atari", action="store_true",
                    help="let the policies put their own groups in atari and take kos (off by default: weak "
                         "policies then fill their own liberties and fight kos to the move cap)")
    vd.add_argument("--seed", type=int, default=0, help="seed of the games: U, the random move, the sampling")
    vd.add_argument("--max-minutes", type=float, default=0.0, help="stop after this many minutes (0 = no limit)")
    vd.add_argument("--quiet", action="store_true", help="no progress bar")
    vd.set_defaults(func=_value_data)

    vt = sub.add_parser("value-targets", help="copy a dataset with value targets: final ownership and score "
                        "of the games that ended by count (dead stones settled by pattern rollouts)")
    vt.add_argument("src", help="dataset folder made by `alphalite data build`")
    vt.add_argument("--out", required=True, help="output dataset folder (continued if it exists)")
    vt.add_argument("--playouts", type=int, default=128, help="rollouts that settle the dead stones of a game")
    vt.add_argument("--seed", type=int, default=0, help="seed of the rollouts")
    vt.add_argument("--jobs", type=int, default=1, help="worker processes")
    vt.add_argument("--max-minutes", type=float, default=0.0, help="stop after this many minutes (0 = no limit)")
    vt.add_argument("--quiet", action="store_true", help="no progress bar")
    vt.set_defaults(func=_value_targets)

    ex = sub.add_parser("export", help="run folder -> standalone model folder (model.json + variables)")
    ex.add_argument("run", help="run folder")
    ex.add_argument("--out", required=True, help="output model folder")
    ex.add_argument("--step", type=int, help="that step's checkpoint (best/ or ckpt/; an AlphaZero run: nets/step-N; "
                                             "default: the best, else the latest)")
    ex.set_defaults(func=_export)

    g = sub.add_parser("gtp", help="play over GTP on stdin/stdout (GUIs, servers, referees)")
    _add_gtp_arguments(g)
    g.set_defaults(func=_gtp)

    from alphalite.arena import tournament as arena

    ar = sub.add_parser("arena", help="tournaments between GTP engines (GNU Go, ours, any): SGF, Elo, SPRT",
                        description="Round-robin or gauntlet matches between GTP engines. Example: alphalite "
                                    "arena --engine 'mcts=@alphalite --engine mcts --visits 400 --seed {seed}' "
                                    "--engine 'gnugo1=@gnugo --level 1 --seed {seed}' --games 20 --size 9 "
                                    "--jobs 2 --out runs/arena-9x9")
    arena.add_arguments(ar)
    ar.set_defaults(func=_arena)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # after parsing: --help and --version stay instant
    training = getattr(args, "training", False)
    runtime.setup(training=training)
    if training:  # a resumed run (or a test's tenth short one) reads its compiles back
        from alphalite.nn import jitcache

        jitcache.enable()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except _user_errors() as e:
        print(f"alphalite: error: {e}", file=sys.stderr)
        return 2


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors caused by input (bad file, checkpoint, config): one line, no traceback."""
    from alphalite.nn.checkpoint import CheckpointError
    from alphalite.go.coords import CoordError

    errors: list[type[BaseException]] = [CheckpointError, CoordError, FileNotFoundError, ValueError]
    for mod, name in (("alphalite.data.dataset", "DatasetError"), ("alphalite.go.sgf", "SgfError")):
        m = sys.modules.get(mod)
        if m is not None:
            errors.append(getattr(m, name))
    return tuple(errors)


if __name__ == "__main__":
    sys.exit(main())
