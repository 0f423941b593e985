"""Analysis commands: ``lz-analyze`` and ``lz-genmove_analyze`` in Leela
Zero's format, ``kata-analyze`` and ``kata-genmove_analyze`` in KataGo's
(with score and ownership estimates: see ``AnalyzeCommands._kata_line``),
and GoGui's analyze commands (policy heatmap and board, ownership).

From ``serve`` the ``STREAMING`` commands run in ``AnalyzeCommands.stream``,
which writes an ``info`` line every interval until the next input line
arrives (analysis) or the move is chosen (``play <vertex>``); through
``handle`` the same commands run a short search and answer once.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Callable

from alphalite.gtp.protocol import Command, GtpFailure, frame, parse_color, parse_int, sanitize
from alphalite.gtp.session import NAME

STREAMING = ("lz-analyze", "lz-genmove_analyze", "kata-analyze", "kata-genmove_analyze")


@dataclasses.dataclass
class AnalyzeRequest:
    """What an analysis command (``lz-``/``kata-analyze``, ``..genmove_analyze``) asked for."""

    color: int  # the side analysed: every number is from its view
    kata: bool = False  # KataGo's format (floats, scores, ownership) instead of Leela Zero's
    interval: float = 0.0  # seconds between info lines (0: the final one only)
    min_moves: int = 0  # report at least this many moves (unvisited ones by prior)
    max_moves: int | None = None  # and at most this many
    ownership: bool = False  # kata: ``ownership`` of every point after the info items
    moves_ownership: bool = False  # kata: ``movesOwnership`` in each info item
    root_info: bool = False  # kata: ``rootInfo`` (the root's visits, winrate, score)
    pv_visits: bool = False  # ``pvVisits``: visits along each pv
    allowed: object = None  # bool [A]: the root moves ``avoid``/``allow`` leave (None: every move)


def _num(x: float) -> str:
    """A float as KataGo-style analysis prints it, always with a decimal
    point (Sabaki tells kata's floats from Leela Zero's integers by it)."""
    text = f"{float(x) + 0.0:.6f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _playouts_for(visits: int, most: int) -> int:
    """Playouts for a move's score estimate: its visits rounded up to a
    power of two, at least 16, at most ``most`` (a few sizes, so the cached
    estimates are redone at most a few times as a move gains visits)."""
    return min(max(16, 1 << max(int(visits) - 1, 0).bit_length()), max(most, 1))


def _batch_priors(prior_fn, leaves):
    import numpy as np

    return np.stack([np.asarray(prior_fn(s), np.float32) for s in leaves.states()])


class AnalyzeCommands:
    """Mixin over a ``Session`` and ``CoreCommands`` (genmove)."""

    streaming = STREAMING
    _territories: dict | None = None  # position and playouts -> Territory, made on first use

    def stream(self, cmd: Command, write: Callable[[str], None], stop: Callable[[], bool], *,
               arrived: float | None = None) -> None:
        """The ``STREAMING`` commands with output as it comes: ``=id``, then
        an ``info ...`` line every interval, until ``stop()`` (analysis) or
        the move is chosen (``play <vertex>``), then the blank line."""
        self.arrived = time.perf_counter() if arrived is None else arrived
        self.wait_ready()
        try:
            req = self._analyze_args(cmd.args, cmd.name)
            self._player()  # a net that cannot load is answered "?", before "=" opens the stream
        except GtpFailure as e:
            write(frame(cmd.id, False, str(e)))
            return
        except Exception as e:  # noqa: BLE001
            write(frame(cmd.id, False, f"internal error: {type(e).__name__}"))
            return
        write(f"={cmd.id}\n")
        last = [time.perf_counter()]

        def emit(tree, force=False):
            now = time.perf_counter()
            if force or (req.interval > 0 and now - last[0] >= req.interval):
                text = sanitize(self._info_line(tree, req)).replace("\n", " ")
                if text:
                    write(text + "\n")
                last[0] = time.perf_counter()  # the interval runs from the end of a (costly) line

        def cb(tree, n):
            if stop():
                return True
            emit(tree)
            return False

        try:
            if cmd.name.endswith("genmove_analyze"):
                trees = []

                def cb_keep(tree, n):
                    trees[:] = [tree]
                    return cb(tree, n)

                move = self._genmove(req.color, callback=cb_keep, allowed=req.allowed)
                if trees:
                    emit(trees[0], force=True)
                write(sanitize(f"play {move}").replace("\n", " ") + "\n")
            else:
                self._analyze(req.color, cb, until_stopped=stop, allowed=req.allowed)
        except Exception as e:  # noqa: BLE001 - keep the framing whatever happens
            self.log(f"{NAME}: internal error in {cmd.name!r}: {type(e).__name__}: {e}")
        write("\n")

    def _analysis_player(self):
        from alphalite.engine import players

        p = self._player()
        if isinstance(p, (players.MctsPlayer, players.ApvPlayer)):
            return p
        key = ("analysis", self.size)
        if key not in self._players:
            from search.evaluators import rollout_evaluator

            prior_fn = p.prior if getattr(p, "has_prior", False) else None
            ev = rollout_evaluator(None if prior_fn is None else
                                   (lambda params, leaves: _batch_priors(prior_fn, leaves)))
            self._players[key] = players.MctsPlayer(ev, visits=self.config.visits, search_params=self.config.search,
                                                    prior_fn=prior_fn, label="analysis")
        return self._players[key]

    def _analyze_args(self, args, command: str) -> AnalyzeRequest:
        """``[colour] [interval] [key value ...]`` of the Leela Zero and
        KataGo analysis commands (colour required by ``lz-genmove_analyze``
        only, as Leela Zero does)."""
        args = list(args)
        color = None
        if args and args[0].lower() in ("b", "w", "black", "white"):
            color = parse_color(args.pop(0))
        elif command == "lz-genmove_analyze":
            raise GtpFailure("syntax error")
        req = AnalyzeRequest(color=self.state.to_play if color is None else color,
                             kata=command.startswith("kata-"))
        if args and re.fullmatch(r"[0-9]{1,9}", args[0]):
            req.interval = int(args.pop(0)) / 100.0
        flags = {"ownership": "ownership", "movesownership": "moves_ownership", "rootinfo": "root_info",
                 "pvvisits": "pv_visits"}
        bans = []  # (key, colour, moves, until_depth)
        while args:
            key = args.pop(0).lower()
            if key == "interval" and args:
                req.interval = parse_int(args.pop(0), lo=0) / 100.0
            elif key in ("minmoves", "maxmoves") and args:
                setattr(req, "min_moves" if key == "minmoves" else "max_moves", parse_int(args.pop(0), lo=0))
            elif key in flags and args and args[0].lower() in ("true", "false"):
                setattr(req, flags[key], args.pop(0).lower() == "true")
            elif key in ("avoid", "allow") and len(args) >= 3:
                color_ = parse_color(args.pop(0))
                try:
                    moves = [self._vertex(v) for v in args.pop(0).split(",")]
                except GtpFailure:  # off this board too: a bad argument, not a bad move
                    raise GtpFailure("syntax error") from None
                bans.append((key, color_, moves, parse_int(args.pop(0), lo=0)))
            else:
                raise GtpFailure("syntax error")
        if bans:
            req.allowed = self._allowed_moves(bans, req.color)
        return req

    def _allowed_moves(self, bans, color: int):
        """The root moves KataGo's ``avoid``/``allow`` clauses leave for
        ``color``, to move at the root (bool [A]): a clause bans its player's
        moves in the first ``until_depth`` plies; ``allow`` bans every point
        but its own (pass stays allowed unless avoided), once and never with
        ``avoid``. The searches ban moves at their root only: a clause that
        reaches a later ply is honoured at the root and said so."""
        import numpy as np

        from alphalite.engine.game import with_to_play
        from alphalite.go import board

        if sum(k == "allow" for k, *_ in bans) > 1 or {k for k, *_ in bans} == {"avoid", "allow"}:
            raise GtpFailure("syntax error: allow is given once and not with avoid")
        n2 = self.size * self.size
        allowed = np.ones(n2 + 1, np.bool_)
        for key, color_, moves, depth in bans:
            if depth > (2 if color_ == color else 1):
                self._say_once(f"{NAME}: avoid/allow ban moves at the search's root only, not deeper in the tree")
            if color_ != color or depth < 1:
                continue
            if key == "avoid":
                allowed[moves] = False
            else:
                allowed[:n2] = np.isin(np.arange(n2), moves)
        if not (allowed & board.legal_moves(with_to_play(self.state, color))).any():
            raise GtpFailure("avoid/allow leave no legal move")
        return allowed

    def _analysis_rows(self, tree, req: AnalyzeRequest) -> list[dict]:
        """``tree.root_analysis()`` rows (most visits first), padded to
        ``min_moves`` with unvisited legal moves by prior (the root's own
        winrate, lcb 0), cut to ``max_moves``."""
        import numpy as np

        rows = tree.root_analysis()
        if len(rows) < req.min_moves:
            seen = {r["move"] for r in rows}
            prior = tree.clean_root_prior
            q, wr = tree.value(0), 0.5 * (tree.winrate_value(0) + 1.0)
            for a in np.argsort(-prior, kind="stable"):
                if len(rows) >= req.min_moves:
                    break
                if int(a) not in seen and tree.children_legal[0, a]:
                    rows.append(dict(move=int(a), visits=0, q=q, winrate=wr, prior=float(prior[a]),
                                     lcb=0.0, pv=[int(a)], pv_visits=[0]))
        return rows if req.max_moves is None else rows[: req.max_moves]

    def _info_line(self, tree, req: AnalyzeRequest) -> str:
        """One analysis update: Leela Zero's ``info`` items (winrate, prior
        and lcb as integers * 10000), or KataGo's (see ``_kata_line``)."""
        rows = self._analysis_rows(tree, req)
        if req.kata:
            return self._kata_line(tree, req, rows)
        parts = []
        for order, row in enumerate(rows):
            wr = int(round(10000 * row["winrate"]))
            lcb = int(round(10000 * min(max(row["lcb"], 0.0), 1.0)))
            prior = int(round(10000 * row["prior"]))
            pv = " ".join(self._to_gtp(m) for m in row["pv"])
            parts.append(f"info move {self._to_gtp(row['move'])} visits {row['visits']} winrate {wr} "
                         f"prior {prior} lcb {lcb} order {order} pv {pv}"
                         + (" pvVisits " + " ".join(map(str, row["pv_visits"])) if req.pv_visits else ""))
        return " ".join(parts)

    def _kata_line(self, tree, req: AnalyzeRequest, rows: list[dict]) -> str:
        """KataGo's ``kata-analyze`` line, every number from the analysed
        side's view and every float written with a decimal point::

            info move M visits N edgeVisits N utility U winrate W scoreMean S
              scoreStdev D scoreLead S scoreSelfplay S prior P lcb L
              utilityLcb UL order K pv M ... [pvVisits N ...]
              [movesOwnership O*size*size] info ...
            [rootInfo visits N utility U winrate W scoreMean S scoreStdev D
              scoreLead S scoreSelfplay S] [ownership O*size*size]

        ``winrate``/``lcb``: the search's (as ``lz-analyze``, as floats: wins
        and losses alone); ``utility``: the value the search maximises, in
        [-1, 1] (the apv search's rollouts add a score term below 19x19,
        ``--score-utility``), ``utilityLcb = 2 * lcb - 1``. Scores and ownership come from
        ``_territory`` of the position after the move (of the root for
        ``rootInfo`` and ``ownership``): scoreMean, scoreLead and
        scoreSelfplay are all its mean final margin, scoreStdev its spread;
        a move gets as many playouts as visits (``_playouts_for``), so the
        hundreds of one-visit moves of a 19x19 search stay cheap.
        Ownership rows run from the top row (A19 on 19x19), left to right."""
        from alphalite.go import board

        state = tree.root_state
        me = state.to_play
        parts = []
        for order, row in enumerate(rows):
            m = row["move"]
            t = self._territory(board.play(state, m), _playouts_for(row["visits"], self.config.score_playouts))
            lead = _num(me * t.margin)
            lcb = min(max(row["lcb"], 0.0), 1.0)
            pv = " ".join(self._to_gtp(x) for x in row["pv"])
            text = (f"info move {self._to_gtp(m)} visits {row['visits']} edgeVisits {row['visits']} "
                    f"utility {_num(row['q'])} winrate {_num(row['winrate'])} scoreMean {lead} "
                    f"scoreStdev {_num(t.stdev)} scoreLead {lead} scoreSelfplay {lead} prior {_num(row['prior'])} "
                    f"lcb {_num(lcb)} utilityLcb {_num(2.0 * lcb - 1.0)} order {order} pv {pv}")
            if req.pv_visits:
                text += " pvVisits " + " ".join(map(str, row["pv_visits"]))
            if req.moves_ownership:
                text += " movesOwnership " + " ".join(_num(me * x) for x in t.ownership)
            parts.append(text)
        if req.root_info or req.ownership:
            t = self._territory(state)
            if req.root_info:
                q = tree.value(0)
                lead = _num(me * t.margin)
                parts.append(f"rootInfo visits {int(tree.node_visits[0])} utility {_num(q)} "
                             f"winrate {_num(0.5 * (tree.winrate_value(0) + 1.0))} scoreMean {lead} "
                             f"scoreStdev {_num(t.stdev)} "
                             f"scoreLead {lead} scoreSelfplay {lead}")
            if req.ownership:
                parts.append("ownership " + " ".join(_num(me * x) for x in t.ownership))
        return " ".join(parts)

    def _territory(self, state, playouts: int | None = None):
        """Expected final ownership and area margin of ``state`` for the
        analysis lines (a ``decisions.Territory``): ``playouts`` (default
        ``score_playouts``) playouts (``players.playout_outcomes``, with the
        judge's pattern rollout policy),
        seeded by the position, cached by it. The one place an ownership or
        score head would plug in."""
        from alphalite.engine.decisions import playout_territory

        n = max(self.config.score_playouts if playouts is None else playouts, 1)
        key = (state.hash, state.komi, state.move_number, state.to_play, n)
        if self._territories is None:
            self._territories = {}
        if key not in self._territories:
            if len(self._territories) >= 4096:
                self._territories.clear()
            self._territories[key] = playout_territory(state, n, self.config.seed, self.judge.policy)
        return self._territories[key]

    def _analyze(self, color, callback, until_stopped=None, max_visits=None, allowed=None):
        from alphalite.engine import players
        from alphalite.engine.game import with_to_play

        self.wait_ready()
        state = with_to_play(self.state, color)
        player = self._analysis_player()
        cap = max_visits if max_visits is not None else players.max_tree_visits(state.size)
        out = player.run(state, self._gen(), max_visits=cap, callback=callback, allowed=allowed)
        if until_stopped is not None:
            while not until_stopped():
                time.sleep(0.02)
        return out

    def _analyze_once(self, args, command: str) -> str:
        """An analysis command through ``handle``: a short search, one answer."""
        req = self._analyze_args(args, command)
        out = self._analyze(req.color, None, max_visits=min(self.config.visits or 200, 200), allowed=req.allowed)
        return self._info_line(out.tree, req)

    def _genmove_analyze(self, args, command: str) -> str:
        req = self._analyze_args(args, command)
        trees = []

        def cb(tree, n):
            trees[:] = [tree]
            return False

        move = self._genmove(req.color, callback=cb, allowed=req.allowed)
        return "\n".join([self._info_line(t, req) for t in trees] + [f"play {move}"])

    def cmd_lz_analyze(self, *args):
        return self._analyze_once(args, "lz-analyze")

    def cmd_lz_genmove_analyze(self, *args):
        return self._genmove_analyze(args, "lz-genmove_analyze")

    def cmd_kata_analyze(self, *args):
        return self._analyze_once(args, "kata-analyze")

    def cmd_kata_genmove_analyze(self, *args):
        return self._genmove_analyze(args, "kata-genmove_analyze")

    def cmd_gogui_analyze_commands(self):
        return "\n".join([
            "gfx/Policy heatmap/alphalite-policy_heatmap",
            "dboard/Policy (percent)/alphalite-policy_dboard",
            "gfx/Ownership and dead stones/alphalite-ownership",
            "string/Final score/final_score",
            "plist/Dead stones/final_status_list dead",
        ])

    def _policy(self):
        from alphalite.engine import players

        self.wait_ready()
        state = players.resume(self.state)
        return state, self._player().prior(state)

    def cmd_alphalite_policy_heatmap(self):
        import numpy as np

        state, p = self._policy()
        n2 = self.size * self.size
        pts = p[:n2]
        top = float(pts.max()) if pts.size else 0.0
        infl = " ".join(f"{self._to_gtp(m)} {pts[m] / top:.3f}" for m in np.flatnonzero(pts > 0.001 * top)) \
            if top > 0 else ""
        labels = " ".join(f"{self._to_gtp(m)} {int(round(100 * pts[m]))}"
                          for m in np.argsort(-pts)[:10] if pts[m] >= 0.005)
        lines = []
        if infl:
            lines.append("INFLUENCE " + infl)
        if labels:
            lines.append("LABEL " + labels)
        lines.append(f"TEXT pass {100 * float(p[n2]):.1f}%")
        return "\n".join(lines)

    def cmd_alphalite_policy_dboard(self):
        state, p = self._policy()
        n = self.size
        return "\n".join(" ".join(f"{100 * float(p[r * n + c]):.1f}" for c in range(n)) for r in range(n))

    def cmd_alphalite_ownership(self):
        state = self.state
        own = self.judge.territory(state).ownership
        _, dead = self.judge(state)
        lines = ["INFLUENCE " + " ".join(f"{self._to_gtp(m)} {own[m]:.2f}" for m in range(own.size))]
        if len(dead):
            lines.append("MARK " + " ".join(self._to_gtp(int(m)) for m in dead))
        return "\n".join(lines)


