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

Before a run resumes, :func:`checkpoint_problem` checks its last checkpoint, cheaply and before any
model loads: file damage that the atomic writes cannot prevent (a copy cut short, a bad disk, a file
replaced by hand) is one error naming the file, and ``tomrl train --resume RUN_DIR --fallback`` sets
the damaged checkpoint aside (:func:`set_aside`: renamed ``checkpoint-N.damaged``, never deleted)
and resumes from the one before it, or from step 0 when none is left. By default only the latest
checkpoint is kept (:data:`KEEP_CHECKPOINTS`; ``keep_checkpoints=2`` keeps one to fall back to): a
checkpoint holds the weights and the optimizer's two moments, three times the model's size, and an
atomically written one is damaged only from outside.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

from tomrl.io import PARTIAL_SUFFIX, RETIRED_SUFFIX, atomic_write_text, iter_jsonl, recover_interrupted_publish
from tomrl.models import safetensors_problem

CHECKPOINTS = "checkpoints"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
STEP_LOGS = ("metrics.jsonl", "samples.jsonl", "validation.jsonl", "validation_samples.jsonl")
KEEP_CHECKPOINTS = 1  # complete checkpoints kept (the latest); the next one is written beside it first
DAMAGED_SUFFIX = ".damaged"  # a checkpoint set aside by --fallback

# What transformers' Trainer reads when it resumes (trainer.py: _load_from_checkpoint,
# _load_optimizer_and_scheduler, _load_rng_state), and how: the torch files below with
# torch.load(weights_only=True). DeepSpeed and FSDP keep their own files (global_stepN/,
# pytorch_model_fsdp_*), read with their own loaders; those are checked as zip archives only.
TRAINER_STATE = "trainer_state.json"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors", "pytorch_model.bin", "pytorch_model.bin.index.json", "adapter_model.bin")
WEIGHTS_ONLY_FILES = re.compile(r"^(optimizer\.pt|scheduler\.pt|scaler\.pt|pytorch_model\.bin|adapter_model\.bin|rng_state(_\d+)?\.pth)$")
JSON_FILES = (TRAINER_STATE, "config.json", "adapter_config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json")
NOT_READ_ON_RESUME = ("training_args.bin",)  # a pickled TrainingArguments, which weights_only loading refuses
# Larger torch files are checked by their zip directory alone (a cut file loses it); smaller ones also
# by their checksums, which reads them once more: the trainer reads them whole right after anyway.
CHECKSUM_MAX_BYTES = 2 * 1024**3


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


