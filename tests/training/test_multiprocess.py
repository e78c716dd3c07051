"""Two processes under `torchrun` on CPU (gloo): the distributed code paths of a real run.

`accelerate launch --cpu --num_processes 2` starts a single process (accelerate's CPU launcher is
the one-process one), so the test launches with torch's own launcher and checks the world size the
run recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["reinforce_pp", "grpo"])
def test_two_cpu_processes_train_and_write_one_run_folder(tmp_path, algorithm):
    run = tmp_path / "run"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "tomrl", "train",
        "--config", "configs/train/smoke_cpu.yaml", f"run_dir={run}", f"algorithm={algorithm}", "max_steps=2",
        "rollouts_per_prompt=4", "micro_batch_size=2", "max_completion_length=8", "eval.every_steps=2",
        "progress=false", "save_every=1",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # two processes on a 2-core machine
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert json.loads((run / "summary.json").read_text())["processes"] == 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]  # one row per step, written by the main process only
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * 2 * 4  # both processes' rollouts, gathered
    validations = [json.loads(line) for line in (run / "validation.jsonl").read_text().splitlines()]
    assert [v["step"] for v in validations] == [0, 2] and validations[0]["accuracy"]["n"] == 4
    assert (run / "checkpoints" / "checkpoint-2").is_dir() and (run / "final" / "model.safetensors").exists()
    assert len(list((run / "tensorboard").iterdir())) == 1  # one event file: only the main process logs


def test_accelerate_cpu_launcher_one_process_is_said():
    from tomrl.training.run import launcher_note

    assert "torchrun --nproc_per_node N" in launcher_note({"ACCELERATE_USE_CPU": "True"}, 1)
    assert launcher_note({"ACCELERATE_USE_CPU": "True"}, 2) is None  # torchrun-style: really several
    assert launcher_note({}, 1) is None  # plain `tomrl train`: one process, as asked
