"""Models: a tiny Qwen2 model with the embedded tokenizer, offline; the embedded model's preparation."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch


def test_tiny_qwen2_model_generates_offline(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from tomrl.models import load_model, load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir))
    model = load_model(str(tiny_model_dir))
    assert model.config.model_type == "qwen2" and model.config.num_hidden_layers == 2
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Where is the apple?"}], tokenize=False, add_generation_prompt=True)
    inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert out.shape[1] == inputs["input_ids"].shape[1] + 5
    assert (tiny_model_dir / "model.safetensors").exists()


def test_other_model_names_pass_through_unchanged():
    from tomrl.models import resolve_model

    assert resolve_model("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    assert resolve_model("/some/local/path") == "/some/local/path"


def test_prepare_then_list_embedded_model(tmp_path):
    """`tomrl models prepare smollm2-135m` converts the GGUF to safetensors; `list` shows where."""
    env = {**os.environ, "TOMRL_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "tomrl", "models"]
    listed = subprocess.run([*cli, "list", "--json"], env=env, capture_output=True, text=True, check=True)
    assert json.loads(listed.stdout)[0]["prepared"] is False
    prepared = subprocess.run([*cli, "prepare", "smollm2-135m"], env=env, capture_output=True, text=True)
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    assert "verified: generated" in prepared.stdout
    rows = json.loads(subprocess.run([*cli, "list", "--json"], env=env, capture_output=True, text=True, check=True).stdout)
    assert rows[0]["prepared"] is True and rows[0]["path"].startswith(str(tmp_path))
    assert rows[0]["parameters"] == pytest.approx(134.5e6, rel=0.01)
    folder = tmp_path / "models" / "smollm2-135m"
    assert (folder / "model.safetensors").exists() and not list(folder.glob("*.gguf"))
    again = subprocess.run([*cli, "prepare", "smollm2-135m"], env=env, capture_output=True, text=True, check=True)
    assert "already prepared" in again.stdout


def test_precision_auto_follows_the_cpu_features_and_explicit_values_pass_through():
    from tomrl.models import cpu_runs_bf16_fast, resolve_precision

    fast, why = cpu_runs_bf16_fast()
    chosen, reason = resolve_precision("auto", "cpu")
    assert chosen == ("bfloat16" if fast else "float32")
    assert why in reason and ("bf16" in why)
    assert resolve_precision("float32", "cpu")[0] == "float32"
    assert resolve_precision("bfloat16", "cpu")[0] == "bfloat16"  # an explicit choice is obeyed, even where slow
