"""What a GTP session holds beside the protocol: its config, the game
record (``alphalite.engine.game``), the judge and the resign policy
(``alphalite.engine.decisions``), the nets of each board size and the
player built on them, the warm-up, the random generator, vertices.

Nets (``--checkpoint``, ``--value-checkpoint``): ``auto`` plays the shipped
nets of the board size in play (``checkpoint.DEFAULT_NETS``; the policy
engine's own where ``checkpoint.POLICY_ALONE_NETS`` names one), loaded and
warmed up when a size is first played, by the command that starts that game
(``boardsize``, ``clear_board``, ``loadsgf``: no move's clock pays for it,
as KataGo loads its net in ``boardsize``); nets named
on the command line are loaded and checked before the first command is
read, and a wrong one stops the engine. A named net replaces the shipped
ones of its board size only; a named net only plays the size it was
trained on (the shipped 19x19 policy also plays the other sizes
``checkpoint.DEFAULT_NETS`` names, moved there by ``nets.resize_policy``); on a size with no
net (or with ``--checkpoint none``) the engine plays rollout MCTS with a
knowledge-free line prior (``players.line_prior``), or the apv search
with its pattern policies alone, and says so once.

Only the standard library (and ``search.params``, plain dataclasses) is
imported at module level, so ``name`` and ``protocol_version`` are answered
before Numba or JAX are loaded.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
import time

from alphalite import runtime
from alphalite.gtp.protocol import GtpFailure
from alphalite.nn import INFERENCE
from search.params import SearchParams

NAME = "alphalite"
VERSION = runtime.version()
ENGINES = ("random", "policy", "mcts", "apv")
# --batch without a value: the mcts search gathers 8 leaves a network call,
# the apv search's network thread takes up to 32 positions (ApvSearch's
# default; on 9x9 it evaluated 45% more of them than 8 at 1 s a move: 7,081
# against 4,883; on 19x19 no difference was measured)
APV_BATCH = 32
AUTO = "auto"  # --checkpoint / --value-checkpoint: the shipped nets of each board size


def default_search(engine: str) -> SearchParams:
    """An engine's search settings where none are given (its flags start from these)."""
    return SearchParams(batch_size=APV_BATCH) if engine == "apv" else SearchParams()

_VERTEX = re.compile(r"[A-Za-z][0-9]{1,2}\Z")


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    engine: str = "random"  # random | policy | mcts | apv
    checkpoint: str | None = None  # policy net: shipped net's name, model or run folder; AUTO: shipped; None: none
    # value net, the same forms (AUTO: the shipped one when the policy net is AUTO, else none); mcts mixes
    # it with rollouts by lam, policy resigns by it
    value_checkpoint: str | None = None
    visits: int | None = None  # mcts visits per move, a cap; None: players.DEFAULT_VISITS without a clock, none with one
    max_time: float | None = None  # seconds a move may take at most, with or without a clock (KataGo's maxTime)
    lag_buffer: float = 0.2  # seconds kept back per move under a clock for pipes and scheduling (KataGo's lagBuffer)
    inference: str = "auto"  # the nets' runtime: auto (ONNX Runtime on the CPU, JAX on a GPU) | jax | onnx
    resign_threshold: float = 0.1  # winrate below which a move counts towards resigning
    resign_moves: int = 3  # consecutive such moves before resigning
    resign: bool = True
    komi: float = 7.5
    size: int = 19
    seed: int = 0
    score_playouts: int = 128  # pattern rollouts for dead stones (final_score, cleanup, passing)
    superko: bool = True
    tree_policy: str = "tree19"  # apv: pattern tree policy (a shipped name or a folder)
    rollout_policy: str = "rollout19"  # pattern rollout policy: apv's rollouts, every engine's judge
    # c_puct, FPU, leaf batch (apv: its network batch), noise, lambda (value net and rollouts), temperature
    # (the policy engine's too); None: the engine's defaults (``default_search``)
    search: SearchParams | None = None

    def __post_init__(self):
        """ValueError naming the flag for a value no game can be played with."""
        if self.search is None:
            object.__setattr__(self, "search", default_search(self.engine))
        def finite(x):
            return isinstance(x, (int, float)) and math.isfinite(x)

        for ok, flag, want, got in (
                (self.engine in ENGINES, "engine", ", ".join(ENGINES), self.engine),
                (self.inference in INFERENCE, "inference", f"{', '.join(INFERENCE[:-1])} or {INFERENCE[-1]}",
                 self.inference),
                (isinstance(self.size, int) and 2 <= self.size <= 25, "size", "in 2..25", self.size),
                (finite(self.komi), "komi", "a finite number", self.komi),
                (self.visits is None or self.visits >= 1, "visits", ">= 1", self.visits),
                (self.max_time is None or finite(self.max_time) and self.max_time > 0, "max-time", "> 0",
                 self.max_time),
                (finite(self.lag_buffer) and self.lag_buffer >= 0, "lag-buffer", ">= 0", self.lag_buffer),
                (finite(self.resign_threshold) and 0 <= self.resign_threshold <= 1, "resign-threshold",
                 "in [0, 1]", self.resign_threshold),
                (self.resign_moves >= 1, "resign-moves", ">= 1", self.resign_moves),
                (self.seed >= 0, "seed", ">= 0", self.seed),
                (self.score_playouts >= 0, "score-playouts", ">= 0", self.score_playouts)):
            if not ok:
                raise ValueError(f"--{flag} must be {want}, got {got!r}")


