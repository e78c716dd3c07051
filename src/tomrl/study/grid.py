"""The grid of a study: its cells (mixture × arm × seed × model), their status, and grid.json.

    from tomrl.study.grid import expand, Grid
    cells = expand(cfg)                       # cfg: StudyConfig; cells in the order they run
    grid = Grid(study_dir, cfg)               # grid.json, rewritten atomically after each change
    grid.set(cell.id, "training")

A cell id is ``<mixture>__<arm>__s<seed>``, with ``__<model>`` appended when the study trains more
than one model. grid.json (read by :mod:`tomrl.analysis.study_report`)::

    {"study": NAME, "cells": [{"id", "mixture", "arm", "seed", "model", "status", "error"?}],
     "tasks": [{"name", "held_out", "benchmark"}], "updated": TIME}

``status`` is one of pending, training, evaluating, done, failed. It says where the study was; the
files of the study folder say what is finished (a started study re-derives every status from them).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tomrl.io import atomic_write_json
from tomrl.study.config import StudyConfig, model_slug

STATUSES = ("pending", "training", "evaluating", "done", "failed")
GRID_FILE = "grid.json"


@dataclass(frozen=True)
class Cell:
    """One training run of the study and its evaluations."""

    id: str
    mixture: str
    arm: str
    seed: int
    model: str  # the model reference as configured (embedded name, hub id or path)


def expand(cfg: StudyConfig, base_model: str) -> list[Cell]:
    """Every cell of ``cfg``: models, then mixtures, then arms, then seeds (so one mixture's arms finish together)."""
    models = list(cfg.models) or [base_model]
    cells = []
    for model in models:
        for mixture in cfg.mixtures:
            for arm in cfg.arms:
                for seed in cfg.seeds:
                    cell_id = f"{mixture.name}__{arm}__s{seed}" + (f"__{model_slug(model)}" if len(models) > 1 else "")
                    cells.append(Cell(cell_id, mixture.name, arm, seed, model))
    return cells


@dataclass
class Grid:
    """The cells with their status; every change is written to STUDY_DIR/grid.json at once (atomically)."""

    study_dir: Path
    name: str
    cells: list[Cell]
    tasks: list[dict]
    status: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for cell in self.cells:
            self.status.setdefault(cell.id, "pending")
        self.write()

    def set(self, cell_id: str, status: str, error: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        self.status[cell_id] = status
        if error is None:
            self.errors.pop(cell_id, None)
        else:
            self.errors[cell_id] = error
        self.write()

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for c in self.cells if self.status[c.id] == s) for s in STATUSES}

    def write(self) -> None:
        rows = []
        for cell in self.cells:
            row = {**asdict(cell), "status": self.status[cell.id]}
            if cell.id in self.errors:
                row["error"] = self.errors[cell.id]
            rows.append(row)
        atomic_write_json(
            Path(self.study_dir) / GRID_FILE,
            {"study": self.name, "cells": rows, "tasks": self.tasks, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        )


__all__ = ["Cell", "Grid", "expand", "STATUSES", "GRID_FILE"]
