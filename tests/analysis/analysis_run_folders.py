"""Builders of constructed run folders in the producers' formats, for the report's tests.

A training run is written the way ``tomrl train`` writes it: ``config.yaml`` by
:func:`tomrl.config.save_config` of a real :class:`TrainConfig`, ``data/*.jsonl`` by
:func:`tomrl.schema.write_examples` (questions from tomrl's generator), ``validation.jsonl`` and
``validation_samples.jsonl`` from :func:`tomrl.training.validation.score_completions` (the
validator's own scorer) over scripted completions, and ``metrics.jsonl`` with TRL's keys as
:class:`tomrl.training.callbacks.StepLogger` renames them. An evaluation is written the way
``tomrl eval`` writes it: sample rows checked by :func:`tomrl.rewards.answer.check_answer` under
both schemes and ``results.json`` summarised by :func:`tomrl.evaluation.results.summarize_benchmark`.
The test decides what the model "did" (accuracy per order, response length, belief statements).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Callable


from tomrl.config import save_config
from tomrl.evaluation.benchmarks import BENCHMARKS, load_examples
from tomrl.evaluation.results import summarize_benchmark
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.rewards.answer import check_answer
from tomrl.rewards.fidelity import world_from_story
from tomrl.schema import Example, write_examples

# A three-agent Hi-ToM-style story for trace-level tests: Anna leaves before Ben moves the apple.
KITCHEN_STORY = """1 Anna, Ben and Carl entered the kitchen.
2 The apple is in the red_box.
3 Anna exited the kitchen.
4 Ben moved the apple to the green_drawer.
5 Ben exited the kitchen.
6 Carl exited the kitchen."""
from tomrl.training.config import TrainConfig
from tomrl.training.validation import score_completions

PREFILL = "<think>"


def hitom_examples(n: int, orders, seed: int, split: str = "train") -> list[Example]:
    examples = generate(GenerateConfig(benchmark="hitom", n=n, seed=seed, orders=list(orders), split_fractions={split: 1.0}))
    return [e for e in examples if e.split == split]


def completion_for(example: Example, correct: bool, states_belief: bool, think_words: int = 20) -> str:
    """A well-formed completion; its reasoning names an agent's belief only when asked to."""
    world = world_from_story(example.story, "hitom")
    wrong = next((c for c in world.containers if c != example.answer), "blue_envelope" if example.answer != "blue_envelope" else "red_box")
    reasoning = " ".join(["step"] * think_words)
    if states_belief:
        reasoning = f"{world.agents[0]} thinks the {world.objects[0]} is in the {world.containers[0]}. " + reasoning
    return f"{reasoning}</think><answer>{example.answer if correct else wrong}</answer>"


def _correct_flags(n: int, share: float) -> list[bool]:
    k = round(share * n)
    return [i < k for i in range(n)]


