"""Run folders and Orbax checkpoints.

A run folder holds::

    config.json      the run's frozen config
    metrics.jsonl    one JSON object per logged step
    plots/*.png
    ckpt/<step>/     latest checkpoints (Orbax CheckpointManager, a few kept)
    best/<step>/     the best by validation metric, kept apart

An exported model (what ships under checkpoints/) is a folder with
``model.json`` (model name, board size, feature preset, ...) and
``variables/`` (an Orbax PyTree of params and batch stats).

An AlphaZero run folder (``alphalite.zero.store``) stands for the net its
``best.json`` points at (``run_best``).

The shipped nets are the package data ``alphalite.checkpoints``
(pyproject.toml maps the repository's ``checkpoints/`` folder there), so
``resolve("policy19")`` finds one from any working folder; a path that
exists wins over a name.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from alphalite.runtime import config, files


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable or not the net asked for."""


SHIPPED = "alphalite.checkpoints"  # the package holding the shipped nets
# The strongest shipped configuration per board size (docs/strength.md):
# search with this policy net's priors and this value net's leaf values
# (None: a policy-value net, valued by its own head, or a policy net alone,
# the rollouts valuing). A policy net of another board size is moved to
# this one (``nets.resize_policy``): 10x10 to 18x18 (not 7x7: 0-10 against
# the pattern policies alone) play the 19x19 policy so.
DEFAULT_NETS: dict[int, tuple[str, str | None]] = {9: ("az9i", None), 19: ("policy19ag40b12", "value19b12"),
                                                   **{n: ("policy19ag40b12", None) for n in range(10, 19)}}
# The policy engine plays a net alone, with no search and no value net to
# resign by: as measured (19x19: the net without the previous moves in its
# input, 59-1 against GNU Go level 10; docs/strength.md).
POLICY_ALONE_NETS: dict[int, str] = {19: "policy19ag40b12"}


def shipped_dir() -> Path:
    """The folder of the shipped nets (package data ``alphalite.checkpoints``)."""
    try:
        return Path(str(resources.files(SHIPPED)))
    except ModuleNotFoundError:  # an install from before the nets were package data
        raise CheckpointError(f"the shipped nets ({SHIPPED}) are not installed: reinstall alphalite "
                              "(make install)") from None


def shipped_names() -> list[str]:
    """Names of the shipped nets (``policy19``, ``value9``, ...)."""
    return sorted(p.name for p in shipped_dir().iterdir() if (p / "model.json").is_file())


def shipped(name: str) -> Path:
    """The folder of the shipped net ``name``."""
    d = shipped_dir() / name
    if os.sep in name or name in ("", ".", "..") or not (d / "model.json").is_file():
        raise CheckpointError(f"no shipped net {name!r} (shipped: {', '.join(shipped_names())})")
    return d


def resolve(ref: str | os.PathLike) -> Path:
    """The folder of a checkpoint given by path (wins when it exists) or by
    the name of a shipped net."""
    p = Path(ref).expanduser()
    if p.exists():
        return p
    try:
        return shipped(str(ref))
    except CheckpointError:
        raise CheckpointError(f"checkpoint not found: {ref} is neither a path nor a shipped net "
                              f"({', '.join(shipped_names())})") from None


def _ocp():
    import orbax.checkpoint as ocp

    return ocp


def manager(directory: str | os.PathLike, *, max_to_keep: int | None = 3):
    """A CheckpointManager with items ``state`` (PyTree) and ``meta`` (JSON)."""
    ocp = _ocp()
    options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                           enable_async_checkpointing=False)
    return ocp.CheckpointManager(Path(directory).absolute(), options=options,
                                 item_names=("state", "meta"))


def latest_step(directory: str | os.PathLike) -> int | None:
    """The newest finished step in a manager's folder, or None, without
    making the folder (a manager would): Orbax renames a step's folder to
    its bare number only once it is complete."""
    return max(kept_steps(directory), default=None)


def kept_steps(directory: str | os.PathLike) -> list[int]:
    """The finished steps in a manager's folder, oldest first (see latest_step)."""
    return sorted(int(d.name) for d in Path(directory).glob("*") if d.name.isdigit())


def save(mgr, step: int, state: Any, meta: dict) -> None:
    ocp = _ocp()
    mgr.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                           meta=ocp.args.JsonSave(meta)), force=True)
    mgr.wait_until_finished()


def restore(mgr, abstract_state: Any, step: int | None = None):
    """(state, meta) of ``step`` (default: latest), or None if there is none."""
    ocp = _ocp()
    step = mgr.latest_step() if step is None else step
    if step is None:
        return None
    out = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state),
                                                    meta=ocp.args.JsonRestore()))
    return out.state, out.meta


