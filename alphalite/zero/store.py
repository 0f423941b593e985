"""The run folder of an AlphaZero run: what every actor reads and writes.

::

    <workdir>/config.json      the run's configs (a rerun must match)
    <workdir>/games/*.npz      self-play records (selfplay.records), written atomically by the actors
    <workdir>/ckpt/<step>/     the learner's Orbax checkpoints (params, optimizer state, step)
    <workdir>/nets/step-N/     exported nets (model.json + variables), one per checkpoint, written atomically
    <workdir>/best.json        pointer to the best net so far (relative to the workdir), atomic
    <workdir>/state.json       the driver's iteration counter (and the step its training goes to), atomic
    <workdir>/metrics.jsonl    one line per self-play round, training round and gating
    <workdir>/plots/zero.png   loss, gating and rating (alphalite.zero.plots), redrawn each iteration

On a cluster the workdir must be on storage every node sees. Every write is
a temp name then a rename, so a process killed at any point leaves the last
complete version of each file; a rerun resumes from what is there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from alphalite.runtime import files


class Store:
    def __init__(self, workdir: str | os.PathLike):
        self.root = Path(workdir).absolute()
        self.games = self.root / "games"
        self.ckpt = self.root / "ckpt"
        self.nets = self.root / "nets"
        self.metrics = self.root / "metrics.jsonl"
        self.plot_path = self.root / "plots" / "zero.png"

    def make(self) -> "Store":
        for d in (self.root, self.games, self.nets):
            d.mkdir(parents=True, exist_ok=True)
        return self

    def net_dir(self, step: int) -> Path:
        return self.nets / f"step-{step:07d}"

    def start_net(self) -> str | None:
        """The run's first net (step 0), the fixed opponent of the anchor matches."""
        d = self.net_dir(0)
        return str(d) if d.is_dir() else None

    def best(self) -> dict | None:
        """``{"net": folder, "step": N, ...}`` of the best net (an absolute
        path), or None before the first."""
        p = self.root / "best.json"
        if not p.exists():
            return None
        best = json.loads(p.read_text())
        net = Path(best["net"])
        if net.is_absolute():  # written before paths were relative: a moved or copied run has it under nets/
            own = self.nets / net.name
            net = own if own.is_dir() else net
        return {**best, "net": str(self.root / net)}

    def set_best(self, net: str | os.PathLike, step: int, **extra) -> None:
        # relative to the run folder, so a moved or copied run resumes from its own net
        net = Path(net).absolute()
        rel = os.path.relpath(net, self.root) if net.is_relative_to(self.root) else str(net)
        files.write_json_atomic(self.root / "best.json", {"net": rel, "step": int(step), **extra})

    def _state(self) -> dict:
        p = self.root / "state.json"
        return json.loads(p.read_text()) if p.exists() else {}

    def iteration(self) -> int:
        return int(self._state().get("iteration", 0))

    def set_iteration(self, iteration: int, **extra) -> None:
        files.write_json_atomic(self.root / "state.json", {"iteration": int(iteration), **extra})

    def train_to(self, iteration: int) -> int | None:
        """The learner step round ``iteration`` trains to, once its training began."""
        state = self._state()
        return int(state["train_to"]) if state.get("iteration") == iteration and "train_to" in state else None

    def round_games(self, prefix: str) -> int:
        """Finished records whose names start with ``prefix-`` (temporary
        files start with a dot: never counted)."""
        return sum(1 for _ in self.games.glob(f"{prefix}-*.npz"))

    def log(self, record: dict) -> None:
        files.append_jsonl(self.metrics, record)

    def read_metrics(self) -> list[dict]:
        return files.read_jsonl(self.metrics) if self.metrics.exists() else []

    def game_paths(self) -> list[Path]:
        """Finished records, oldest first (hidden temporary files left out)."""
        paths = [p for p in self.games.glob("*.npz") if not p.name.startswith(".")]
        return sorted(paths, key=lambda p: (p.stat().st_mtime_ns, p.name))
