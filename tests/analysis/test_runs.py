"""Reading run folders: families, training mixtures, which model a run produced, bad input."""

from __future__ import annotations

import json

import pytest

from tomrl.analysis.runs import TrainingRun, accuracy_from, load_runs, read_evaluation, task_family
from tomrl.io import BadInputError


@pytest.mark.parametrize("name, family", [
    ("hitom600", "hitom"), ("hitom4", "hitom"), ("tomrl-hitom-order4", "hitom"), ("hi_tom", "hitom"),
    ("tomrl-paper-hitom600", "hitom"), ("tomi", "tomi"), ("tomrl-tomi", "tomi"), ("exploretom", "exploretom"),
    ("exploretom-infilled", "exploretom"), ("explore_tom", "exploretom"), ("opentom", "opentom"), ("gsm8k", "gsm8k"),
])
def test_task_family(name, family):
    assert task_family(name) == family


def test_in_distribution_follows_families_and_orders(tmp_path):
    run = TrainingRun(tmp_path / "rl", {}, [], mixture={"hitom": {0, 1, 2, 3}, "exploretom": {None, 1, 2}})
    assert run.in_distribution("hitom600") is True
    assert run.in_distribution("hitom600", 3) is True
    assert run.in_distribution("hitom600", 4) is False
    assert run.in_distribution("tomrl-hitom-order4", 4) is False
    assert run.in_distribution("exploretom-infilled", 2) is True
    assert run.in_distribution("tomi") is False
    assert run.in_distribution("validation", 4) is False and run.in_distribution("validation", 1) is True
    assert TrainingRun(tmp_path, {}, []).in_distribution("tomi") is None
    assert run.describe_mixture() == "exploretom + hitom orders 0-3"


def test_output_name_recognises_the_runs_models(tmp_path, monkeypatch):
    run = TrainingRun(tmp_path / "runs" / "rl-hitom", {}, [])
    assert run.output_name(str(tmp_path / "runs" / "rl-hitom" / "final")) == "final"
    assert run.output_name(str(tmp_path / "runs" / "rl-hitom" / "checkpoints" / "checkpoint-50")) == "checkpoints/checkpoint-50"
    monkeypatch.chdir(tmp_path / "..")  # a relative path written from another working directory
    assert run.output_name("elsewhere/rl-hitom/best") == "best"
    assert run.output_name("smollm2-135m") is None
    assert run.output_name("other-run/final") is None


def test_accuracy_from_keeps_a_written_interval_and_checks_fields():
    bootstrap = accuracy_from({"n": 10, "k": 5, "value": 0.5, "low": 0.2, "high": 0.8, "method": "bootstrap-2000"}, "x")
    assert (bootstrap.low, bootstrap.high, bootstrap.method) == (0.2, 0.8, "bootstrap-2000")
    wilson = accuracy_from({"n": 10, "k": 5}, "x")
    assert wilson.low == pytest.approx(0.2366, abs=1e-4)
    with pytest.raises(BadInputError, match="where: field 'k'"):
        accuracy_from({"n": 3, "k": 4}, "where")
    with pytest.raises(BadInputError, match="field 'n'"):
        accuracy_from({"n": -1, "k": 0}, "where")


def test_bad_results_json_names_file_and_field(tmp_path):
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "results.json").write_text("{not json")
    with pytest.raises(BadInputError, match="results.json: invalid JSON"):
        read_evaluation(folder)
    (folder / "results.json").write_text(json.dumps({"model": "m", "benchmarks": {"tomi": {"overall": {"n": 2}}}}))
    with pytest.raises(BadInputError, match=r"benchmarks.tomi.overall: field 'strict'"):
        read_evaluation(folder)


def test_validation_answers_must_match_the_validation_data(tmp_path):
    from analysis_run_folders import write_training_run

    run = write_training_run(tmp_path / "rl", steps=range(0, 20, 2), validation_steps=(0, 18))
    with open(run / "validation_samples.jsonl", "a") as handle:
        handle.write(json.dumps({"step": 18, "id": "no-such-question", "correct": True, "completion": ""}) + "\n")
    with pytest.raises(BadInputError, match=r"validation_samples.jsonl:\d+: field 'id': 'no-such-question'"):
        load_runs([tmp_path])


def test_torn_last_line_of_a_running_log_is_skipped(tmp_path):
    from analysis_run_folders import write_training_run

    run = write_training_run(tmp_path / "rl", steps=range(0, 20, 2), validation_steps=(0, 18))
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 20, "rew')  # a run still writing, or killed mid-line
    loaded = load_runs([tmp_path]).training[0]
    assert [row["step"] for row in loaded.metrics][-1] == 18


def test_file_benchmark_questions_are_found_above_the_evaluation_and_checked_by_hash(tmp_path):
    import hashlib

    from analysis_run_folders import hitom_examples

    from tomrl.analysis.runs import benchmark_examples
    from tomrl.schema import write_examples

    data = tmp_path / "project" / "sets" / "dev.jsonl"
    write_examples(data, hitom_examples(4, (1,), seed=3, split="test"))
    version = hashlib.sha256(data.read_bytes()).hexdigest()[:12]
    folder = tmp_path / "project" / "runs" / "eval"
    folder.mkdir(parents=True)
    benchmark = {"loader": "jsonl-file", "loader_options": {"path": "sets/dev.jsonl"}, "version": version,
                 "overall": {"strict": {"accuracy": {"n": 0, "k": 0}}}}
    (folder / "results.json").write_text(json.dumps({"model": "m", "benchmarks": {"file-dev": benchmark}}))
    examples, note = benchmark_examples(read_evaluation(folder), "file-dev")  # relative to tmp_path/project
    assert len(examples) == 4 and note == ""
    benchmark["version"] = "000000000000"
    (folder / "results.json").write_text(json.dumps({"model": "m", "benchmarks": {"file-dev": benchmark}}))
    examples, note = benchmark_examples(read_evaluation(folder), "file-dev")
    assert examples == {} and "has changed since the evaluation" in note
    benchmark["loader_options"]["path"] = "sets/gone.jsonl"
    (folder / "results.json").write_text(json.dumps({"model": "m", "benchmarks": {"file-dev": benchmark}}))
    assert "was not found" in benchmark_examples(read_evaluation(folder), "file-dev")[1]
