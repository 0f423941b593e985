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
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


class CheckpointError(RuntimeError):
    """A checkpoint that is missing or unreadable."""


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def append_jsonl(path: str | os.PathLike, obj: Any) -> None:
    """One line per call; a line is written with a single write() so a kill
    leaves at worst a torn last line, which readers skip."""
    with open(path, "a") as f:
        f.write(json.dumps(obj, sort_keys=True) + "\n")
        f.flush()


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # torn last line of a killed run
    except FileNotFoundError:
        pass
    return out


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
    write_json_atomic(tmp / "model.json", model_info)
    if extra:
        for name, obj in extra.items():
            write_json_atomic(tmp / name, obj)
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


def find_model_dir(path: str | os.PathLike) -> Path:
    """Accept an exported model folder, or a run folder (its best, else its
    latest checkpoint, exported on the fly is not needed: we read in place)."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    if (p / "model.json").exists():
        return p
    if (p / "config.json").exists() and ((p / "best").exists() or (p / "ckpt").exists()):
        return p
    raise CheckpointError(f"{path} is neither an exported model (model.json) nor a run folder")


def load_variables(path: str | os.PathLike) -> tuple[dict, dict]:
    """(model_info, variables) from an exported model folder or a run folder."""
    p = find_model_dir(path)
    ocp = _ocp()
    if (p / "model.json").exists():
        info = json.loads((p / "model.json").read_text())
        with ocp.StandardCheckpointer() as ckptr:
            variables = ckptr.restore((p / "variables").absolute())
        return info, _to_numpy(variables)
    # Run folder: restore the raw state tree without a template.
    cfg = json.loads((p / "config.json").read_text())
    for sub in ("best", "ckpt"):
        d = p / sub
        if not d.exists():
            continue
        mgr = manager(d, max_to_keep=None)
        step = mgr.latest_step()
        if step is None:
            continue
        out = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(),
                                                        meta=ocp.args.JsonRestore()))
        state = out.state
        variables = {"params": state["params"]}
        if state.get("batch_stats"):
            variables["batch_stats"] = state["batch_stats"]
        info = model_info_from_config(cfg)
        info["step"] = int(step)
        return info, _to_numpy(variables)
    raise CheckpointError(f"run folder {path} has no checkpoint yet")


def load_model(path: str | os.PathLike, kind: str, size: int | None = None):
    """(info, model, variables): the net in an exported folder or run folder,
    built by ``nets.make_model``; ValueError unless it is a ``kind``
    ("policy" or "value") net, for a ``size`` board when given."""
    from alphalite import features, nets

    info, variables = load_variables(path)
    is_value = str(info.get("model", "")).endswith("_value")
    if info.get("kind", kind) != kind or is_value != (kind == "value"):
        raise ValueError(f"{path} is not a {kind} net (model {info.get('model')!r})")
    n = int(info["board_size"])
    if size is not None and n != size:
        raise ValueError(f"{path} is a {n}x{n} {kind} net, expected {size}x{size}")
    model = nets.make_model(info["model"], n, features.num_planes(info.get("preset", "default")))
    return info, model, variables


def model_info_from_config(cfg: dict) -> dict:
    return {k: cfg[k] for k in ("model", "board_size", "preset", "kind") if k in cfg}


def _to_numpy(tree):
    import jax

    return jax.tree_util.tree_map(np.asarray, tree)
