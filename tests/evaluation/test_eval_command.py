"""`tomrl eval` on the command line: listing, a run, the table of finished runs, user errors."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest
import torch
from fake_openai_server import FakeOpenAIServer

from tomrl.cli import main

PAPER_A_EVAL = Path(__file__).resolve().parents[2] / "configs" / "eval" / "paper_a.yaml"


def test_list(capsys):
    assert main(["eval", "--list"]) == 0
    out = capsys.readouterr().out
    assert "paper" in out and "hitom600" in out and "Paper A column: 4th-order" in out


def test_run_then_table(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeOpenAIServer(answer="green_drawer") as server:
        code = main(["eval", "--engine", "openai", "--model", "Qwen/Qwen2.5-0.5B-Instruct", "--benchmark", "tomrl-hitom-order0,tomrl-hitom-order1",
                     "--limit", "3", "--out", str(out), "--greedy", "heldout_n=5", f"openai.base_url={server.base_url}"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Qwen2.5-0.5B-Instruct (Paper A) | 30.33" in printed and "wrote" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["temperature"] == 0 and results["limit"] == 3
    assert {name: b["n_answered"] for name, b in results["benchmarks"].items()} == {"tomrl-hitom-order0": 3, "tomrl-hitom-order1": 3}
    assert main(["eval", "--table", str(out), "--all-paper-rows"]) == 0
    assert capsys.readouterr().out.count("(Paper A)") == 9


def test_user_errors_exit_2(tmp_path, capsys):
    assert main(["eval", "--benchmark", "hitom60", "--out", str(tmp_path)]) == 2
    assert "did you mean 'hitom600'" in capsys.readouterr().err
    assert main(["eval", "limit=0"]) == 2
    assert main(["eval", "--table", str(tmp_path / "nothing")]) == 2
    assert main(["eval", "lmit=3"]) == 2
    assert "unknown key 'lmit'" in capsys.readouterr().err


def test_failed_requests_exit_1_and_are_retried_later(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["eval", "--engine", "openai", "--model", "m", "--benchmark", "tomrl-hitom-order0", "--out", str(out), "heldout_n=2", "openai.max_retries=0"]
    with FakeOpenAIServer(fail_first=1, fail_status=500) as server:
        assert main([*args, f"openai.base_url={server.base_url}", "openai.concurrency=1"]) == 1
        assert "1 prompts failed" in capsys.readouterr().err
        assert main([*args, f"openai.base_url={server.base_url}", "openai.concurrency=1"]) == 0
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and len(server.requests) == 3


def test_engine_vllm_without_vllm_or_gpu_fails_before_anything_loads(tmp_path, capsys):
    if importlib.util.find_spec("vllm") is not None and torch.cuda.is_available():
        pytest.skip("this machine has vLLM and a GPU")
    out = tmp_path / "run"
    started = time.monotonic()
    code = main(["eval", "--config", str(PAPER_A_EVAL), "model=Qwen/Qwen2.5-0.5B-Instruct", "engine=vllm", f"out={out}"])
    assert code == 2 and time.monotonic() - started < 30  # about 1 s: no model, data or run folder touched
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("tomrl: error: engine=vllm needs ") and line.endswith("; otherwise use engine=hf")
    if importlib.util.find_spec("vllm") is None:
        assert "pip install 'tomrl[vllm]'" in line
    assert not out.exists()
