"""Exact resume, sampling included: a sampled answer depends on its question's seed alone.

- ``sample_tokens``: a row's token does not depend on the other rows, and it follows the
  temperature / top-p distribution.
- The ``hf`` engine (slot decoder and plain ``model.generate``), on tiny real models in float32:
  sampled completions with per-question seeds are token-identical generated all at once, in other
  batch sizes, in a shuffled order, or split over two calls; both paths draw the same tokens.
- ``tomrl eval`` at temperature 0.6, top-p 0.95, SIGKILLed after a random number of answers and
  resumed, writes the answers of an uninterrupted run, word for word.
- ``tomrl train --resume`` on a finished run is a no-op that says so.

Kill points are drawn from ``TOMRL_KILL_SEED`` (random when unset; failures print it).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, cli_env, complete_lines, jsonl_rows, kill, run_cli, start_cli, wait_until

from tomrl.generation import HFEngine, Sampling
from tomrl.generation.base import request_generators, request_seed, sample_tokens

KILL_SEED = int(os.environ.get("TOMRL_KILL_SEED") or random.SystemRandom().randrange(10**6))
PAPER_SAMPLING = dict(temperature=0.6, top_p=0.95)


# --------------------------------------------------------------------------- sample_tokens


@pytest.mark.parametrize("top_p", [1.0, 0.95, 0.3])
def test_a_rows_token_depends_on_its_logits_and_generator_only(top_p):
    import torch

    torch.manual_seed(0)
    rows = torch.randn(6, 500) * 3
    rows[:3, :4] += 12  # three peaked rows: their top 64 tokens hold top_p (the short path) …
    sampling = Sampling(temperature=0.7, top_p=top_p)
    for seed in range(20):
        alone = [int(sample_tokens(rows[i : i + 1], sampling, request_generators([seed + i]))[0]) for i in range(6)]
        together = sample_tokens(rows, sampling, request_generators([seed + i for i in range(6)])).tolist()
        # … and batched with the flat rows, which need the full sort: the same tokens either way.
        peaked = sample_tokens(rows[:3], sampling, request_generators([seed + i for i in range(3)])).tolist()
        reversed_rows = sample_tokens(rows.flip(0), sampling, request_generators([seed + i for i in reversed(range(6))])).tolist()
        assert alone == together == peaked + together[3:] == reversed_rows[::-1]


def test_sample_tokens_follows_temperature_and_top_p():
    import torch

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    generators = request_generators([7])
    counts = torch.zeros(4)
    for _ in range(4000):
        counts[sample_tokens(logits, Sampling(temperature=1.0, top_p=1.0), generators)] += 1
    assert torch.allclose(counts / 4000, torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.03)
    # top-p 0.7 keeps 0.5 and 0.3 (the mass before 0.15 is 0.8 >= 0.7): renormalised 5/8, 3/8.
    counts.zero_()
    for _ in range(4000):
        counts[sample_tokens(logits, Sampling(temperature=1.0, top_p=0.7), generators)] += 1
    assert counts[2:].sum() == 0 and abs(counts[0] / 4000 - 5 / 8) < 0.03
    # A free slot (no generator) draws nothing from the others.
    assert sample_tokens(logits.repeat(2, 1), Sampling(temperature=1.0, top_p=1.0), [None, request_generators([1])[0]]).shape == (2,)


# --------------------------------------------------------------------------- the hf engine


def _sampled(engine: HFEngine, prompts: list[str], order: list[int], seeds: list[int]) -> dict[int, list[int]]:
    """Token ids of the prompts ``order`` (indices into ``prompts``), each sampled with its own seed."""
    sampling = Sampling(**PAPER_SAMPLING, max_new_tokens=10, stop=(), seeds=tuple(seeds[i] for i in order))
    return {order[done.index]: done.token_ids for done in engine.generate([prompts[i] for i in order], sampling)}


@pytest.mark.parametrize(("architecture", "mode"), [("tiny_llama", "slots"), ("tiny_qwen2", "slots"), ("tiny_llama", "generate")])
def test_sampled_answers_do_not_depend_on_batching_order_or_calls(request, chat_prompts, architecture, mode):
    folder = str(request.getfixturevalue(architecture))
    engines = {size: HFEngine(folder, dtype="float32", device="cpu", mode=mode, batch_size=size) for size in (1, 3, 8)}
    prompts = chat_prompts * 2  # each prompt twice: same text, different question, different answer
    seeds = [request_seed(0, "bench", f"q{i}", 0) for i in range(len(prompts))]
    everything = list(range(len(prompts)))
    shuffled = everything[:]
    random.Random(3).shuffle(shuffled)

    reference = _sampled(engines[8], prompts, everything, seeds)
    assert len({tuple(ids) for ids in reference.values()}) == len(prompts)  # sampled, and not alike
    assert _sampled(engines[3], prompts, everything, seeds) == reference
    assert _sampled(engines[1], prompts, shuffled, seeds) == reference
    assert _sampled(engines[8], prompts, shuffled, seeds) == reference
    # A run interrupted after some answers and resumed: the rest in a second call.
    first, second = shuffled[:5], shuffled[5:]
    assert {**_sampled(engines[3], prompts, first, seeds), **_sampled(engines[3], prompts, second, seeds)} == reference


def test_both_paths_sample_the_same_tokens(tiny_llama, chat_prompts):
    seeds = [request_seed(1, i) for i in range(len(chat_prompts))]
    order = list(range(len(chat_prompts)))
    slots = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="slots", batch_size=4)
    plain = HFEngine(str(tiny_llama), dtype="float32", device="cpu", mode="generate", batch_size=4)
    assert _sampled(slots, chat_prompts, order, seeds) == _sampled(plain, chat_prompts, order, seeds)


# --------------------------------------------------------------------------- tomrl eval, killed and resumed


QUESTIONS = 30


@pytest.fixture(scope="module")
def questions_file(tmp_path_factory) -> Path:
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.schema import write_examples

    examples = generate(GenerateConfig(benchmark="hitom", n=QUESTIONS, seed=11, lengths=[1], orders=[0, 1], agents=2))
    path = tmp_path_factory.mktemp("questions") / "questions.jsonl"
    assert write_examples(path, examples) == QUESTIONS
    return path


def sampled_eval_args(questions: Path, out: Path) -> list[str]:
    # Batches of 4: the answers finish in waves, so the kill lands mid-run and the resumed run
    # batches the remaining questions differently from the uninterrupted one.
    return ["eval", "--model", "tiny-qwen2", "--benchmark", str(questions), "--out", str(out), "temperature=0.6", "top_p=0.95",
            "max_new_tokens=12", "batch_size=4", "dtype=float32", "threads=1"]


def answers(out: Path) -> dict[str, tuple[str, int]]:
    rows = jsonl_rows(out / "samples.jsonl")
    assert len(rows) == len({row["id"] for row in rows}) == QUESTIONS
    return {row["id"]: (row["output"], row["tokens"]) for row in rows}


def test_sampled_eval_killed_and_resumed_writes_the_uninterrupted_answers(tmp_path, hermetic_home, questions_file):
    env = cli_env(hermetic_home)
    reference = run_cli(sampled_eval_args(questions_file, tmp_path / "reference"), env, tmp_path)
    assert reference.returncode == 0, reference.stderr[-3000:]
    expected = answers(tmp_path / "reference")
    assert len(set(expected.values())) > QUESTIONS // 2, "the answers must differ for the comparison to mean something"

    out = tmp_path / "killed"
    kill_at = random.Random(f"{KILL_SEED}:sampled-eval").randint(3, QUESTIONS - 8)
    process = start_cli(sampled_eval_args(questions_file, out), env, tmp_path, tmp_path / "killed.log")
    reached = wait_until(lambda: len(complete_lines(out / "samples.jsonl")) >= kill_at, process, timeout=240)
    kill(process)
    before = len(complete_lines(out / "samples.jsonl"))
    assert reached and 0 < before < QUESTIONS, f"kill after {kill_at} answers missed: {before} (TOMRL_KILL_SEED={KILL_SEED})"

    resumed = run_cli(sampled_eval_args(questions_file, out), env, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    got = answers(out)
    differ = sorted(key for key in expected if got[key] != expected[key])
    assert not differ, f"{len(differ)} of {QUESTIONS} answers differ after a kill at {before} answers (TOMRL_KILL_SEED={KILL_SEED})"


# --------------------------------------------------------------------------- tomrl train --resume of a finished run


def test_resuming_a_finished_training_run_does_nothing(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    run_dir = tmp_path / "run"
    args = ["train", "--config", str(REPO_ROOT / "configs/train/smoke_cpu.yaml"), f"run_dir={run_dir}", "max_steps=1", "save_every=1",
            "eval.at_start=false", "eval.every_steps=0", "progress=false", "max_completion_length=8", "report_to=[]"]
    first = run_cli(args, env, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = (run_dir / "summary.json").read_text()
    metrics = (run_dir / "metrics.jsonl").read_text()

    again = run_cli(["train", "--resume", str(run_dir)], env, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "run already finished at step 1 of 1 (summary.json); nothing to do" in " ".join(again.stdout.split())
    assert [p.name for p in (run_dir / "checkpoints").glob("checkpoint-*")] == ["checkpoint-1"]
    assert (run_dir / "summary.json").read_text() == summary and (run_dir / "metrics.jsonl").read_text() == metrics
    assert json.loads(summary)["steps"] == 1
