"""The rft arm keeps exactly the sampled completions that the shared answer checker marks correct.

A random tiny model answers nothing right, which would make the check vacuous; so the tiny Qwen2 is
first taught to answer two of three stories under the answer-only prefill, and then sampled by the
arm (tomrl's generation engine) at a high temperature: some samples are right, some wrong.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tomrl.config import load_config
from tomrl.prompts import render_prompt
from tomrl.rewards.answer import check_answer
from tomrl.schema import Example
from tomrl.study.arms import rejection_samples
from tomrl.study.config import StudyConfig
from tomrl.training.config import TrainConfig

PREFILL = "<think> </think><answer>"


def story(index: int, answer: str) -> Example:
    return Example(id=f"q{index}", source="tomrl", split="train", story=f"Story {index}: the apple is in the {answer}.",
                   question="Where is the apple really?", answer=answer, order=0, question_type="reality",
                   deception=None, story_length=1, story_id=f"s{index}")


@pytest.fixture(scope="module")
def taught_model(tmp_path_factory, tiny_qwen2):
    """The tiny Qwen2 after 30 passes on the answers of stories 0 and 1 (not story 2), with a
    plain torch loop (the arms' own fine-tuning is exercised by the smoke study; this only has to be quick)."""
    import torch
    from transformers import AutoModelForCausalLM

    from tomrl.models import load_tokenizer

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = load_config(TrainConfig, "configs/train/smoke_cpu.yaml", ["progress=false", "prompt.style=cot", f"prompt.prefill='{PREFILL}'"])
    tokenizer = load_tokenizer(str(tiny_qwen2))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_qwen2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    batch = []
    for example in (story(0, "green_drawer"), story(1, "blue_crate")):
        prompt = tokenizer(render_prompt(example, tokenizer, cfg.prompt), add_special_tokens=False)["input_ids"]
        answer = tokenizer(f"{example.answer}</answer>", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        batch.append((torch.tensor([prompt + answer[:-1]]), torch.tensor(answer)))
    for _ in range(30):
        for ids, answer in batch:  # the loss on the answer's tokens only (logits of the last positions)
            optimizer.zero_grad()
            logits = model(input_ids=ids, logits_to_keep=len(answer)).logits[0]
            torch.nn.functional.cross_entropy(logits, answer).backward()
            optimizer.step()
    folder = tmp_path_factory.mktemp("taught")
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return str(folder), cfg


def test_rft_keeps_only_what_the_checker_marks_correct(taught_model, tmp_path):
    model, cfg = taught_model
    stories = [story(0, "green_drawer"), story(1, "blue_crate"), story(2, "red_basket")]
    study = load_config(StudyConfig, "configs/study/smoke.yaml", ["arms=[rft]", "rft.samples_per_prompt=6", "rft.temperature=1.5"])
    cfg = replace(cfg, max_completion_length=16, stop_at_answer=True)
    kept, source = rejection_samples(cfg, study, model, stories, tmp_path / "rft", say=lambda _: None)
    samples = [json.loads(line) for line in (tmp_path / "rft" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 3 * 6 == source["sampled"]
    # Checker level: every kept row is a sample the shared checker calls correct, and every correct sample is kept.
    for sample in samples:
        gold = next(s.answer for s in stories if s.id == sample["id"])
        verdict = check_answer(sample["completion"], gold, scheme="strict", prefill=PREFILL)
        assert sample["correct"] == verdict.correct
    assert kept, "the taught model answered nothing right: the test would prove nothing"
    assert len(kept) == sum(s["correct"] for s in samples) == source["kept"]
    assert any(not s["correct"] for s in samples), "every sample was right: the filter was not exercised"
    for row in kept:
        gold = next(s.answer for s in stories if f"Story {s.id[1:]}:" in row["prompt"])
        assert check_answer(row["completion"], gold, scheme="strict", prefill=PREFILL).correct
        assert row["prompt"].endswith(PREFILL)
    # Sampled once: a second call reads the kept rows back instead of sampling again.
    again, _ = rejection_samples(cfg, study, model, stories, tmp_path / "rft", say=lambda _: None)
    assert again == kept