def size_list(sizes) -> str:
    """Board sizes as a reader takes them in: runs of consecutive sizes as
    one range ("9x9-19x19", "9x9, 13x13-15x15")."""
    runs: list[list[int]] = []
    for n in sorted(sizes):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}x{r[0]}" + (f"-{r[-1]}x{r[-1]}" if len(r) > 1 else "") for r in runs) \
        or "none (--checkpoint none)"


def _freeze_heap() -> None:
    """Leave the objects of start-up (JAX, ONNX Runtime, the nets: about
    250,000) out of the cyclic collector's full passes. A full pass over
    them took 0.14-0.19 s on a 2-core AMD EPYC (Zen 3) with the GIL held,
    when the search cannot see its deadline; one fell inside a 9x9 move at
    1 s byo-yomi (1.46 s, with a kernel's first compile)."""
    import gc

    gc.collect()
    gc.freeze()


class Session:
    """The state the command groups share. Call ``init_session`` from
    ``__init__`` (after ``protocol.Dispatcher.init_dispatch``)."""

    def init_session(self, config: EngineConfig, warmup: bool) -> None:
        self.config = config
        self._said: set = set()
        self._players: dict = {}  # board size (or ("analysis", size)) -> player
        self._nets: dict[int, tuple[str, str | None]] = {}  # board size -> (policy, value net or None)
        self._loaded: dict[int, object] = {}  # board size -> PolicyNet, or the CheckpointError loading it
        self._ready = threading.Event()
        self._warm = warmup
        self._rng = None
        self._game = None
        self._game_lock = threading.Lock()  # the warm-up thread may ask for the game first
        self._judge = None
        self._resign = None
        if config.engine != "random":
            self._plan_nets()
        self._check_pattern_policies()
        if warmup:
            threading.Thread(target=self._warmup, name="gtp-warmup", daemon=True).start()
        else:
            self._ready.set()

    def wait_ready(self) -> None:
        self._ready.wait()

    # ------------------------------------------------------------ the game

    @property
    def game(self):
        """The game record (``alphalite.engine.game.Game``), made on first use."""
        with self._game_lock:
            if self._game is None:
                from alphalite.engine.game import Game

                self._game = Game(self.config.size, self.config.komi, superko=self.config.superko,
                                  on_reset=self._game_reset)
        return self._game

    def _game_reset(self) -> None:
        """What hangs on the old game goes with it; a board size not played
        yet is warmed up now."""
        if self._judge is not None:
            self._judge.clear()
        self.resign_policy.reset()
        for p in self._players.values():
            p.forget()
        self._warm_up_size()

    @property
    def size(self) -> int:
        return self.game.size

    @property
    def state(self):
        return self.game.state

    @property
    def judge(self):
        """Scores positions (dead stones off), cached: ``decisions.Judge``.
        The apv engine judges from its own search's ownership (its pattern
        rollouts, ``ApvPlayer.territory``); the other engines from playouts
        of the same pattern rollout policy (``--rollout-policy``). Uniform
        random playouts misjudge life and death on 19x19: the policy engine
        counted W+24.5 a game the referee scored B+7.5."""
        if self._judge is None:
            from alphalite.engine.decisions import Judge
            from alphalite.nn import checkpoint
            from search.rollout import PatternPolicy

            try:
                policy = PatternPolicy.load(self.config.rollout_policy)
            except checkpoint.CheckpointError as e:
                raise GtpFailure(f"cannot load the rollout policy: {e}") from None
            search = self._search_territory if self.config.engine == "apv" else None
            self._judge = Judge(self.config.score_playouts, self.config.seed, policy=policy, search=search)
        return self._judge

    def _search_territory(self, state, rollouts: int, max_seconds: float | None = None):
        """The game player's own end-of-game estimate, where it has one
        (None: a size whose player has no such search, e.g. without a net)."""
        from alphalite.engine import players

        p = self._player()
        return p.territory(state, rollouts, max_seconds) if isinstance(p, players.ApvPlayer) else None

    @property
    def resign_policy(self):
        if self._resign is None:
            from alphalite.engine.decisions import ResignPolicy

            self._resign = ResignPolicy(threshold=self.config.resign_threshold,
                                        consecutive=self.config.resign_moves, enabled=self.config.resign)
        return self._resign

    def _gen(self):
        import numpy as np

        if self._rng is None:
            self._rng = np.random.default_rng(self.config.seed)
        return self._rng

    def _say_once(self, msg: str):
        if msg not in self._said:
            self._said.add(msg)
            self.log(msg)

    def _vertex(self, word: str) -> int:
        from alphalite.go import coords

        if word.lower() == "pass":
            return self.size * self.size
        if not _VERTEX.match(word) or word[0].upper() == "I":
            raise GtpFailure("syntax error")
        try:
            return coords.from_gtp(word, self.size)
        except (coords.CoordError, ValueError):
            raise GtpFailure("illegal move") from None  # well formed, off this board

    def _to_gtp(self, move: int) -> str:
        from alphalite.go import coords

        return coords.to_gtp(int(move), self.size)

    # ------------------------------------------------------------ nets and players

    def _warmup(self):
        try:
            self._load()
            import numpy as np

            from alphalite.engine import players
            from alphalite.go import board

            # Every kernel a genmove runs (tests/test_clock.py checks none is
            # left to load or compile), with a generator of its own so that
            # the engine's moves do not depend on whether it warmed up.
            n = self.size
            st = board.new_game(n, self.game.komi, superko=self.config.superko)
            st = board.play(board.play(st, (n // 2) * n + n // 2), 0)  # both colours: territory is judged
            players.candidate_moves(st)
            p = self._player()
            if isinstance(p, players.MctsPlayer):
                p.run(st, np.random.default_rng(0), max_visits=16).tree.root_analysis()
                p.forget()
            elif isinstance(p, players.ApvPlayer):
                cand = players.candidate_moves(st)
                p.genmove(st, cand, None, None, lambda view, n: bool(view.root_analysis()) and n >= 8)
                p.forget()
                self.judge(st)  # its search's ownership
                p.forget()
            elif isinstance(p, players.PolicyPlayer):
                p.prior(st)
            if not isinstance(p, players.ApvPlayer):
                self.judge(st)  # pattern playouts
                self.judge.clear()
            players.warm_up_rules(st)
        except Exception as e:  # noqa: BLE001 - reported, genmove then falls back
            self.log(f"{NAME}: warm-up failed: {type(e).__name__}: {e}")
        finally:
            _freeze_heap()
            self._ready.set()

    def _warm_up_size(self):
        """A game on a board size not played yet: warm up its player (nets
        loaded, their functions compiled) before the command that started
        the game answers. In the background, a genmove sent after that
        answer waited for it on its own clock (0.95 s of a 0.75 s budget)."""
        if self._warm and self.config.engine != "random" and self.size not in self._players:
            self._warmup()

    def _check_pattern_policies(self):
        """The pattern policies the engine uses are found and are pattern
        policies (CheckpointError naming the flag otherwise): the rollout
        policy (every engine's judge), the tree policy (apv); loaded when
        first used."""
        from alphalite.nn import checkpoint

        refs = [("--rollout-policy", self.config.rollout_policy)]
        if self.config.engine == "apv":
            refs.append(("--tree-policy", self.config.tree_policy))
        for flag, ref in refs:
            try:
                info = checkpoint.read_model_info(checkpoint.find_model_dir(ref))
            except checkpoint.CheckpointError as e:
                raise checkpoint.CheckpointError(f"{flag} {ref}: {e}") from None
            if info.get("model") != "patterns":
                raise checkpoint.CheckpointError(f"{flag} {ref}: not a pattern policy (model {info.get('model')!r})")

    def _plan_nets(self):
        """Which nets play which board size. Nets named in the config are
        loaded and checked now (CheckpointError naming the folder); the
        shipped ones (AUTO) only found now, and loaded when their size is
        first played."""
        from alphalite.engine import players
        from alphalite.nn import checkpoint

        policy, value = self.config.checkpoint, self.config.value_checkpoint
        if policy is not None:
            # the installed ones, whatever folders the working folder holds;
            # a net named below replaces them on its own board size only
            for n, (p, v) in checkpoint.DEFAULT_NETS.items():
                if self.config.engine == "policy" and value in (None, AUTO) and n in checkpoint.POLICY_ALONE_NETS:
                    p, v = checkpoint.POLICY_ALONE_NETS[n], None  # alone, as measured
                own_head = v is None or value is None  # a policy-value net, or --value-checkpoint none
                self._nets[n] = (str(checkpoint.shipped(p)), None if own_head else str(checkpoint.shipped(v)))
        if value in (None, AUTO) and policy in (None, AUTO):
            return
        if policy is None:
            raise checkpoint.CheckpointError(f"the value net {value} needs a policy net beside it "
                                             "(--checkpoint is none)")
        if policy == AUTO:  # the value net named replaces the shipped one of its size
            info = checkpoint.read_model_info(checkpoint.find_model_dir(value))
            n = int(info["board_size"])
            if n not in self._nets:
                raise checkpoint.CheckpointError(f"{value} is a {n}x{n} value net, but no shipped policy net "
                                                 f"plays {n}x{n} (give --checkpoint)")
            policy = self._nets[n][0]
        value = None if value == AUTO else value  # beside a policy-value net: its own head
        run, best = policy, checkpoint.run_best(checkpoint.resolve(policy))
        policy = policy if best is None else str(best)
        t0 = time.perf_counter()
        net = players.load_net(policy, value, self.config.inference)
        if best is not None:  # said once, after a good load (a refusal stays one line)
            self.log(f"{NAME}: {run} is an AlphaZero run: playing its best net {best}")
        self._nets[net.size] = (policy, value)
        self._loaded[net.size] = net
        self._log_loaded(net.size, time.perf_counter() - t0)

    def _log_loaded(self, n: int, seconds: float):
        policy, value = self._nets[n]
        if value is None and self._loaded[n].has_value:
            value = "its own head (policy-value net)"
        r = self._loaded[n].resized_from
        if r:
            policy = f"{policy} ({r}x{r}, its policy head moved to {n}x{n})"
        self.log(f"{NAME}: {n}x{n} nets: policy {policy}, value {value or 'none'} "
                 f"(loaded in {seconds:.1f} s, {self._loaded[n].inference}"
                 f"{': ' + self._loaded[n].note if self._loaded[n].note else ''})")

    def _load(self, size: int | None = None):
        """The PolicyNet for ``size`` (default: the board's), loaded once;
        None where no net plays that size. A net that fails to load answers
        every command that needs it with a failure (logged once)."""
        from alphalite.engine import players
        from alphalite.nn import checkpoint

        n = self.size if size is None else size
        if n not in self._nets:
            return None
        if n not in self._loaded:
            t0 = time.perf_counter()
            try:
                self._loaded[n] = players.load_net(*self._nets[n], self.config.inference, size=n)
                self._log_loaded(n, time.perf_counter() - t0)
            except checkpoint.CheckpointError as e:
                self._loaded[n] = e
                self.log(f"{NAME}: cannot load the {n}x{n} nets: {e}")
        net = self._loaded[n]
        if isinstance(net, Exception):
            raise GtpFailure(f"cannot load the {n}x{n} network")
        return net

    def _apv_player(self, net):
        from alphalite.engine import players
        from alphalite.nn import checkpoint
        from search.rollout import PatternPolicy

        cfg = self.config
        try:
            tree, roll = PatternPolicy.load(cfg.tree_policy), PatternPolicy.load(cfg.rollout_policy)
        except checkpoint.CheckpointError as e:
            self.log(f"{NAME}: cannot load the pattern policies: {e}")
            raise GtpFailure("cannot load the pattern policies") from None
        return players.ApvPlayer(net, tree, roll, cfg.search, size=self.size, visits=cfg.visits,
                                 batch_size=cfg.search.batch_size)

    def _player(self):
        """The move chooser for the current board size."""
        from alphalite.engine import players

        size = self.size
        if size in self._players:
            return self._players[size]
        cfg = self.config
        if cfg.engine == "random":
            p = players.RandomPlayer()
        else:
            net = self._load()
            if net is not None:
                if cfg.engine == "policy":
                    p = players.PolicyPlayer(net, cfg.search)
                elif cfg.engine == "apv":
                    p = self._apv_player(net)
                else:
                    from search.evaluators import net_evaluator

                    ev = net_evaluator(net.net_fn, has_value=net.has_value, lam=cfg.search.lam,
                                       preset=net.preset, pad_to=cfg.search.batch_size)
                    p = players.MctsPlayer(ev, net.params, visits=cfg.visits, search_params=cfg.search,
                                           prior_fn=net.priors, label="mcts")
            elif cfg.engine == "apv":
                self._say_once(f"{NAME}: no network plays {size}x{size} (nets: {size_list(self._nets)}): apv engine "
                               "searching with its pattern policies alone")
                p = self._apv_player(None)
            else:
                self._say_once(f"{NAME}: no network plays {size}x{size} (nets: {size_list(self._nets)}): "
                               f"{cfg.engine} engine using rollout MCTS with line priors")
                from search.evaluators import rollout_evaluator

                p = players.MctsPlayer(rollout_evaluator(players.line_prior_fn(size)), visits=cfg.visits,
                                       search_params=cfg.search, label="rollout-mcts")
        self._players[size] = p
        return p
