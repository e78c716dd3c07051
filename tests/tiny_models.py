"""Tiny real models for the generation and evaluation tests: the embedded tokenizer, random weights, 2 layers.

Fixtures (made available to every test by ``tests/conftest.py``): ``tiny_llama``, ``tiny_qwen2``,
``tiny_qwen3`` (model folders) and ``chat_prompts`` (Paper-A-style prompts sharing a system prompt).

The weights are drawn with a large initializer range so that greedy outputs differ from prompt
to prompt (with the default 0.02 a tiny random model repeats one token), which the engine
equivalence tests need in order to be able to fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def _save_tiny(out_dir: Path, architecture: str) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    from tomrl.models import embedded_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        initializer_range=0.3,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )
    classes = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}
    config_class, model_class = classes[architecture]
    extra = {"head_dim": 16} if architecture == "qwen3" else {}
    torch.manual_seed(0)
    model = model_class(config_class(**common, **extra))
    if architecture == "qwen2":
        # Qwen2's q/k/v projections have biases (zero at init): make them count.
        with torch.no_grad():
            for layer in model.model.layers:
                for projection in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    projection.bias.normal_(0, 0.3)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return _save_tiny(tmp_path_factory.mktemp("tiny-llama"), "llama")


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory) -> Path:
    return _save_tiny(tmp_path_factory.mktemp("tiny-qwen2-biased"), "qwen2")


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory) -> Path:
    return _save_tiny(tmp_path_factory.mktemp("tiny-qwen3"), "qwen3")


STORY_PROMPTS = [
    "Anna put the apple in the box. She left the room.",
    "Bob moved the apple to the basket while Anna was away. Where will Anna look for the apple?",
    "The ball is in the red_drawer.",
    "Chloe entered the kitchen. Chloe exited the kitchen. Where is the melon really?",
    "x",
    "Mila loves the plum. Hunter loves the tomato. Mila entered the lounge. Hunter entered the hall. The jeans is in the container.",
    # Longer than the shared system prompt: its prefill group takes the padded-causal attention path.
    " ".join(f"Agent{i} moved the lime to the box{i % 7}." for i in range(60)) + " Where is the lime really?",
]


@pytest.fixture(scope="session")
def chat_prompts(tiny_llama) -> list[str]:
    """Paper-A-style prompts of different lengths sharing a system prompt (so the prefix cache is used)."""
    from transformers import AutoTokenizer

    from tomrl.prompts import PAPER_A_SYSTEM_PROMPT

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama))
    prompts = []
    for text in STORY_PROMPTS:
        messages = [{"role": "system", "content": PAPER_A_SYSTEM_PROMPT}, {"role": "user", "content": text}]
        prompts.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + "<think>")
    return prompts