def write_training_run(
    folder: Path,
    *,
    model: str = "smollm2-135m",
    train_orders=(0, 1, 2, 3),
    validation_orders=(0, 1, 2, 3, 4),
    validation_per_order: int = 30,
    steps=range(0, 120, 2),
    reward: Callable[[float], float] = lambda s: -1.0 + s / 60,
    length: Callable[[float], float] = lambda s: 300.0,
    validation_steps=(0, 40, 80, 118),
    accuracy: Callable[[float, bool], float] = lambda s, in_distribution: 0.4,
    belief_share: Callable[[float], float] = lambda s: 0.9,
    noise_seed: int = 0,
    entropy: Callable[[float], float] = lambda s: 1.2 - s / 500,
    rollout: Callable[[Example, float], str] | None = None,
    rollout_steps: int = 10,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_config(TrainConfig(model=model, run_dir=str(folder)), folder / "config.yaml")
    train = hitom_examples(8 * len(train_orders), train_orders, seed=11)
    validation = hitom_examples(validation_per_order * len(validation_orders), validation_orders, seed=12, split="validation")
    write_examples(folder / "data" / "train.jsonl", train)
    write_examples(folder / "data" / "validation.jsonl", validation)
    rng = random.Random(noise_seed)
    entropy_noise = random.Random(noise_seed + 1)  # its own stream: the other series keep their noise
    with open(folder / "metrics.jsonl", "w") as metrics:
        for step in steps:
            mean_length = length(step) * (1 + rng.gauss(0, 0.03))
            total = reward(step) + rng.gauss(0, 0.15)
            metrics.write(json.dumps({
                "step": step, "wall_time_s": 3.0 * step, "loss": 0.01, "grad_norm": 0.5, "learning_rate": 5e-7,
                "response_length/mean": mean_length, "response_length/min": 0.5 * mean_length,
                "response_length/max": 1.6 * mean_length, "response_length/clipped_ratio": 0.0,
                "rewards/paper/mean": total, "rewards/paper/std": 1.0, "reward": total, "reward_std": 1.0,
                "frac_reward_zero_std": 0.1, "reward_components/paper/format": 0.8, "reward_components/paper/answer": total - 0.8,
                "answer/format_rate": 0.9, "answer/accuracy": min(1.0, max(0.0, (total + 3) / 6)),
                "tokens/generated": 128 * mean_length, "step_time": 2.0, "tokens_per_s/generated": 64 * mean_length,
                "kl": 0.001 * step, "entropy": entropy(step) * (1 + entropy_noise.gauss(0, 0.03)),
            }) + "\n")
    by_order: dict[int, list[Example]] = {}
    for example in validation:
        by_order.setdefault(example.order, []).append(example)
    with open(folder / "validation.jsonl", "w") as summary, open(folder / "validation_samples.jsonl", "w") as answers:
        for step in validation_steps:
            completions = {}
            for order, group in by_order.items():
                flags = _correct_flags(len(group), accuracy(step, order in train_orders))
                beliefs = _correct_flags(len(group), belief_share(step))
                for example, correct, belief in zip(group, flags, beliefs[::-1]):
                    completions[example.id] = completion_for(example, correct, belief)
            texts = [(completions[e.id], 40) for e in validation]
            result = score_completions(validation, texts, "strict", PREFILL)
            summary.write(json.dumps({"step": step, **result.to_dict()}) + "\n")
            for row in result.rows:
                answers.write(json.dumps({"step": step, **row}) + "\n")
    with open(folder / "samples.jsonl", "w") as rollouts:
        for step in list(steps)[::rollout_steps]:
            for example in train[:4] if rollout is None else train:
                text = completion_for(example, True, True) if rollout is None else rollout(example, step)
                rollouts.write(json.dumps({"id": example.id, "order": example.order, "completion": text, "completion_tokens": 40,
                                           "rewards": {"paper": 3.0}, "components": {}, "format_ok": True, "correct": True,
                                           "extracted": example.answer, "step": step + 1}) + "\n")
    return folder


def sample_row(benchmark: str, example: Example, output: str) -> dict:
    strict = check_answer(output, example.answer, "strict", prefill=PREFILL)
    paper = check_answer(output, example.answer, "paper_eval", prefill=PREFILL)
    return {
        "benchmark": benchmark, "id": example.id, "order": example.order, "question_type": example.question_type,
        "gold": example.answer, "prompt": "…", "output": output, "tokens": 40, "finish_reason": "stop",
        "extracted": strict.extracted, "correct": strict.correct, "format_ok": strict.format_ok, "reason": strict.reason,
        "paper_extracted": paper.extracted, "paper_correct": paper.correct, "paper_format_ok": paper.format_ok,
        "paper_reason": paper.reason,
    }


def write_task_evaluation(folder: Path, questions: dict[str, list[Example]], right: dict[str, Callable[[int], bool]],
                          keep_source: bool = False) -> None:
    """An evaluation folder as tomrl eval writes it, one benchmark per task: the i-th question of a task answered
    right where ``right[task](i)``; rows scored by the shared checker, results.json by its summariser.
    ``keep_source``: each row keeps its question's source (the study report reads it)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows, benchmarks = [], {}
    for benchmark, examples in questions.items():
        task_rows = []
        for index, example in enumerate(examples):
            row = sample_row(benchmark, example, completion_for(example, right[benchmark](index), True))
            if keep_source:
                row["source"] = example.source
            task_rows.append(row)
        benchmarks[benchmark] = {"title": benchmark, "n_selected": len(task_rows), "n_answered": len(task_rows),
                                 "complete": True, **summarize_benchmark(task_rows, ("order", "question_type"))}
        rows += task_rows
    (folder / "results.json").write_text(json.dumps({"model": str(folder), "seed": 0, "benchmarks": benchmarks,
                                                     "config": {"heldout_n": 0, "heldout_seed": 0, "data_paths": {}}}))
    (folder / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def write_evaluation(
    folder: Path,
    model: str,
    accuracy_by_benchmark_order: dict[str, dict[int, float]],
    *,
    answer: Callable[[Example, bool], str] | None = None,
    heldout_n: int = 40,
    heldout_seed: int = 5,
) -> Path:
    """An evaluation folder; questions of ``tomrl-hitom-order*`` come from the benchmark's own loader
    (so they can be reloaded), the others from the generator under the benchmark's name."""
    folder.mkdir(parents=True, exist_ok=True)
    benchmarks = {}
    all_rows = []
    for name, shares in accuracy_by_benchmark_order.items():
        if name.startswith("tomrl-hitom-order"):
            examples = load_examples(BENCHMARKS[name], {}, heldout_n, heldout_seed)
        else:
            examples = hitom_examples(heldout_n * len(shares), sorted(shares), seed=hash(name) % 1000, split="test")
        rows = []
        for order, share in shares.items():
            group = [e for e in examples if e.order == order]
            for example, correct in zip(group, _correct_flags(len(group), share)):
                output = answer(example, correct) if answer else completion_for(example, correct, True)
                rows.append(sample_row(name, example, output))
        known = BENCHMARKS.get(name)
        benchmarks[name] = {
            "title": known.title if known else name, "version": "1", "paper_column": known.paper_column if known else None,
            "n_selected": len(rows), "n_answered": len(rows), "complete": True,
            **summarize_benchmark(rows, ("order", "question_type")),
            "generated_tokens": 40 * len(rows), "tokens_per_s": 100.0,
        }
        all_rows += rows
    results = {"model": model, "engine": {"engine": "hf", "model": model}, "seed": 0, "limit": None,
               "benchmarks": benchmarks, "skipped": {}, "failed_prompts": 0,
               "config": {"model": model, "seed": 0, "heldout_n": heldout_n, "heldout_seed": heldout_seed, "data_paths": {}}}
    (folder / "results.json").write_text(json.dumps(results, indent=2))
    with open(folder / "samples.jsonl", "w") as handle:
        for row in all_rows:
            handle.write(json.dumps(row) + "\n")
    return folder


def collapsing(step: float) -> float:
    return 380 * math.exp(-step / 30) + 45
