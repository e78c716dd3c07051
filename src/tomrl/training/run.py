"""The training recipe, top to bottom: set up the run, data, warm start, trainer; train; finish.

    from tomrl.training.run import train
    summary = train(cfg)                     # cfg: TrainConfig; a new run in cfg.run_dir
    summary = train(cfg, resume=True)        # continue cfg.run_dir from its last checkpoint
    summary = train(cfg, resume=True, fallback=True)  # ... setting a damaged last checkpoint aside

or ``tomrl train --config configs/train/smoke_cpu.yaml`` / ``tomrl train --resume RUN_DIR``.

One optimizer step of every algorithm is TRL's: (1) sample ``rollouts_per_prompt`` completions
for each of ``prompts_per_step`` prompts, (2) score them with tomrl's rewards, (3) compute
advantages (GRPO: TRL's group normalisation; REINFORCE++: :mod:`tomrl.training.advantages`),
(4) update the policy with the clipped surrogate loss, accumulated over micro-batches.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from tomrl.config import ConfigError, config_to_dict, save_config
from tomrl.io import BadInputError, atomic_write_json
from tomrl.models import check_finite_weights, model_init_kwargs, resolve_precision
from tomrl.outputs import check_folder, mark_folder
from tomrl.schema import Example
from tomrl.training import checkpoints
from tomrl.training.config import TrainConfig
from tomrl.training.preflight import preflight

CONFIG_FILE = "config.yaml"
BASE_VALIDATION = "base_validation.json"  # the model before the warm start, under RUN_DIR/warm_start


@dataclass
class RunSummary:
    run_dir: str
    steps: int
    seconds: float
    train_examples: int
    validation_examples: int
    dropped_long_prompts: int
    base_validation: dict | None  # before the warm start (None without one)
    warm_start: dict | None
    first_validation: dict | None
    last_validation: dict | None
    best_validation: dict | None
    resumed_from: str | None
    skipped_bad_rows: int = 0  # data.skip_bad: rows left out (listed in RUN_DIR/data/skipped.json)
    split_check: dict | None = None  # the split rule's finding (RUN_DIR/data/split_check.json)
    processes: int = 1  # data-parallel processes that trained (accelerate / torchrun)
    parameter_dtype: str | None = None  # dtype of the trained (master) weights: float32 on every path
    distributed: str | None = None  # accelerate's distributed type: NO, MULTI_CPU, MULTI_GPU, DEEPSPEED, FSDP
    zero_stage: int | None = None  # DeepSpeed ZeRO stage (None without DeepSpeed)
    precision: str | None = None  # compute precision the run used (autocast), "auto" resolved
    precision_reason: str | None = None  # why: as configured, or what "auto" found on this machine (its CPU's features)
    deterministic: str | None = None  # whether torch's deterministic kernels were on, and why (make_torch_deterministic)

    def to_dict(self) -> dict:
        # A run that validated on test stories (data.allow_test_validation) says so first.
        warning = (self.split_check or {}).get("warning")
        return {"warning": warning, **asdict(self)} if warning else asdict(self)


def train(
    cfg: TrainConfig, resume: bool = False, console: Any = None, rewards: list | None = None, callbacks: list | None = None, fallback: bool = False
) -> RunSummary:
    """Train ``cfg`` into ``cfg.run_dir`` (continuing it when ``resume``).

    A resumed run checks its last checkpoint first (:func:`tomrl.training.checkpoints.checkpoint_problem`);
    a damaged one stops it with one error, unless ``fallback``, which sets damaged checkpoints aside
    (renamed, never deleted) and resumes from the latest complete one, or from step 0.

    ``rewards`` replaces the reward functions named by ``cfg.rewards`` (tomrl ``Reward`` objects,
    e.g. a research reward not in the registry); by default they come from tomrl.rewards.
    ``callbacks`` are extra transformers ``TrainerCallback`` objects of the RL trainer (``tomrl
    study`` keeps model snapshots with one).
    The main process holds the run folder's lock throughout: a second ``tomrl train`` on the same
    folder fails at once, naming this one's pid.
    """
    from tomrl.io import locked_folder

    preflight(cfg)  # the GPU path's requirements (vLLM, CUDA), in seconds, before any model loads
    check_folder(cfg.run_dir, "train", key="run_dir")  # an eval/study/demo/report folder, or run_dir='', before any write
    with contextlib.ExitStack() as stack:
        # The launcher's RANK, not accelerate's PartialState: creating that state here, before the
        # trainer asks for a CPU backend, would fix it to one process under torchrun on a CPU
        # (every rank would then think it is the main one and take the lock).
        if int(os.environ.get("RANK", "0")) == 0:
            stack.enter_context(locked_folder(cfg.run_dir, "tomrl train"))
        return _train(cfg, resume, console, rewards, callbacks, fallback)


def _train(cfg: TrainConfig, resume: bool, console: Any, rewards: list | None, callbacks: list | None = None, fallback: bool = False) -> RunSummary:
    from accelerate import PartialState

    from tomrl.training.data import RECIPE_NOTES_FILE, SKIPPED_FILE, prepare_data
    from tomrl.training.split_rule import read_split_check

    started = time.time()
    run_dir = Path(cfg.run_dir)
    # One process, or one of several under `accelerate launch` / `torchrun`. The first state created
    # fixes the backend for the whole run: without cpu=True on a machine with no GPU it would be
    # "one process" under torchrun (every rank training alone into the same folder).
    import torch

    state = PartialState(cpu=not torch.cuda.is_available())
    say = (console.print if console is not None else print) if state.is_main_process else (lambda *_: None)
    if resume:
        # A finished run resumed is a no-op: transformers would train one step past max_steps.
        finished = _finished_run(cfg, run_dir)
        if finished is not None:
            summary, note = finished
            say(note)
            return summary
    # 1. The run folder (a new run refuses a folder that already holds one), and 2. the data, frozen
    # in RUN_DIR/data in training order. The main process writes both; the others then read them.
    with state.main_process_first():
        if state.is_main_process:
            note = _set_up_run_dir(cfg, run_dir, resume, fallback)
            mark_folder(run_dir, "train")
            if note:
                say(note)
        train_examples, validation_examples = prepare_data(cfg, run_dir)
    note = launcher_note(os.environ, state.num_processes)
    if note:
        say(note)
    # The config keeps "auto" (a resumed run re-decides on the machine it runs on); the run uses the choice.
    precision, why = resolve_precision(cfg.precision, state.device.type)
    cfg = replace(cfg, precision=precision)
    say(why)
    resume_from = checkpoints.latest_checkpoint(run_dir) if resume else None
    if resume_from is not None and 0 < cfg.max_steps <= checkpoints.checkpoint_step(resume_from):
        # A run stopped after its last checkpoint, before final/: TomrlGRPOTrainer trains no further step.
        say(f"{resume_from.name} is at max_steps={cfg.max_steps}: writing final/ from it without training")
    determinism = _seed_everything(cfg.seed, state.device.type, cfg.deterministic)
    say(determinism)
    split_check = read_split_check(run_dir)
    if split_check and split_check.get("warning"):
        say(split_check["warning"])
    say(f"data: {len(train_examples)} training and {len(validation_examples)} validation examples ({run_dir / 'data'})")
    for note in (_read_json(run_dir / "data" / RECIPE_NOTES_FILE) or {}).get("notes", []):
        say(f"recipe note: {note}")
    skipped = (_read_json(run_dir / "data" / SKIPPED_FILE) or {}).get("skipped_lines", 0)
    if skipped:
        say(f"skipped {skipped} bad data rows (data.skip_bad); each with its reason in {run_dir / 'data' / SKIPPED_FILE}")
    # 3. The policy to start from: the model, or the output of the supervised warm start.
    policy = _resolve_policy(cfg, run_dir, train_examples, validation_examples, say)
    # 4. The trainer.
    trainer, validator, logger, progress, dropped = build_trainer(cfg, policy, train_examples, validation_examples, rewards, callbacks)
    if dropped:
        say(f"dropped {dropped} training prompts longer than max_prompt_length={cfg.max_prompt_length} tokens")
    # 5. Train.
    try:
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    finally:
        progress.stop()
        logger.close()
    # 6. Finish: the final model beside the best one, and a summary.
    _save_model(trainer, run_dir / "final")
    summary = RunSummary(
        run_dir=str(run_dir),
        steps=trainer.state.global_step,
        seconds=round(time.time() - started, 1),
        train_examples=len(train_examples),
        validation_examples=len(validation_examples),
        dropped_long_prompts=dropped,
        skipped_bad_rows=skipped,
        base_validation=_read_json(run_dir / "warm_start" / BASE_VALIDATION),
        warm_start=_read_json(run_dir / "warm_start" / "done.json"),
        first_validation=_first_validation(run_dir),
        last_validation=_last_validation(run_dir),
        best_validation=_best_validation(run_dir),
        resumed_from=str(resume_from) if resume_from else None,
        split_check=split_check,
        processes=trainer.accelerator.num_processes,
        parameter_dtype=_parameter_dtype(trainer),
        distributed=str(trainer.accelerator.distributed_type.value),
        zero_stage=trainer.accelerator.state.deepspeed_plugin.zero_stage if getattr(trainer, "is_deepspeed_enabled", False) else None,
        precision=cfg.precision,
        precision_reason=why,
        deterministic=determinism,
    )
    if trainer.accelerator.is_main_process:
        atomic_write_json(run_dir / "summary.json", summary.to_dict())
    return summary


def end_distributed() -> None:
    """Leave the process group cleanly at the end of a command (a no-op on one process). Without it a
    rank of a DeepSpeed CPU run could abort at exit ("terminate called without an active exception")
    after its work was done, turning a finished run into a failed exit status."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def launcher_note(environ, processes: int) -> str | None:
    """A warning when the launcher ran fewer processes than it was likely asked for: accelerate's CPU
    launcher (``accelerate launch --cpu`` or a ``use_cpu: true`` config) starts one process whatever
    ``num_processes`` says, silently."""
    if processes == 1 and str(environ.get("ACCELERATE_USE_CPU", "")).lower() == "true":
        return (
            "note: 1 process. accelerate launch on a CPU starts one process whatever num_processes says; "
            "for N processes use: torchrun --nproc_per_node N -m tomrl train ... (summary.json records the count)"
        )
    return None


