"""Trainer callbacks of a tomrl run: per-step logs, validation with the best checkpoint, progress bars.

- :class:`StepLogger` writes one row per optimizer step to ``RUN_DIR/metrics.jsonl`` and to
  TensorBoard (``RUN_DIR/tensorboard``): every reward and reward component, format rate,
  accuracy, response length (mean, min, max, clipped ratio), entropy, KL, step time and
  tokens per second (generated, and trained = prompt + completion); and every rollout to
  ``samples.jsonl``. Other loggers asked for in ``report_to`` (W&B, trackio, MLflow, …) get the
  same rows through transformers' own callbacks.
- :class:`Validator` answers the validation set every ``eval.every_steps`` steps (and before
  the first and after the last), appends the result to ``validation.jsonl``, and keeps the
  model with the best accuracy in ``RUN_DIR/best`` (Paper B's protocol).
- :class:`RichProgress` shows rich progress bars for steps and validation.

Validation runs in ``on_step_end``, before transformers saves that step's checkpoint, so a run
resumed from step N has already validated step N and does not do it again.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Sequence

from transformers import TrainerCallback

from tomrl.io import JsonlAppender, atomic_write_json, iter_jsonl, write_folder_atomically
from tomrl.schema import Example
from tomrl.training.checkpoints import gathered_state_dict

# TRL's keys renamed to tomrl's (the others keep TRL's names).
RENAMED = {
    "completions/mean_length": "response_length/mean",
    "completions/min_length": "response_length/min",
    "completions/max_length": "response_length/max",
    "completions/clipped_ratio": "response_length/clipped_ratio",
}


class StepLogger(TrainerCallback):
    """metrics.jsonl + TensorBoard per optimizer step, samples.jsonl per rollout."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = True):
        from accelerate import PartialState

        self.run_dir = Path(run_dir)
        self.trainer: Any = None
        self.main = PartialState().is_main_process  # only the main process writes the run folder
        self.metrics = JsonlAppender(self.run_dir / "metrics.jsonl") if self.main else None
        self.samples = JsonlAppender(self.run_dir / "samples.jsonl") if self.main else None
        self.writer = None
        if tensorboard and self.main:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.run_dir / "tensorboard"))
        self.started = time.time()
        self.final_logs: dict = {}

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self.main or not logs:
            return
        if "train_runtime" in logs:  # the end-of-training summary, not a step
            self.final_logs = dict(logs)
            return
        row = {"step": state.global_step, "wall_time_s": round(time.time() - self.started, 3)}
        for key, value in logs.items():
            row[RENAMED.get(key, key)] = value
        step_time = row.get("step_time")
        if step_time:
            for kind in ("generated", "trained"):
                if f"tokens/{kind}" in row:
                    row[f"tokens_per_s/{kind}"] = row[f"tokens/{kind}"] / step_time
        self.metrics.write(row)
        if self.writer is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and key != "step":
                    self.writer.add_scalar(key, value, state.global_step)
            self.writer.flush()
        if self.trainer is not None and self.trainer.sample_rows:
            for sample in self.trainer.sample_rows:
                self.samples.write(sample)
            self.trainer.sample_rows.clear()

    def close(self) -> None:
        if self.main:
            self.metrics.close()
            self.samples.close()
        if self.writer is not None:
            self.writer.close()


