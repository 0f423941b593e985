"""The AlphaZero learner: a policy-value net trained on the most recent
self-play games.

Loss per position (AlphaZero's): cross-entropy from the search's improved
policy (the record's ``policy_*`` target, Gumbel completed-Q or visit
counts) to the net's policy over the legal moves, plus ``value_weight``
times the squared error of the net's value against the game's outcome from
the mover's view, plus weight decay (``optax.adamw``). A ``bNcM_aux`` model
(``bNcM_aux_pv``: the net with KataGo's ownership and score heads) also
learns each record's final ownership and score, exact (the games are played
out and scored by Tromp-Taylor area), with KataGo's weights
(``train.value.ownership_score_loss``); a resigned game's are not known.

Positions are replayed from the records on the host (board kernels, the
net's input planes, the legal mask), cached per record, and sampled
uniformly from the ``window_games`` newest records, each batch under one
random board symmetry.

Start (``init``): a fresh net, or a shipped policy net (``policy9``) whose
arrays are copied wherever name and shape match the policy-value net (the
trunk and the policy head when the model is the same ``bNcM``), plus the
value head of ``init_value`` (``value9``) where shapes match; what was
copied is listed in the checkpoint's meta and the run's metrics. With
``grow``, ``init`` is a smaller policy-value net of the same kind (fewer
blocks or channels) grown into the model so that it computes the same
function (Net2Net's idea, Chen et al. 2016): the net keeps what it learnt
and the run trains the new capacity from there.
"""

from __future__ import annotations

import numpy as np

from alphalite.go import board
from alphalite.nn import checkpoint as ckpt
from alphalite.nn import features
from alphalite.zero.store import Store
from selfplay.records import read_game


def model_info(model: str, size: int, preset: str) -> dict:
    """``model`` ``bNcM`` -> a ``bNcM_pv`` net, ``bNcM_aux`` -> ``bNcM_aux_pv``."""
    return {"model": f"{model}_pv", "board_size": int(size), "preset": preset, "kind": "policy_value"}


def build_model(info: dict):
    from alphalite.nn import nets

    return nets.make_model(info["model"], info["board_size"], features.num_planes(info.get("preset", "default")))


def load_net(net_dir):
    """(model, variables) of an exported policy-value net folder."""
    info, variables = ckpt.load_variables(net_dir)
    return build_model(info), variables


def replay_positions(game, preset: str):
    """A record's positions: planes uint8 [T, H, W, C], legal bool [T, A],
    targets float32 [T, A] (the improved policy), z float32 [T] (the
    outcome from the mover's view), ownership int8 [T, H, W] (the final
    owner of each point, mover's view) and score float32 [T] (the final
    Tromp-Taylor margin, mover's view; NaN and ownership 0 where the record
    has none or the game was resigned)."""
    n, T = game.size, len(game.moves)
    A = n * n + 1
    B = board.init_board(n, True, False, board.zobrist_table(), T + 16)
    pid = features.preset_id(preset)
    buf = np.zeros((n, n, features.num_planes(preset)), np.float32)
    planes = np.zeros((T,) + buf.shape, np.uint8)
    legal = np.zeros((T, A), np.bool_)
    targets = np.zeros((T, A), np.float32)
    off = game.policy_offsets
    for t in range(T):
        features.encode_into(B, pid, buf)
        planes[t] = buf
        board.legal_mask(B, legal[t])
        targets[t, game.policy_moves[off[t]:off[t + 1]]] = game.policy_probs[off[t]:off[t + 1]]
        board.play_flat(B, int(game.moves[t]), int(game.colours[t]))
    targets /= np.maximum(targets.sum(axis=1, keepdims=True), 1e-8)
    legal |= targets > 0  # a target move is always a move the net may choose
    mover = game.colours.astype(np.float32)
    z = (mover * game.winner).astype(np.float32)
    if game.ownership is None or game.resigned:
        own, score = np.zeros((T, n, n), np.int8), np.full(T, np.nan, np.float32)
    else:
        own = (game.colours[:, None, None] * game.ownership.reshape(1, n, n)).astype(np.int8)
        score = (mover * game.score).astype(np.float32)
    return planes, legal, targets, z, own, score


def copy_matching(dst: dict, src: dict, prefix: str = "", only=None) -> list[str]:
    """Copy into the nested dict ``dst`` every array of ``src`` with the same
    path and shape (top-level names in ``only`` if given); returns the paths."""
    done = []
    for k, v in src.items():
        if k not in dst or (only is not None and not prefix and k not in only):
            continue
        if isinstance(v, dict) and isinstance(dst[k], dict):
            done += copy_matching(dst[k], v, f"{prefix}{k}/")
        elif not isinstance(v, dict) and np.shape(v) == np.shape(dst[k]):
            dst[k] = np.asarray(v, np.asarray(dst[k]).dtype)
            done.append(prefix + k)
    return done