def build_trainer(
    cfg: TrainConfig,
    policy: str,
    train_examples: list[Example],
    validation_examples: list[Example],
    rewards: list | None = None,
    callbacks: list | None = None,
):
    """The TRL trainer and tomrl's callbacks for ``cfg``, training ``policy`` (a model path or name)."""
    from datasets import Dataset

    from tomrl.models import load_tokenizer
    from tomrl.prompts import render_prompt
    from tomrl.rewards.functions import make_reward
    from tomrl.training.callbacks import RichProgress, StepLogger, Validator, use_rich_progress
    from tomrl.training.trainer import TomrlGRPOTrainer
    from tomrl.training.validation import generation_dtype

    run_dir = Path(cfg.run_dir)
    tokenizer = load_tokenizer(policy)
    prefill = cfg.prompt.resolved_prefill
    rows, dropped = [], 0
    for example in train_examples:
        prompt = render_prompt(example, tokenizer, cfg.prompt)
        if len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) > cfg.max_prompt_length:
            dropped += 1
            continue
        rows.append(dataset_row(example, prompt, prefill))
    if not rows:
        raise ConfigError(f"every training prompt is longer than max_prompt_length={cfg.max_prompt_length} tokens")
    validation_prompts = [render_prompt(e, tokenizer, cfg.prompt) for e in validation_examples]
    if cfg.eval.max_examples is not None:
        validation_examples = validation_examples[: cfg.eval.max_examples]
        validation_prompts = validation_prompts[: cfg.eval.max_examples]
    if rewards is None:
        rewards = [make_reward(name, prefill=prefill, **cfg.reward_options.get(name, {})) for name in cfg.rewards]
    progress = RichProgress(enabled=cfg.progress)
    logger = StepLogger(run_dir, tensorboard="tensorboard" in cfg.report_to)
    validator = Validator(
        run_dir, validation_examples, validation_prompts, cfg.eval, prefill, tokenizer, cfg.seed, progress, generation_dtype(cfg.precision),
        stop_at_answer=cfg.stop_at_answer,
    )
    trainer = TomrlGRPOTrainer(
        model=policy,
        args=grpo_arguments(cfg),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(cfg),
        callbacks=[logger, validator, progress, *(callbacks or [])],
        train_config=cfg,
        rewards=rewards,
        run_dir=run_dir,
    )
    check_finite_weights(trainer.model, policy)  # NaN/inf weights load silently, then sample garbage or crash
    use_rich_progress(trainer, progress)
    logger.trainer = trainer
    validator.trainer = trainer
    return trainer, validator, logger, progress, dropped


