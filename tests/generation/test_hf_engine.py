"""The Hugging Face engine and the slot decoder on tiny real models: both paths agree (text and token ids),
log-probabilities, stopping rules, sampling."""

from __future__ import annotations

import pytest

from tomrl.generation import HFEngine, Sampling, SlotGenerator, SlotModel, cut_at_stop, eos_token_ids
from tomrl.generation.slots import _common_prefix_length

GREEDY = Sampling(temperature=0, max_new_tokens=12, stop=())


def _texts(engine, prompts, sampling=GREEDY):
    done = list(engine.generate(prompts, sampling))
    assert sorted(c.index for c in done) == list(range(len(prompts)))
    return [c for c in sorted(done, key=lambda c: c.index)]


@pytest.fixture(scope="module")
def reference_completions(tiny_llama, chat_prompts):
    """Plain model.generate, one prompt at a time, float32: the baseline every path must match."""
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="generate", batch_size=1)
    return _texts(engine, chat_prompts)


@pytest.fixture(scope="module")
def reference(reference_completions):
    return [c.text for c in reference_completions]


def test_reference_outputs_differ(reference):
    # Otherwise the equality tests below could not fail.
    assert len(set(reference)) == len(reference)
    assert all(reference)


@pytest.mark.parametrize(("mode", "batch_size"), [("generate", 3), ("slots", 1), ("slots", 3), ("slots", 8)])
def test_batched_greedy_equals_one_at_a_time(tiny_llama, chat_prompts, reference, mode, batch_size):
    # Left padding (generate) and slot refills / compaction (slots) must not change any output.
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode=mode, batch_size=batch_size)
    assert [c.text for c in _texts(engine, chat_prompts)] == reference


@pytest.mark.parametrize(("mode", "batch_size"), [("generate", 3), ("slots", 3)])
def test_token_ids_are_what_model_generate_sampled(tiny_llama, chat_prompts, reference_completions, mode, batch_size):
    # Completion.token_ids: the ids model.generate produced greedily, one prompt at a time (the
    # reference path's own ids are checked against a direct model.generate call too).
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode=mode, batch_size=batch_size)
    done = _texts(engine, chat_prompts)
    for ours, theirs, prompt in zip(done, reference_completions, chat_prompts):
        assert ours.token_ids == theirs.token_ids == _generated_ids(engine, prompt, GREEDY.max_new_tokens)
        assert len(ours.token_ids) == ours.tokens
        assert engine.tokenizer.decode(ours.token_ids, skip_special_tokens=True) == ours.text
        assert ours.logprobs is None  # not asked for


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_slot_logprobs_match_a_forward_pass(tiny_llama, chat_prompts, temperature):
    # Each sampled token's log-probability equals log_softmax(logits / temperature) of one full
    # forward pass over prompt + completion, at that token (float32, within 1e-4).
    import torch

    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="slots", batch_size=3)
    sampling = Sampling(temperature=temperature, top_p=1.0, max_new_tokens=10, stop=(), seed=5, logprobs=True)
    done = _texts(engine, chat_prompts, sampling)
    for completion, prompt in zip(done, chat_prompts):
        prompt_ids = engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert len(completion.logprobs) == len(completion.token_ids) == completion.tokens
        with torch.inference_mode():
            logits = engine.model(torch.tensor([prompt_ids + completion.token_ids])).logits[0].float()
        scaled = logits if temperature == 0 else logits / temperature
        expected = torch.log_softmax(scaled, dim=-1)[len(prompt_ids) - 1 : -1].gather(1, torch.tensor(completion.token_ids).unsqueeze(1)).squeeze(1)
        torch.testing.assert_close(torch.tensor(completion.logprobs), expected, atol=1e-4, rtol=0)


def test_slots_without_prefix_cache_match(tiny_llama, chat_prompts, reference):
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="slots", batch_size=4, prefix_cache=False)
    assert [c.text for c in _texts(engine, chat_prompts)] == reference


def test_prompts_share_a_prefix(tiny_llama, chat_prompts):
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="slots")
    token_lists = [engine.tokenizer(p, add_special_tokens=False)["input_ids"] for p in chat_prompts]
    assert _common_prefix_length(token_lists) > 50  # the system prompt: the prefix-cache path is exercised


@pytest.mark.parametrize("architecture", ["tiny_qwen2", "tiny_qwen3"])
def test_slots_match_generate_on_qwen(architecture, request, chat_prompts):
    path = str(request.getfixturevalue(architecture))
    plain = HFEngine(path, dtype="float32", device="cpu", mode="generate", batch_size=1)
    fast = HFEngine(path, dtype="float32", device="cpu", mode="slots", batch_size=4)
    assert fast.mode == "slots"
    assert [c.text for c in _texts(fast, chat_prompts)] == [c.text for c in _texts(plain, chat_prompts)]


