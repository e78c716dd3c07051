"""Settings checked before any work, folders that keep their identity when moved, validation that is not
training, and failed evaluations that do not pass for evaluations (issue 27, item 5).

- ``tomrl study`` used to fail cell by cell *after* the base model's evaluation on a bad seed, a bad key or
  value in ``arm_overrides`` or an unknown recipe, leaving a folder that then refused the corrected config;
  ``tomrl demo`` checked its evaluation sets' settings only after generating the training data. Both now
  check every cell's / stage's full settings first: one error line naming the cell (or mixture, task,
  demo key) and the key, exit 2, no folder.
- A study, demo, evaluation or interventions folder copied or moved elsewhere was refused ("started with
  other settings") because absolute paths were compared as settings, and the same model given by a
  relative and an absolute path was "another model".
- ``data.validation_files`` equal to ``data.train_files`` (or about the same stories) was accepted:
  the split rule's ``training_overlap`` compares training with *test* sets, never with validation.
- An evaluation whose every prompt failed wrote a results.json with 0 answers that ``tomrl eval --table``
  (and ``tomrl report``) counted as an evaluation.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer

from tomrl.cli import main
from tomrl.config import ConfigError, load_config, save_config
from tomrl.schema import write_examples

from tests.reliability.reliability_helpers import REPO_ROOT, one_error

SMOKE_STUDY = REPO_ROOT / "configs" / "study" / "smoke.yaml"
QUICK_DEMO = REPO_ROOT / "configs" / "demo" / "quick.yaml"
SMOKE_TRAIN = REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml"


def _nothing_written(out: Path) -> None:
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    assert not list(out.parent.glob(f".{out.name}*")), list(out.parent.iterdir())  # no lock or temporary file beside it


# --------------------------------------------------------------------------- 1. tomrl study


STUDY_CASES = {
    "negative seed": (["seeds=[0, -1]"], ["seeds: a seed must be between 0 and 4294967295, got -1"]),
    "unknown arm key": (["arm_overrides={grpo: [learning_ratez=1]}"],
                        ["cell o0__grpo__s0: arm_overrides.grpo:", "unknown key 'learning_ratez'", "did you mean 'learning_rate'"]),
    "bad arm value": (["arm_overrides={sft: [learning_rate=-1]}"], ["cell o0__sft__s0: arm_overrides.sft:", "learning_rate must be > 0"]),
    "fidelity twice": (["arms=[grpo, fidelity]", "arm_overrides={fidelity: ['rewards=[fidelity]']}"],
                       ["cell o0__fidelity__s0: arm_overrides.fidelity: the fidelity arm adds the fidelity reward"]),
    "unknown recipe": (["mixtures=[{name: m, recipe: nosuchrecipe}]"], ["mixtures[m]: data.recipe: unknown recipe 'nosuchrecipe'"]),
    "missing train file": (["mixtures=[{name: m, data: {train_files: [missing.jsonl]}}]"],
                           ["mixtures[m]: data.train_files: missing.jsonl: file not found"]),
    "bad mixture generator key": (["mixtures=[{name: m, data: {generate: default, generate_overrides: [nn=3]}}]"],
                                  ["mixtures[m]: data.generate_overrides", "unknown key 'nn'"]),
    "bad task generator key": (["tasks=[{name: t, held_out: true, generate: default, generate_overrides: [nn=3]}]"],
                               ["tasks[t]:", "unknown key 'nn'"]),
    "missing task file": (["tasks=[{name: t, held_out: true, benchmark: missing.jsonl}]"], ["tasks[t]: benchmark file not found: missing.jsonl"]),
    "missing model": (["models=[tiny-qwen2, ./missing-model]"], ["key 'models': ./missing-model: no such folder"]),
}


@pytest.mark.parametrize("case", sorted(STUDY_CASES))
def test_a_bad_study_stops_before_any_work_naming_the_cell_and_key(case, tmp_path, monkeypatch, capsys):
    overrides, expected = STUDY_CASES[case]
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "study"
    assert main(["study", "--config", str(SMOKE_STUDY), f"out_dir={out}", *overrides]) == 2
    line = one_error(capsys.readouterr().err)
    for text in expected:
        assert text in line, line
    _nothing_written(out)  # so the corrected config starts afresh: no study.yaml to refuse it


# --------------------------------------------------------------------------- 2. tomrl demo


DEMO_CASES = {
    "untrained order out of range": ("higher_orders=[7]", ["higher_orders, higher_per_order (eval set neutral-orders3-4):",
                                                           "orders must be a non-empty list of 0..4, got [7]"]),
    "unknown benchmark": ("eval_benchmarks=[hitom600, nosuch]", ["eval_benchmarks: unknown benchmark 'nosuch'"]),
    "bad training key": ("train_overrides=[learning_ratez=1]", ["train_config + train_overrides:", "unknown key 'learning_ratez'"]),
    "bad training data key": ("train_overrides=['data.generate_overrides=[nn=3]']",
                              ["train_config + train_overrides: data.generate_overrides", "unknown key 'nn'"]),
    "missing neutral config": ("neutral_config=missing.yaml", ["neutral_config: config not found: missing.yaml"]),
    "no evaluation tokens": ("eval_max_new_tokens=0", ["eval_max_new_tokens, eval_stop_at_answer: max_new_tokens must be >= 1"]),
}


@pytest.mark.parametrize("case", sorted(DEMO_CASES))
def test_a_bad_demo_stops_before_stage_one(case, tmp_path, monkeypatch, capsys):
    override, expected = DEMO_CASES[case]
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "demo"
    assert main(["demo", "--config", str(QUICK_DEMO), f"out_dir={out}", override]) == 2
    captured = capsys.readouterr()
    line = one_error(captured.err)
    for text in expected:
        assert text in line, line
    assert "1/7" not in captured.out  # no stage started
    _nothing_written(out)


# --------------------------------------------------------------------------- 3. folder identity


def test_a_moved_study_folder_is_the_same_study_and_a_changed_one_is_not(tmp_path, monkeypatch, generated_examples):
    from tomrl.study.config import StudyConfig
    from tomrl.study.runner import base_train_config, check_and_record

    monkeypatch.chdir(REPO_ROOT)  # the smoke study's train_config is relative to the repository
    first = tmp_path / "first"
    first.mkdir()
    write_examples(first / "mine.jsonl", generated_examples[0])  # a task file kept inside the study folder

    def study(folder: Path, *overrides: str) -> StudyConfig:
        return load_config(StudyConfig, SMOKE_STUDY, [f"out_dir={folder}", f"tasks=[{{name: mine, held_out: true, benchmark: {folder / 'mine.jsonl'}}}]",
                                                      *overrides])

    cfg = study(first)
    check_and_record(cfg, base_train_config(cfg), first)
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(str(first), str(moved))
    # out_dir, the task file inside the folder, and the train config by its absolute path: the same study
    cfg = study(moved, f"train_config={SMOKE_TRAIN}")
    check_and_record(cfg, base_train_config(cfg), moved)
    assert load_config(StudyConfig, moved / "study.yaml").out_dir == str(moved)  # recorded where it is now
    cfg = study(moved, "updates=3")
    with pytest.raises(ConfigError, match=r"holds a study started with other settings \(updates\)"):
        check_and_record(cfg, base_train_config(cfg), moved)
    cfg = study(moved, "train_overrides=[max_completion_length=13]")
    with pytest.raises(ConfigError, match=r"other settings \(train_overrides, .*train_config.max_completion_length"):
        check_and_record(cfg, base_train_config(cfg), moved)


def test_a_moved_demo_folder_keeps_its_settings(tmp_path, monkeypatch):
    from tomrl.demo import DEMO_FILE, DemoConfig, check_settings

    monkeypatch.chdir(REPO_ROOT)
    first = tmp_path / "first"
    first.mkdir()
    shutil.copy(REPO_ROOT / "configs" / "generate" / "hitom_neutral_test.yaml", first / "neutral.yaml")
    save_config(DemoConfig(out_dir=str(first), train_config="configs/train/smoke_cpu.yaml", neutral_config=str(first / "neutral.yaml")),
                first / DEMO_FILE)
    moved = tmp_path / "moved"
    shutil.move(str(first), str(moved))
    # the folder, a config inside it, and the training config by its absolute path instead of a relative one
    check_settings(DemoConfig(out_dir=str(moved), train_config=str(SMOKE_TRAIN), neutral_config=str(moved / "neutral.yaml")), moved)
    with pytest.raises(ConfigError, match=r"holds a demo started with other settings \(seed: 0 -> 1\)"):
        check_settings(DemoConfig(out_dir=str(moved), train_config=str(SMOKE_TRAIN), neutral_config=str(moved / "neutral.yaml"), seed=1), moved)
    other = tmp_path / "other.yaml"
    shutil.copy(REPO_ROOT / "configs" / "generate" / "hitom_default.yaml", other)
    with pytest.raises(ConfigError, match=r"other settings \(neutral_config: "):
        check_settings(DemoConfig(out_dir=str(moved), train_config=str(SMOKE_TRAIN), neutral_config=str(other)), moved)


def test_an_eval_folder_resumes_by_relative_or_absolute_path_and_when_moved_with_its_model(
    tmp_path, monkeypatch, tiny_model_dir, generated_examples
):
    from tomrl.evaluation.config import EvalConfig
    from tomrl.evaluation.runner import run_eval

    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_model_dir, tmp_path / "demo" / "model")
    write_examples(tmp_path / "questions.jsonl", generated_examples[0][:2])
    cfg = EvalConfig(model="demo/model", benchmarks=[str(tmp_path / "questions.jsonl")], out="demo/eval", temperature=0.0,
                     max_new_tokens=4, batch_size=2)
    quiet = lambda _: None  # noqa: E731
    assert run_eval(cfg, log=quiet).generated == 2
    again = run_eval(replace(cfg, model=str(tmp_path / "demo" / "model")), log=quiet)  # the same model, absolute
    assert (again.generated, again.reused) == (0, 2)
    shutil.move(str(tmp_path / "demo"), str(tmp_path / "moved"))  # the folder with the model it evaluated
    moved = run_eval(replace(cfg, model=str(tmp_path / "moved" / "model"), out=str(tmp_path / "moved" / "eval")), log=quiet)
    assert (moved.generated, moved.reused) == (0, 2)
    shutil.copytree(tiny_model_dir, tmp_path / "another")
    with pytest.raises(ConfigError, match=r"holds answers generated with other settings \(model: "):
        run_eval(replace(cfg, model=str(tmp_path / "another"), out="moved/eval"), log=quiet)


def test_interventions_know_their_models_by_any_path_and_when_moved(tmp_path, monkeypatch):
    from tomrl.analysis.interventions import ModelSpec, _check_and_record

    monkeypatch.chdir(tmp_path)
    for name in ("rl", "base"):
        (tmp_path / "demo" / "train" / name).mkdir(parents=True)
    settings = {"seed": 0}
    out = Path("demo") / "analysis"
    _check_and_record(out, settings, [ModelSpec("rl", "demo/train/rl")])
    _check_and_record(out, settings, [ModelSpec("rl", str(tmp_path / "demo" / "train" / "rl"))])  # the same, absolute
    shutil.move(str(tmp_path / "demo"), str(tmp_path / "moved"))
    _check_and_record(tmp_path / "moved" / "analysis", settings, [ModelSpec("rl", str(tmp_path / "moved" / "train" / "rl"))])
    with pytest.raises(ConfigError, match=r"label 'rl' was model .* now .*train/base"):
        _check_and_record(tmp_path / "moved" / "analysis", settings, [ModelSpec("rl", str(tmp_path / "moved" / "train" / "base"))])


@pytest.mark.slow
def test_a_copied_study_folder_continues_where_it_is(tmp_path):
    """One cell of the smoke study (about 30 s), copied; the copy's final evaluation summary removed, so the study
    must resume that evaluation in the copy: it does, from the copy's answers, generating none."""
    from tomrl.study.config import StudyConfig
    from tomrl.study.runner import run_study

    mixture = ("mixtures=[{name: o0, data: {generate: default, generate_overrides: [n=8, 'orders=[0]', 'lengths=[1]', agents=2, "
               "'deception=[false]'], validation_overrides: [n=2]}}]")
    keys = ["arms=[grpo]", "updates=1", "eval.checkpoint_every=0", "report=false", mixture]
    first = tmp_path / "first"
    assert run_study(load_config(StudyConfig, SMOKE_STUDY, [f"out_dir={first}", *keys])) == 0
    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    evaluation = copy / "evals" / "o0__grpo__s0" / "final"
    (evaluation / "results.json").unlink()
    answers = (evaluation / "samples.jsonl").read_bytes()
    assert run_study(load_config(StudyConfig, SMOKE_STUDY, [f"out_dir={copy}", *keys])) == 0
    assert (evaluation / "samples.jsonl").read_bytes() == answers
    results = json.loads((evaluation / "results.json").read_text())
    assert results["status"] == "complete" and results["model"] == str(copy / "runs" / "o0__grpo__s0" / "final")