def dataset_row(example: Example, prompt: str, prefill: str) -> dict:
    """One training row: the rendered prompt and the columns rewards may read (TRL passes them on)."""
    return {
        "prompt": prompt,
        "prefill": prefill,
        "answer": example.answer,
        "id": example.id,
        "order": example.order,
        "source": example.source,
        "story": example.story,
        "question": example.question,
        "question_type": example.question_type,
        "story_id": example.story_id,
        "meta": json.dumps(example.meta, ensure_ascii=False),
    }


def grpo_arguments(cfg: TrainConfig):
    """TRL's GRPOConfig for ``cfg`` (the batch arithmetic of TrainConfig's docstring)."""
    import torch
    from trl import GRPOConfig

    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_step = cfg.completions_per_step
    if per_step % (cfg.micro_batch_size * world) != 0:
        raise ConfigError(
            f"prompts_per_step x rollouts_per_prompt = {per_step} completions must split into micro-batches of "
            f"{cfg.micro_batch_size} on each of {world} processes"
        )
    if cfg.dynamic_sampling and (per_step // world) % cfg.rollouts_per_prompt != 0:
        # Each process replaces its own groups; a group split across processes cannot be replaced.
        raise ConfigError(
            f"dynamic_sampling needs whole prompt groups on each process: {per_step // world} completions per process "
            f"are not a multiple of rollouts_per_prompt={cfg.rollouts_per_prompt}"
        )
    accumulation = per_step // (cfg.micro_batch_size * world)
    on_gpu = torch.cuda.is_available()
    generation_kwargs = {}
    return GRPOConfig(
        output_dir=str(Path(cfg.run_dir) / checkpoints.CHECKPOINTS),
        seed=cfg.seed,
        data_seed=cfg.seed,
        per_device_train_batch_size=cfg.micro_batch_size,
        gradient_accumulation_steps=accumulation,
        generation_batch_size=per_step,
        num_generations=cfg.rollouts_per_prompt,
        shuffle_dataset=False,  # tomrl orders the data itself (seeded, curriculum stages kept in order)
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=cfg.warmup_ratio,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=0,
        generation_kwargs=generation_kwargs or None,
        beta=cfg.kl_coef,
        epsilon=cfg.clip_epsilon,
        epsilon_high=cfg.clip_epsilon_high,
        loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards,
        entropy_coef=cfg.entropy_coef,
        num_iterations=cfg.num_iterations,
        mask_truncated_completions=cfg.mask_truncated_completions,
        reward_weights=cfg.reward_weights,
        gradient_checkpointing=cfg.gradient_checkpointing,
        bf16=cfg.precision == "bfloat16",
        fp16=cfg.precision == "float16",
        use_cpu=not on_gpu,  # bf16 autocast on a CPU needs it said explicitly
        model_init_kwargs=model_init_kwargs(),  # float32 master weights (tomrl.models.MASTER_DTYPE)
        use_vllm=cfg.use_vllm,
        vllm_importance_sampling_correction=cfg.vllm_importance_sampling_correction,
        vllm_mode=cfg.vllm_mode,
        vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
        logging_steps=1,
        save_strategy="steps",
        save_steps=cfg.save_every,
        save_total_limit=None,  # tomrl keeps the latest complete checkpoint itself
        report_to=[name for name in cfg.report_to if name != "tensorboard"] or "none",  # tensorboard: tomrl's StepLogger writes it
        disable_tqdm=True,
        log_completions=False,
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )


def lora_config(cfg: TrainConfig):
    if not cfg.lora.enabled:
        return None
    from peft import LoraConfig

    targets: Any = cfg.lora.target_modules
    if targets == ["all-linear"]:
        targets = "all-linear"
    return LoraConfig(r=cfg.lora.rank, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout, target_modules=targets, task_type="CAUSAL_LM")


# ----------------------------------------------------------------------------- helpers


# What a run writes into its folder (checkpoints.STEP_LOGS too): a new run that takes over a
# folder whose run stopped before saving anything removes exactly these.
RUN_ENTRIES = (CONFIG_FILE, "data", "warm_start", checkpoints.CHECKPOINTS, "best", "final", "tensorboard", "summary.json")


def _set_up_run_dir(cfg: TrainConfig, run_dir: Path, resume: bool, fallback: bool = False) -> str | None:
    """Create the run folder, or prepare it for resuming from its last complete checkpoint.

    A new run refuses a folder holding a run that saved a checkpoint or finished; a folder whose
    run failed before its first checkpoint (a bad key, a model that would not load) is taken over,
    so the corrected command works. Returns a note to print, or None.
    """
    if not resume:
        note = None
        if (run_dir / CONFIG_FILE).exists():
            if _run_saved_progress(run_dir):
                raise ConfigError(f"{run_dir} already holds a run; continue it with: tomrl train --resume {run_dir} (or set run_dir=…)")
            _clear_run_dir(run_dir)
            note = f"{run_dir}: the run there stopped before its first checkpoint; starting a new run in its place"
        _create_run_dir(cfg, run_dir)
        return note
    if not (run_dir / CONFIG_FILE).exists():
        raise ConfigError(f"{run_dir}: no {CONFIG_FILE}; is this a tomrl run folder?")
    checkpoints.remove_partial(run_dir / checkpoints.CHECKPOINTS)
    checkpoints.remove_partial(run_dir)
    note = _check_last_checkpoint(run_dir, fallback)
    latest = checkpoints.latest_checkpoint(run_dir)
    step = checkpoints.checkpoint_step(latest) if latest else 0
    # The steps after the checkpoint are redone; their log rows go, so the logs read as one run.
    checkpoints.truncate_step_logs(run_dir, step)
    save_config(cfg, run_dir / CONFIG_FILE)
    return note


def _check_last_checkpoint(run_dir: Path, fallback: bool) -> str | None:
    """Check the checkpoint a resume starts from, before any model loads. A damaged one is one error
    saying how to fall back; with ``fallback`` it is set aside (and the one before it checked in turn)."""
    notes = []
    while (latest := checkpoints.latest_checkpoint(run_dir)) is not None:
        problem = checkpoints.checkpoint_problem(latest)
        if problem is None:
            break
        earlier = checkpoints.checkpoint_dirs(run_dir)[:-1]
        if not fallback:
            aside = f"set it aside (as {latest.name}{checkpoints.DAMAGED_SUFFIX}, kept)"
            instead = (
                f"; to {aside} and resume from {earlier[-1].name}"
                if earlier
                else f" and no earlier one is kept (keep_checkpoints=2 keeps one); to {aside} and train again from step 0 (the data, config and warm start stay)"
            )
            raise BadInputError(f"{latest}/{problem}; this checkpoint cannot be resumed{instead}: tomrl train --resume {run_dir} --fallback")
        aside = checkpoints.set_aside(latest)
        notes.append(f"{latest.name} is damaged ({problem}); set aside as {aside}")
    if fallback:
        notes.append(f"resuming from {latest.name}" if latest else "no complete checkpoint left: training again from step 0")
    return "; ".join(notes) or None


def _finished_run(cfg: TrainConfig, run_dir: Path) -> tuple[RunSummary, str] | None:
    """The saved summary of the run in ``run_dir`` and a note, when it finished (summary.json and
    final/) as far as ``cfg`` asks: ``max_steps`` reached, or, by epochs, the length it was given
    unchanged. None when there is training left (e.g. ``max_steps`` raised on resume)."""
    saved = _read_json(run_dir / "summary.json")
    if saved is None or not (run_dir / "final").is_dir():
        return None
    steps = saved["steps"]
    if cfg.max_steps > 0:
        if steps < cfg.max_steps:
            return None
        reached = f"step {steps} of {cfg.max_steps}"
    else:
        from tomrl.config import load_config

        before = load_config(TrainConfig, run_dir / CONFIG_FILE)
        if (before.max_steps, before.epochs) != (cfg.max_steps, cfg.epochs):
            return None
        reached = f"step {steps} ({cfg.epochs:g} epochs)"
    known = {f.name for f in fields(RunSummary)}
    summary = RunSummary(**{**{key: value for key, value in saved.items() if key in known}, "run_dir": str(run_dir)})
    return summary, f"{run_dir}: run already finished at {reached} (summary.json); nothing to do"


def _run_saved_progress(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` saved a checkpoint or finished (then only --resume may continue it)."""
    return (
        checkpoints.latest_checkpoint(run_dir) is not None
        or bool(checkpoints.damaged_checkpoints(run_dir))  # set aside by --fallback, kept for the user
        or (run_dir / "final").exists()
        or (run_dir / "summary.json").exists()
    )


def _clear_run_dir(run_dir: Path) -> None:
    (run_dir / CONFIG_FILE).unlink()  # first: a crash below leaves a folder a new run creates afresh
    for name in (*RUN_ENTRIES, *checkpoints.STEP_LOGS):
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    checkpoints.remove_partial(run_dir)


def _create_run_dir(cfg: TrainConfig, run_dir: Path) -> None:
    """Build the data in a staging folder beside ``run_dir``, then move them in and save the config.

    Bad data files, an unknown recipe or a failing generator therefore leave no run folder that a
    re-run would refuse; ``config.yaml`` is written last, so it marks a complete new run.
    """
    from tomrl.io import publish_folder
    from tomrl.training.data import prepare_data

    staging = run_dir.with_name(f".{run_dir.name}.new{checkpoints.PARTIAL_SUFFIX}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        prepare_data(cfg, staging)
        run_dir.mkdir(parents=True, exist_ok=True)
        publish_folder(staging / "data", run_dir / "data")  # replaces a data/ left by a crash before config.yaml
        save_config(cfg, run_dir / CONFIG_FILE)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _seed_everything(seed: int, device_type: str, deterministic: bool | None) -> str:
    """Seed Python, numpy and torch, and make torch's kernels deterministic where configured (by default on
    CPUs): the same seed on the same machine then trains the same weights, idle or loaded
    (:func:`tomrl.models.make_torch_deterministic`). Returns that decision and its reason."""
    from transformers import set_seed

    from tomrl.models import make_torch_deterministic

    set_seed(seed)
    return make_torch_deterministic(device_type, deterministic)


def _resolve_policy(cfg: TrainConfig, run_dir: Path, train_examples: list[Example], validation_examples: list[Example], say) -> str:
    """The model RL starts from: ``cfg.model``, or the warm-started one (the base validated first)."""
    from accelerate import PartialState

    from tomrl.models import resolve_model

    if not cfg.warm_start.enabled:
        return resolve_model(cfg.model)
    from tomrl.training.sft_warmstart import WARM_START, warm_start
    from tomrl.training.validation import validate_saved_model

    base_file = run_dir / WARM_START / BASE_VALIDATION
    state = PartialState()
    if cfg.eval.every_steps and cfg.eval.at_start and validation_examples and not base_file.exists() and state.is_main_process:
        result = validate_saved_model(resolve_model(cfg.model), validation_examples, cfg)
        atomic_write_json(base_file, {"step": "base", "model": cfg.model, **result.to_dict()})
        say(f"base model validation: {result.summary()}")
    state.wait_for_everyone()
    return str(warm_start(cfg, run_dir, train_examples, say))


def _parameter_dtype(trainer) -> str | None:
    """The dtype of the weights the optimizer updates: the trainable parameters themselves, or under
    DeepSpeed ZeRO the optimizer's own flat master partitions (the module there holds bf16 copies)."""
    optimizer = getattr(getattr(trainer, "model_wrapped", None), "optimizer", None) if getattr(trainer, "is_deepspeed_enabled", False) else None
    for attribute in ("fp32_partitioned_groups_flat", "single_partition_of_fp32_groups"):  # ZeRO-3, ZeRO-1/2
        groups = getattr(optimizer, attribute, None)
        if groups:
            return ",".join(sorted({str(t.dtype).removeprefix("torch.") for t in groups}))
    dtypes = {str(p.dtype).removeprefix("torch.") for p in trainer.model.parameters() if p.requires_grad}
    return ",".join(sorted(dtypes)) or None


def _save_model(trainer, target: Path) -> None:
    """Save the policy to ``target`` atomically: gathered on every process (ZeRO-3 / FSDP shard the
    weights), written by the main one."""
    from tomrl.io import write_folder_atomically

    state_dict = checkpoints.gathered_state_dict(trainer)
    if not trainer.accelerator.is_main_process:
        return
    model = trainer.accelerator.unwrap_model(trainer.model)

    def write(folder: Path) -> None:
        model.save_pretrained(folder, state_dict=state_dict, safe_serialization=True)
        trainer.processing_class.save_pretrained(folder)

    write_folder_atomically(target, write)


def _validation_rows(run_dir: Path) -> list[dict]:
    from tomrl.io import iter_jsonl

    path = run_dir / "validation.jsonl"
    return [row for _, row in iter_jsonl(path, allow_torn_tail=True)] if path.exists() else []


def _first_validation(run_dir: Path) -> dict | None:
    rows = _validation_rows(run_dir)
    return rows[0] if rows else None


def _last_validation(run_dir: Path) -> dict | None:
    rows = _validation_rows(run_dir)
    return rows[-1] if rows else None


def _best_validation(run_dir: Path) -> dict | None:
    return _read_json(run_dir / "best" / "best.json")


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


__all__ = ["train", "build_trainer", "grpo_arguments", "RunSummary", "config_to_dict"]