class Validator(TrainerCallback):
    """Validate every K steps; keep the best model (by validation accuracy) in RUN_DIR/best."""

    def __init__(
        self,
        run_dir: str | Path,
        examples: Sequence[Example],
        prompts: Sequence[str],
        settings: Any,
        prefill: str,
        tokenizer: Any,
        seed: int,
        progress: "RichProgress | None" = None,
        fast_dtype: Any = None,
        stop_at_answer: bool = False,
    ):
        self.run_dir = Path(run_dir)
        self.stop_at_answer = stop_at_answer  # TrainConfig.stop_at_answer: end answers at the first </answer>
        self.examples, self.prompts = list(examples), list(prompts)
        self.settings, self.prefill, self.tokenizer, self.seed = settings, prefill, tokenizer, seed
        self.progress = progress
        self.fast_dtype = fast_dtype
        self.trainer: Any = None
        self.best_path = self.run_dir / "best"
        self.done_steps = {row["step"] for _, row in iter_jsonl(self.run_dir / "validation.jsonl", allow_torn_tail=True)} if (self.run_dir / "validation.jsonl").exists() else set()
        best = self.best_path / "best.json"
        self.best_accuracy = json.loads(best.read_text())["accuracy"]["value"] if best.exists() else -1.0
        self.last_result = None

    @property
    def enabled(self) -> bool:
        return bool(self.examples)

    def on_train_begin(self, args, state, control, **kwargs):
        # Only a run's first start: a resumed run begins at its checkpoint's step, which the
        # uninterrupted run did not validate (unless on its schedule), and a validation there could move best/.
        if self.enabled and self.settings.every_steps and self.settings.at_start and state.global_step == 0:  # 0 = never
            self.run(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        every = self.settings.every_steps
        if self.enabled and every and state.global_step % every == 0:
            self.run(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if self.enabled and self.settings.every_steps:
            self.run(state.global_step)

    def run(self, step: int):
        """Validate the current policy at ``step`` (once per step, even across resumes)."""
        if step in self.done_steps:
            return None
        from accelerate.utils import gather_object
        from trl.models import unwrap_model_for_generation

        from tomrl.training.validation import score_completions, generate_completions

        trainer = self.trainer
        accelerator = trainer.accelerator
        rank, world = accelerator.process_index, accelerator.num_processes
        indices = list(range(rank, len(self.examples), world))
        started = time.perf_counter()
        task = self.progress.start_validation(len(indices), step) if self.progress and accelerator.is_main_process else None
        with unwrap_model_for_generation(trainer.model_wrapped, accelerator) as model:
            completions = generate_completions(
                model,
                self.tokenizer,
                [self.prompts[i] for i in indices],
                max_new_tokens=self.settings.max_new_tokens,
                temperature=self.settings.temperature,
                top_p=self.settings.top_p,
                batch_size=self.settings.batch_size,
                seed=self.seed + step,
                progress=(lambda n: self.progress.advance_validation(task, n)) if task is not None else None,
                fast_dtype=self.fast_dtype,
                stop_at_answer=self.stop_at_answer,
                keys=[self.examples[i].id for i in indices],  # each question's own sampling seed, whatever the process count
            )
        gathered = gather_object([(i, c) for i, c in zip(indices, completions)])
        if self.progress and accelerator.is_main_process:
            self.progress.end_validation(task)
        by_index = dict(gathered)
        result = score_completions(self.examples, [by_index[i] for i in range(len(self.examples))], self.settings.scheme, self.prefill)
        result.seconds = time.perf_counter() - started
        self.done_steps.add(step)
        self.last_result = result
        if accelerator.is_main_process:
            with JsonlAppender(self.run_dir / "validation.jsonl") as log:
                log.write({"step": step, **result.to_dict()})
            with JsonlAppender(self.run_dir / "validation_samples.jsonl") as log:
                for row in result.rows:
                    log.write({"step": step, **row})
            if self.progress:
                self.progress.note(f"step {step} validation: {result.summary()}")
        # Every process scored the same gathered completions, so all agree on a new best: the weights are
        # gathered on all of them (ZeRO-3 / FSDP shard them) and written by the main one.
        if self.settings.keep_best and result.accuracy.value > self.best_accuracy:
            self.best_accuracy = result.accuracy.value
            self._save_best(step, result)
        accelerator.wait_for_everyone()
        return result

    def _save_best(self, step: int, result) -> None:
        trainer = self.trainer
        state_dict = gathered_state_dict(trainer)
        if not trainer.accelerator.is_main_process:
            return
        model = trainer.accelerator.unwrap_model(trainer.model)

        def write(folder: Path) -> None:
            model.save_pretrained(folder, state_dict=state_dict, safe_serialization=True)
            self.tokenizer.save_pretrained(folder)
            atomic_write_json(folder / "best.json", {"step": step, "split": "validation", **result.to_dict()})

        write_folder_atomically(self.best_path, write)


class RichProgress(TrainerCallback):
    """Rich progress bars: optimizer steps (with reward and accuracy) and validation passes."""

    def __init__(self, enabled: bool = True, description: str = "training"):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.enabled = enabled
        self.description = description
        self.console = Console()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=self.console,
            disable=not enabled,
        )
        self.steps_task = None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.steps_task is None:
            self.progress.start()
            self.steps_task = self.progress.add_task(self.description, total=state.max_steps, completed=state.global_step, info="")

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.steps_task is not None:
            self.progress.update(self.steps_task, completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.steps_task is not None and logs and "loss" in logs and "reward" not in logs:
            self.progress.update(self.steps_task, info=f"loss {logs['loss']:.3f}")  # the supervised warm start
        if state.is_world_process_zero and self.steps_task is not None and logs and "reward" in logs:
            info = f"reward {logs['reward']:.2f}"
            if "answer/accuracy" in logs:
                info += f"  acc {100 * logs['answer/accuracy']:.0f} %  format {100 * logs.get('answer/format_rate', 0):.0f} %"
            if "completions/mean_length" in logs:
                info += f"  len {logs['completions/mean_length']:.0f}"
            self.progress.update(self.steps_task, info=info)

    def on_train_end(self, args, state, control, **kwargs):
        self.stop()

    def start_validation(self, total: int, step: int):
        if not self.progress.live.is_started:
            self.progress.start()
        return self.progress.add_task(f"validation @ step {step}", total=total, info="")

    def advance_validation(self, task, n: int) -> None:
        self.progress.advance(task, n)

    def end_validation(self, task) -> None:
        self.progress.remove_task(task)

    def note(self, text: str) -> None:
        self.progress.console.print(text)

    def stop(self) -> None:
        if self.progress.live.is_started:
            self.progress.stop()


def use_rich_progress(trainer, progress: RichProgress) -> None:
    """Replace transformers' tqdm bar and log printer with ``progress``."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    if progress not in trainer.callback_handler.callbacks:
        trainer.add_callback(progress)
