"""Frozen, typed configs with a command line over them.

A config is a frozen dataclass whose fields carry a ``help`` in their
metadata. ``add_arguments`` turns the fields into ``--flag`` options,
``from_args`` / ``from_dict`` build the config (unknown keys rejected), and
``to_dict`` gives what is saved as config.json beside a run.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import json
import typing
from pathlib import Path


def field(default, help: str, choices=None, flag: str | None = None):
    """A config field; ``flag`` names its option where ``--name-with-dashes``
    will not do (``lam`` is ``--lambda``: ``lambda`` is a Python keyword)."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices, "flag": flag})


def flag_of(f: dataclasses.Field) -> str:
    """The command-line option of field ``f``."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def finite(x) -> bool:
    """A real number, neither inf nor nan (for ``require``'s checks)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def refuse(checks, error=ValueError) -> None:
    """``error`` naming the flag of the first ``(flag, ok, what it must be,
    value)`` of ``checks`` that is not ok: the one wording of a refused
    value, for a command's own arguments and (``require``) a config's."""
    for flag, ok, want, got in checks:
        if not ok:
            raise error(f"{flag} must be {want}, got {got!r}")


def require(obj, checks) -> None:
    """``refuse`` for a config's fields: ``(field name, ok, what it must
    be)`` (a config's ``__post_init__``)."""
    fields = {f.name: f for f in dataclasses.fields(obj)}
    refuse((flag_of(fields[name]), ok, want, getattr(obj, name)) for name, ok, want in checks)


def _types(cls) -> dict:
    return typing.get_type_hints(cls)


def add_arguments(parser: argparse.ArgumentParser, cls, *, skip_existing: bool = False) -> None:
    """One option per field; ``skip_existing``: leave out fields whose option
    the parser already has (two configs sharing one flag, e.g. ``--komi``)."""
    hints = _types(cls)
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        flag = flag_of(f)
        if skip_existing and flag in parser._option_string_actions:
            continue
        help_ = (f.metadata.get("help", "") + f" (default: {f.default})").replace("%", "%%")
        if t is bool:
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                                default=None, help=help_)
        else:
            parser.add_argument(flag, dest=f.name, type=t, default=None,
                                choices=f.metadata.get("choices"), help=help_)


def from_dict(cls, d: dict):
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"unknown config keys for {cls.__name__}: {', '.join(unknown)}")
    hints = _types(cls)
    kwargs = {}
    for k, v in d.items():
        t = hints[k]
        if t is float and isinstance(v, int):
            v = float(v)
        if not isinstance(v, t) or (t is int and isinstance(v, bool)):
            raise ValueError(f"config key {k!r} must be {t.__name__}, got {v!r}")
        kwargs[k] = v
    cfg = cls(**kwargs)
    for f in dataclasses.fields(cls):
        choices = f.metadata.get("choices")
        if choices and getattr(cfg, f.name) not in choices:
            raise ValueError(f"config key {f.name!r} must be one of {choices}, got {getattr(cfg, f.name)!r}")
    return cfg


def from_args(cls, args: argparse.Namespace, base: dict | None = None):
    d = dict(base or {})
    for f in dataclasses.fields(cls):
        v = getattr(args, f.name, None)
        if v is not None:
            d[f.name] = v
    return from_dict(cls, d)


def to_dict(cfg) -> dict:
    return dataclasses.asdict(cfg)


# What a run's config.json holds beside its config: the net it trains (the
# net loaders read it there, checkpoint.model_info_from_config).
NET_INFO = ("model", "board_size", "preset", "kind")


def file_values(cls, d: dict) -> dict:
    """The ``cls`` values of a ``--config`` file: a run's own config.json
    (its config plus ``NET_INFO``) reads back as that run's config; any
    other unknown key is left for ``from_dict`` to refuse."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names or k not in NET_INFO}


def changed_fields(cfg, saved: dict, *, keep=(), legacy: dict | None = None) -> list[str]:
    """Fields of ``cfg`` that differ from a run's saved config (a resumed run
    must match it), as ``name (saved -> now)``, except those in ``keep``.
    A field the saved config lacks (saved before the field existed) counts
    as ``legacy[name]`` if given, else as the field's default."""
    legacy = legacy or {}
    out = []
    for f in dataclasses.fields(cfg):
        now = getattr(cfg, f.name)
        was = saved.get(f.name, legacy.get(f.name, f.default))
        if f.name not in keep and was != now:
            out.append(f"{f.name} ({was!r} -> {now!r})")
    return out


def load(cls, path: str | Path):
    return from_dict(cls, json.loads(Path(path).read_text()))
