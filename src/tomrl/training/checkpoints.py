"""Run folders, atomic checkpoints and what ``--resume`` needs.

Layout of a run folder::

    RUN_DIR/
      config.yaml             the resolved TrainConfig (what --resume trains with)
      data/                   train.jsonl, validation.jsonl: the examples in training order
      warm_start/             optional supervised warm start (model/ and done.json)
      checkpoints/            checkpoint-N: weights, optimizer, scheduler, RNG, trainer state
      best/                   model with the best validation accuracy so far, and best.json
      final/                  model at the end of training
      metrics.jsonl           one row per optimizer step
      validation.jsonl        one row per validation
      samples.jsonl           one row per rollout (prompt id, completion, rewards)
      tensorboard/            the same metrics for TensorBoard
      summary.json            written when training ends

Every checkpoint and model folder is written under a temporary name and renamed into place
(:func:`tomrl.io.write_folder_atomically`), so a crash leaves either the previous folder or the new
one, never half of one. A resumed run drops the log rows written after its checkpoint, so the logs
read as if it never stopped.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tomrl.io import PARTIAL_SUFFIX, RETIRED_SUFFIX, atomic_write_text, iter_jsonl, recover_interrupted_publish

CHECKPOINTS = "checkpoints"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
STEP_LOGS = ("metrics.jsonl", "samples.jsonl", "validation.jsonl", "validation_samples.jsonl")


def checkpoint_dirs(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (partial ones never carry the final name)."""
    folder = Path(run_dir) / CHECKPOINTS
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := CHECKPOINT_PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    found = checkpoint_dirs(run_dir)
    return found[-1] if found else None


def checkpoint_step(path: str | Path) -> int:
    match = CHECKPOINT_PATTERN.match(Path(path).name)
    if not match:
        raise ValueError(f"{path} is not a checkpoint folder (checkpoint-N)")
    return int(match.group(1))


def remove_partial(folder: str | Path) -> None:
    """Clean up after writes a crash interrupted: delete ``*.partial`` folders, except that a retired
    ``X.old.partial`` whose ``X`` is missing (a crash between the two renames of a publish) is renamed
    back to ``X``, the last complete version (:func:`tomrl.io.recover_interrupted_publish`)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        if path.name.endswith(RETIRED_SUFFIX):
            recover_interrupted_publish(path.with_name(path.name.removesuffix(RETIRED_SUFFIX)))
        elif path.name.endswith(PARTIAL_SUFFIX):
            shutil.rmtree(path, ignore_errors=True)


def keep_latest_checkpoints(run_dir: str | Path, keep: int = 1) -> None:
    for old in checkpoint_dirs(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def truncate_step_logs(run_dir: str | Path, step: int) -> None:
    """Drop rows of the per-step logs whose step is after ``step`` (those a resumed run redoes)."""
    for name in STEP_LOGS:
        path = Path(run_dir) / name
        if not path.exists():
            continue
        kept = [row for _, row in iter_jsonl(path, allow_torn_tail=True) if int(row.get("step", 0)) <= step]
        atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in kept))


def gathered_state_dict(trainer) -> dict | None:
    """The policy's whole state dict where the weights are sharded across processes (DeepSpeed ZeRO-3,
    FSDP), else None (``save_pretrained`` then reads the model itself, as on one process, DDP and ZeRO-1/2).

    Collective: every process must call it, or the gather hangs. Under ZeRO-3 it needs the accelerate
    DeepSpeed setting ``zero3_save_16bit_model: true`` (configs/accelerate/deepspeed_zero3*.yaml set it),
    and the weights come back in the compute precision (bf16 with mixed_precision bf16); the main process
    gets the full dict, the others may get an empty one. ``unwrap_model(...).save_pretrained`` without it
    wrote every tensor of a ZeRO-3 run with shape (0,).
    """
    trainer.accelerator.wait_for_everyone()
    if not (getattr(trainer, "is_deepspeed_enabled", False) or getattr(trainer, "is_fsdp_enabled", False)):
        return None
    return trainer.accelerator.get_state_dict(trainer.model_wrapped)