# --------------------------------------------------------------------------- 4. validation is not training


@pytest.mark.parametrize("how", ["same path", "relative path", "symlink", "copy"])
def test_validation_files_that_are_the_training_files_are_refused(how, tmp_path, monkeypatch, generated_examples):
    from tomrl.training.config import DataConfig, TrainConfig
    from tomrl.training.data import check_data, prepare_data

    monkeypatch.chdir(tmp_path)
    train = tmp_path / "train.jsonl"
    write_examples(train, generated_examples[0])
    validation = {"same path": str(train), "relative path": "train.jsonl", "symlink": "link.jsonl", "copy": "copy.jsonl"}[how]
    (tmp_path / "link.jsonl").symlink_to(train)
    shutil.copy(train, tmp_path / "copy.jsonl")
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), data=DataConfig(train_files=[str(train)], validation_files=[validation]))
    message = rf"data.validation_files {validation} is (the same file as|a copy of) data.train_files {train}: validation must be held out"
    with pytest.raises(ConfigError, match=message):
        check_data(cfg)
    with pytest.raises(ConfigError, match=message):
        prepare_data(cfg, cfg.run_dir)
    assert not (tmp_path / "run").exists()


def test_train_refuses_its_training_file_as_validation_before_the_run_folder(tmp_path, generated_examples, capsys):
    train = tmp_path / "train.jsonl"
    write_examples(train, generated_examples[0])
    data = [f"data.train_files=['{train}']", f"data.validation_files=['{train}']", "data.generate=null", "data.generate_overrides=[]",
            "data.validation_overrides=[]"]
    assert main(["train", "--config", str(SMOKE_TRAIN), f"run_dir={tmp_path / 'run'}", *data]) == 2
    line = one_error(capsys.readouterr().err)
    assert f"data.validation_files {train} is the same file as data.train_files {train}" in line, line
    _nothing_written(tmp_path / "run")


