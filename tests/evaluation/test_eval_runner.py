"""The evaluation runner: samples and results on disk, intervals, resuming after a crash or kill."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer

from tomrl.config import ConfigError
from tomrl.evaluation.config import EvalConfig, OpenAISettings
from tomrl.generation.hf import HFEngine
from tomrl.evaluation.runner import default_out_dir, run_eval, score
from tomrl.io import BadInputError
from tomrl.rewards.answer import check_answer

REPO = Path(__file__).resolve().parents[2]
SAMPLE_FIELDS = {"benchmark", "id", "order", "question_type", "gold", "prompt", "output", "tokens", "finish_reason",
                 "extracted", "correct", "format_ok", "paper_extracted", "paper_correct", "paper_format_ok"}


def first_location(prompt: str) -> str:
    """Answer with the first place the story puts the object in: a no-ToM shortcut."""
    match = re.search(r"is in the (\w+)", prompt)
    return match.group(1) if match else "nowhere"


class CountingEngine:
    """A real engine, wrapped to record what it is asked and to simulate a crash after k answers."""

    def __init__(self, inner, crash_after: int | None = None):
        self.inner = inner
        self.crash_after = crash_after
        self.asked: list = []
        for name in ("name", "model_name", "prompt_kind", "tokenizer"):
            setattr(self, name, getattr(inner, name))

    def describe(self):
        return self.inner.describe()

    def generate(self, prompts, sampling):
        self.asked.extend(prompts)
        for count, completion in enumerate(self.inner.generate(prompts, sampling)):
            if self.crash_after is not None and count >= self.crash_after:
                raise KeyboardInterrupt
            yield completion


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _hf_config(tiny_llama, out, **changes) -> EvalConfig:
    values = dict(
        model=str(tiny_llama), benchmarks=["tomrl-hitom-order1", "tomrl-hitom-order3"], heldout_n=6, limit=4,
        temperature=0.0, max_new_tokens=6, out=str(out), dtype="float32", device="cpu", batch_size=3,
    )
    values.update(changes)
    return EvalConfig(**values)


def test_run_writes_samples_results_and_table(tiny_llama, tmp_path):
    cfg = _hf_config(tiny_llama, tmp_path / "run")
    outcome = run_eval(cfg, log=lambda m: None)
    rows = _read(tmp_path / "run" / "samples.jsonl")
    assert len(rows) == 8 and outcome.generated == 8
    assert SAMPLE_FIELDS <= set(rows[0])
    assert {r["benchmark"] for r in rows} == {"tomrl-hitom-order1", "tomrl-hitom-order3"}
    assert all(r["prompt"].endswith("<think>") and r["prefill"] == "<think>" for r in rows)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["model"] == str(tiny_llama) and results["seed"] == 0 and results["config"]["limit"] == 4
    assert results["engine"]["engine"] == "hf"
    bench = results["benchmarks"]["tomrl-hitom-order3"]
    assert bench["n_selected"] == 4 and bench["n_answered"] == 4 and bench["complete"]
    assert bench["tokens_per_s"] > 0 and bench["generated_tokens"] == sum(r["tokens"] for r in rows if r["benchmark"] == "tomrl-hitom-order3")
    for scheme in ("strict", "paper_eval"):
        accuracy = bench["overall"][scheme]["accuracy"]
        assert accuracy["n"] == 4 and accuracy["method"] == "wilson"
        assert 0.0 <= accuracy["low"] <= accuracy["value"] <= accuracy["high"] <= 1.0
        assert "format_failure" in bench["overall"][scheme]
    assert list(bench["by_order"]) == ["3"] and bench["by_order"]["3"]["n"] == 4
    assert "by_question_type" in bench and "by_deception" in bench
    table = (tmp_path / "run" / "table.md").read_text()
    assert "| Model | Hi-ToM |" in table and "tomrl-hitom-order3 by order" in table


def test_scores_come_from_the_answer_checker(tmp_path, monkeypatch):
    # Served answers are the story's first location: right on some questions, wrong on others.
    with FakeOpenAIServer(answer_fn=first_location) as server:
        cfg = EvalConfig(model="fake", engine="openai", benchmarks=["tomrl-hitom-order0", "tomrl-hitom-order2"], heldout_n=10,
                         out=str(tmp_path / "run"), openai=OpenAISettings(base_url=server.base_url, concurrency=4))
        outcome = run_eval(cfg, log=lambda m: None)
    rows = _read(tmp_path / "run" / "samples.jsonl")
    assert len(rows) == 20
    for row in rows:
        strict = check_answer(row["output"], row["gold"], scheme="strict", prefill="")
        paper = check_answer(row["output"], row["gold"], scheme="paper_eval", prefill="")
        assert (row["correct"], row["format_ok"], row["paper_correct"]) == (strict.correct, strict.format_ok, paper.correct)
    assert row["prefill"] == "" and isinstance(row["prompt"], list)  # chat API: messages, no prefill
    for name in ("tomrl-hitom-order0", "tomrl-hitom-order2"):
        mine = [r for r in rows if r["benchmark"] == name]
        summary = outcome.results["benchmarks"][name]["overall"]
        assert summary["strict"]["accuracy"]["k"] == sum(r["correct"] for r in mine)
        assert summary["strict"]["format_failure"]["k"] == 0
    correct = [r["correct"] for r in rows]
    assert any(correct) and not all(correct)


def test_score_strict_and_paper_side_by_side():
    hedge = "hmm</think><answer>the toolbox</answer>"  # the prompt ends with the <think> prefill
    result = score(hedge, "box", prefill="<think>")
    assert result["paper_correct"] and not result["correct"] and result["format_ok"]
    unformatted = score(" I think <answer>box</answer>", "box", prefill="<think>")
    assert unformatted["paper_correct"] and not unformatted["format_ok"] and not unformatted["correct"]


def test_interrupted_run_resumes_without_redoing(tiny_llama, tmp_path):
    out = tmp_path / "run"
    cfg = _hf_config(tiny_llama, out, heldout_n=10, limit=None)
    engine = HFEngine(cfg.model, dtype="float32", device="cpu", batch_size=3)
    first = CountingEngine(engine, crash_after=5)
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, log=lambda m: None, engine=first)
    kept = _read(out / "samples.jsonl")
    assert len(kept) == 5
    partial = json.loads((out / "results.json").read_text())
    assert not partial["benchmarks"]["tomrl-hitom-order1"]["complete"]
    # A crash in the middle of a write leaves half a line behind.
    with open(out / "samples.jsonl", "a") as handle:
        handle.write('{"benchmark": "tomrl-hitom-order1", "id": "cut-sho')
    second = CountingEngine(engine)
    outcome = run_eval(cfg, log=lambda m: None, engine=second)
    rows = _read(out / "samples.jsonl")
    ids = [(r["benchmark"], r["id"]) for r in rows]
    assert len(ids) == len(set(ids)) == 20
    assert rows[:5] == kept  # nothing finished was lost or rewritten
    kept_prompts = {r["prompt"] for r in kept}
    assert len(second.asked) == 15 and not kept_prompts & set(second.asked)
    assert outcome.reused == 5 and outcome.generated == 15
    assert all(b["complete"] for b in outcome.results["benchmarks"].values())


def test_killed_process_resumes(tmp_path):
    # A real `tomrl eval` process, killed with SIGKILL in the middle of its run.
    out = tmp_path / "run"
    with FakeOpenAIServer(delay_s=0.25, answer_fn=first_location) as server:
        args = [sys.executable, "-m", "tomrl", "eval", "--engine", "openai", "--model", "fake", "--benchmark", "tomrl-hitom-order2",
                "--out", str(out), "heldout_n=12", f"openai.base_url={server.base_url}", "openai.concurrency=1"]
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples = out / "samples.jsonl"
        deadline = time.time() + 60
        while time.time() < deadline and (not samples.exists() or samples.read_text().count("\n") < 3):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.returncode == -signal.SIGKILL
        before = _read(samples)
        assert 3 <= len(before) < 12
        # A request the killed process had already sent is recorded by the server when its reply
        # (after delay_s) is written: let it land before counting, or it is charged to the resume.
        requests_before = -1
        while requests_before != len(server.requests):
            requests_before = len(server.requests)
            time.sleep(0.6)
        cfg = EvalConfig(model="fake", engine="openai", benchmarks=["tomrl-hitom-order2"], heldout_n=12, out=str(out),
                         openai=OpenAISettings(base_url=server.base_url, concurrency=1))
        outcome = run_eval(cfg, log=lambda m: None)
    rows = _read(samples)
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 12
    assert rows[: len(before)] == before
    assert len(server.requests) - requests_before == 12 - len(before)
    assert outcome.results["benchmarks"]["tomrl-hitom-order2"]["complete"]


def test_resume_with_other_settings_is_refused(tiny_llama, tmp_path):
    out = tmp_path / "run"
    run_eval(_hf_config(tiny_llama, out, benchmarks=["tomrl-hitom-order1"], limit=2), log=lambda m: None)
    with pytest.raises(ConfigError, match="temperature"):
        run_eval(_hf_config(tiny_llama, out, benchmarks=["tomrl-hitom-order1"], limit=2, temperature=0.6), log=lambda m: None)
    # A larger limit extends the same run: the two finished answers are reused.
    outcome = run_eval(_hf_config(tiny_llama, out, benchmarks=["tomrl-hitom-order1"], limit=3), log=lambda m: None)
    assert outcome.reused == 2 and outcome.generated == 1
    # Nothing left to do: no model is loaded, and the results still name the engine that answered.
    again = run_eval(_hf_config(tiny_llama, out, benchmarks=["tomrl-hitom-order1"], limit=3), log=lambda m: None)
    assert again.generated == 0 and again.results["engine"]["path"] == "slots"


def test_default_out_dir_follows_generation_settings():
    base = EvalConfig(model="Qwen/Qwen2.5-0.5B-Instruct")
    assert default_out_dir(base) == default_out_dir(EvalConfig(model="Qwen/Qwen2.5-0.5B-Instruct", limit=5))
    assert default_out_dir(base) != default_out_dir(EvalConfig(model="Qwen/Qwen2.5-0.5B-Instruct", temperature=0))
    assert default_out_dir(base).name.startswith("Qwen2.5-0.5B-Instruct-")


def test_missing_user_data(tmp_path, monkeypatch):
    monkeypatch.setenv("TOMRL_DATA", str(tmp_path / "empty"))
    cfg = EvalConfig(model="fake", engine="openai", benchmarks=["fantom"], out=str(tmp_path / "run"))
    with pytest.raises(BadInputError, match="fantom"):
        run_eval(cfg, log=lambda m: None)


def test_suites_skip_benchmarks_without_data(tmp_path, monkeypatch):
    from tomrl.evaluation import benchmarks

    monkeypatch.setenv("TOMRL_DATA", str(tmp_path / "empty"))
    monkeypatch.setitem(benchmarks.SUITES, "mini", ("tomrl-hitom-order0", "fantom", "gsm8k"))
    with FakeOpenAIServer() as server:
        cfg = EvalConfig(model="fake", engine="openai", benchmarks=["mini"], heldout_n=3, out=str(tmp_path / "run"),
                         openai=OpenAISettings(base_url=server.base_url))
        outcome = run_eval(cfg, log=lambda m: None)
    assert set(outcome.skipped) == {"fantom", "gsm8k"}
    assert set(outcome.results["benchmarks"]) == {"tomrl-hitom-order0"}
    assert set(outcome.results["skipped"]) == {"fantom", "gsm8k"}


def test_gsm8k_side_check_from_a_user_file(tmp_path):
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(
        json.dumps({"question": "Tom has 3 apples and buys 4. How many?", "answer": "3+4=7\n#### 7"}) + "\n"
        + json.dumps({"question": "What is 1,000 + 24?", "answer": "#### 1,024"}) + "\n"
    )
    with FakeOpenAIServer(answer="7") as server:
        cfg = EvalConfig(model="fake", engine="openai", benchmarks=["gsm8k"], data_paths={"gsm8k": str(data)},
                         out=str(tmp_path / "run"), openai=OpenAISettings(base_url=server.base_url))
        outcome = run_eval(cfg, log=lambda m: None)
    rows = _read(tmp_path / "run" / "samples.jsonl")
    assert sorted(r["gold"] for r in rows) == ["1024", "7"]
    assert outcome.results["benchmarks"]["gsm8k"]["overall"]["strict"]["accuracy"]["k"] == 1


def test_gsm8k_answers_are_read_from_boxed_and_compared_as_numbers(tmp_path):
    """A user's file in the official GSM8K format; answers boxed, with currency and separators: numeric comparison."""
    data = tmp_path / "gsm8k_test.jsonl"
    data.write_text(
        json.dumps({"question": "Tom has 3 apples and buys 4. How many?", "answer": "3+4=<<3+4=7>>7\n#### 7"}) + "\n"
        + json.dumps({"question": "What is 1,000 + 24 dollars?", "answer": "1000+24=<<1000+24=1024>>1024\n#### 1,024"}) + "\n"
        + json.dumps({"question": "What is 2 + 2?", "answer": "#### 4"}) + "\n"
    )
    replies = {"apples": "so \\boxed{7}", "dollars": "\\boxed{\\$1,024.00}", "2 + 2": "5"}
    prompts: list[str] = []
    with FakeOpenAIServer(answer_fn=lambda prompt: prompts.append(prompt) or next(v for k, v in replies.items() if k in prompt)) as server:
        cfg = EvalConfig(model="fake", engine="openai", benchmarks=["gsm8k"], data_paths={"gsm8k": str(data)},
                         out=str(tmp_path / "run"), openai=OpenAISettings(base_url=server.base_url))
        outcome = run_eval(cfg, log=lambda m: None)
    rows = {r["gold"]: r for r in _read(tmp_path / "run" / "samples.jsonl")}
    assert rows["1024"]["extracted"] == "\\$1,024.00" and rows["1024"]["correct"] and rows["7"]["correct"] and not rows["4"]["correct"]
    assert outcome.results["benchmarks"]["gsm8k"]["overall"]["strict"]["accuracy"]["k"] == 2
    # Asked as Paper A's models are asked maths: the \\boxed{} instruction, not the ToM prompt's answer tag.
    assert len(prompts) == 3 and all("final answer within \\boxed{}" in p and "<answer>" not in p for p in prompts)


