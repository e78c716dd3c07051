"""configs/study/smoke.yaml on tiny-qwen2 (real TRL steps, real SFT, real evaluations).

A one-cell study runs to the end and, started again, redoes nothing; a failed cell is recorded and the
grid goes on; the whole smoke grid is killed mid-grid with SIGKILL, continued, started once more, and
the study folder it leaves is checked against the contract the report reads (about a minute on a quiet
2-core CPU, several on a busy one). Slow (``-m slow``): the shared warm start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tomrl.config import load_config
from tomrl.study.config import StudyConfig
from tomrl.study.runner import run_study
from tomrl.training.config import TrainConfig

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "study" / "smoke.yaml"
KILL_IN = "o1__grpo__s0"  # the third cell: killed once its RL run has saved a checkpoint
TIMEOUT_S = 900


def file_times(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


def read_grid(out: Path) -> dict:
    return json.loads((out / "grid.json").read_text())


def test_a_finished_cell_is_not_redone(tmp_path):
    cfg = load_config(StudyConfig, SMOKE, [f"out_dir={tmp_path / 'one'}", "arms=[grpo]", "updates=1", "eval.checkpoint_every=0", "report=false"])
    cfg = replace(cfg, mixtures=cfg.mixtures[:1])
    assert run_study(cfg) == 0
    out = Path(cfg.out_dir)
    grid = read_grid(out)
    assert [(c["id"], c["status"]) for c in grid["cells"]] == [("o0__grpo__s0", "done")]
    assert (out / "runs" / "o0__grpo__s0" / "final").is_dir()
    # The run saved a resume checkpoint every update (save_every: 1); finished, the study deleted it (keep_checkpoints: false).
    assert json.loads((out / "runs" / "o0__grpo__s0" / "config.yaml").read_text().split("save_every: ")[1].split()[0]) == 1
    assert not (out / "runs" / "o0__grpo__s0" / "checkpoints").exists()
    assert json.loads((out / "evals" / "o0__grpo__s0" / "final" / "results.json").read_text())["benchmarks"]["file-order2"]["complete"]
    times = file_times(out / "runs") | {f"evals/{k}": v for k, v in file_times(out / "evals").items()}
    assert run_study(cfg) == 0
    assert file_times(out / "runs") | {f"evals/{k}": v for k, v in file_times(out / "evals").items()} == times


def test_a_failed_cell_is_recorded_and_the_grid_goes_on(tmp_path):
    """rft on a random model finds no correct sample: its cell fails with that reason; the answer_only cell
    (RL with the answer-only prefill) still trains and is evaluated under its own prompt."""
    cfg = load_config(StudyConfig, SMOKE, [f"out_dir={tmp_path / 'two'}", "arms=[rft, answer_only]", "updates=1",
                                           "eval.checkpoint_every=0", "report=false"])
    cfg = replace(cfg, mixtures=cfg.mixtures[:1])
    assert run_study(cfg) == 1
    out = Path(cfg.out_dir)
    cells = {c["id"]: c for c in read_grid(out)["cells"]}
    assert cells["o0__rft__s0"]["status"] == "failed" and "no sampled completion was correct" in cells["o0__rft__s0"]["error"]
    assert (out / "runs" / "o0__rft__s0" / "study_error.txt").is_file()
    samples = [json.loads(line) for line in (out / "runs" / "o0__rft__s0" / "rft" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * 2 and not any(s["correct"] for s in samples)  # 2 stories x rollouts_per_prompt, all checked
    assert cells["o0__answer_only__s0"]["status"] == "done"
    arm = json.loads((out / "runs" / "o0__answer_only__s0" / "study_arm.json").read_text())
    assert arm["prefill"] == "<think> </think><answer>" and arm["updates"] == 1
    rows = [json.loads(line) for line in (out / "evals" / "o0__answer_only__s0" / "final" / "samples.jsonl").read_text().splitlines()]
    assert rows and all(row["prefill"] == "<think> </think><answer>" for row in rows)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The smoke study killed inside its third cell, the times of what was finished before the kill,
    the study continued to the end in-process, and the times after that."""
    out = tmp_path_factory.mktemp("study") / "smoke"
    log = out.parent / "first.log"
    with open(log, "w") as handle:
        process = subprocess.Popen([sys.executable, "-m", "tomrl", "study", "--config", str(SMOKE), f"out_dir={out}"],
                                   cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    checkpoint = out / "runs" / KILL_IN / "checkpoints"
    started = time.time()
    try:
        while not (checkpoint.is_dir() and any(p.name.startswith("checkpoint-") for p in checkpoint.iterdir())):
            assert process.poll() is None, f"the study ended before the kill: {log.read_text()[-3000:]}"
            assert time.time() - started < TIMEOUT_S, "no checkpoint in time"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    before = read_grid(out)
    finished_before = {c["id"] for c in before["cells"] if c["status"] == "done"}
    times_before = {name: file_times(out / "runs" / name) | {f"evals/{k}": v for k, v in file_times(out / "evals" / name).items()}
                    for name in finished_before}
    base_before = file_times(out / "evals" / "base__tiny-qwen2")
    cfg = load_config(StudyConfig, out / "study.yaml")  # the resolved config continues the study
    rc = run_study(cfg)
    after_resume = {"runs": file_times(out / "runs"), "evals": file_times(out / "evals")}
    rc_again = run_study(cfg)
    return {"out": out, "cfg": cfg, "before": before, "finished_before": finished_before, "times_before": times_before,
            "base_before": base_before, "rc": rc, "rc_again": rc_again, "after_resume": after_resume}


def test_killed_study_continues_to_the_end(study):
    out = study["out"]
    assert study["finished_before"] == {"o0__grpo__s0", "o0__sft__s0"}
    assert next(c for c in study["before"]["cells"] if c["id"] == KILL_IN)["status"] == "training"
    assert study["rc"] == 0
    grid = read_grid(out)
    assert [c["status"] for c in grid["cells"]] == ["done"] * 4
    # The killed RL run continued from its checkpoint instead of starting again.
    summary = json.loads((out / "runs" / KILL_IN / "summary.json").read_text())
    assert summary["resumed_from"] is not None and summary["steps"] == 2


def test_finished_work_is_never_redone(study):
    out = study["out"]
    for name, times in study["times_before"].items():  # finished before the kill: untouched by the resume
        now = file_times(out / "runs" / name) | {f"evals/{k}": v for k, v in file_times(out / "evals" / name).items()}
        assert now == times, name
    assert file_times(out / "evals" / "base__tiny-qwen2") == study["base_before"]
    # Started once more on a finished study: nothing is trained or evaluated again.
    assert study["rc_again"] == 0
    assert file_times(out / "runs") == study["after_resume"]["runs"]
    assert file_times(out / "evals") == study["after_resume"]["evals"]


def test_study_folder_follows_the_contract(study):
    out, cfg = study["out"], study["cfg"]
    assert load_config(StudyConfig, out / "study.yaml") == cfg
    grid = read_grid(out)
    assert [c["id"] for c in grid["cells"]] == ["o0__grpo__s0", "o0__sft__s0", "o1__grpo__s0", "o1__sft__s0"]
    assert {(c["mixture"], c["arm"], c["seed"], c["model"]) for c in grid["cells"]} == {
        (m, a, 0, "tiny-qwen2") for m in ("o0", "o1") for a in ("grpo", "sft")}
    assert [(t["name"], t["held_out"]) for t in grid["tasks"]] == [("order0", False), ("order2", True)]
    for task in grid["tasks"]:
        assert Path(task["benchmark"]).is_file()
    for cell in grid["cells"]:
        run = out / "runs" / cell["id"]
        assert (run / "final" / "model.safetensors").is_file() and (run / "summary.json").is_file()
        metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in metrics] == [1, 2]  # matched budget: 2 optimizer updates in every arm
        arm = json.loads((run / "study_arm.json").read_text())
        assert arm["arm"] == cell["arm"] and arm["updates"] == cfg.updates and arm["stories_per_update"] == 2
        # The step-1 snapshot was evaluated (below), then its weights deleted (keep_snapshots: false); final/ stays.
        assert not (run / "snapshots").exists() and not (run / "checkpoints").exists()
        for checkpoint in ("step-1", "final"):
            evals = out / "evals" / cell["id"] / checkpoint
            results = json.loads((evals / "results.json").read_text())
            assert set(results["benchmarks"]) == {"file-order0", "file-order2"}
            assert all(entry["complete"] for entry in results["benchmarks"].values())
    rows = [json.loads(line) for line in (out / "evals" / "base__tiny-qwen2" / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    for row in rows:
        assert {"benchmark", "id", "order", "question_type", "correct", "tokens"} <= set(row)
    assert (out / "evals" / "o0__sft__s0" / "final" / "run.json").is_file()
    try:
        import tomrl.analysis.study_report  # noqa: F401
    except ImportError:
        pytest.skip("tomrl.analysis.study_report is not there yet")
    assert (out / "report").is_dir() and any((out / "report").iterdir())


@pytest.mark.slow
def test_arms_begin_from_one_shared_warm_start(tmp_path):
    """With a warm start in the training config, it is trained once per mixture and seed, and every arm
    (RL and supervised) starts from it: their runs name it as their model, and none warm-starts again."""
    cfg = load_config(StudyConfig, SMOKE, [f"out_dir={tmp_path / 'warm'}", "updates=1", "eval.checkpoint_every=0", "report=false"])
    warm = ["warm_start.enabled=true", "warm_start.max_steps=1", "warm_start.batch_size=2"]
    cfg = replace(cfg, mixtures=cfg.mixtures[:1], train_overrides=[*cfg.train_overrides, *warm])
    assert run_study(cfg) == 0
    out = Path(cfg.out_dir)
    start = out / "starts" / "o0__s0" / "warm_start"
    assert json.loads((start / "done.json").read_text())["steps"] == 1
    for cell in ("o0__grpo__s0", "o0__sft__s0"):
        run = out / "runs" / cell
        assert load_config(TrainConfig, run / "config.yaml").model == str(start.resolve() / "model")
        assert not (run / "warm_start").exists()
