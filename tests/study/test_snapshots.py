"""The study's model snapshots (``step-N`` every K updates) load back as the model that was trained,
full weights or a LoRA adapter (transformers attaches an adapter folder to its base model on load)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from tomrl.models import load_model
from tomrl.study.callbacks import ModelSnapshots


def _tiny_llama(folder):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    return model


def _step(snapshots: ModelSnapshots, model, step: int, max_steps: int = 10) -> None:
    state = SimpleNamespace(global_step=step, max_steps=max_steps, is_world_process_zero=True)
    snapshots.on_step_end(None, state, None, model=model)


def test_snapshots_every_k_updates_not_the_last(tmp_path):
    model = _tiny_llama(tmp_path / "base")
    snapshots = ModelSnapshots(tmp_path / "snapshots", every=2)
    for step in range(1, 5):
        _step(snapshots, model, step, max_steps=4)
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["step-2"]  # step 4 is final/, the run's own


def test_a_lora_snapshot_loads_as_base_plus_adapter(tmp_path):
    from peft import LoraConfig, get_peft_model

    _tiny_llama(tmp_path / "base")
    from transformers import LlamaForCausalLM

    peft_model = get_peft_model(LlamaForCausalLM.from_pretrained(tmp_path / "base"), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    _step(ModelSnapshots(tmp_path / "snapshots", every=2), peft_model, 2)
    folder = tmp_path / "snapshots" / "step-2"
    assert (folder / "adapter_config.json").exists()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        want = peft_model(ids).logits
        loaded = load_model(str(folder), dtype="float32")
        assert torch.allclose(loaded(ids).logits, want, atol=1e-5)
        # The adapter changes the outputs: a snapshot that dropped it would fail the comparison above.
        assert not torch.allclose(LlamaForCausalLM.from_pretrained(tmp_path / "base")(ids).logits, want, atol=1e-5)
