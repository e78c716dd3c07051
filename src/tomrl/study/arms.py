"""The arms of a study: six ways to spend the same budget of optimizer updates on the same stories.

    from tomrl.study.arms import arm_train_config, run_arm
    cfg = arm_train_config("sft", study, base, mixture, seed=0, model="tiny-qwen2", run_dir=...)
    run_arm("sft", cfg, study, say=print)        # RUN_DIR: config.yaml, data/, metrics.jsonl, final/, summary.json

Every arm makes ``study.updates`` optimizer updates of ``prompts_per_step`` training stories each,
starting from the same model (the base model, or, when the training config has a warm start, the
one warm start of that mixture and seed that the study trains once for all arms:
:func:`tomrl.study.runner.shared_start`), on the first ``updates × prompts_per_step`` stories of
the same frozen training data:

- ``grpo``, ``reinforce_pp``: RL with tomrl train (:func:`tomrl.training.run.train`), ``max_steps = updates``;
- ``answer_only``: the same RL, but the assistant turn is prefilled with an empty think block and an
  open answer tag (``answer_only.prefill``), so the policy is rewarded for the answer alone;
- ``fidelity``: the same RL (``fidelity.algorithm``), rewarded by the training config's rewards plus the
  reasoning-fidelity reward (:mod:`tomrl.rewards.fidelity`) with weight ``fidelity.weight`` and options
  ``fidelity.options``: the answer reward stays, so the arm asks what judging the reasoning adds;
- ``sft``: supervised fine-tuning on the oracle-written reasoning traces of those stories
  (:func:`tomrl.training.sft_warmstart.trace_rows`), ``updates`` updates of ``prompts_per_step`` traces;
- ``rft``: rejection-sampling fine-tuning: ``samples_per_prompt`` completions per story from the
  starting model (tomrl's generation engine, the RL sampling settings), kept only where the shared
  answer checker (:func:`tomrl.rewards.answer.check_answer`) says correct, then the same supervised
  updates on the kept completions (RUN_DIR/rft/samples.jsonl holds every sample with its verdict).

The two supervised arms write the run folder ``tomrl train`` writes (``metrics.jsonl`` with the
loss per update, ``final/``, ``summary.json``) plus ``study_arm.json`` (the budget actually used).
They have no rollouts, so no reward curve.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from tomrl.config import load_config, save_config
from tomrl.io import atomic_write_json, publish_folder, write_jsonl
from tomrl.schema import Example
from tomrl.study.config import MixtureSpec, StudyConfig
from tomrl.training.config import TrainConfig

RL_ARMS = ("grpo", "reinforce_pp", "answer_only", "fidelity")
SUPERVISED_ARMS = ("sft", "rft")
ARM_FILE = "study_arm.json"
SNAPSHOTS = "snapshots"  # RUN_DIR/snapshots/step-N: the model every eval.checkpoint_every updates


def arm_train_config(
    arm: str, study: StudyConfig, base_path: str | Path, mixture: MixtureSpec, seed: int, model: str, run_dir: str | Path
) -> TrainConfig:
    """The training config of one cell: the base config, the study's overrides, the cell's model, seed,
    data and run folder, the matched budget, then the arm's own keys and ``arm_overrides``."""
    overrides = [*study.train_overrides, f"model={model}", f"seed={seed}", f"run_dir={run_dir}", f"max_steps={study.updates_of(mixture.name)}"]
    if arm in RL_ARMS:
        algorithm = {"answer_only": study.answer_only.algorithm, "fidelity": study.fidelity.algorithm}.get(arm, arm)
        # The algorithm's own place for the KL (a base config written for REINFORCE++ says kl_in_reward: true).
        overrides += [f"algorithm={algorithm}", "kl_in_reward=null"]
    overrides += study.arm_overrides.get(arm, [])
    cfg = load_config(TrainConfig, base_path, overrides)
    cfg = replace(cfg, data=mixture.data_config)
    if arm == "answer_only":
        cfg = replace(cfg, prompt=replace(cfg.prompt, prefill=study.answer_only.prefill))
    if arm == "fidelity":
        cfg = with_fidelity_reward(cfg, study)
    return cfg


def with_fidelity_reward(cfg: TrainConfig, study: StudyConfig) -> TrainConfig:
    """``cfg`` with the fidelity reward appended to its rewards: weight ``study.fidelity.weight`` beside the
    others' (their reward_weights, or 1 each), options ``study.fidelity.options``."""
    from tomrl.config import ConfigError

    if "fidelity" in cfg.rewards:
        raise ConfigError(f"the fidelity arm adds the fidelity reward, but the training config already has rewards {cfg.rewards}; "
                          "leave it out of the base config and arm_overrides (set study.fidelity.weight and .options instead)")
    weights = list(cfg.reward_weights) if cfg.reward_weights is not None else [1.0] * len(cfg.rewards)
    return replace(cfg, rewards=[*cfg.rewards, "fidelity"], reward_weights=[*weights, study.fidelity.weight],
                   reward_options={**cfg.reward_options, "fidelity": asdict(study.fidelity.options)})


