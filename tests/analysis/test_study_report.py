"""The study report on a study folder written to the folder contract of `tomrl study`, with planted effects.

The folder holds one mixture (Hi-ToM orders 0-1) × two arms × two seeds of training-run folders
in tomrl train's format (analysis_run_folders.write_training_run) and real evaluation folders
(samples.jsonl rows scored by the shared answer checker, results.json summarised by the
evaluator's own function), on two tasks:

- "hitom-train" (orders 0-1, a JSONL file): arm grpo answers 80 % right, arm sft 40 %, same ids
  (the planted difference);
- "hitom-heldout" (orders 2-3, declared held out, a recipe split): both arms 60 %, on different
  questions (discordant pairs balanced: the null difference);
- the base model answers 20 % of each; every run's checkpoint step-10 answers 50 %.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tomrl.analysis.study_report import POOLED_HELD_OUT, arm_comparisons, read_study, write_study_report
from tomrl.cli import main

MODEL = "tiny"
MIXTURE = "hitom-o01"
SEEDS = (0, 1)
TASK_SIZE = 40


def _share(pattern: str):
    """Which question indices are right: planted shares over a cycle of 5 questions."""
    return {
        "base": lambda i: i % 5 == 0,  # 20 %
        "high": lambda i: i % 5 < 4,  # 80 %
        "low": lambda i: i % 5 < 2,  # 40 %, nested in "high": every discordant pair favours high
        "null_a": lambda i: i % 5 in (0, 1, 2),  # 60 %
        "null_b": lambda i: i % 5 in (1, 2, 3),  # 60 %, 1 in 5 only-a and 1 in 5 only-b
        "half": lambda i: i % 2 == 0,  # 50 %
    }[pattern]


def _write_eval(folder: Path, tasks: dict[str, list], patterns: dict[str, str]) -> None:
    from analysis_run_folders import write_task_evaluation

    write_task_evaluation(folder, tasks, {task: _share(patterns[task]) for task in tasks}, keep_source=True)


def _write_metrics(path: Path, arm: str, seed: int) -> None:
    """Per-step rows with tomrl train's keys: GRPO's reward rises and its responses shorten (by 10 tokens a
    step); the supervised arm logs no reward and keeps its length."""
    with open(path, "w") as handle:
        for step in range(0, 20, 2):
            row = {"step": step, "response_length/mean": 300.0 - (10 * step if arm == "grpo" else 0) + seed,
                   "answer/accuracy": 0.5, "loss": 0.1}
            if arm == "grpo":
                row["reward"] = row["rewards/paper/mean"] = -1.0 + step / 10 + 0.01 * seed
            handle.write(json.dumps(row) + "\n")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    from analysis_run_folders import hitom_examples, write_training_run

    from tomrl.schema import write_examples

    root = tmp_path_factory.mktemp("study")
    trained = hitom_examples(TASK_SIZE, (0, 1), seed=21, split="test")  # the mixture trains on orders 0-1
    held_out = hitom_examples(TASK_SIZE, (2, 3), seed=22, split="test")
    write_examples(root / "tasks" / "hitom_train.jsonl", trained)
    # `tomrl eval --benchmark FILE.jsonl` names a file's answers file-<stem>. The held-out task's file is gone
    # (moved after the evaluation): its answers still count, its no-ToM rule cannot be computed.
    questions = {"file-hitom_train": trained, "file-hitom_heldout": held_out}
    tasks = [{"name": "hitom-train", "held_out": False, "benchmark": "tasks/hitom_train.jsonl"},
             {"name": "hitom-heldout", "held_out": True, "benchmark": "tasks/hitom_heldout.jsonl"}]
    plan = {"grpo": {"file-hitom_train": "high", "file-hitom_heldout": "null_a"},
            "sft": {"file-hitom_train": "low", "file-hitom_heldout": "null_b"}}
    # One run folder as `tomrl train` writes it (config, data/train.jsonl on orders 0-1, validation, metrics);
    # the cells copy it and get their own metrics.jsonl (building every run from scratch is slow).
    template = write_training_run(root / "template", train_orders=(0, 1), validation_orders=(0, 1),
                                  validation_per_order=4, steps=range(0, 20, 2), validation_steps=(0, 18))
    cells = []
    for arm, patterns in plan.items():
        for seed in SEEDS:
            cell_id = f"{MIXTURE}__{arm}__s{seed}__{MODEL}"
            cells.append({"id": cell_id, "mixture": MIXTURE, "arm": arm, "seed": seed, "model": MODEL, "status": "done"})
            shutil.copytree(template, root / "runs" / cell_id)
            _write_metrics(root / "runs" / cell_id / "metrics.jsonl", arm, seed)
            _write_eval(root / "evals" / cell_id / "step-10", questions, dict.fromkeys(questions, "half"))
            _write_eval(root / "evals" / cell_id / "final", questions, patterns)
    # A failed cell whose evaluation is there must not enter the numbers.
    failed = f"{MIXTURE}__sft__s2__{MODEL}"
    cells.append({"id": failed, "mixture": MIXTURE, "arm": "sft", "seed": 2, "model": MODEL, "status": "failed"})
    _write_eval(root / "evals" / failed / "final", questions, dict.fromkeys(questions, "high"))
    _write_eval(root / "evals" / f"base__{MODEL}", questions, dict.fromkeys(questions, "base"))
    (root / "grid.json").write_text(json.dumps({"cells": cells, "tasks": tasks}))
    (root / "study.yaml").write_text("name: planted-study\n")
    shutil.rmtree(template)
    return root


@pytest.fixture(scope="module")
def report(study):
    """The report, written once by the entry point into its default folder, STUDY_DIR/report."""
    written = write_study_report(study)
    return written, study / "report"


def _entry(data, row, task):
    return next(e for e in data["generalization_matrix"] if e["row"] == row and e.get("task") == task)


def test_matrix_values(report):
    written, _ = report
    data = json.loads(written["json"].read_text())
    assert data["done"] == 4 and data["cells"] == 5
    base = _entry(data, f"base · {MODEL}", "hitom-train")
    assert (base["accuracy"]["k"], base["accuracy"]["n"]) == (8, 40)
    grpo = _entry(data, f"{MIXTURE} · grpo", "hitom-train")
    assert (grpo["accuracy"]["k"], grpo["accuracy"]["n"]) == (64, 80)  # 2 seeds × 40, 80 % (the failed seed 2 left out)
    assert grpo["in_distribution_share"] == 1.0  # orders 0-1: the runs' data/train.jsonl
    assert _entry(data, f"{MIXTURE} · grpo", "hitom-heldout")["in_distribution_share"] == 0.0  # orders 2-3
    sft = _entry(data, f"{MIXTURE} · sft", "hitom-train")
    assert (sft["accuracy"]["k"], sft["accuracy"]["n"]) == (32, 80)
    change = grpo["change_from_base"]
    assert change["pairs"] == 80 and change["clusters"] == 40
    assert change["difference"]["value"] == pytest.approx(0.6)  # 80 % − 20 %
    assert change["difference"]["low"] > 0.4


def test_paired_test_finds_the_planted_difference_and_calls_the_null_inconclusive(report):
    written, _ = report
    comparisons = {c["task"]: c for c in json.loads(written["json"].read_text())["arm_comparisons"]}
    assert sorted(comparisons) == ["hitom-heldout", "hitom-train"]  # 1 pair of arms × 2 tasks: the Holm family
    for c in comparisons.values():
        assert c["pairs"] == 80 and c["clusters"] == 40 and c["seeds"] == [0, 1]
        assert (c["arm_a"], c["arm_b"]) == ("grpo", "sft")
    planted, null = comparisons["hitom-train"], comparisons["hitom-heldout"]
    assert (planted["only_a"], planted["only_b"]) == (32, 0)
    assert planted["p_value"] == pytest.approx(2 / 2**32)
    assert planted["holm_p"] == pytest.approx(2 * 2 / 2**32)  # the smaller of two p-values, times 2
    assert planted["verdict"] == "grpo better" and planted["difference"]["value"] == pytest.approx(0.4)
    assert (null["only_a"], null["only_b"]) == (16, 16)
    assert null["holm_p"] == pytest.approx(1.0)
    assert null["verdict"] == "inconclusive (n=80 pairs)"


def test_checkpoints_orders_seeds_and_rules(report):
    written, _ = report
    data = json.loads(written["json"].read_text())
    steps = {(c["cell"], c["checkpoint"]): c for c in data["checkpoints"]}
    final = steps[(f"{MIXTURE}__grpo__s0__{MODEL}", "final")]
    assert final["step"] == 18  # the run's last logged step
    assert (final["in_distribution"]["k"], final["in_distribution"]["n"]) == (32, 40)
    assert (final["held_out"]["k"], final["held_out"]["n"]) == (24, 40)
    assert steps[(f"{MIXTURE}__grpo__s0__{MODEL}", "step-10")]["in_distribution"]["k"] == 20
    start = steps[(f"{MIXTURE}__grpo__s0__{MODEL}", "base model")]  # the curve starts at the base model
    assert start["step"] == 0 and (start["in_distribution"]["k"], start["held_out"]["k"]) == (8, 8)
    divergence = {d["subject"]: d for d in data["divergence"]}[f"{MIXTURE}__grpo__s0__{MODEL}"]
    assert (divergence["data"]["first_step"], divergence["data"]["last_step"]) == (0, 18)
    [orders] = data["orders"]  # both tasks are Hi-ToM: one difficulty curve over orders 0-3
    assert orders["family"] == "hitom" and orders["orders"] == [0, 1, 2, 3]
    grpo = orders["models"][f"{MIXTURE} · grpo"]
    assert sum(a["n"] for a in grpo.values()) == 2 * 2 * TASK_SIZE  # 2 seeds × 2 tasks × 40 questions
    assert sum(a["k"] for a in grpo.values()) == 2 * (32 + 24)  # 80 % of one task, 60 % of the other
    assert sorted(orders["rule"]) == ["0", "1"]  # read from the train task's JSONL file
    assert sum(r["accuracy"]["n"] for r in orders["rule"].values()) == TASK_SIZE
    assert "hitom-heldout: not computed, its file tasks/hitom_heldout.jsonl is not found" in orders["rule_source"]
    spread = next(s for s in data["seed_spread"] if s["group"] == f"{MIXTURE} · sft" and s["task"] == "hitom-heldout")
    assert spread["mean"] == pytest.approx(0.6) and spread["min"] == spread["max"] == pytest.approx(0.6)
    curves = {(c["group"], c["metric"]): c for c in data["training_curves"]}
    length = curves[(f"{MIXTURE} · grpo", "response_length/mean")]
    assert length["mean"][0] == pytest.approx(300.5) and length["mean"][-1] == pytest.approx(300.5 - 180)  # seeds 0, 1
    assert curves[(f"{MIXTURE} · grpo", "rewards/paper/mean")]["mean"][0] == pytest.approx(-0.995)  # the answer reward, by name
    assert not any(group == f"{MIXTURE} · sft" and "reward" in metric for group, metric in curves)  # supervised: none


def test_every_report_file_is_written(report):
    written, out = report
    for key in ("html", "markdown", "json"):
        assert written[key].is_file() and written[key].stat().st_size > 0
    assert written["html"] == out / "report.html"
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == sorted(key.removeprefix("png:") for key in written if key.startswith("png:"))
    assert {"study-generalization-matrix.png", f"study-id-vs-held-out-1-{MIXTURE}.png",
            f"study-training-curves-1-{MIXTURE}.png", "study-orders-1-hitom.png"} == set(pngs)
    for png in pngs:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown, html = written["markdown"].read_text(), written["html"].read_text()
    for text in ("hitom-heldout (held out)", "inconclusive (n=80 pairs)", "grpo better", "Holm p",
                 "not computed, its file", "failed", "not logged"):
        assert text in markdown, text
        assert text in html, text
    assert html.count("data:image/png;base64,") == len(pngs)


def test_cli_writes_a_study_report(tmp_path):
    """`tomrl report --study` on a study whose cells have not run yet: a report that says so, in STUDY_DIR/report."""
    cells = [{"id": "m__grpo__s0", "mixture": "m", "arm": "grpo", "seed": 0, "model": None, "status": "pending"}]
    (tmp_path / "grid.json").write_text(json.dumps({"cells": cells, "tasks": [
        {"name": "tomi", "held_out": True, "benchmark": "tomi"}]}))
    assert main(["report", "--study", str(tmp_path)]) == 0
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "1 pending" in markdown and "No two arms have final models" in markdown
    assert (tmp_path / "report" / "report.html").is_file() and (tmp_path / "report" / "study_report.json").is_file()
    assert main(["report", "--study", str(tmp_path), str(tmp_path)]) == 2  # RUN_DIRs and --study: refused
    assert main(["report"]) == 2  # nothing to report on


def test_a_recipe_task_becomes_one_column_per_recipe_task(tmp_path):
    """Paper B's test split as one study task: its 12 tasks are the matrix's columns, as tomrl eval names them."""
    (tmp_path / "grid.json").write_text(json.dumps({"cells": [], "tasks": [
        {"name": "paper-b", "held_out": False, "benchmark": "recipe:paper-b-all:test"}]}))
    study = read_study(tmp_path)
    names = [task.name for task in study.tasks]
    assert len(names) == 12 and "paper-b-all:hitom-order4" in names
    held_out = {task.name: task.held_out for task in study.tasks}
    assert held_out["paper-b-all:opentom-attitude"] and not held_out["paper-b-all:hitom-order1"]  # as the recipe declares


def test_not_a_study_folder_is_named(tmp_path):
    from tomrl.io import BadInputError

    with pytest.raises(BadInputError, match="grid.json"):
        read_study(tmp_path)


def test_held_out_tasks_are_also_compared_pooled(tmp_path):
    """Two held-out tasks of 10 questions, grpo right on 8, sft on 4 (nested): 4 discordant pairs per task
    (exact p = 2/16 each) are inconclusive alone, 8 pooled (p = 2/256) are not, after Holm over the 3 tests."""
    from analysis_run_folders import hitom_examples

    questions = {"a": hitom_examples(10, (2,), seed=31, split="test"), "b": hitom_examples(10, (3,), seed=32, split="test")}
    cells = []
    for arm, pattern in (("grpo", "high"), ("sft", "low")):
        cells.append({"id": f"m__{arm}__s0", "mixture": "m", "arm": arm, "seed": 0, "model": "tiny", "status": "done"})
        _write_eval(tmp_path / "evals" / f"m__{arm}__s0" / "final", questions, dict.fromkeys(questions, pattern))
    tasks = [{"name": name, "held_out": True, "benchmark": name} for name in questions]
    (tmp_path / "grid.json").write_text(json.dumps({"cells": cells, "tasks": tasks}))
    comparisons = {c.task: c for c in arm_comparisons(read_study(tmp_path))}
    assert sorted(comparisons) == sorted([POOLED_HELD_OUT, "a", "b"])
    pooled = comparisons[POOLED_HELD_OUT]
    assert (pooled.result.pairs, pooled.result.only_a, pooled.result.only_b) == (20, 8, 0)
    assert pooled.result.p_value == pytest.approx(2 / 256) and pooled.holm_p == pytest.approx(3 * 2 / 256)
    assert pooled.verdict == "grpo better (one training seed)"  # one seed per arm: the spread of training is not measured
    for task in ("a", "b"):
        assert comparisons[task].result.p_value == pytest.approx(2 / 16)
        assert comparisons[task].holm_p == pytest.approx(2 * 2 / 16)
        assert comparisons[task].verdict == "inconclusive (n=10 pairs)"


def _planted_copy(study, tmp_path, planted: dict, step_n: tuple[int, int], entry) -> Path:
    """A copy of ``study`` (its report left out) whose held-out results.json files get ``entry(k, n)``:
    (k, n) from ``planted`` by the cell's name, ``step_n`` for the step-N checkpoints' evaluations."""
    copy = tmp_path / "study"
    shutil.copytree(study, copy, ignore=shutil.ignore_patterns("report"))
    for results in copy.glob("evals/**/results.json"):
        place = str(results.relative_to(copy))
        k, n = step_n if "step-10" in place else next(v for key, v in planted.items() if key in place)
        data = json.loads(results.read_text())
        data["benchmarks"]["file-hitom_heldout"].update(entry(k, n))
        results.write_text(json.dumps(data))
    return copy


def test_pair_accuracy_is_pooled_over_seeds_beside_the_base_model(study, report, tmp_path):
    """A pairs task's pair accuracy (both members right) comes from each final evaluation's results.json, pooled
    over seeds; the failed cell and step-N checkpoints stay out; a study without pairs has no such section."""
    assert "Counterfactual pairs" not in report[1].joinpath("report.md").read_text()
    planted = {"base__": (0, 6), "__s0__": (2, 6), "__s1__": (3, 6), "__s2__": (6, 6)}  # s2: the failed cell

    def pairs_entry(k: int, n: int) -> dict:
        return {"pairs": {"kind": "counterfactual", "n_pairs": n, "strict": {"pair_accuracy": {"k": k, "n": n}}}}

    written = write_study_report(_planted_copy(study, tmp_path, planted, (6, 6), pairs_entry))
    pairs = json.loads(written["json"].read_text())["pair_accuracy"]
    assert pairs[f"base · {MODEL}"] == {"hitom-heldout": {"k": 0, "n": 6}}
    for arm in ("grpo", "sft"):
        assert pairs[f"{MIXTURE} · {arm}"] == {"hitom-heldout": {"k": 5, "n": 12}}  # seeds 0 and 1: 2 + 3 of 6 + 6
    markdown = written["markdown"].read_text()
    assert "## Counterfactual pairs: both members right" in markdown and "41.7 % [" in markdown


def test_nesting_required_accuracy_is_pooled_over_seeds_beside_the_base_model(study, report, tmp_path):
    """The questions that need nesting (results.json's by_nesting, from tomrl eval) get their own table, pooled
    over the seeds of each mixture · arm; the failed cell and step-N checkpoints stay out; without them, no table."""
    assert "Questions that need nesting" not in report[1].joinpath("report.md").read_text()
    planted = {"base__": (0, 4), "__s0__": (1, 4), "__s1__": (3, 4), "__s2__": (4, 4)}  # s2: the failed cell

    def nesting_entry(k: int, n: int) -> dict:
        return {"by_nesting": {"nesting required": {"n": n, "strict": {"accuracy": {"k": k, "n": n}}},
                               "partially answerable": {"n": 2, "strict": {"accuracy": {"k": 2, "n": 2}}}}}

    written = write_study_report(_planted_copy(study, tmp_path, planted, (4, 4), nesting_entry))
    nesting = json.loads(written["json"].read_text())["nesting"]
    assert nesting[f"base · {MODEL}"]["hitom-heldout · nesting required"] == {"k": 0, "n": 4}
    for arm in ("grpo", "sft"):
        assert nesting[f"{MIXTURE} · {arm}"]["hitom-heldout · nesting required"] == {"k": 4, "n": 8}  # seeds 0 and 1
        assert nesting[f"{MIXTURE} · {arm}"]["hitom-heldout · partially answerable"] == {"k": 4, "n": 4}
    markdown = written["markdown"].read_text()
    assert "## Questions that need nesting" in markdown and "50.0 % [" in markdown
