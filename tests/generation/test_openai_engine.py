"""The OpenAI-compatible engine against a real HTTP server on 127.0.0.1 (started by the test)."""

from __future__ import annotations

import logging

import pytest

from fake_openai_server import FakeOpenAIServer
from tomrl.evaluation.config import OpenAISettings
from tomrl.generation.base import Sampling
from tomrl.generation.openai import OpenAIEngine, _restore_stop

SECRET = "sk-test-secret-value-123"
MESSAGES = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": f"question {i}"}] for i in range(5)]


def _engine(server, **settings) -> tuple[OpenAIEngine, list[float]]:
    waits: list[float] = []
    cfg = OpenAISettings(base_url=server.base_url, api_key_env="TOMRL_TEST_KEY", **settings)
    return OpenAIEngine("test-model", cfg, sleep=waits.append), waits


def test_chat_requests_and_answers(monkeypatch):
    monkeypatch.setenv("TOMRL_TEST_KEY", SECRET)
    with FakeOpenAIServer(answer="green_drawer") as server:
        engine, _ = _engine(server, concurrency=3)
        done = sorted(engine.generate(MESSAGES, Sampling(temperature=0.6, top_p=0.95, max_new_tokens=64, seed=5)), key=lambda c: c.index)
    assert [c.index for c in done] == list(range(5))
    # The stop string the server removed is put back, so the strict format can hold.
    assert all(c.text == "<think>they moved it</think><answer>green_drawer</answer>" and c.finish_reason == "stop" for c in done)
    assert all(c.tokens == 9 and c.prompt_tokens == 50 for c in done)
    bodies = sorted((r["body"] for r in server.requests), key=lambda b: b["seed"])
    assert [b["seed"] for b in bodies] == [5, 6, 7, 8, 9]  # one seed per prompt
    assert all(b["model"] == "test-model" and b["temperature"] == 0.6 and b["top_p"] == 0.95 and b["max_tokens"] == 64 for b in bodies)
    assert all(b["stop"] == ["</answer>"] for b in bodies)
    assert {r["path"] for r in server.requests} == {"/v1/chat/completions"}
    assert all(r["headers"]["Authorization"] == f"Bearer {SECRET}" for r in server.requests)


def test_no_key_no_header(monkeypatch):
    monkeypatch.delenv("TOMRL_TEST_KEY", raising=False)
    with FakeOpenAIServer() as server:
        engine, _ = _engine(server)
        list(engine.generate(MESSAGES[:1], Sampling(temperature=0)))
    assert "Authorization" not in server.requests[0]["headers"]
    assert "top_p" not in server.requests[0]["body"]  # greedy: temperature 0 only


def test_retries_with_backoff_then_succeeds(monkeypatch):
    monkeypatch.setenv("TOMRL_TEST_KEY", SECRET)
    with FakeOpenAIServer(fail_first=3, fail_status=503) as server:
        engine, waits = _engine(server, concurrency=1, max_retries=5, backoff_s=0.5)
        done = list(engine.generate(MESSAGES[:1], Sampling(temperature=0)))
    assert done[0].finish_reason == "stop"
    assert len(server.requests) == 4 and engine.retries_used == 3
    # Exponential backoff with jitter: 0.5, 1, 2 s times a factor in [0.5, 1.5).
    for wait, base in zip(waits, [0.5, 1.0, 2.0]):
        assert 0.5 * base <= wait < 1.5 * base


def test_retry_after_header_is_honoured(monkeypatch):
    with FakeOpenAIServer(fail_first=1, fail_status=429, retry_after="7") as server:
        engine, waits = _engine(server, max_retries=2)
        done = list(engine.generate(MESSAGES[:1], Sampling(temperature=0)))
    assert done[0].finish_reason == "stop" and waits == [7.0]


def test_gives_up_after_retries_and_reports_error(monkeypatch, caplog):
    monkeypatch.setenv("TOMRL_TEST_KEY", SECRET)
    with caplog.at_level(logging.DEBUG), FakeOpenAIServer(fail_first=100, fail_status=500) as server:
        engine, waits = _engine(server, max_retries=2)
        done = list(engine.generate(MESSAGES[:2], Sampling(temperature=0)))
    assert all(c.finish_reason == "error" for c in done)
    assert "HTTP 500" in done[0].error and "gave up after 3 attempts" in done[0].error
    assert len(server.requests) == 6 and len(waits) == 4
    # The key never appears in errors, descriptions or logs.
    assert SECRET not in done[0].error and SECRET not in str(engine.describe()) and SECRET not in caplog.text


def test_client_errors_are_not_retried(monkeypatch):
    with FakeOpenAIServer(fail_first=100, fail_status=401) as server:
        engine, waits = _engine(server, max_retries=4)
        done = list(engine.generate(MESSAGES[:1], Sampling(temperature=0)))
    assert done[0].finish_reason == "error" and "HTTP 401" in done[0].error
    assert len(server.requests) == 1 and waits == []


def test_timeout_is_retried_then_reported():
    with FakeOpenAIServer(delay_s=1.0) as server:
        engine, waits = _engine(server, timeout_s=0.2, max_retries=1)
        done = list(engine.generate(MESSAGES[:1], Sampling(temperature=0)))
    assert done[0].finish_reason == "error" and "gave up after 2 attempts" in done[0].error
    assert len(waits) == 1


def test_unreachable_server_is_an_error():
    cfg = OpenAISettings(base_url="http://127.0.0.1:9/v1", max_retries=1, timeout_s=2)
    engine = OpenAIEngine("m", cfg, sleep=lambda s: None)
    done = list(engine.generate(MESSAGES[:1], Sampling(temperature=0)))
    assert done[0].finish_reason == "error"


def test_completions_api_sends_rendered_text(monkeypatch, tiny_llama):
    with FakeOpenAIServer() as server:
        cfg = OpenAISettings(base_url=server.base_url, api="completions", tokenizer=str(tiny_llama))
        engine = OpenAIEngine("served-model", cfg)
        assert engine.prompt_kind == "text" and engine.tokenizer is not None
        done = list(engine.generate(["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>"], Sampling(temperature=0)))
    assert server.requests[0]["path"] == "/v1/completions"
    assert server.requests[0]["body"]["prompt"].endswith("<think>")
    assert done[0].text.endswith("</answer>")


def test_restore_stop_rules():
    # vLLM says which stop string ended generation; OpenAI does not (then an open <answer> block is closed).
    assert _restore_stop("<answer>box", "stop", "</answer>", ("</answer>",)) == ("<answer>box</answer>", "stop")
    assert _restore_stop("<answer>box", "stop", None, ("</answer>",)) == ("<answer>box", "eos")
    assert _restore_stop("no tags", "stop", None, ("</answer>",)) == ("no tags", "eos")
    assert _restore_stop("<answer>bo", "length", None, ("</answer>",)) == ("<answer>bo", "length")


@pytest.mark.parametrize("bad", [{"timeout_s": 0}, {"max_retries": -1}, {"concurrency": 0}])
def test_settings_are_checked(bad):
    with pytest.raises(ValueError):
        OpenAISettings(**bad)
