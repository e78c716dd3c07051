"""Trainer callbacks of tomrl study's runs: model snapshots every K updates, and the supervised arms' step log.

Passed to the RL trainer (:func:`tomrl.training.run.train`'s ``callbacks``) and to the supervised
fine-tuning (:func:`tomrl.training.sft_warmstart.fine_tune`) by :mod:`tomrl.study.arms`; imported
only there, so loading a study config does not import transformers.
"""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from tomrl.io import JsonlAppender


class ModelSnapshots(TrainerCallback):
    """Keep the model every ``every`` optimizer updates in ``folder/step-N`` (written atomically), for the
    study's curves over checkpoints; the last update is ``final/``, written by the run itself."""

    def __init__(self, folder: Path, every: int):
        self.folder = Path(folder)
        self.every = every

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        step = state.global_step
        if not self.every or step % self.every or step >= state.max_steps or not state.is_world_process_zero:
            return
        from tomrl.io import write_folder_atomically

        unwrapped = getattr(model, "module", model)  # DDP wraps the model; ZeRO-3 partitions are not gathered here

        def write(staging: Path) -> None:
            unwrapped.save_pretrained(staging, safe_serialization=True)
            if processing_class is not None:
                processing_class.save_pretrained(staging)

        write_folder_atomically(self.folder / f"step-{step}", write)


class SupervisedLog(TrainerCallback):
    """metrics.jsonl of the supervised arms: one row per update (loss, learning rate, gradient norm)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        row = {"step": state.global_step, **{k: v for k, v in logs.items() if isinstance(v, (int, float))}}
        with JsonlAppender(self.path) as out:
            out.write(row)
