"""The supervised warm start on oracle traces: a real TRL SFT run on a tiny model, with the shared-prefix loss.

    pytest tests/training/test_warm_start.py
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tomrl.config import load_config

REPO = Path(__file__).resolve().parents[2]


def test_warm_start_trains_on_traces_and_resumes_without_training_again(tmp_path):
    from safetensors.torch import load_file

    from tomrl.models import resolve_model
    from tomrl.training.config import TrainConfig
    from tomrl.training.data import prepare_data
    from tomrl.training.sft_warmstart import WARM_START, warm_start

    cfg = load_config(
        TrainConfig,
        REPO / "configs" / "train" / "smoke_cpu.yaml",
        [f"run_dir={tmp_path}", "warm_start.enabled=true", "warm_start.max_examples=4", "warm_start.batch_size=2",
         "warm_start.learning_rate=1.0e-3"],
    )
    train_examples, _ = prepare_data(cfg, tmp_path)
    said = []
    folder = warm_start(cfg, tmp_path, train_examples, say=said.append)

    done = json.loads((tmp_path / WARM_START / "done.json").read_text())
    assert done["traces"] == 4 and done["steps"] == 2
    assert done["last_loss"] < done["first_loss"]
    base = load_file(str(Path(resolve_model(cfg.model)) / "model.safetensors"))
    trained = load_file(str(folder / "model.safetensors"))
    changed = [name for name in trained if name in base and not torch.equal(trained[name], base[name])]
    assert changed, "the warm start changed no weight"

    # A finished warm start is reused, not redone.
    modified = (folder / "model.safetensors").stat().st_mtime_ns
    assert warm_start(cfg, tmp_path, train_examples, say=said.append) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == modified
