"""Prompt builders with a real tokenizer (the embedded SmolLM2's ChatML template).

The paper_a prompt must equal Paper A's released prompts byte for byte (they were rendered with
Qwen2.5's ChatML template, which SmolLM2 shares whenever a system message is given).
"""

from __future__ import annotations

import json

import pytest

from tomrl.models import embedded_tokenizer_dir
from tomrl.prompts import (
    PAPER_A_SYSTEM_PROMPT,
    PROMPT_STYLES,
    PromptConfig,
    build_messages,
    render_prompt,
)
from tomrl.schema import Example


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))


def _example(story="1 Anna entered the kitchen.\n2 The apple is in the red_box.", question="Where is the apple really?", choices=None):
    return Example(
        id="q1", source="tomrl-hitom", split="test", story=story, question=question, answer="red_box", order=0,
        question_type="reality", deception=False, story_length=1, story_id="s1", choices=choices,
    )


def test_paper_a_prompt_is_the_released_text(tokenizer, shared_data):
    """Every 20th prompt of Paper A's released training and test files, re-rendered from story + question."""
    checked = 0
    for name in ("tomrl_train_3200.jsonl", "tomrl_test_merged_8060.jsonl"):
        path = shared_data / "tomrl_paper" / name
        if not path.exists():
            pytest.skip(f"{path} not found")
        for line in path.read_text(encoding="utf-8").splitlines()[::20]:
            row = json.loads(line)
            example = _example(story=row["story"], question=row["question"])
            assert render_prompt(example, tokenizer) == row["prompt"][0]["content"]
            checked += 1
    assert checked > 500


def test_paper_a_prompt_shape(tokenizer):
    text = render_prompt(_example(), tokenizer, PromptConfig("paper_a"))
    assert text.startswith("<|im_start|>system\n" + PAPER_A_SYSTEM_PROMPT + "<|im_end|>\n")
    assert "Read the following story and answer the question. \nStory: 1 Anna entered" in text
    assert text.endswith("Question: Where is the apple really?\n<|im_end|>\n<|im_start|>assistant\n<think>")
    assert "(1) An agent witnesses everything" in text and "(2) An agent A can infer" in text


def test_prefill_is_configurable(tokenizer):
    example = _example()
    assert render_prompt(example, tokenizer, PromptConfig("paper_a", prefill="")).endswith("<|im_start|>assistant\n")
    assert render_prompt(example, tokenizer, PromptConfig("cot")).endswith("<|im_start|>assistant\n")
    assert render_prompt(example, tokenizer, PromptConfig("cot", prefill="<think>")).endswith("assistant\n<think>")
    assert PromptConfig().resolved_prefill == "<think>"
    assert PromptConfig(style="cot").resolved_prefill == ""
    assert PromptConfig(style="cot", prefill="<think>").resolved_prefill == "<think>"
    with pytest.raises(ValueError, match="style"):
        PromptConfig(style="fancy")  # type: ignore[arg-type]


def test_every_style_renders_with_the_real_tokenizer(tokenizer):
    example = _example(choices=["red_box", "blue_box", "green_drawer"])
    for style in PROMPT_STYLES:
        text = render_prompt(example, tokenizer, PromptConfig(style))
        if style == "gsm8k":  # Paper A's math side check asks for \boxed{}, not the answer tag
            assert "Anna entered" in text and "within \\boxed{}." in text and "<answer>" not in text
        else:
            assert "Where is the apple really?" in text and "Anna entered" in text and "<answer>" in text
        assert len(tokenizer(text)["input_ids"]) > 20
    mc = render_prompt(example, tokenizer, PromptConfig("hitom_mc"))
    assert "Choices: A. red_box, B. blue_box, C. green_drawer" in mc
    assert "Note: You should assume the following. (1)" in mc and "(4) Agents in private communications" in mc
    assert "Choices:" not in render_prompt(example, tokenizer, PromptConfig("hitom_open"))


def test_messages_per_style():
    example = _example(choices=["red_box"])
    assert [m["role"] for m in build_messages(example, "paper_a")] == ["system", "user"]
    for style in ("cot", "hitom_mc", "hitom_open", "gsm8k"):
        assert [m["role"] for m in build_messages(example, style)] == ["user"]
    with pytest.raises(ValueError, match="needs choices"):
        build_messages(_example(), "hitom_mc")
    with pytest.raises(ValueError, match="unknown prompt style"):
        build_messages(example, "fancy")  # type: ignore[arg-type]


def test_template_without_system_role(tokenizer):
    """A Gemma-like template that raises on a system message: the system text opens the user turn."""
    strict = tokenizer.__class__.from_pretrained(str(embedded_tokenizer_dir()))
    strict.chat_template = (
        "{% for message in messages %}{% if message['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}<start_of_turn>{{ message['role'] }}\n{{ message['content'] }}<end_of_turn>\n{% endfor %}"
        "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
    )
    text = render_prompt(_example(), strict, PromptConfig("paper_a"))
    assert text.startswith("<start_of_turn>user\nYou are a helpful assistant.")
    assert "interactions.\n\nRead the following story" in text
    assert text.endswith("<start_of_turn>model\n<think>")


def test_tokenizer_without_chat_template(tokenizer):
    bare = tokenizer.__class__.from_pretrained(str(embedded_tokenizer_dir()))
    bare.chat_template = None
    text = render_prompt(_example(), bare, PromptConfig("paper_a"))
    assert text.startswith("You are a helpful assistant.") and text.endswith("Question: Where is the apple really?\n\n<think>")


@pytest.mark.parametrize("config_class", ["tomrl.training.config:TrainConfig", "tomrl.evaluation.config:EvalConfig"])
def test_training_and_evaluation_configs_embed_the_prompt(config_class):
    import importlib

    from tomrl.config import ConfigError, load_config

    module, name = config_class.split(":")
    cls = getattr(importlib.import_module(module), name)
    cfg = load_config(cls, None, ["prompt.style=cot", "prompt.prefill=<think>"])
    assert cfg.prompt == PromptConfig("cot", "<think>") and cfg.prompt.resolved_prefill == "<think>"
    # The keys of before the prompt: block fail, naming their new place.
    with pytest.raises(ConfigError, match=r"unknown key 'prompt_style' .*did you mean 'prompt.style'"):
        load_config(cls, None, ["prompt_style=cot"])
    with pytest.raises(ConfigError, match=r"unknown key 'prefill' .*did you mean 'prompt.prefill'"):
        load_config(cls, None, ["prefill=''"])
    with pytest.raises(ConfigError, match="prompt.style"):
        load_config(cls, None, ["prompt.style=fancy"])
