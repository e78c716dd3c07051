"""Training effects carry the run-to-run spread of training beside their question-sampling interval.

Three runs of the demo with one setup gave RL accuracies of 40.0, 50.7 and 57.3 % on one set of 75
questions, a spread larger than most effects the demo reports; an interval over questions says
nothing about it. The reports are read on real result files:

- ``tomrl report``: training-run folders as ``tomrl train`` writes them (analysis_run_folders, their
  ``config.yaml`` a real TrainConfig with its seed) and evaluation folders as ``tomrl eval`` writes them,
  the trained model's path inside its run folder. One seed gives the note; three seeds that all drop on a
  held-out task keep the negative-transfer verdict and show each seed; three seeds that differ in sign
  make it "inconclusive: training seeds disagree (…)". The runs are found from the evaluations alone too.
- the demo's comparison (:func:`tomrl.analysis.comparison.compare`) with one model per training seed;
- the study report on a study folder (``grid.json`` + ``evals/CELL/final`` + ``evals/base__MODEL``) with
  three seeds per arm: its matrix and its arm verdicts.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Callable

import pytest
from analysis_run_folders import hitom_examples, write_evaluation, write_task_evaluation, write_training_run

from tomrl.analysis.comparison import EvalSet, TrainingSeeds, compare, to_markdown
from tomrl.analysis.report import default_options, write_report
from tomrl.analysis.runs import load_runs, read_evaluation
from tomrl.analysis.significance import ONE_TRAINING_SEED, SeedEffects, training_effect_verdict
from tomrl.analysis.study_report import arm_comparisons, read_study, write_study_report
from tomrl.cli import main
from tomrl.config import save_config
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.training.config import TrainConfig

BASE = "smollm2-135m"  # the runs' base model (TrainConfig's default), evaluated as such
BASE_TOMI = {0: 0.6, 1: 0.5}


# ---------------------------------------------------------------------------- the rule itself


def test_the_verdict_rule_on_hand_made_effects():
    agree, disagree = SeedEffects.of({0: 0.05, 1: 0.07, 2: 0.03}), SeedEffects.of({0: -0.03, 1: 0.05, 2: 0.02})
    assert training_effect_verdict(1, agree, "gain", "inconclusive") == "gain"
    assert training_effect_verdict(0, agree, "gain", "inconclusive") == "inconclusive"
    expected = "inconclusive: training seeds disagree (effects -3.0..+5.0 points, 3 seeds)"
    assert training_effect_verdict(1, disagree, "gain", "inconclusive") == expected
    assert training_effect_verdict(0, disagree, "gain", "inconclusive") == expected
    # A seed with no effect at all does not carry a claimed direction.
    assert training_effect_verdict(-1, SeedEffects.of({0: -0.1, 1: 0.0}), "loss", "inconclusive").startswith(
        "inconclusive: training seeds disagree")
    one = SeedEffects.of({0: 0.1})
    assert training_effect_verdict(1, one, "gain", "inconclusive") == "gain (one training seed)"
    assert training_effect_verdict(1, None, "gain", "inconclusive") == "gain (one training seed)"
    assert one.describe() == ONE_TRAINING_SEED and one.to_dict()["note"] == ONE_TRAINING_SEED
    assert agree.sd == pytest.approx(0.02) and (agree.low, agree.high) == (0.03, 0.07)
    assert agree.describe() == "seeds 0, 1, 2: +5.0, +7.0, +3.0 pts (range +3.0..+7.0, sd 2.0)"


# ---------------------------------------------------------------------------- tomrl report


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """One small run folder as tomrl train writes it, trained on Hi-ToM orders 0-3 (ToMi is held out)."""
    return write_training_run(tmp_path_factory.mktemp("template") / "run", steps=range(0, 20, 2), validation_steps=(0, 18),
                              validation_per_order=4)


def _run(template: Path, folder: Path, seed: int) -> Path:
    """A copy of the template whose config.yaml is the one `tomrl train ... seed=SEED` writes, with its final model."""
    shutil.copytree(template, folder)
    save_config(TrainConfig(model=BASE, run_dir=str(folder), seed=seed), folder / "config.yaml")
    (folder / "final").mkdir()
    return folder


def _plant(root: Path, template: Path, tomi_by_seed: dict[int, dict[int, float]]) -> tuple[Path, Path]:
    """runs/rl-sSEED (one per seed) and evals/base + evals/rl-sSEED: the base model and each final model on ToMi."""
    write_evaluation(root / "evals" / "base", BASE, {"tomi": BASE_TOMI}, heldout_n=60)
    for seed, shares in tomi_by_seed.items():
        run = _run(template, root / "runs" / f"rl-s{seed}", seed)
        write_evaluation(root / "evals" / f"rl-s{seed}", str(run / "final"), {"tomi": shares}, heldout_n=60)
    return root / "runs", root / "evals"


def _transfer(out: Path) -> dict:
    [found] = [d for d in json.loads((out / "detectors.json").read_text())["detectors"] if d["name"] == "negative_transfer"]
    return found


def _training_seed_of(markdown: str, run: str) -> str:
    line = next(line for line in markdown.splitlines() if line.startswith("| training run") and f"/{run} |" in line)
    return re.search(r"training seed \w+", line).group(0)


def _expected_effects(evals: Path, seeds) -> dict[str, float]:
    base = read_evaluation(evals / "base").benchmarks["tomi"].overall.value
    return {str(s): read_evaluation(evals / f"rl-s{s}").benchmarks["tomi"].overall.value - base for s in seeds}


def test_one_training_seed_carries_the_note(template, tmp_path):
    _, evals = _plant(tmp_path, template, {0: {0: 0.3, 1: 0.25}})
    sets = [EvalSet("gen", "generated", "stories", hitom_examples(30, (0, 1), seed=3, split="test"))]
    rows = {label: {"gen": {e.id: {"id": e.id, "correct": right(i)} for i, e in enumerate(sets[0].examples)}}
            for label, right in (("warm start", lambda i: i % 5 == 0), ("RL", lambda i: i % 5 < 4))}
    out = tmp_path / "report"
    write_report(load_runs([tmp_path]), out, default_options(comparison=compare(sets, rows)))
    transfer = _transfer(out)
    assert transfer["fired"] and transfer["verdict"] == "fired (one training seed)"  # still fires, says what it rests on
    assert ONE_TRAINING_SEED in transfer["explanation"]
    [comparison] = transfer["data"]["comparisons"]
    assert comparison["training_seeds"]["training_seeds"] == 1 and comparison["holds_in_every_seed"]
    markdown = (out / "report.md").read_text()
    assert "Negative transfer — against base: smollm2-135m: FIRED (one training seed)" in markdown
    assert f"Rows with one training seed: {ONE_TRAINING_SEED}" in markdown  # beside the change table
    assert "after: rl-s0: one training seed: the run-to-run spread" in markdown  # beside the before/after table
    assert "| rl-s0 (hitom orders 0-3) | tomi | base: smollm2-135m |" in markdown
    # The demo's comparison (warm start → RL, one model each): its gain says it is one training seed's.
    section = markdown.split("## Models beside the best no-ToM rule")[1].split("\n## ")[0]
    assert "gain (one training seed)" in section and ONE_TRAINING_SEED in section
    assert _training_seed_of(markdown, "rl-s0") == "training seed 0"


def test_three_agreeing_seeds_keep_the_verdict_and_show_their_spread(template, tmp_path):
    """Only the evaluation folders are given: each model is traced to its run folder (config.yaml: the seed)."""
    seeds = {0: {0: 0.3, 1: 0.25}, 1: {0: 0.4, 1: 0.3}, 2: {0: 0.2, 1: 0.15}}
    _, evals = _plant(tmp_path, template, seeds)
    out = tmp_path / "report"
    assert main(["report", str(evals), "--out", str(out)]) == 0
    transfer = _transfer(out)
    assert transfer["fired"] and transfer["verdict"] == "fired"
    [comparison] = transfer["data"]["comparisons"]
    pooled = "rl-s0 + rl-s1 + rl-s2 (hitom orders 0-3; 3 training seeds, pooled)"
    assert comparison["mixture"] == pooled and comparison["trained"]["n"] == 3 * comparison["base"]["n"]
    spread = comparison["training_seeds"]
    expected = _expected_effects(evals, seeds)
    assert spread["training_seeds"] == 3 and spread["per_seed"] == pytest.approx(expected)
    assert spread["min"] == pytest.approx(min(expected.values())) and spread["sd"] > 0
    assert all(v < 0 for v in expected.values()) and comparison["holds_in_every_seed"]
    evidence = dict(transfer["evidence"])
    assert evidence[f"{pooled} on tomi, per training seed"].startswith("seeds 0, 1, 2: ")
    markdown = (out / "report.md").read_text()
    assert "Negative transfer — against base: smollm2-135m: FIRED" in markdown
    generalization = markdown.split("## Generalization")[1].split("\n## ")[0]
    assert "FIRED (one training seed)" not in markdown and ONE_TRAINING_SEED not in generalization
    change_row = next(line for line in markdown.splitlines() if line.startswith(f"| {pooled} | tomi |"))
    assert "seeds 0, 1, 2: " in change_row and "range " in change_row and "sd " in change_row
    assert "differ only by training seed (seeds 0, 1, 2)" in markdown  # the before/after table's spread
    assert _training_seed_of(markdown, "rl-s2") == "training seed 2"  # listed as the origin of an evaluated model
    assert "after: rl-s1" in markdown and "before: rl-s1" not in markdown


def test_three_seeds_disagreeing_in_sign_are_inconclusive(template, tmp_path):
    """Pooled, the trained models are far below the base model on ToMi, but one seed is above it."""
    seeds = {0: {0: 0.1, 1: 0.1}, 1: {0: 0.2, 1: 0.2}, 2: {0: 0.7, 1: 0.6}}
    _, evals = _plant(tmp_path, template, seeds)
    out = tmp_path / "report"
    assert main(["report", str(tmp_path), "--out", str(out), "--fail-on-detection"]) == 0  # nothing fired
    transfer = _transfer(out)
    [comparison] = transfer["data"]["comparisons"]
    assert comparison["significant_drop"] and not comparison["holds_in_every_seed"]  # the pooled test alone would fire
    expected = _expected_effects(evals, seeds)
    low, high = min(expected.values()), max(expected.values())
    assert low < 0 < high
    verdict = f"inconclusive: training seeds disagree (effects {100 * low:+.1f}..{100 * high:+.1f} points, 3 seeds)"
    assert not transfer["fired"] and transfer["verdict"] == verdict and transfer["data"]["seeds_disagree"]
    assert "seeds disagree" in transfer["explanation"]
    markdown = (out / "report.md").read_text()
    assert f"Negative transfer — against base: smollm2-135m: {verdict}" in markdown
    assert f"| Negative transfer | against base: smollm2-135m | {verdict} |" in markdown  # detectors at a glance
    # The runs were given too: the per-run detectors of training are counted over the seeds.
    assert ("Runs rl-s0, rl-s1, rl-s2 differ only by training seed (seeds 0, 1, 2): Reasoning collapse fired in 0 of 3; "
            "Entropy collapse fired in 0 of 3; ID/OOD divergence fired in 0 of 3.") in markdown


def test_shortcut_shift_per_training_seed(template, tmp_path):
    """Seeds 0 and 1 answer the last-mentioned container where they are wrong, seed 2 answers like the base
    model: pooled over the seeds the agreement rises, but not in every seed."""
    from tomrl.audit.heuristics import HEURISTICS
    from tomrl.rewards.answer import answers_match
    from tomrl.rewards.fidelity import world_from_story

    def base_answer(example, correct):
        avoid = {example.answer, HEURISTICS["last_mentioned"](example)}
        other = next((c for c in world_from_story(example.story, "hitom").containers if c not in avoid), "blue_envelope")
        return f"Anna thinks so.</think><answer>{example.answer if correct else other}</answer>"

    def shortcut_answer(example, correct):
        last = HEURISTICS["last_mentioned"](example)
        return f"The end.</think><answer>{example.answer if correct or answers_match(last, example.answer) else last}</answer>"

    benchmark = {"tomrl-hitom-order2": {2: 0.4}}
    write_evaluation(tmp_path / "evals" / "base", BASE, benchmark, answer=base_answer, heldout_n=40)
    for seed, answer in ((0, shortcut_answer), (1, shortcut_answer), (2, base_answer)):
        run = _run(template, tmp_path / "runs" / f"rl-s{seed}", seed)
        write_evaluation(tmp_path / "evals" / f"rl-s{seed}", str(run / "final"), benchmark, answer=answer, heldout_n=40)
    out = tmp_path / "report"
    write_report(load_runs([tmp_path]), out, default_options(trace_views=0))
    section = (out / "report.md").read_text().split("## Shortcuts")[1].split("\n## ")[0]
    assert "training seed 0, one of 3: the last table of this benchmark gives the spread over seeds" in section
    [row] = [line for line in section.splitlines() if line.startswith("| last_mentioned |") and "per training seed" not in line
             and "seeds 0, 1, 2:" in line]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    pooled, per_seed, verdict = cells[1], cells[2], cells[3]
    assert float(re.search(r"\[\+(\d+\.\d)", pooled).group(1)) > 0  # pooled, the interval lies above zero
    assert re.fullmatch(r"seeds 0, 1, 2: \+(\d+\.\d), \+\1, \+0\.0 pts \(range \+0\.0\.\.\+\1, sd \d+\.\d\)", per_seed)
    assert verdict.startswith("inconclusive: training seeds disagree (effects +0.0..+") and verdict.endswith("3 seeds)")


# ---------------------------------------------------------------------------- the demo's comparison


def test_comparison_per_training_seed():
    examples = generate(GenerateConfig(n=60, seed=3, orders=[0, 1, 2], lengths=[1], agents=3, deception=[False]))
    sets = [EvalSet("gen", "generated", "stories", examples)]

    def rows(right) -> dict:
        return {"gen": {e.id: {"id": e.id, "correct": right(i)} for i, e in enumerate(examples)}}

    warm = rows(lambda i: i % 5 == 0)  # 20 %
    agreeing = TrainingSeeds({0: rows(lambda i: i % 5 < 4), 1: rows(lambda i: i % 5 < 4), 2: rows(lambda i: i % 5 < 3)})
    comparison = compare(sets, {"warm start": warm, "RL": agreeing})
    change = next(r for r in comparison["rows"] if r["group"] == "all")["change"]
    assert change["verdict"] == "gain"
    assert change["seed_spread"]["per_seed"] == pytest.approx({"0": 0.6, "1": 0.6, "2": 0.4})
    assert next(r for r in comparison["rows"] if r["group"] == "all")["models"]["RL"]["n"] == 3 * 60  # seeds pooled
    markdown = to_markdown(comparison)
    assert "gain; seeds 0, 1, 2: +60.0, +60.0, +40.0 pts (range +40.0..+60.0, sd 11.5)" in markdown
    assert ONE_TRAINING_SEED not in markdown and "every seed's change has its sign" in markdown

    disagreeing = TrainingSeeds({0: rows(lambda i: i % 5 < 4), 1: rows(lambda i: i % 5 < 4), 2: rows(lambda i: False)})
    change = next(r for r in compare(sets, {"warm start": warm, "RL": disagreeing})["rows"] if r["group"] == "all")["change"]
    assert change["low"] > 0  # pooled over seeds the interval alone says "gain"
    assert change["verdict"] == "inconclusive: training seeds disagree (effects -20.0..+60.0 points, 3 seeds)"

    # Both models per seed: seed s of RL against seed s of the warm start.
    warm_seeds = TrainingSeeds({0: warm, 1: rows(lambda i: i % 5 < 2), 2: warm})
    change = next(r for r in compare(sets, {"warm start": warm_seeds, "RL": agreeing})["rows"] if r["group"] == "all")["change"]
    assert change["seed_spread"]["per_seed"] == pytest.approx({"0": 0.6, "1": 0.4, "2": 0.4})


# ---------------------------------------------------------------------------- the study report


def _write_eval(folder: Path, questions: dict[str, list], right: dict[str, Callable[[int], bool]]) -> None:
    write_task_evaluation(folder, questions, right)


HIGH, LOW, MID, HALF, BASE_RATE = (lambda i: i % 5 < 4), (lambda i: i % 5 < 2), (lambda i: i % 5 < 3), (lambda i: i % 2 == 0), \
    (lambda i: i % 5 == 0)  # 80, 40, 60, 50, 20 % of 40 questions; LOW ⊂ MID ⊂ HIGH


def _study(root: Path, seeds) -> Path:
    """Arms grpo and sft, one mixture, the given seeds, two tasks of 40 questions:

    - "agree": grpo 80 %, sft 40 % in every seed; the base model 20 %;
    - "disagree": seeds 0 and 1 as above, seed 2 grpo 40 % and sft 60 %; the base model 50 %, so grpo's change
      from the base model is +30 points in seeds 0 and 1 and −10 in seed 2.
    """
    questions = {"agree": hitom_examples(40, (1,), seed=41, split="test"), "disagree": hitom_examples(40, (2,), seed=42, split="test")}
    cells = []
    for seed in seeds:
        flipped = seed == 2
        plan = {"grpo": {"agree": HIGH, "disagree": LOW if flipped else HIGH},
                "sft": {"agree": LOW, "disagree": MID if flipped else LOW}}
        for arm, right in plan.items():
            cell = f"m__{arm}__s{seed}__tiny"
            cells.append({"id": cell, "mixture": "m", "arm": arm, "seed": seed, "model": "tiny", "status": "done"})
            _write_eval(root / "evals" / cell / "final", questions, right)
    _write_eval(root / "evals" / "base__tiny", questions, {"agree": BASE_RATE, "disagree": HALF})
    tasks = [{"name": name, "held_out": False, "benchmark": name} for name in questions]
    (root / "grid.json").write_text(json.dumps({"cells": cells, "tasks": tasks}))
    return root


def test_study_report_matrix_and_arm_verdicts_carry_the_seed_spread(tmp_path):
    written = write_study_report(_study(tmp_path, (0, 1, 2)))
    data = json.loads(written["json"].read_text())
    matrix = {(e["row"], e["task"]): e for e in data["generalization_matrix"] if e["kind"] == "trained"}
    agree = matrix[("m · grpo", "agree")]
    assert agree["change_per_seed"]["per_seed"] == pytest.approx({"0": 0.6, "1": 0.6, "2": 0.6})
    assert agree["change_verdict"] == "gain"
    disagree = matrix[("m · grpo", "disagree")]
    assert disagree["change_per_seed"]["per_seed"] == pytest.approx({"0": 0.3, "1": 0.3, "2": -0.1})
    assert disagree["change_verdict"] == "inconclusive: training seeds disagree (effects -10.0..+30.0 points, 3 seeds)"

    arms = {c["task"]: c for c in data["arm_comparisons"]}
    assert arms["agree"]["verdict"] == "grpo better" and arms["agree"]["per_seed"]["per_seed"] == pytest.approx(
        {"0": 0.4, "1": 0.4, "2": 0.4})
    planted = arms["disagree"]
    assert planted["per_seed"]["per_seed"] == pytest.approx({"0": 0.4, "1": 0.4, "2": -0.2})
    assert planted["holm_p"] < 0.05 and planted["difference"]["low"] > 0  # pooled, grpo looks better …
    assert planted["verdict"] == "inconclusive: training seeds disagree (effects -20.0..+40.0 points, 3 seeds)"  # … not per seed

    markdown = written["markdown"].read_text()
    assert "seeds 0, 1, 2: +30.0, +30.0, -10.0 pts (range -10.0..+30.0, sd 23.1): inconclusive: training seeds disagree" in markdown
    assert "seeds 0, 1, 2: +40.0, +40.0, +40.0 pts (range +40.0..+40.0, sd 0.0)" in markdown  # the arm table's column
    assert ONE_TRAINING_SEED not in markdown


def test_study_report_with_one_seed_says_so(tmp_path):
    study = _study(tmp_path, (0,))
    [agree] = [c for c in arm_comparisons(read_study(study)) if c.task == "agree"]
    assert agree.verdict == "grpo better (one training seed)"
    written = write_study_report(study)
    data = json.loads(written["json"].read_text())
    entry = next(e for e in data["generalization_matrix"] if e["row"] == "m · grpo" and e["task"] == "agree")
    assert entry["change_verdict"] == "gain (one training seed)" and entry["change_per_seed"]["note"] == ONE_TRAINING_SEED
    markdown = written["markdown"].read_text()
    assert f"Rows with one training seed: {ONE_TRAINING_SEED}" in markdown
    assert f"Comparisons of one training seed: {ONE_TRAINING_SEED}" in markdown
    assert "one training seed: gain (one training seed)" in markdown  # the change cell
