"""Validation answers run to EOS or the token budget; stop_at_answer (a speed option) ends them at the stop string."""

from __future__ import annotations

import pytest

from tomrl.models import load_model, load_tokenizer
from tomrl.training import validation


@pytest.mark.parametrize("path", ["slots", "generate"])
def test_validation_generates_to_the_budget_unless_stop_at_answer(tiny_model_dir, monkeypatch, path):
    model, tokenizer = load_model(str(tiny_model_dir), dtype="float32"), load_tokenizer(str(tiny_model_dir))
    if path == "generate":  # the transformers path, used for architectures the slot decoder lacks
        monkeypatch.setattr(validation, "slot_path_supported", lambda model: False)
    prompts = ["Where is the ball?", "Anna moved the apple to the box."]
    full = validation.generate_completions(model, tokenizer, prompts, max_new_tokens=12)
    text, tokens = full[0]
    if tokens < 8:
        pytest.skip("the random model ends its answer at once")
    # The random model never writes </answer>: stand a piece of its own answer in for it.
    stop = text[len(text) // 3 : len(text) // 3 + 3]
    monkeypatch.setattr(validation, "STOP", stop)
    assert validation.generate_completions(model, tokenizer, prompts, max_new_tokens=12) == full  # default: no stop
    cut = validation.generate_completions(model, tokenizer, prompts, max_new_tokens=12, stop_at_answer=True)
    # Cut right after the stop string (the transformers path keeps the whole token that completes it).
    kept, cut_tokens = cut[0]
    assert text.startswith(kept) and kept.startswith(text[: text.find(stop) + len(stop)]) and cut_tokens < tokens
    if path == "slots":
        assert kept == text[: text.find(stop) + len(stop)]