def restore_meta(mgr, step: int | None = None) -> dict | None:
    """The meta of ``step`` (default: latest) alone, or None if there is none."""
    ocp = _ocp()
    step = mgr.latest_step() if step is None else step
    if step is None:
        return None
    return mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta


def export_model(out_dir: str | os.PathLike, variables: dict, model_info: dict,
                 extra: dict | None = None) -> Path:
    """Write a standalone model folder (model.json + variables/) atomically."""
    ocp = _ocp()
    out = Path(out_dir).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    variables = {k: v for k, v in variables.items()}
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(tmp / "variables", variables)
    files.write_json_atomic(tmp / "model.json", model_info)
    if extra:
        for name, obj in extra.items():
            files.write_json_atomic(tmp / name, obj)
    if out.exists():
        import shutil

        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)
    return out


def run_best(path: str | os.PathLike) -> Path | None:
    """The exported net an AlphaZero run folder's ``best.json`` points at:
    the run's own ``nets/`` folder of that name (a moved or copied run), else
    the path as written; None when
    ``path`` is no such run folder. CheckpointError for a broken pointer."""
    p = Path(path).expanduser()
    f = p / "best.json"
    if (p / "model.json").exists() or not f.is_file():
        return None
    try:
        net = Path(json.loads(f.read_text())["net"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise CheckpointError(f"{f}: unreadable: {type(e).__name__}: {e}") from None
    for d in (p / "nets" / net.name, p / net):  # p / an absolute path is that path; a relative one is the run's
        if (d / "model.json").is_file():
            return d
    raise CheckpointError(f"{f}: its best net {net} is not there")


def find_model_dir(path: str | os.PathLike) -> Path:
    """Accept a shipped net's name, an exported model folder, an AlphaZero
    run folder (the net of its best.json), or a run folder (its best, else
    its latest checkpoint, read in place)."""
    p = resolve(path)
    if (p / "model.json").exists():
        return p
    best = run_best(p)
    if best is not None:
        return best
    if (p / "config.json").exists() and ((p / "best").exists() or (p / "ckpt").exists()):
        return p
    raise CheckpointError(f"{path} is neither an exported model (model.json) nor a run folder")


def read_model_info(path: str | os.PathLike) -> dict:
    """An exported model's ``model.json``, checked for what loading needs."""
    f = Path(path) / "model.json"
    try:
        info = json.loads(f.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{f}: unreadable: {e}") from None
    if not isinstance(info, dict):
        raise CheckpointError(f"{f}: not a JSON object")
    for key in ("model", "board_size"):
        if key not in info:
            raise CheckpointError(f"{f}: no {key!r}")
    if not isinstance(info["model"], str) or not isinstance(info["board_size"], int) \
            or not 2 <= info["board_size"] <= 25:
        raise CheckpointError(f"{f}: bad model {info['model']!r} or board_size {info['board_size']!r}")
    return info


def load_variables(path: str | os.PathLike, step: int | None = None) -> tuple[dict, dict]:
    """(model_info, variables) from an exported model folder or a run folder
    (its best, else its latest checkpoint; ``step``: that step, from best/ or
    ckpt/)."""
    if step is not None and run_best(resolve(path)) is not None:  # an AlphaZero run: nets/step-N
        nets = {int(d.name[5:]): d for d in (resolve(path) / "nets").glob("step-*") if d.name[5:].isdigit()}
        if step not in nets:
            raise CheckpointError(f"AlphaZero run {path} has no net of step {step} "
                                  f"(nets: {', '.join(map(str, sorted(nets))) or 'none'})")
        return load_variables(nets[step])
    p = find_model_dir(path)
    ocp = _ocp()
    if (p / "model.json").exists():
        if step is not None:
            raise CheckpointError(f"{p} is an exported model: it has one step, not a choice of steps")
        info = read_model_info(p)
        _drop_orphaned_read_errors()
        try:
            with ocp.StandardCheckpointer() as ckptr:
                variables = ckptr.restore((p / "variables").absolute())
        except Exception as e:  # noqa: BLE001 - Orbax and TensorStore raise many kinds; all mean unreadable
            raise CheckpointError(f"{p / 'variables'}: unreadable ({_first_words(e)})") from None
        return info, _to_numpy(variables)
    # Run folder: restore the raw state tree without a template.
    cfg = json.loads((p / "config.json").read_text())
    kept = {sub: kept_steps(p / sub) for sub in ("best", "ckpt")}
    if step is not None and not any(step in s for s in kept.values()):
        have = "; ".join(f"{sub}/ {', '.join(map(str, s))}" for sub, s in kept.items() if s) or "none"
        raise CheckpointError(f"run folder {path} has no checkpoint of step {step} (kept: {have})")
    for sub in ("best", "ckpt"):
        d = p / sub
        if not kept[sub] or (step is not None and step not in kept[sub]):
            continue
        mgr = manager(d, max_to_keep=None)
        step = kept[sub][-1] if step is None else step
        _drop_orphaned_read_errors()
        try:
            out = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(),
                                                            meta=ocp.args.JsonRestore()))
        except Exception as e:  # noqa: BLE001 - as for an exported model
            raise CheckpointError(f"{d / str(step)}: unreadable ({_first_words(e)})") from None
        state = out.state
        variables = {"params": state["params"]}
        if state.get("batch_stats"):
            variables["batch_stats"] = state["batch_stats"]
        info = model_info_from_config(cfg)
        info["step"] = int(step)
        return info, _to_numpy(variables)
    raise CheckpointError(f"run folder {path} has no checkpoint yet")


def net_kind(info: dict) -> str:
    """"policy", "value" or "policy_value" by the model's name (``_value``,
    ``_pv`` suffixes); model.json's ``kind`` must agree when it has one."""
    name = str(info.get("model", ""))
    return "value" if name.endswith("_value") else "policy_value" if name.endswith("_pv") else "policy"


def load_model(path: str | os.PathLike, kind: str | tuple[str, ...], size: int | None = None):
    """(info, model, variables): the net in an exported folder or run folder,
    built by ``nets.make_model``. CheckpointError (naming the folder) unless
    it is a ``kind`` ("policy", "value", "policy_value", or one of a tuple
    of them) net, for a ``size`` board when given, whose variables fit its
    model."""
    import jax

    # JAX and Numba on first use: train.supervised and selfplay.rl import this module,
    # and the CLI's parser imports their configs.
    from alphalite.nn import features, nets

    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    info, variables = load_variables(path)
    got = net_kind(info)
    if info.get("kind", got) != got or got not in kinds:
        raise CheckpointError(f"{path} is not a {' or '.join(kinds)} net (model {info.get('model')!r}, "
                              f"kind {info.get('kind', 'unknown')!r})")
    n = int(info["board_size"])
    if size is not None and n != size:
        raise CheckpointError(f"{path} is a {n}x{n} {got} net, expected {size}x{size}")
    try:
        model = nets.make_model(info["model"], n, features.num_planes(info.get("preset", "default")))
        want = nets.abstract_variables(model)
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot build model {info['model']!r} ({_first_words(e)})") from None
    got_shapes = jax.tree_util.tree_map(np.shape, variables)
    want_shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), want)
    if got_shapes != want_shapes:
        raise CheckpointError(f"{path}: its variables do not fit model {info['model']!r} "
                              f"for {n}x{n} (model.json and variables/ disagree)")
    return info, model, variables