def keep_latest_checkpoints(run_dir: str | Path, keep: int = KEEP_CHECKPOINTS) -> None:
    for old in checkpoint_dirs(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def damaged_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoints set aside by ``--fallback`` (``checkpoint-N.damaged``, ``checkpoint-N.damaged-2``…)."""
    folder = Path(run_dir) / CHECKPOINTS
    return sorted(folder.glob(f"checkpoint-*{DAMAGED_SUFFIX}*")) if folder.is_dir() else []


def set_aside(checkpoint: str | Path) -> Path:
    """Rename a damaged checkpoint out of the resume path (``checkpoint-N.damaged``); never deleted."""
    checkpoint = Path(checkpoint)
    target, n = checkpoint.with_name(checkpoint.name + DAMAGED_SUFFIX), 1
    while target.exists():
        n += 1
        target = checkpoint.with_name(f"{checkpoint.name}{DAMAGED_SUFFIX}-{n}")
    os.replace(checkpoint, target)
    return target


def checkpoint_problem(checkpoint: str | Path) -> str | None:
    """What makes ``checkpoint`` unfit to resume from, as ``FILE: what is wrong``; None when it looks whole.

    Cheap checks of everything the trainer will read, made before any model loads: trainer_state.json
    parses and names the checkpoint's step; the weights, optimizer, scheduler and random state are
    there; every safetensors file is as long as its header says; every torch file is a complete zip
    archive (checksums too, up to :data:`CHECKSUM_MAX_BYTES`), and those the trainer loads with
    ``torch.load(weights_only=True)`` load that way (memory-mapped: their tensors are not read).
    """
    folder = Path(checkpoint)
    state = folder / TRAINER_STATE
    if not state.is_file():
        return f"{TRAINER_STATE}: missing"
    problem = _json_problem(state)
    if problem:
        return f"{TRAINER_STATE}: {problem}"
    step = json.loads(state.read_text(encoding="utf-8")).get("global_step")
    if step != checkpoint_step(folder):
        return f"{TRAINER_STATE}: says global_step {step!r}, but the folder is step {checkpoint_step(folder)} (a file from another checkpoint?)"
    entries = sorted(folder.rglob("*"))
    files = [p for p in entries if p.is_file()]
    names = {p.name for p in files}
    # DeepSpeed (global_stepN/) and FSDP (pytorch_model_fsdp*, files or folders) restore weights and optimizer themselves.
    sharded = any(p.name.startswith(("global_step", "pytorch_model_fsdp")) for p in entries)
    required = [] if sharded else [("model weights", WEIGHT_FILES), ("optimizer state", ("optimizer.pt",)), ("scheduler state", ("scheduler.pt",))]
    required.append(("random state", tuple(n for n in names if n.startswith("rng_state")) or ("rng_state.pth",)))
    for what, candidates in required:
        if not names.intersection(candidates):
            return f"{candidates[0]}: missing ({what}; every checkpoint tomrl writes has it)"
    for path in files:
        name = path.name
        if name.endswith(".safetensors"):
            problem = safetensors_problem(path)
        elif name in JSON_FILES:
            problem = _json_problem(path)
        elif name.endswith((".pt", ".pth", ".bin")) and name not in NOT_READ_ON_RESUME:
            problem = _torch_file_problem(path, load=bool(WEIGHTS_ONLY_FILES.match(name)))
        else:
            continue
        if problem:
            return f"{path.relative_to(folder)}: {problem}"
    for index in (folder / "model.safetensors.index.json", folder / "pytorch_model.bin.index.json"):
        if index.is_file():
            missing = sorted(set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()) - names)
            if missing:
                return f"{missing[0]}: missing (listed in {index.name})"
    return None


def _json_problem(path: Path) -> str | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        return f"not valid JSON, cut short or damaged ({str(err).splitlines()[0]})"
    return None if isinstance(value, dict) else "not a JSON object"


def _torch_file_problem(path: Path, load: bool) -> str | None:
    """A torch.save file (a zip archive) that is cut short, damaged, or holds what the safe loader refuses."""
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:  # reads the directory at the end: a cut file has none
            for member in archive.infolist():
                if member.header_offset + member.compress_size > size:
                    return f"cut short: {member.filename} ends past the end of the file"
            if size <= CHECKSUM_MAX_BYTES:
                bad = archive.testzip()
                if bad is not None:
                    return f"damaged: {bad} fails its checksum"
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as err:
        return f"not a complete torch file, cut short or damaged ({str(err).splitlines()[0] or type(err).__name__})"
    if not load:
        return None
    import pickle

    import torch
    from transformers.trainer_pt_utils import safe_globals  # numpy's random state, as the trainer allows it

    try:
        with safe_globals():
            torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as err:
        refused = re.search(r"Unsupported global: GLOBAL (\S+)", str(err))
        if refused:
            return f"holds a pickled {refused.group(1)}, which torch's safe loader (weights_only=True) refuses to run"
        return f"torch's safe loader (weights_only=True) refuses it ({_first_line(err)})"
    except Exception as err:  # torch raises RuntimeError, ValueError, KeyError… on a damaged archive
        return f"torch cannot load it ({_first_line(err)})"
    return None


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0][:200] if lines else type(err).__name__


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