def test_validation_questions_about_training_stories_are_refused(tmp_path):
    """Four stories, two questions each: split by question, every validation story is a training story (the
    split rule's training_overlap stayed empty: it compares training with test sets); split by story it is clean."""
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.training.config import DataConfig, TrainConfig
    from tomrl.training.data import prepare_data

    rows = generate(GenerateConfig(benchmark="hitom", n=8, seed=5, lengths=[1], orders=[0, 1], agents=3, stories=4))
    stories = list(dict.fromkeys(row.story for row in rows))
    assert len(stories) == 4
    write_examples(tmp_path / "train.jsonl", rows[::2])
    write_examples(tmp_path / "validation.jsonl", rows[1::2])
    cfg = TrainConfig(data=DataConfig(train_files=[str(tmp_path / "train.jsonl")], validation_files=[str(tmp_path / "validation.jsonl")]))
    with pytest.raises(ConfigError, match=r"validation.jsonl\): 4 of 4 questions are about stories of the training data \(data.train_files\)"):
        prepare_data(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "data" / "complete.json").exists()
    write_examples(tmp_path / "train.jsonl", [row for row in rows if row.story in stories[:3]])
    write_examples(tmp_path / "validation.jsonl", [row for row in rows if row.story == stories[3]])
    train, validation = prepare_data(cfg, tmp_path / "clean")
    assert len(train) == 6 and len(validation) == 2


