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

Credentials go only to the server named by ``openai.base_url``: a redirect to another origin (scheme,
host or port) is refused, since urllib would carry the Authorization header along (see
:class:`_RefuseCrossOriginRedirects`). A key in the base URL, as userinfo (``https://user:KEY@host``)
or as a parameter (``?api-key=KEY``, kept after the endpoint's path), is redacted wherever the URL
is stored or printed; userinfo is sent as HTTP Basic authentication (when no key is set in the
environment), never as part of the host name. A reply that is not UTF-8 JSON with the expected
fields, or is larger than ``MAX_REPLY_BYTES``, is a one-line error naming the server's URL.

Servers drop the stop string from their output; when the server says it stopped on one (vLLM's
``stop_reason``) or, for servers that do not say, when the output ends inside an unclosed
``<answer>`` block, the stop string is put back, so outputs look the same as the local engines'.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Iterator, Sequence

from tomrl.generation.base import Completion, Sampling
from tomrl.io import redact_secrets

ABSENT = object()  # the reply has no stop_reason field (OpenAI's own API); None means "stopped at EOS" (vLLM)
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 60.0
# A completion is kilobytes; a reply larger than this comes from a broken or hostile server, and
# reading it whole would hold the memory (and the parse time) of every thread.
MAX_REPLY_BYTES = 16 * 2**20
MAX_ERROR_BODY_BYTES = 64 * 2**10  # of an HTTP error's body, of which 300 characters are quoted


class RequestFailed(RuntimeError):
    """A request that failed for good (after its retries, or with a non-retryable status)."""


class BadReply(ValueError):
    """A reply that cannot be used: too large, cut short, not UTF-8 or not JSON (retried, as a proxy's
    error page may be passing), or JSON without the expected fields (not retried)."""


class _RefuseCrossOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects within the base URL's origin only; refuse one to another origin.

    urllib copies every request header, Authorization included, onto the redirected request, even
    to another host (``requests`` strips it there). Refusing is chosen over following without the
    key: an API that wants a key would then fail with a misleading 401, and a server that moved is
    better named in the error so that the user points ``openai.base_url`` at it, knowing where the
    key goes. Same-origin redirects are followed: 307 and 308 repeat the POST there (urllib would
    refuse them), others are handled as urllib does (301-303 turn a POST into a GET).
    """

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if _origin(newurl) != _origin(req.full_url):
            fp.close()
            raise RequestFailed(
                f"HTTP {code} from {req.full_url} redirects to {newurl}, another origin; not followed, so that "
                "the API key is not sent there (set openai.base_url to the server that should get it)"
            )
        if code in (307, 308):
            return urllib.request.Request(newurl, data=req.data, headers=req.headers, method=req.get_method(),
                                          origin_req_host=req.origin_req_host, unverifiable=True)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_RefuseCrossOriginRedirects)  # replaces urllib's redirect handler


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
        # The URL requests go to has no userinfo: "user:KEY@host" would otherwise be looked up as a
        # host name, the key sent to the DNS resolver.
        parts = urllib.parse.urlsplit(settings.base_url)
        self._userinfo = parts.netloc.rpartition("@")[0]
        self._base_url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], fragment=""))

    def describe(self) -> dict:
        # The key's variable name is recorded, never its value.
        return {
            "engine": self.name,
            "model": self.model_name,
            "base_url": redact_secrets(self.settings.base_url),
            "api": self.settings.api,
            "api_key_env": self.settings.api_key_env,
            "concurrency": self.settings.concurrency,
        }

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.settings.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif self._userinfo:
            userinfo = urllib.parse.unquote(self._userinfo)
            headers["Authorization"] = "Basic " + base64.b64encode(userinfo.encode("utf-8")).decode("ascii")
        return headers

    def _redact(self, text: str) -> str:
        """``text`` without the API key: a server or proxy may echo the Authorization header
        into its error body, and error texts are printed and counted in results.json."""
        key = os.environ.get(self.settings.api_key_env)
        return text.replace(key, "[redacted]") if key else text

    def _error_message(self, text: str) -> str:
        """An error as it may be printed: one line, without the key, credentials in URLs redacted."""
        return _one_line(redact_secrets(self._redact(text)))

    def _endpoint(self, path: str) -> str:
        """``base_url`` with ``path`` appended to its path: a query (``?api-version=…``) stays last."""
        parts = urllib.parse.urlsplit(self._base_url)
        return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))

    def _payload(self, prompt: Any, sampling: Sampling, index: int) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "seed": sampling.seeds[index] if sampling.seeds is not None else sampling.seed + index,  # per question: resumes are exact
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
        """POST ``payload`` to ``base_url + path`` with timeout and retries; the parsed JSON reply.

        Every error is a :class:`RequestFailed` whose message is one line naming the URL (redacted)."""
        url = self._endpoint(path)
        body = json.dumps(payload).encode("utf-8")
        delay = self.settings.backoff_s
        last_problem = ""
        for attempt in range(self.settings.max_retries + 1):
            retry_after = None
            try:
                request = urllib.request.Request(url, data=body, headers=self._headers(), method="POST")
                with _OPENER.open(request, timeout=self.settings.timeout_s) as response:
                    return _read_reply(response, url)
            except RequestFailed as error:  # a redirect to another origin
                raise RequestFailed(self._error_message(str(error))) from None
            except urllib.error.HTTPError as error:
                last_problem = f"HTTP {error.code} from {url}: {_error_detail(error)}"
                if error.code not in RETRYABLE_STATUS:
                    raise RequestFailed(self._error_message(last_problem)) from None
                retry_after = _retry_after_seconds(error.headers.get("Retry-After") if error.headers else None)
            except BadReply as error:
                last_problem = str(error)
            except (ValueError, http.client.InvalidURL) as error:  # a base URL urllib cannot use (no scheme, bad port)
                raise RequestFailed(self._error_message(f"cannot send a request to {url}: {error}")) from None
            except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as error:
                # HTTPException: a status line or headers that are not HTTP, a body cut short.
                reason = getattr(error, "reason", error)
                last_problem = f"{type(reason).__name__} from {url}: {reason}"
            if attempt == self.settings.max_retries:
                break
            self.retries_used += 1
            wait = retry_after if retry_after is not None else min(MAX_BACKOFF_S, delay) * (0.5 + random.random())
            self._sleep(min(MAX_BACKOFF_S, wait))
            delay *= 2
        raise RequestFailed(self._error_message(f"{last_problem} (gave up after {self.settings.max_retries + 1} attempts)"))

    def complete(self, prompt: Any, sampling: Sampling, index: int) -> Completion:
        path = "/chat/completions" if self.settings.api == "chat" else "/completions"
        try:
            reply = self.post(path, self._payload(prompt, sampling, index))
            choice, text = _first_choice(reply, self.settings.api)
        except RequestFailed as error:
            return Completion(index=index, text="", tokens=0, prompt_tokens=0, finish_reason="error", error=str(error))
        except BadReply as error:
            message = self._error_message(f"the reply from {self._endpoint(path)} {error}")
            return Completion(index=index, text="", tokens=0, prompt_tokens=0, finish_reason="error", error=message)
        text = self._redact(text)  # a server that echoes headers must not put the key in samples.jsonl
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        reason = choice.get("finish_reason")
        reason = reason if isinstance(reason, str) and reason and reason != "error" else "stop"
        text, reason = _restore_stop(text, reason, choice.get("stop_reason", ABSENT), sampling.stop)
        return Completion(
            index=index,
            text=text,
            tokens=_count(usage.get("completion_tokens")),
            prompt_tokens=_count(usage.get("prompt_tokens")),
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


def _origin(url: str) -> tuple[str, str | None, int | None] | None:
    """(scheme, host, port) of ``url``, the port filled in from the scheme; None if it has none."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:  # a port that is not a number
        return None
    return parts.scheme.lower(), parts.hostname, port


def _read_reply(response, url: str) -> Any:
    """The JSON of ``response``'s body, read up to MAX_REPLY_BYTES; a BadReply naming ``url`` otherwise."""
    data = response.read(MAX_REPLY_BYTES + 1)
    if len(data) > MAX_REPLY_BYTES:
        raise BadReply(f"the reply from {url} is larger than {MAX_REPLY_BYTES // 2**20} MiB")
    if getattr(response, "length", None):  # read(amount) returns what came before the connection closed
        raise BadReply(f"the reply from {url} was cut short: {response.length} of its announced bytes never came")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadReply(f"the reply from {url} is not UTF-8 (byte {data[error.start]:#04x} at offset {error.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise BadReply(f"the reply from {url} is not JSON ({error.msg}: character {error.pos}): {text[:80]!r}") from None
    except (ValueError, RecursionError) as error:  # an integer of over 4300 digits; arrays nested thousands deep
        raise BadReply(f"the reply from {url} is not usable JSON ({type(error).__name__}: {str(error)[:100]})") from None


def _first_choice(reply: Any, api: str) -> tuple[dict, str]:
    """The first choice of an OpenAI reply and its text; a BadReply saying which field is wrong."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)):
        found = f"keys {[key[:40] for key in list(reply)[:8]]}" if isinstance(reply, dict) else f"a JSON {type(reply).__name__}"
        raise BadReply(f"has no choices list of objects (found {found})")
    choice = choices[0]
    if api == "chat":
        message = choice.get("message")
        text = message.get("content", ABSENT) if isinstance(message, dict) else ABSENT
        if text is None:  # a refusal or tool call: no content, an empty answer
            text = ""
        field = "choices[0].message.content"
    else:
        text, field = choice.get("text", ABSENT), "choices[0].text"
    if not isinstance(text, str):
        raise BadReply(f"has no string {field} (found {'nothing' if text is ABSENT else type(text).__name__})")
    return choice, text


def _count(value: Any) -> int:
    """A token count from the reply's usage; 0 when it is missing or not a count."""
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError, OverflowError):
        return 0


def _one_line(text: str) -> str:
    """``text`` with line breaks and control characters (a server's, or a terminal escape) as spaces."""
    return re.sub(r"[\s\x00-\x1f\x7f-\x9f]+", " ", text).strip()


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
        body = error.read(MAX_ERROR_BODY_BYTES).decode("utf-8", "replace")
    except Exception:  # a body that cannot be read says nothing more than the status
        return str(error.reason or "")
    try:
        message = json.loads(body).get("error", {})
        if isinstance(message, dict):
            message = message.get("message", "")
        return str(message)[:300] or body[:300]
    except (ValueError, RecursionError, AttributeError):  # not JSON, or not an object
        return body[:300]