@dataclass(frozen=True)
class Budget:
    """What every arm of a cell gets: the same number of updates of the same number of stories."""

    updates: int
    stories_per_update: int

    @property
    def stories(self) -> int:
        return self.updates * self.stories_per_update


def budget_of(cfg: TrainConfig) -> Budget:
    return Budget(updates=cfg.max_steps, stories_per_update=cfg.prompts_per_step)


def budget_stories(train: Sequence[Example], budget: Budget) -> list[Example]:
    """The stories RL's ``updates`` steps read: the first ``updates × prompts_per_step`` of the frozen
    training order (TRL reads it unshuffled, wrapping around when the set is smaller)."""
    return list(train[: budget.stories])


def supervised_settings(cfg: TrainConfig, study: StudyConfig, budget: Budget):
    """The fine-tuning settings of the sft and rft arms: ``updates`` updates of ``prompts_per_step`` rows."""
    return replace(
        cfg.warm_start,
        epochs=1.0,  # unused: max_steps decides
        max_steps=budget.updates,
        batch_size=budget.stories_per_update,
        learning_rate=study.sft.learning_rate or cfg.warm_start.learning_rate,
        max_examples=None,
    )


# ----------------------------------------------------------------------------- running an arm


def run_arm(arm: str, cfg: TrainConfig, study: StudyConfig, say: Callable[[str], Any] = print, console: Any = None) -> dict:
    """Train one cell into ``cfg.run_dir`` (continuing what a killed run left); returns its summary."""
    from tomrl.study.callbacks import ModelSnapshots

    run_dir = Path(cfg.run_dir)
    callbacks = [ModelSnapshots(run_dir / SNAPSHOTS, study.eval.checkpoint_every)] if study.eval.checkpoint_every else []
    budget = budget_of(cfg)
    if arm in RL_ARMS:
        from tomrl.training.run import CONFIG_FILE, train

        # A started run continues from its last checkpoint (or, killed before one, starts again in place).
        summary = train(cfg, resume=(run_dir / CONFIG_FILE).exists(), console=console, callbacks=callbacks).to_dict()
        atomic_write_json(run_dir / ARM_FILE, {"arm": arm, "updates": summary["steps"], "stories_per_update": budget.stories_per_update,
                                               "algorithm": cfg.algorithm, "prefill": cfg.prompt.resolved_prefill, "rewards": list(cfg.rewards),
                                               "reward_weights": cfg.reward_weights, "reward_options": cfg.reward_options})
        return summary
    if arm in SUPERVISED_ARMS:
        return _run_supervised(arm, cfg, study, budget, say, callbacks)
    raise ValueError(f"unknown arm {arm!r}")


def _run_supervised(arm: str, cfg: TrainConfig, study: StudyConfig, budget: Budget, say, callbacks) -> dict:
    from tomrl.models import load_tokenizer, resolve_model
    from tomrl.study.callbacks import SupervisedLog
    from tomrl.training.data import prepare_data
    from tomrl.training.run import CONFIG_FILE
    from tomrl.training.sft_warmstart import fine_tune, trace_rows, warm_start

    started = time.time()
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / CONFIG_FILE)
    train, validation = prepare_data(cfg, run_dir)
    start = str(warm_start(cfg, run_dir, train, say)) if cfg.warm_start.enabled else resolve_model(cfg.model)
    stories = budget_stories(train, budget)
    folder = run_dir / arm
    if arm == "sft":
        rows = trace_rows(stories, load_tokenizer(start), cfg.prompt)
        source = {"traced_stories": len(rows), "untraceable_stories": len(stories) - len(rows)}
    else:
        rows, source = rejection_samples(cfg, study, start, stories, folder, say)
    if not rows:
        raise RuntimeError(
            f"{arm}: nothing to fine-tune on ({source}); "
            + ("no story of this mixture has an oracle trace" if arm == "sft" else
               "no sampled completion was correct: the starting model needs a warm start (warm_start.enabled in the training config)")
        )
    settings = supervised_settings(cfg, study, budget)
    finished = (folder / "done.json").exists() and ((folder / "model").exists() or (run_dir / "final").exists())
    if not finished:
        for stale in ("metrics.jsonl",):  # a killed attempt's rows: the updates restart from the starting model
            (run_dir / stale).unlink(missing_ok=True)
        say(f"{arm}: {budget.updates} updates of {budget.stories_per_update} rows from {len(rows)} rows ({source}), lr {settings.learning_rate}")
        fine_tune(replace(cfg, warm_start=settings), start, rows, folder, say,
                  callbacks=[SupervisedLog(run_dir / "metrics.jsonl"), *callbacks], description=arm)
    if (folder / "model").exists():  # moved, not copied: one copy of the weights
        publish_folder(folder / "model", run_dir / "final")
    done = json.loads((folder / "done.json").read_text())
    atomic_write_json(run_dir / ARM_FILE, {"arm": arm, "updates": done["steps"], "stories_per_update": budget.stories_per_update,
                                           "stories": len(stories), "rows": len(rows), **source, "learning_rate": settings.learning_rate})
    summary = {
        "run_dir": str(run_dir), "arm": arm, "steps": done["steps"], "seconds": round(time.time() - started, 1),
        "train_examples": len(train), "validation_examples": len(validation), "rows": len(rows),
        "first_loss": done["first_loss"], "last_loss": done["last_loss"],
        "warm_start": json.loads((run_dir / "warm_start" / "done.json").read_text()) if cfg.warm_start.enabled else None,
    }
    atomic_write_json(run_dir / "summary.json", summary)
    return summary


