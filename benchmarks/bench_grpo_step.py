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
  with the demo's CPU settings: ``--precision`` (default ``auto``, the demo's: float32 on CPUs
  without native bf16; with ``bfloat16``, bf16 autocast for the update and rollouts decoded by a
  bf16 copy of the weights), rollouts sampled by ``--rollout-engine`` (default ``auto``: tomrl's
  continuous-batching decoder for this Llama model), each rollout stopped after ``</answer>``.

TRL runs once per ``--trl`` side: ``default`` (GRPOConfig's defaults: bf16 autocast), ``float32``
(``bf16=False``: TRL given the precision that is fastest on a CPU without native bf16, so the ratio
is not only the precision choice) and ``float32-nockpt`` (also ``gradient_checkpointing=False``,
which TRL turns on by default and tomrl does not: so the ratio is not that choice either). Each round builds the trainers (loading is not timed) and runs
one step of each, TRL first then tomrl, so a change of load on a shared machine touches both. Step time is TRL's own
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
    from tomrl.prompts import PromptConfig, render_prompt
    from tomrl.training.run import dataset_row

    cfg = load_config(GenerateConfig, None, [f"n={n}", "orders=[0, 1, 2]", "lengths=[1]", "agents=3", "deception=[false]", f"seed={seed}"])
    return [dataset_row(e, render_prompt(e, tokenizer, PromptConfig("paper_a")), "<think>") for e in generate(cfg)]


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


def trl_step(model: str, rows: list[dict], args, workdir: Path, precision: str = "default") -> dict:
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
        # "default": TRL's own choice (bf16 autocast); "float32": TRL given the precision that is
        # fastest on a CPU without native bf16, so a gain is not only the precision choice;
        # "float32-nockpt": also without TRL's default gradient checkpointing (tomrl's setting).
        **({"bf16": False} if precision.startswith("float32") else {}),
        **({"gradient_checkpointing": False} if precision == "float32-nockpt" else {}),
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
            f"precision={args.precision}",
            f"rollout_engine={args.rollout_engine}",
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


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_name() -> str:
    import platform

    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--max-completion", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="auto", choices=["auto", "float32", "bfloat16"], help="tomrl's precision")
    parser.add_argument("--rollout-engine", default="auto", choices=["auto", "slots", "transformers"], help="tomrl's rollouts")
    parser.add_argument(
        "--trl", default="default,float32",
        help="TRL sides to run, comma-separated: default (GRPOConfig's defaults, bf16), float32 (bf16=False), "
        "float32-nockpt (bf16=False, gradient_checkpointing=False)",
    )
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
    sides = [side.strip() for side in args.trl.split(",") if side.strip()]
    unknown = sorted(set(sides) - {"default", "float32", "float32-nockpt"})
    if unknown or not sides:
        parser.error(f"--trl takes default, float32 and/or float32-nockpt, got {args.trl!r}")
    results = []
    for round_index in range(args.rounds):
        workdir = Path(tempfile.mkdtemp(prefix="bench_grpo_"))
        try:
            trl = {side: trl_step(model, rows, args, workdir / side, side) for side in sides}
            ours = tomrl_step(model, rows, args, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        ratios = {
            f"vs_trl_{side}": {
                "step_time": trl[side]["step_time_s"] / ours["step_time_s"],
                "generated_per_s": ours["generated_per_s"] / trl[side]["generated_per_s"],
                "trained_per_s": ours["trained_per_s"] / trl[side]["trained_per_s"],
            }
            for side in sides
        }
        results.append({"round": round_index, "trl": trl, "tomrl": ours, "tomrl_over_trl": ratios})
        line = " | ".join(f"TRL {side} {trl[side]['step_time_s']:.1f} s/step ({trl[side]['generated_per_s']:.1f} gen tok/s)" for side in sides)
        speedups = ", ".join(f"x{ratios[f'vs_trl_{side}']['step_time']:.2f} vs TRL {side}" for side in sides)
        print(f"round {round_index}: {line} | tomrl {ours['step_time_s']:.1f} s/step ({ours['generated_per_s']:.1f} gen tok/s) | speed-up {speedups}", flush=True)
    summary = {
        "work": vars(args),
        "torch_threads": torch.get_num_threads(),
        "rounds": results,
        "median_tomrl_over_trl": {
            side: {k: statistics.median(r["tomrl_over_trl"][side][k] for r in results) for k in ("step_time", "generated_per_s", "trained_per_s")}
            for side in results[0]["tomrl_over_trl"]
        },
        "cpu": _cpu_name(),
        "peak_rss_mb": _peak_rss_mb(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for side, ratio in summary["median_tomrl_over_trl"].items():
        print(f"median tomrl / TRL ({side}):", json.dumps({k: round(v, 2) for k, v in ratio.items()}))
    print(f"peak memory (max RSS of this process): {_peak_rss_mb():.0f} MB; CPU: {summary['cpu']}")
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