def test_slot_logits_match_the_model(tiny_llama, chat_prompts):
    import torch

    from tomrl.generation.slots import _SlotCache

    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="slots")
    model = SlotModel(engine.model)
    tokens = engine.tokenizer(chat_prompts[1], add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        expected = engine.model(torch.tensor([tokens])).logits[0, -1]
        cache = _SlotCache(len(model.layers), 1, model.kv_heads, model.head_dim, len(tokens) + 2, model.dtype, "cpu")
        prefilled = model.prefill(cache, [0], [tokens[:-1]], None)[0]
        stepped = model.decode(cache, torch.tensor([tokens[-1]]), None)[0]
        expected_before = engine.model(torch.tensor([tokens[:-1]])).logits[0, -1]
    torch.testing.assert_close(prefilled, expected_before, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(stepped, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["generate", "slots"])
def test_stops_right_after_the_stop_string(tiny_llama, chat_prompts, reference, mode):
    # Take a piece of what the model writes anyway as the stop string; generation must end
    # right after its first occurrence, with fewer tokens.
    text = reference[1]
    stop = text[3:8]
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode=mode, batch_size=4)
    done = _texts(engine, chat_prompts, Sampling(temperature=0, max_new_tokens=12, stop=(stop,)))
    assert done[1].finish_reason == "stop"
    assert done[1].text == text[: text.find(stop) + len(stop)]
    assert done[1].tokens < 12
    # Prompts whose output never contains the stop string run to their budget.
    for completion, full in zip(done, reference):
        if stop not in full:
            assert completion.text == full and completion.finish_reason == "length" and completion.tokens == 12


@pytest.mark.parametrize("mode", ["generate", "slots"])
def test_stops_at_eos(tiny_llama, chat_prompts, mode):
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode=mode, batch_size=4)
    first = _texts(engine, chat_prompts[:1], Sampling(temperature=0, max_new_tokens=6, stop=()))[0]
    ids = engine.tokenizer(first.text, add_special_tokens=False)["input_ids"]
    # Declare the model's third output token an end-of-sequence token: generation ends there.
    full = list(engine.generate(chat_prompts[:1], Sampling(temperature=0, max_new_tokens=6, stop=())))[0]
    assert full.tokens == 6
    generated = _generated_ids(engine, chat_prompts[0], 6)
    engine.eos_ids = {generated[2]}
    stopped = _texts(engine, chat_prompts[:1], Sampling(temperature=0, max_new_tokens=6, stop=()))[0]
    assert stopped.finish_reason == "eos"
    assert stopped.tokens == 3
    assert ids  # the decoded text re-tokenises to something


def _generated_ids(engine, prompt, n):
    import torch

    ids = engine.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = engine.model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    return out[0, ids.shape[1] :].tolist()


def test_default_stop_is_answer_tag():
    assert Sampling().stop == ("</answer>",)
    assert cut_at_stop("<think>a</think><answer>box</answer> more", ("</answer>",)) == ("<think>a</think><answer>box</answer>", True)
    assert cut_at_stop("no tag", ("</answer>",)) == ("no tag", False)


def test_sampling_is_seeded_and_top_p_limits_choices(tiny_llama, chat_prompts, reference):
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="slots", batch_size=8)
    hot = Sampling(temperature=1.5, top_p=0.95, max_new_tokens=12, stop=(), seed=7)
    first = [c.text for c in _texts(engine, chat_prompts, hot)]
    again = [c.text for c in _texts(engine, chat_prompts, hot)]
    assert first == again
    assert first != reference  # sampling at temperature 1.5 is not greedy
    # A nucleus so small that only the most likely token survives is greedy decoding.
    narrow = Sampling(temperature=1.0, top_p=1e-6, max_new_tokens=12, stop=(), seed=3)
    assert [c.text for c in _texts(engine, chat_prompts, narrow)] == reference


def test_ignore_eos_runs_to_the_budget(tiny_llama, chat_prompts):
    # With the model's own third token declared EOS, ignore_eos never picks it (as model.generate's
    # min_new_tokens) and both paths agree on what comes instead.
    outputs = []
    for mode in ("generate", "slots"):
        engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode=mode, batch_size=4)
        engine.eos_ids = {_generated_ids(engine, chat_prompts[0], 6)[2]}
        done = _texts(engine, chat_prompts, Sampling(temperature=0, max_new_tokens=6, stop=(), ignore_eos=True))
        assert all(c.tokens == 6 and c.finish_reason == "length" for c in done)
        outputs.append([c.text for c in done])
    assert outputs[0] == outputs[1]


def test_describe_and_dtype(tiny_llama):
    engine = HFEngine(str(tiny_llama), dtype="float32", device="cpu")
    described = engine.describe()
    assert described["engine"] == "hf" and described["path"] == "slots" and described["dtype"] == "float32"


def test_unsupported_architecture_falls_back(tmp_path):
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from tomrl.models import embedded_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    engine = HFEngine(str(tmp_path), dtype="float32", device="cpu")
    assert engine.mode == "generate"
    with pytest.raises(ValueError, match="slots path supports"):
        HFEngine(str(tmp_path), dtype="float32", device="cpu", mode="slots")
    done = list(engine.generate(["hello there", "a"], Sampling(temperature=0, max_new_tokens=3, stop=())))
    assert sorted(c.index for c in done) == [0, 1] and all(c.tokens == 3 for c in done)


def test_packed_bf16_weights_change_nothing(tiny_llama, chat_prompts):
    # oneDNN's prepacked weights (used on CPUs with native bf16) must give bit-identical logits.
    import torch

    engine = HFEngine(str(tiny_llama), dtype="bfloat16", device="cpu", mode="slots")
    packed, plain = SlotModel(engine.model), SlotModel(engine.model, pack_weights=False)
    if not packed.packed:
        pytest.skip("oneDNN bf16 weight packing is not available on this CPU")
    sampling = Sampling(temperature=0, max_new_tokens=10, stop=())
    token_lists = [engine.tokenizer(p, add_special_tokens=False)["input_ids"] for p in chat_prompts]
    outputs = []
    with torch.inference_mode():
        for model in (packed, plain):
            done = SlotGenerator(model, engine.tokenizer, eos_token_ids(engine.model, engine.tokenizer), 4).run(token_lists, sampling)
            outputs.append(sorted((c.index, c.text) for c in done))
        tokens = torch.tensor([token_lists[0][:20]])
        assert torch.equal(packed.logits(engine.model.model.embed_tokens(tokens)[0]), plain.logits(engine.model.model.embed_tokens(tokens)[0]))
    assert outputs[0] == outputs[1]