# ----------------------------------------------------------------------------- rejection sampling


def keep_correct(stories: Sequence[Example], prompts: Sequence[str], completions: Sequence[Any], prefill: str, scheme: str) -> tuple[list[dict], list[dict]]:
    """``(kept rows, every sample)``: each completion (``.index`` into ``stories``) checked by the shared
    answer checker; a prompt-completion row is kept exactly when ``check_answer`` says correct."""
    from tomrl.rewards.answer import check_answer, unaware_names

    kept, samples = [], []
    for completion in completions:
        story = stories[completion.index]
        check = check_answer(completion.text, story.answer, scheme=scheme, prefill=prefill, question_type=story.question_type,
                             unaware=unaware_names(story.meta))
        samples.append({"id": story.id, "order": story.order, "gold": story.answer, "completion": completion.text,
                        "tokens": completion.tokens, "correct": check.correct, "format_ok": check.format_ok,
                        "extracted": check.extracted, "reason": check.reason})
        if check.correct:
            kept.append({"prompt": prompts[completion.index], "completion": completion.text})
    return kept, samples


def rejection_samples(cfg: TrainConfig, study: StudyConfig, model: str, stories: Sequence[Example], folder: Path, say) -> tuple[list[dict], dict]:
    """The rft arm's training rows: the starting model's correct completions of ``stories`` (sampled once,
    kept in ``folder/samples.jsonl`` and ``folder/kept.jsonl``; ``folder/sampled.json`` marks them complete)."""
    from tomrl.generation import HFEngine, Sampling
    from tomrl.io import iter_jsonl
    from tomrl.prompts import render_prompt

    marker = folder / "sampled.json"
    if marker.exists():
        rows = [row for _, row in iter_jsonl(folder / "kept.jsonl")]
        return rows, json.loads(marker.read_text())
    settings = study.rft
    k = settings.samples_per_prompt or cfg.rollouts_per_prompt
    engine = HFEngine(model, dtype=cfg.precision, batch_size=settings.batch_size)  # auto: bf16 only where the device runs it natively
    rendered = [render_prompt(story, engine.tokenizer, cfg.prompt) for story in stories]
    repeated_stories = [story for story in stories for _ in range(k)]
    repeated_prompts = [prompt for prompt in rendered for _ in range(k)]
    sampling = Sampling(
        temperature=settings.temperature or cfg.temperature, top_p=settings.top_p or cfg.top_p, max_new_tokens=cfg.max_completion_length,
        stop=("</answer>",) if cfg.stop_at_answer else (), seed=cfg.seed,
    )
    say(f"rft: sampling {k} completions for each of {len(stories)} stories from {model}")
    completions = list(engine.generate(repeated_prompts, sampling))
    kept, samples = keep_correct(repeated_stories, repeated_prompts, completions, cfg.prompt.resolved_prefill, settings.scheme)
    write_jsonl(folder / "samples.jsonl", samples)
    write_jsonl(folder / "kept.jsonl", kept)
    source = {"sampled": len(samples), "kept": len(kept), "stories_with_a_kept_sample": len({s["id"] for s in samples if s["correct"]}),
              "samples_per_prompt": k, "scheme": settings.scheme}
    atomic_write_json(marker, source)
    say(f"rft: kept {len(kept)} of {len(samples)} completions (correct under {settings.scheme})")
    return kept, source


__all__ = ["arm_train_config", "with_fidelity_reward", "run_arm", "budget_of", "budget_stories", "keep_correct", "rejection_samples", "Budget", "RL_ARMS", "SUPERVISED_ARMS"]