class TwoAnswerEngine:
    """Writes an answer block, goes on, and writes a second one; honours ``sampling.stop`` as engines do."""

    name = model_name = "two-answers"
    prompt_kind = "messages"
    tokenizer = None
    TEXT = "<think>r</think><answer>first</answer> Wait, no. <answer>second</answer>"

    def __init__(self):
        self.stops: list[tuple[str, ...]] = []

    def describe(self):
        return {"engine": self.name}

    def generate(self, prompts, sampling):
        from tomrl.generation.base import Completion, cut_at_stop

        self.stops.append(sampling.stop)
        for index, _ in enumerate(prompts):
            text, stopped = cut_at_stop(self.TEXT, sampling.stop)
            yield Completion(index=index, text=text, tokens=len(text.split()), prompt_tokens=1, finish_reason="stop" if stopped else "eos")


def test_generation_runs_to_eos_and_paper_eval_scores_the_last_tag(tmp_path):
    # Paper A generates to EOS and scores the last <answer> tag; strict fails the text after </answer>.
    engine = TwoAnswerEngine()
    cfg = EvalConfig(model="fake", engine="openai", benchmarks=["tomrl-hitom-order0"], heldout_n=2, out=str(tmp_path / "eos"))
    assert cfg.stop_at_answer is False
    outcome = run_eval(cfg, log=lambda m: None, engine=engine)
    assert engine.stops == [()] and outcome.results["sampling"]["stop"] == []
    for row in _read(tmp_path / "eos" / "samples.jsonl"):
        assert row["output"] == TwoAnswerEngine.TEXT and row["finish_reason"] == "eos"
        assert row["paper_extracted"] == "second" and row["paper_format_ok"]
        assert not row["format_ok"] and row["extracted"] is None and row["reason"].startswith("format")
    # The speed option truncates at the first </answer>: the second answer is never seen.
    engine = TwoAnswerEngine()
    fast = EvalConfig(model="fake", engine="openai", benchmarks=["tomrl-hitom-order0"], heldout_n=2, out=str(tmp_path / "fast"), stop_at_answer=True)
    outcome = run_eval(fast, log=lambda m: None, engine=engine)
    assert engine.stops == [("</answer>",)] and outcome.results["sampling"]["stop"] == ["</answer>"]
    for row in _read(tmp_path / "fast" / "samples.jsonl"):
        assert row["output"] == "<think>r</think><answer>first</answer>"
        assert row["paper_extracted"] == "first" and row["format_ok"] and row["extracted"] == "first"
    assert default_out_dir(cfg) != default_out_dir(fast)  # a generation setting: never mixed in one folder
