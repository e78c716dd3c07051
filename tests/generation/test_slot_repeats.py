"""The slot decoder prefills a prompt repeated in one pass (RL samples each prompt several times) once:
the outputs must be those of prefilling every copy."""

from __future__ import annotations

import pytest

from tomrl.generation import Sampling, SlotGenerator, SlotModel, eos_token_ids
from tomrl.models import load_model, load_tokenizer


def _run(model, tokenizer, token_lists, sampling, share_repeats: bool):
    generator = SlotGenerator(SlotModel(model), tokenizer, eos_token_ids(model, tokenizer), batch_size=8, share_repeats=share_repeats)
    return sorted(generator.run(token_lists, sampling), key=lambda done: done.index)


@pytest.mark.parametrize("architecture", ["tiny_llama", "tiny_qwen2"])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_shared_prefill_of_repeated_prompts_changes_no_output(request, chat_prompts, architecture, temperature):
    folder = str(request.getfixturevalue(architecture))
    model, tokenizer = load_model(folder, dtype="float32"), load_tokenizer(folder)
    # Each prompt four times in a row, as TRL's sampler repeats them (the last one longer than the shared
    # system prompt); 12 rows over 8 slots also exercise refills.
    token_lists = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in [chat_prompts[i] for i in (0, 5, 6)] for _ in range(4)]
    sampling = Sampling(temperature=temperature, top_p=1.0, max_new_tokens=10, stop=(), seed=3, logprobs=True)
    shared = _run(model, tokenizer, token_lists, sampling, share_repeats=True)
    separate = _run(model, tokenizer, token_lists, sampling, share_repeats=False)
    assert [d.token_ids for d in shared] == [d.token_ids for d in separate]
    for ours, theirs in zip(shared, separate):
        assert ours.logprobs == pytest.approx(theirs.logprobs, abs=1e-5)
    if temperature > 0:  # the copies are sampled on their own, not duplicated
        assert len({tuple(d.token_ids) for d in shared[:4]}) > 1
