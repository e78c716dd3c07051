"""One GRPO step on the embedded model on CPU: tomrl against TRL with its defaults, on the same work.

    TOMRL_HOME=/tmp/tomrl_home .venv/bin/python benchmarks/bench_grpo_step.py
    .venv/bin/python benchmarks/bench_grpo_step.py --prompts 2 --rollouts 4 --max-completion 64 --rounds 2 --out bench.json

The work, identical on both sides: ``--prompts`` generated Hi-ToM stories (orders 0-2, one chapter)
rendered with Paper A's prompt, ``--rollouts`` completions each of at most ``--max-completion``
tokens, Paper A's reward (tomrl.rewards), micro-batches of ``--micro-batch`` completions, one
optimizer step of GRPO with beta = 0 (TRL's default: no reference model on either side), from the
same model (the embedded SmolLM2-135M unless ``--model``), the same seed.

- **TRL**: ``GRPOTrainer`` with ``GRPOConfig``'s defaults for everything that is not the work
  itself (so bf16 autocast, TRL's default, and ``model.generate`` rollouts).
- **tomrl**: the trainer ``tomrl train`` builds (:class:`tomrl.training.trainer.TomrlGRPOTrainer`)
  with the demo's CPU settings: bf16 autocast for the update, rollouts decoded by a bf16 copy of
  the weights (no per-step weight casts), each rollout stopped after ``</answer>``.

Each round builds both trainers (loading is not timed) and runs one step of each, TRL first then
tomrl, so a change of load on a shared machine touches both. Step time is TRL's own
``step_time`` (generation + scoring + forward/backward + optimizer, the same instrumentation on
both sides); tokens generated/s = completion tokens / step time; tokens trained/s = (prompt +
completion tokens) / step time. The ratios tomrl / TRL are printed per round with their median.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def build_rows(n: int, seed: int, tokenizer) -> list[dict]:
    from tomrl.config import load_config
    from tomrl.generators.config import GenerateConfig
    from tomrl.generators.dataset import generate
    from tomrl.prompts import render_prompt
    from tomrl.training.run import dataset_row

    cfg = load_config(GenerateConfig, None, [f"n={n}", "orders=[0, 1, 2]", "lengths=[1]", "agents=3", "deception=[false]", f"seed={seed}"])
    return [dataset_row(e, render_prompt(e, tokenizer, "paper_a", "<think>"), "<think>") for e in generate(cfg)]


class Capture:
    """A TrainerCallback that keeps the step's logged metrics."""

    def __init__(self):
        from transformers import TrainerCallback

        outer = self
        self.logs: list[dict] = []

        class _Callback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "step_time" in logs:
                    outer.logs.append(dict(logs))

        self.callback = _Callback()


def measure(logs: list[dict], completions: int) -> dict:
    row = logs[-1]
    step_time = row["step_time"]
    generated = row["completions/mean_length"] * completions
    trained = row["num_tokens"]
    return {
        "step_time_s": step_time,
        "tokens_generated": generated,
        "tokens_trained": trained,
        "generated_per_s": generated / step_time,
        "trained_per_s": trained / step_time,
    }


def trl_step(model: str, rows: list[dict], args, workdir: Path) -> dict:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from tomrl.models import load_tokenizer
    from tomrl.rewards.functions import make_reward

    capture = Capture()
    completions = args.prompts * args.rollouts
    config = GRPOConfig(
        output_dir=str(workdir / "trl"),
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=completions // args.micro_batch,
        num_generations=args.rollouts,
        max_completion_length=args.max_completion,
        max_steps=1,
        shuffle_dataset=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=args.seed,
        use_cpu=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[make_reward("paper", prefill="<think>")],
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=load_tokenizer(model),
        callbacks=[capture.callback],
    )
    trainer.train()
    return measure(capture.logs, completions)


def tomrl_step(model: str, rows: list[dict], args, workdir: Path) -> dict:
    from tomrl.config import load_config
    from tomrl.training.config import TrainConfig
    from tomrl.training.run import build_trainer

    cfg = load_config(
        TrainConfig,
        None,
        [
            f"model={model}",
            f"run_dir={workdir / 'tomrl'}",
            f"seed={args.seed}",
            f"prompts_per_step={args.prompts}",
            f"rollouts_per_prompt={args.rollouts}",
            f"micro_batch_size={args.micro_batch}",
            f"max_completion_length={args.max_completion}",
            "max_steps=1",
            "kl_coef=0.0",
            "loss_type=dapo",
            "learning_rate=1e-6",
            "precision=bfloat16",
            "stop_at_answer=true",
            "progress=false",
            "log_samples=false",
            "report_to=[]",
            "eval.every_steps=0",
            "eval.at_start=false",
            "save_every=1000",
        ],
    )
    examples = [_example_of(r) for r in rows]
    Path(cfg.run_dir).mkdir(parents=True, exist_ok=True)
    capture = Capture()
    trainer, _, logger, progress, _ = build_trainer(cfg, model, examples, [])
    trainer.add_callback(capture.callback)
    try:
        trainer.train()
    finally:
        logger.close()
        progress.stop()
    return measure(capture.logs, args.prompts * args.rollouts)


def _example_of(row: dict):
    from tomrl.schema import Example

    return Example(
        id=row["id"], source=row["source"], split="train", story=row["story"], question=row["question"], answer=row["answer"],
        order=row["order"], question_type=row["question_type"], deception=False, story_length=1, story_id=row["story_id"],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--max-completion", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the measurements as JSON here")
    args = parser.parse_args()

    import warnings

    import datasets
    import torch
    import transformers

    from tomrl.models import load_tokenizer, resolve_model

    warnings.filterwarnings("ignore")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    model = resolve_model(args.model)
    rows = build_rows(args.prompts, args.seed, load_tokenizer(model))
    results = []
    for round_index in range(args.rounds):
        workdir = Path(tempfile.mkdtemp(prefix="bench_grpo_"))
        try:
            trl = trl_step(model, rows, args, workdir)
            ours = tomrl_step(model, rows, args, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        ratio = {
            "step_time": trl["step_time_s"] / ours["step_time_s"],
            "generated_per_s": ours["generated_per_s"] / trl["generated_per_s"],
            "trained_per_s": ours["trained_per_s"] / trl["trained_per_s"],
        }
        results.append({"round": round_index, "trl": trl, "tomrl": ours, "tomrl_over_trl": ratio})
        print(
            f"round {round_index}: TRL {trl['step_time_s']:.1f} s/step ({trl['generated_per_s']:.1f} gen tok/s, "
            f"{trl['trained_per_s']:.0f} trained tok/s) | tomrl {ours['step_time_s']:.1f} s/step "
            f"({ours['generated_per_s']:.1f} gen tok/s, {ours['trained_per_s']:.0f} trained tok/s) | "
            f"speed-up x{ratio['step_time']:.2f}",
            flush=True,
        )
    summary = {
        "work": vars(args),
        "torch_threads": torch.get_num_threads(),
        "rounds": results,
        "median_tomrl_over_trl": {k: statistics.median(r["tomrl_over_trl"][k] for r in results) for k in results[0]["tomrl_over_trl"]},
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print("median tomrl / TRL:", json.dumps({k: round(v, 2) for k, v in summary["median_tomrl_over_trl"].items()}))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
