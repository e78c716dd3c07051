"""Supervised warm start on oracle-written reasoning traces, before RL.

A small model that never closes its tags gets no signal from format-and-answer rewards: every
rollout scores the same, every advantage is zero. The warm start teaches the format and a way of
reasoning first: for each training example with a parsable story, the target completion is

    <think> {trace of who saw each move of the object} </think><answer>{gold}</answer>

where the trace comes from :func:`tomrl.generators.traces.reasoning_trace` (the belief oracle,
so every statement in it is true) and the prompt is the same rendered prompt RL trains on
(``<think>`` prefilled for Paper A's style, in which case the target starts after it).
Training is TRL's ``SFTTrainer`` on prompt-completion pairs (loss on the completion only).

    warm_start:
      enabled: true
      epochs: 1
      learning_rate: 1.0e-4

(``tomrl train --config configs/train/demo_cpu.yaml``.) The model lands in
``RUN_DIR/warm_start/model`` and RL starts from it, with it as the KL reference too. Before
training, the base model is validated once (``RUN_DIR/warm_start/base_validation.json``) so a
run reports base → after warm start → after RL.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from tomrl.io import atomic_write_json
from tomrl.models import check_finite_weights, make_torch_deterministic, model_init_kwargs, resolve_precision
from tomrl.schema import Example

WARM_START = "warm_start"


def trace_completion(example: Example, prefill: str) -> str | None:
    """The target completion for ``example`` after ``prefill``, or None when its story cannot be traced."""
    from tomrl.generators.traces import reasoning_trace

    try:
        trace = reasoning_trace(example)
    except (ValueError, KeyError):  # a story or question the parsers do not read (e.g. ExploreToM)
        return None
    opening = "" if prefill.rstrip().endswith("<think>") else "<think>"
    return f"{opening} {trace} </think><answer>{example.answer}</answer>"


def trace_rows(examples: Sequence[Example], tokenizer: Any, prompt: Any) -> list[dict]:
    """Prompt-completion rows of the oracle traces of ``examples`` (those whose story can be traced)."""
    from tomrl.prompts import render_prompt

    rows = []
    for example in examples:
        completion = trace_completion(example, prompt.resolved_prefill)
        if completion is not None:
            rows.append({"prompt": render_prompt(example, tokenizer, prompt), "completion": completion})
    return rows


def warm_start(cfg: Any, run_dir: Path, train_examples: Sequence[Example], say: Callable[[str], Any] = print) -> Path:
    """Fine-tune ``cfg.model`` on traces of ``train_examples`` once; returns the model folder."""
    from tomrl.models import load_tokenizer, resolve_model

    folder = Path(run_dir) / WARM_START
    target = folder / "model"
    if (folder / "done.json").exists():
        return target
    settings = cfg.warm_start
    base = resolve_model(cfg.model)
    chosen = train_examples[: settings.max_examples] if settings.max_examples else train_examples
    rows = trace_rows(chosen, load_tokenizer(base), cfg.prompt)
    if not rows:
        raise ValueError("warm start: no training example has a story the trace builder can read")
    say(f"warm start: {len(rows)} oracle-written traces, {settings.epochs} epoch(s), lr {settings.learning_rate}")
    return fine_tune(cfg, base, rows, folder, say, description="warm start")


def fine_tune(
    cfg: Any,
    model: str,
    rows: Sequence[dict],
    folder: Path,
    say: Callable[[str], Any] = print,
    callbacks: Sequence[Any] = (),
    description: str = "warm start",
) -> Path:
    """Supervised fine-tuning of ``model`` on prompt-completion ``rows`` (loss on the completion only)
    with ``cfg.warm_start``'s epochs (or ``max_steps``), learning rate and batch size; the model lands
    in ``folder/model`` and ``folder/done.json`` marks it finished. Returns the model folder.

    The warm start calls it with oracle traces; ``tomrl study``'s sft and rft arms call it with the
    traces or the model's own correct completions of the stories RL trains on.
    """
    import torch
    from accelerate import PartialState
    from datasets import Dataset
    from trl import SFTConfig

    from tomrl.io import write_folder_atomically
    from tomrl.models import load_tokenizer
    from tomrl.training.callbacks import RichProgress, use_rich_progress
    from tomrl.training.shared_prompt import shared_prefix_sft_trainer

    folder = Path(folder)
    target = folder / "model"
    done = folder / "done.json"
    state = PartialState()
    settings = cfg.warm_start
    tokenizer = load_tokenizer(model)
    started = time.time()
    # "auto" decided here too (tomrl train has decided it already; tomrl study's shared warm start has not),
    # from the hardware alone; the same seed then gives the same weights (make_torch_deterministic).
    precision, precision_reason = resolve_precision(cfg.precision, state.device.type)
    determinism = make_torch_deterministic(state.device.type, cfg.deterministic)
    args = SFTConfig(
        output_dir=str(folder / "checkpoints"),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps or -1,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        # The RL micro-batch bounds activation memory here too (a 135M model at 8 x 400 tokens
        # needs about 6 GB of float32 activations).
        per_device_train_batch_size=math.gcd(settings.batch_size, cfg.micro_batch_size),
        gradient_accumulation_steps=settings.batch_size // math.gcd(settings.batch_size, cfg.micro_batch_size),
        max_length=cfg.max_prompt_length + cfg.max_completion_length,
        seed=cfg.seed,
        data_seed=cfg.seed,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        bf16=precision == "bfloat16",
        use_cpu=not torch.cuda.is_available(),  # bf16 autocast on a CPU needs it said explicitly
        fp16=precision == "float16",
        gradient_checkpointing=cfg.gradient_checkpointing,
        dataset_num_proc=None,
        model_init_kwargs=model_init_kwargs() if isinstance(model, str) else None,  # float32 master weights
    )
    # TRL's SFTTrainer, with each micro-batch's shared system prompt run once (same loss and gradient).
    trainer = shared_prefix_sft_trainer()(model=model, args=args, train_dataset=Dataset.from_list(list(rows)), processing_class=tokenizer, callbacks=list(callbacks))
    check_finite_weights(trainer.model, str(model) if isinstance(model, (str, Path)) else "the warm start's model")
    progress = RichProgress(enabled=cfg.progress, description=description)
    use_rich_progress(trainer, progress)
    try:
        result = trainer.train()
    finally:
        progress.stop()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    if state.is_main_process:
        trained = trainer.accelerator.unwrap_model(trainer.model)

        def write(staging: Path) -> None:
            trained.save_pretrained(staging, safe_serialization=True)
            tokenizer.save_pretrained(staging)

        write_folder_atomically(target, write)
        atomic_write_json(
            done,
            {
                "traces": len(rows),
                "epochs": settings.epochs,
                "learning_rate": settings.learning_rate,
                "steps": trainer.state.global_step,
                "first_loss": losses[0] if losses else None,
                "last_loss": losses[-1] if losses else None,
                "seconds": round(time.time() - started, 1),
                "train_runtime": result.metrics.get("train_runtime"),
                # Besides the rows and the seed, the bytes of the weights depend on these (and the machine).
                "precision": precision,
                "precision_reason": precision_reason,
                "deterministic": determinism,
                "torch_threads": torch.get_num_threads(),
            },
        )
    state.wait_for_everyone()
    say(f"{description} done in {time.time() - started:.0f} s: loss {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else f"{description} done")
    return target


def read_summary(run_dir: Path) -> dict | None:
    path = Path(run_dir) / WARM_START / "done.json"
    return json.loads(path.read_text()) if path.exists() else None