def grow_into(dst: dict, src: dict) -> list[str]:
    """Copy the variables ``src`` of a policy-value net into the fresh ``dst``
    of a wider or deeper one of the same kind so that ``dst`` computes the
    same outputs: in each conv kernel the old [.., C_in, C_out] block is put
    in place and the new input channels get zero weights into the old
    outputs (they feed nothing old; the old inputs feed them through the
    fresh random weights, so they learn), new channels' batch norms stay
    fresh, and each new residual block starts as the identity (its second
    batch norm's scale and bias 0: relu(x + 0) = x for x >= 0). Returns the
    grown paths; ValueError where a shape cannot be grown."""
    done = []

    def graft(d: dict, s: dict, prefix: str):
        for k, v in s.items():
            path = prefix + k
            if k not in d:
                raise ValueError(f"cannot grow {path}: the larger net has no such array")
            if isinstance(v, dict):
                graft(d[k], v, path + "/")
                continue
            v, new = np.asarray(v), np.array(d[k])
            if v.shape == new.shape:
                new = v.astype(new.dtype)
            elif v.ndim == new.ndim == 4 and v.shape[:2] == new.shape[:2] and v.shape[2] <= new.shape[2] \
                    and v.shape[3] <= new.shape[3]:
                ci, co = v.shape[2:]
                new[:, :, ci:, :co] = 0.0
                new[:, :, :ci, :co] = v
            elif v.ndim == new.ndim == 1 and v.shape[0] < new.shape[0]:
                new[:v.shape[0]] = v
            else:
                raise ValueError(f"cannot grow {path}: {v.shape} into {new.shape}")
            d[k] = new
            done.append(path)

    for c in src:
        graft(dst[c], src[c], f"{c}/")
    old = set(src["params"]["trunk"])
    for k, block in dst["params"]["trunk"].items():
        if k.startswith("block") and k not in old:
            bn = block["BatchNorm_1"]
            bn["scale"], bn["bias"] = np.zeros_like(bn["scale"]), np.zeros_like(bn["bias"])
            done.append(f"params/trunk/{k}: identity")
    return done


def check_grow_source(init: str, size: int, num_planes: int, aux: bool) -> None:
    """ValueError unless ``init`` (its model.json alone) is a policy-value net
    for ``size`` with ``num_planes`` input planes (``aux``: with ownership and
    score heads), one that can grow into such a net."""
    info = ckpt.read_model_info(ckpt.find_model_dir(init))
    kind = ckpt.net_kind(info)
    have = (kind, info["board_size"], features.num_planes(info.get("preset", "default")),
            info["model"].endswith("_aux_pv"))
    if have != ("policy_value", size, num_planes, aux):
        raise ValueError(f"cannot grow {init}: a {info['model']} {kind} net for "
                         f"{info['board_size']}x{info['board_size']} with {have[2]} input planes; "
                         f"--grow needs a smaller net of the same kind, board size and preset")


def initial_variables(model, seed: int, init: str, init_value: str, grow: bool = False) -> tuple[dict, list[str]]:
    import jax

    from alphalite.nn import nets

    variables = jax.tree_util.tree_map(np.asarray, nets.init_variables(model, jax.random.PRNGKey(seed)))
    variables = {c: dict(v) for c, v in variables.items()}
    if grow:
        if not init or init_value:
            raise ValueError("grow: needs --init (the smaller net) and no --init-value")
        check_grow_source(init, model.size, model.num_planes, bool(model.aux_heads))
        _, src = ckpt.load_variables(ckpt.resolve(init))
        return variables, [f"{init}:{p}" for p in grow_into(variables, src)]
    copied = []
    for ref, heads in ((init, None), (init_value, ("value_conv", "value_bn", "value_hidden", "value_out"))):
        if ref:
            _, src = ckpt.load_variables(ckpt.resolve(ref))
            for c in variables:
                if c in src:
                    copied += [f"{ref}:{c}/{p}" for p in copy_matching(variables[c], src[c], only=heads)]
    return variables, copied


