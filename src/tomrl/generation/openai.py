"""Any OpenAI-compatible HTTP server as an engine, so API models can be baselines.

    export OPENAI_API_KEY=...                      # read from the environment only, never logged or saved
    tomrl eval --engine openai --model gpt-4o-mini openai.base_url=https://api.openai.com/v1 --benchmark tomi --limit 50
    tomrl eval --engine openai --model Qwen/Qwen2.5-7B-Instruct openai.base_url=http://127.0.0.1:8000/v1 \\
        openai.api=completions --benchmark paper                     # a local `vllm serve`, prompts rendered here

``openai.api=chat`` (default) posts the prompt's messages to ``/chat/completions``; the server
applies its own chat template, and no prefill (Paper A's ``<think>``) can be sent, so such
answers are scored without one. ``openai.api=completions`` posts the prompt text rendered here
with the model's tokenizer, prefill included, to ``/completions``: for a server hosting an open
model this is exactly the prompt the local engines use.

Requests run ``openai.concurrency`` at a time (threads; the standard library's urllib, no client
package needed). Each has a timeout (``openai.timeout_s``) and is retried with exponential
backoff and jitter (``openai.backoff_s`` doubling, at most 60 s, honouring ``Retry-After``) on
connection errors, timeouts and HTTP 408, 409, 429 and 5xx, up to ``openai.max_retries`` times;
other HTTP errors fail at once. A request that still fails yields a Completion with
``finish_reason="error"``: the runner does not record it, so running the same command again
retries exactly those prompts.

Servers drop the stop string from their output; when the server says it stopped on one (vLLM's
``stop_reason``) or, for servers that do not say, when the output ends inside an unclosed
``<answer>`` block, the stop string is put back, so outputs look the same as the local engines'.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Iterator, Sequence

from tomrl.generation.base import Completion, Sampling
from tomrl.io import redact_secrets

ABSENT = object()  # the reply has no stop_reason field (OpenAI's own API); None means "stopped at EOS" (vLLM)
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 60.0


class RequestFailed(RuntimeError):
    """A request that failed for good (after its retries, or with a non-retryable status)."""


class OpenAIEngine:
    """Generate through an OpenAI-compatible ``/chat/completions`` or ``/completions`` endpoint."""

    name = "openai"

    def __init__(self, model: str, settings, trust_remote_code: bool = False, sleep=time.sleep):
        self.model_name = model
        self.settings = settings
        self.prompt_kind = "messages" if settings.api == "chat" else "text"
        self.tokenizer = None
        if settings.api == "completions":
            from tomrl.models import load_tokenizer

            self.tokenizer = load_tokenizer(settings.tokenizer or model, trust_remote_code=trust_remote_code)
        self._sleep = sleep
        self.retries_used = 0

    def describe(self) -> dict:
        # The key's variable name is recorded, never its value.
        return {
            "engine": self.name,
            "model": self.model_name,
            "base_url": self.settings.base_url,
            "api": self.settings.api,
            "api_key_env": self.settings.api_key_env,
            "concurrency": self.settings.concurrency,
        }

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.settings.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _redact(self, text: str) -> str:
        """``text`` without the API key: a server or proxy may echo the Authorization header
        into its error body, and error texts are printed and counted in results.json."""
        key = os.environ.get(self.settings.api_key_env)
        return text.replace(key, "[redacted]") if key else text

    def _payload(self, prompt: Any, sampling: Sampling, index: int) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "seed": sampling.seed + index,
        }
        if not sampling.greedy:
            payload["top_p"] = sampling.top_p
        if sampling.stop:
            payload["stop"] = list(sampling.stop)
        if sampling.ignore_eos:
            payload["ignore_eos"] = True  # a vLLM extension; other servers ignore or reject it
        if self.settings.api == "chat":
            payload["messages"] = prompt
        else:
            payload["prompt"] = prompt
        return payload

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``base_url + path`` with timeout and retries; the parsed JSON reply."""
        url = self.settings.base_url.rstrip("/") + path
        body = json.dumps(payload).encode("utf-8")
        delay = self.settings.backoff_s
        last_problem = ""
        for attempt in range(self.settings.max_retries + 1):
            retry_after = None
            request = urllib.request.Request(url, data=body, headers=self._headers(), method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as error:
                detail = _error_detail(error)
                last_problem = f"HTTP {error.code} from {url}: {detail}"
                if error.code not in RETRYABLE_STATUS:
                    raise RequestFailed(redact_secrets(self._redact(last_problem))) from None
                retry_after = _retry_after_seconds(error.headers.get("Retry-After") if error.headers else None)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                reason = getattr(error, "reason", error)
                last_problem = f"{type(reason).__name__} from {url}: {reason}"
            except json.JSONDecodeError as error:
                last_problem = f"invalid JSON from {url}: {error}"
            if attempt == self.settings.max_retries:
                break
            self.retries_used += 1
            wait = retry_after if retry_after is not None else min(MAX_BACKOFF_S, delay) * (0.5 + random.random())
            self._sleep(min(MAX_BACKOFF_S, wait))
            delay *= 2
        raise RequestFailed(redact_secrets(self._redact(f"{last_problem} (gave up after {self.settings.max_retries + 1} attempts)")))  # the URL may hold credentials

    def complete(self, prompt: Any, sampling: Sampling, index: int) -> Completion:
        path = "/chat/completions" if self.settings.api == "chat" else "/completions"
        try:
            reply = self.post(path, self._payload(prompt, sampling, index))
            choice = reply["choices"][0]
            text = choice["message"]["content"] if self.settings.api == "chat" else choice["text"]
            text = self._redact(text or "")  # a server that echoes headers must not put the key in samples.jsonl
        except RequestFailed as error:
            return Completion(index=index, text="", tokens=0, prompt_tokens=0, finish_reason="error", error=str(error))
        except (KeyError, IndexError, TypeError) as error:
            return Completion(index=index, text="", tokens=0, prompt_tokens=0, finish_reason="error", error=f"unexpected reply shape: {error!r}")
        usage = reply.get("usage") or {}
        reason = choice.get("finish_reason") or "stop"
        text, reason = _restore_stop(text, reason, choice.get("stop_reason", ABSENT), sampling.stop)
        return Completion(
            index=index,
            text=text,
            tokens=int(usage.get("completion_tokens") or 0),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            finish_reason=reason,
        )

    def generate(self, prompts: Sequence[Any], sampling: Sampling) -> Iterator[Completion]:
        with ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool:
            futures = [pool.submit(self.complete, prompt, sampling, index) for index, prompt in enumerate(prompts)]
            try:
                for future in as_completed(futures):
                    yield future.result()
            finally:
                for future in futures:
                    future.cancel()


def _restore_stop(text: str, reason: str, stop_reason: Any, stop: Sequence[str]) -> tuple[str, str]:
    """Put back the stop string a server removed; map the server's finish reason to ours."""
    if reason == "length":
        return text, "length"
    if isinstance(stop_reason, str) and stop_reason in stop:
        return text + stop_reason, "stop"
    if stop_reason is ABSENT and "</answer>" in stop and text.rfind("<answer>") > text.rfind("</answer>"):
        return text + "</answer>", "stop"
    return text, "eos" if reason == "stop" else reason


def _retry_after_seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _error_detail(error: urllib.error.HTTPError) -> str:
    try:
        body = error.read().decode("utf-8", "replace")
    except Exception:  # a body that cannot be read says nothing more than the status
        return error.reason or ""
    try:
        message = json.loads(body).get("error", {})
        if isinstance(message, dict):
            message = message.get("message", "")
        return str(message)[:300] or body[:300]
    except (json.JSONDecodeError, AttributeError):
        return body[:300]