# --------------------------------------------------------------------------- 5. a failed evaluation is not an evaluation


def _eval_args(questions: Path, out: Path, server: FakeOpenAIServer) -> list[str]:
    return ["eval", "--engine", "openai", "--model", "m", "--benchmark", str(questions), "--out", str(out),
            f"openai.base_url={server.base_url}", "openai.max_retries=0"]


def test_a_failed_evaluation_writes_no_results_and_the_rerun_does(tmp_path, monkeypatch, generated_examples, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    questions, out = tmp_path / "questions.jsonl", tmp_path / "eval"
    write_examples(questions, generated_examples[0][:3])
    with FakeOpenAIServer(fail_first=3, fail_status=400) as server:  # every prompt of the first run fails
        assert main(_eval_args(questions, out, server)) == 1
        err = capsys.readouterr().err
        assert "3 prompts failed" in err and "has no results.json" in err, err
        assert not (out / "results.json").exists() and not (out / "table.md").exists()
        assert main(_eval_args(questions, out, server)) == 0  # the same command once the server answers: the evaluation
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "complete" and results["n_answered"] == 3 and results["failed_prompts"] == 0


def test_a_folder_whose_evaluation_failed_is_taken_over_by_the_corrected_command(tmp_path, monkeypatch, generated_examples, capsys):
    """A folder without one answer holds nothing to mix: the corrected command (here: another server) may use it;
    one with answers still refuses other settings."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    questions, out = tmp_path / "questions.jsonl", tmp_path / "eval"
    write_examples(questions, generated_examples[0][:2])
    with FakeOpenAIServer(fail_first=2, fail_status=400) as wrong:
        assert main(_eval_args(questions, out, wrong)) == 1
    with FakeOpenAIServer() as right:
        assert main(_eval_args(questions, out, right)) == 0
        with FakeOpenAIServer() as other:
            capsys.readouterr()
            assert main(_eval_args(questions, out, other)) == 2
    assert "holds answers generated with other settings (openai_base_url: " in one_error(capsys.readouterr().err)


def _failed_copy(good: Path, failed: Path) -> Path:
    """A failed evaluation as earlier tomrl versions wrote it, beside ``good``: every benchmark with 0 answers."""
    failed.mkdir()
    results = json.loads((good / "results.json").read_text())
    results["model"] = "the-failed-model"
    for entry in results["benchmarks"].values():
        entry.update(n_answered=0, complete=False)
        entry["overall"]["n"] = 0
    (failed / "results.json").write_text(json.dumps(results))
    return failed


def test_table_leaves_out_results_without_answers_and_refuses_only_those(tmp_path, monkeypatch, generated_examples, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    questions, good = tmp_path / "questions.jsonl", tmp_path / "good"
    write_examples(questions, generated_examples[0][:2])
    with FakeOpenAIServer() as server:
        assert main(_eval_args(questions, good, server)) == 0
    failed = _failed_copy(good, tmp_path / "failed")
    capsys.readouterr()
    assert main(["eval", "--table", str(good), str(failed)]) == 0
    printed = capsys.readouterr()
    assert "| m (tomrl, strict)" in printed.out and "the-failed-model (tomrl" not in printed.out, printed.out
    assert f"--table {failed}: its results.json has no answered question" in printed.err, printed.err
    assert main(["eval", "--table", str(failed)]) == 2
    assert "no evaluation with answers to show" in one_error(capsys.readouterr().err)


def test_report_leaves_out_results_without_answers(tmp_path, monkeypatch, generated_examples, capsys):
    """``tomrl report`` counts only evaluations with answers: a 0-answer results.json is a note, never a 0 % row."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    questions, good = tmp_path / "questions.jsonl", tmp_path / "runs" / "good"
    write_examples(questions, generated_examples[0][:2])
    with FakeOpenAIServer() as server:
        assert main(_eval_args(questions, good, server)) == 0
    failed = _failed_copy(good, tmp_path / "runs" / "failed")
    capsys.readouterr()
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr()
    assert "read 0 training run(s) and 1 evaluation(s)" in printed.err and "has no answered question" in printed.err, printed.err
    report = (tmp_path / "report" / "report.md").read_text()
    assert "the-failed-model" not in report and "m" in report
    assert main(["report", str(failed), "--out", str(tmp_path / "report2")]) == 2
    assert "no runs to report" in one_error(capsys.readouterr().err)