class Learner:
    """Holds the train state; ``train(steps)`` then ``save()``. Restores the
    latest checkpoint of the store on construction (a restarted actor or a
    rerun continues where the last checkpoint was)."""

    def __init__(self, workdir, *, model: str, size: int, preset: str, init: str, init_value: str,
                 learning_rate: float, weight_decay: float, batch_size: int, value_weight: float,
                 window_games: int, seed: int = 0, grow: bool = False):
        import jax
        import optax

        from alphalite.train import loop

        self.store = Store(workdir).make()
        self.info = model_info(model, size, preset)
        self.model = build_model(self.info)
        self.aux = self.model.aux_heads
        self.batch_size, self.value_weight, self.window = batch_size, value_weight, window_games
        self.gen = np.random.default_rng(seed)
        self.cache: dict[str, tuple] = {}
        tx = loop.with_clipping(optax.adamw(learning_rate, weight_decay=weight_decay), loop.GRAD_CLIP)
        variables, self.copied = initial_variables(self.model, seed, init, init_value, grow)
        self.state = loop.new_state(self.model, tx, variables)
        self.mgr = ckpt.manager(self.store.ckpt, max_to_keep=3)
        got = ckpt.restore(self.mgr, jax.tree_util.tree_map(np.asarray, self.state))
        if got is not None:
            self.state = got[0]
            # a restarted learner must not draw its first batches again
            self.gen = np.random.default_rng((seed, self.step))
        self.step_fn = jax.jit(self._step)

    def _step(self, state, planes, legal, targets, z, own, score):
        import jax
        import jax.numpy as jnp

        from alphalite.nn import nets
        from alphalite.train import loop, value

        def loss_fn(params):
            (logits, out), updates = state.apply_fn({"params": params, "batch_stats": state.batch_stats},
                                                    planes.astype(jnp.float32), train=True, aux=self.aux,
                                                    mutable=["batch_stats"])
            v = out["value"] if self.aux else out
            pol = jnp.mean(nets.masked_cross_entropy(logits, legal, targets))
            val = jnp.mean((v - z) ** 2)
            loss, parts = pol + self.value_weight * val, {}
            if self.aux:
                l_aux, parts = value.ownership_score_loss(out, own.astype(jnp.float32), score)
                loss = loss + jnp.mean(l_aux)
            return loss, (updates, {"policy_loss": pol, "value_loss": val, **parts})

        (loss, (updates, parts)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state, m = loop.apply_update(state, grads, updates, loss)
        return state, {**m, **parts}

    @property
    def step(self) -> int:
        return int(self.state.step)

    def _window(self):
        paths = self.store.game_paths()[-self.window:]
        keep = {str(p) for p in paths}
        self.cache = {k: v for k, v in self.cache.items() if k in keep}
        for p in paths:
            if str(p) not in self.cache:
                try:
                    self.cache[str(p)] = replay_positions(read_game(p), self.info["preset"])
                except ValueError:  # unreadable record: skipped
                    continue
        parts = [self.cache[k] for k in sorted(self.cache)]
        return [np.concatenate(x) for x in zip(*parts)] if parts else None

    def train(self, steps: int) -> dict:
        """``steps`` optimizer steps on the window; mean metrics (empty window: no step)."""
        from alphalite.train.loop import TrainingDiverged

        data = self._window()
        if data is None or len(data[0]) == 0:
            return {"step": self.step, "positions": 0}
        planes, legal, targets, z, own, score = data
        n, size = len(z), self.info["board_size"]
        table = features.sym_move_table(size)
        sums: dict[str, float] = {}
        for _ in range(steps):
            idx = self.gen.integers(0, n, self.batch_size)
            k = int(self.gen.integers(0, 8))
            perm = table[k]
            lg, tg = np.zeros_like(legal[idx]), np.zeros_like(targets[idx])
            lg[:, perm] = legal[idx]
            tg[:, perm] = targets[idx]
            state, m = self.step_fn(self.state, features.transform_planes(planes[idx], k), lg, tg, z[idx],
                                    features.transform_planes(own[idx, :, :, None], k)[..., 0], score[idx])
            if not bool(m["finite"]):
                raise TrainingDiverged(f"non-finite loss or parameters at step {self.step}")
            self.state = state
            for key in ("loss", "policy_loss", "value_loss", "grad_norm", "ownership_loss", "score_mae"):
                if key in m:
                    sums[key] = sums.get(key, 0.0) + float(m[key])
        return {"step": self.step, "positions": int(n), "games": len(self.cache),
                **{k: v / max(steps, 1) for k, v in sums.items()}}

    def save(self) -> dict:
        """Orbax checkpoint of the train state and an exported net for the
        actors, both atomic; returns ``{"step", "net"}``."""
        import jax

        from alphalite.train.loop import variables_of

        step = self.step
        net = self.store.net_dir(step)
        if self.mgr.latest_step() != step:
            ckpt.save(self.mgr, step, self.state, {"step": step, "copied": self.copied})
        if not net.exists():
            ckpt.export_model(net, jax.tree_util.tree_map(np.asarray, variables_of(self.state)),
                              {**self.info, "step": step})
        return {"step": step, "net": str(net)}

    def start_net(self) -> dict:
        """Export the starting net (step 0) if there is no best yet; returns the best pointer."""
        best = self.store.best()
        if best is None:
            saved = self.save()
            self.store.set_best(saved["net"], saved["step"], copied=len(self.copied))
            best = self.store.best()
        return best

