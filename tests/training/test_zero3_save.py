"""Saves that gather: under DeepSpeed ZeRO-3 each process holds a shard of every weight, and final/
and best/ must still be the whole model (they were written with every tensor of shape (0,)).

Two real CPU processes (torchrun, gloo, ``DS_ACCELERATOR=cpu``) under ZeRO-3 configured the way
``accelerate launch --config_file configs/accelerate/deepspeed_zero3.yaml`` configures it (the
ACCELERATE_DEEPSPEED_* environment), two GRPO steps of the tiny model, then final/ and best/ are
reloaded with transformers and compared with the starting weights.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tomrl.models import resolve_model

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("deepspeed", reason="the dev extra installs deepspeed (pip install -e '.[dev]')")


def free_port() -> int:
    """A port no other job uses: DeepSpeed's CPU all-reduce names its shared memory after it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def zero3_environment(mixed_precision: str) -> dict[str, str]:
    """What accelerate launch sets for configs/accelerate/deepspeed_zero3.yaml (mixed_precision bf16 there)."""
    return {
        **os.environ,
        "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "DS_ACCELERATOR": "cpu",
        "ACCELERATE_USE_DEEPSPEED": "true",
        "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
        "ACCELERATE_DEEPSPEED_ZERO3_INIT": "true",
        "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": "true",
        "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE": "none",
        "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE": "none",
        "ACCELERATE_MIXED_PRECISION": mixed_precision,
        "OMP_NUM_THREADS": "1",  # two processes on a 2-core machine
    }


@pytest.mark.slow
@pytest.mark.parametrize("precision, mixed_precision", [("float32", "no"), ("bfloat16", "bf16")])
def test_zero3_final_and_best_hold_the_whole_trained_model(tmp_path, precision, mixed_precision):
    from transformers import AutoModelForCausalLM

    run = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
               "tests/training/zero3_worker.py", str(run), precision]
    result = subprocess.run(command, cwd=REPO, env=zero3_environment(mixed_precision), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 2 and summary["distributed"] == "DEEPSPEED" and summary["zero_stage"] == 3
    assert summary["parameter_dtype"] == "float32"  # the optimizer's master partitions, also when the module is bf16
    start = load_file(f"{resolve_model('tiny-qwen2')}/model.safetensors")
    saved_dtype = torch.float32 if precision == "float32" else torch.bfloat16  # ZeRO-3 gathers the module's 16-bit weights
    for folder in ("final", "best"):
        saved = load_file(run / folder / "model.safetensors")
        assert set(saved) == set(start), folder
        assert all(saved[name].shape == start[name].shape for name in start), folder  # not shape (0,)
        assert {t.dtype for t in saved.values()} == {saved_dtype}, folder
        model = AutoModelForCausalLM.from_pretrained(run / folder)
        assert sum(p.numel() for p in model.parameters()) == sum(t.numel() for t in start.values())
    final = load_file(run / "final" / "model.safetensors")
    changed = sum(int((final[n] != start[n].to(saved_dtype)).sum()) for n in start) / sum(t.numel() for t in start.values())
    assert changed > 0.5, changed  # the trained values, not the starting ones
    assert json.loads((run / "best" / "best.json").read_text())["step"] in (0, 1, 2)