def _is_orphaned_read_error(u) -> bool:
    """The error a read left in flight by a failed restore raises: Orbax has
    closed its event loop, and the read's completion, in TensorStore's
    thread, finds it closed (asyncio's ``_check_closed``)."""
    tb = u.exc_traceback
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return (isinstance(u.exc_value, RuntimeError) and str(u.exc_value) == "Event loop is closed"
            and tb is not None and tb.tb_frame.f_code.co_name == "_check_closed")


def _drop_orphaned_read_errors() -> None:
    """A failed Orbax restore leaves reads in flight; each raises "Event loop
    is closed" when it completes, where nobody can catch it, and Python
    printed a traceback per read after the refusal had been said in one line
    (in a test run, charged to whichever test was running). From the first
    restore on (some complete before the failure reaches us), this process
    drops those errors, and only those."""
    hook = sys.unraisablehook
    if getattr(hook, "drops_orphaned_reads", False):
        return

    def drop(u):
        if not _is_orphaned_read_error(u):
            hook(u)

    drop.drops_orphaned_reads = True
    sys.unraisablehook = drop


def _first_words(e: BaseException, limit: int = 240) -> str:
    """An exception as one short line (TensorStore appends its whole spec)."""
    text = " ".join(str(e).split()).split(" [tensorstore_spec")[0]
    return f"{type(e).__name__}: {text[:limit]}"


def model_info_from_config(cfg: dict) -> dict:
    return {k: cfg[k] for k in config.NET_INFO if k in cfg}


def _to_numpy(tree):
    import jax

    return jax.tree_util.tree_map(np.asarray, tree)
