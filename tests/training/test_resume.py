"""A run killed with SIGKILL mid-training and resumed matches an uninterrupted run step for step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = ["max_steps=2", "save_every=1", "eval.at_start=false", "eval.every_steps=0", "progress=false",
             "max_completion_length=8", "report_to=[]"]


def tomrl(*args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "tomrl", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)


def finish(process: subprocess.Popen, timeout: float = 300) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-3000:]
    return output


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rollouts_by_step(run: Path) -> dict[int, list[tuple[str, str]]]:
    steps: dict[int, list[tuple[str, str]]] = {}
    for row in rows(run / "samples.jsonl"):
        steps.setdefault(row["step"], []).append((row["id"], row["completion"]))
    return steps


# The slot decoder (rollout_engine auto on this Qwen2 model) seeds its sampler from the step, model.generate
# (transformers) draws from the restored random state. bfloat16 on a CPU decodes rollouts with a bf16 copy of
# the policy, built on the first step of every process: a resumed run builds it again, which must not draw
# from the random state.
@pytest.mark.parametrize("precision, engine", [("float32", "slots"), ("bfloat16", "slots"), ("float32", "transformers")])
def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path, precision, engine):
    config = "configs/train/smoke_cpu.yaml"
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    overrides = [*OVERRIDES, f"precision={precision}", f"rollout_engine={engine}"]
    finish(tomrl("train", "--config", config, f"run_dir={reference}", *overrides))

    process = tomrl("train", "--config", config, f"run_dir={killed}", *overrides)
    deadline = time.time() + 300
    while not (killed / "checkpoints" / "checkpoint-1").is_dir():
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "final").exists(), "the run finished before the kill"

    output = finish(tomrl("train", "--resume", str(killed)))
    assert "resuming" in output

    assert [r["step"] for r in rows(killed / "metrics.jsonl")] == [1, 2]
    reference_rollouts, resumed_rollouts = rollouts_by_step(reference), rollouts_by_step(killed)
    assert sorted(resumed_rollouts) == [1, 2]
    for step in (1, 2):
        # Same data order (prompt ids) and, with the random state restored, the same samples.
        assert [i for i, _ in resumed_rollouts[step]] == [i for i, _ in reference_rollouts[step]], step
        assert resumed_rollouts[step] == reference_rollouts[step], step
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["steps"] == 2 and Path(summary["resumed_from"]).name == "checkpoint-1"
    assert not list((killed / "checkpoints").glob("*.partial"))


def test_resume_refuses_keys_that_change_the_run(tmp_path):
    from tomrl.cli import main

    (tmp_path / "config.yaml").write_text("model: tiny-qwen2\n")
    assert main(["train", "--resume", str(tmp_path), "prompts_per_step=4"]) == 2
    assert main(["train", "--resume", str(tmp_path / "missing")]) == 2
