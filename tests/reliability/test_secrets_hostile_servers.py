"""Secrets and hostile servers: the openai engine against real local HTTP servers that misbehave.

Each server is an ``http.server`` on 127.0.0.1 with a port of its own, so two of them are two
origins. Faults: a redirect to another origin (urllib would carry the Authorization header there),
a key in the base URL (as userinfo or as ``?api-key=``), and replies that are not UTF-8, not JSON,
not the expected shape, nested too deeply, too large, cut short, or not HTTP at all. Each must be a
one-line error naming the server (credentials redacted), never a traceback or a leaked key.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT

from tomrl.generation.base import Sampling
from tomrl.generation.openai import MAX_REPLY_BYTES, OpenAIEngine
from tomrl.generation.settings import OpenAISettings

KEY = "sk-tomrl-hostile-KEY-0123456789abcdef"  # the API key, from the environment
URL_SECRET = "hunter2QuerySecret77"  # a key given in the base URL: not key-shaped, so only URL redaction hides it
MESSAGES = [{"role": "user", "content": "Where is the ball?"}]


def chat_reply(text: str = "<think>t</think><answer>box</answer>") -> bytes:
    return json.dumps({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                       "usage": {"completion_tokens": 5, "prompt_tokens": 9}}).encode()


class Origin:
    """A local HTTP server that records every request and answers with ``respond(request) -> (status, headers, body)``.

    ``respond`` may return None to write nothing itself (it then wrote raw bytes to ``request["wfile"]``).
    """

    def __init__(self, respond):
        self.requests: list[dict] = []
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body,
                           "wfile": self.wfile}
                origin.requests.append(request)
                answer = respond(request)
                if answer is None:
                    return
                status, headers, data = answer
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    if "Content-Length" not in headers:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading (a reply over the size limit)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # A short poll, so that shutdown() does not wait the default half second.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "Origin":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def answering(status: int = 200, data: bytes = b"", headers: dict | None = None):
    return lambda request: (status, {"Content-Type": "application/json", **(headers or {})}, data)


def redirecting(code: int, location: str):
    return lambda request: (code, {"Location": location}, b"")


def engine_for(base_url: str, **settings) -> OpenAIEngine:
    return OpenAIEngine("m", OpenAISettings(base_url=base_url, max_retries=0, timeout_s=10, **settings), sleep=lambda s: None)


def complete(engine: OpenAIEngine):
    return engine.complete(MESSAGES, Sampling(temperature=0.0, max_new_tokens=8), 0)


def assert_one_line_error(done, *names: str) -> str:
    assert done.finish_reason == "error" and done.error, done
    assert "\n" not in done.error and "\r" not in done.error and "\x1b" not in done.error, repr(done.error)
    assert "Traceback" not in done.error
    assert KEY not in done.error and URL_SECRET not in done.error, done.error
    for name in names:
        assert name in done.error, (name, done.error)
    return done.error


# --------------------------------------------------------------------------- redirects


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_refused_and_the_key_never_reaches_it(code, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Origin(answering(200, chat_reply())) as other:
        with Origin(redirecting(code, f"{other.root}/v1/chat/completions")) as server:
            done = complete(engine_for(f"{server.root}/v1"))
    assert other.requests == [], "the other origin must not be contacted at all"
    assert server.requests[0]["headers"].get("Authorization") == f"Bearer {KEY}"  # the key went where it was meant to
    error = assert_one_line_error(done, server.root, other.root, "another origin")
    assert f"HTTP {code}" in error


def test_control_plain_urllib_would_forward_the_key_to_the_other_origin():
    """Why the engine needs its own redirect handler: urllib's default follows with every header."""
    with Origin(answering(200, chat_reply())) as other:
        with Origin(redirecting(302, f"{other.root}/v1/chat/completions")) as server:
            request = urllib.request.Request(f"{server.root}/v1/chat/completions", data=b"{}",
                                             headers={"Authorization": f"Bearer {KEY}"}, method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
    assert other.requests and other.requests[0]["headers"].get("Authorization") == f"Bearer {KEY}"


def test_a_same_origin_redirect_is_followed_and_keeps_the_post(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def respond(request):
        if request["path"] == "/v1/chat/completions":
            return 307, {"Location": "/v2/chat/completions"}, b""
        return 200, {"Content-Type": "application/json"}, chat_reply()

    with Origin(respond) as server:
        done = complete(engine_for(f"{server.root}/v1"))
    assert done.finish_reason != "error" and done.text.endswith("</answer>"), done
    moved = server.requests[1]
    assert moved["method"] == "POST" and moved["path"] == "/v2/chat/completions"
    assert moved["headers"].get("Authorization") == f"Bearer {KEY}" and json.loads(moved["body"])["messages"] == MESSAGES


def test_a_same_origin_hop_then_another_origin_is_still_refused(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Origin(answering(200, chat_reply())) as other:
        def respond(request):
            if request["path"] == "/v1/chat/completions":
                return 308, {"Location": "/moved/chat/completions"}, b""
            return 302, {"Location": f"{other.root}/v1/chat/completions"}, b""

        with Origin(respond) as server:
            done = complete(engine_for(f"{server.root}/v1"))
    assert other.requests == []
    assert_one_line_error(done, other.root, "another origin")


def test_another_host_name_or_scheme_for_the_same_server_is_another_origin(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Origin(answering(200, chat_reply())) as other:
        with Origin(redirecting(302, other.root.replace("127.0.0.1", "localhost") + "/v1/chat/completions")) as host_change, \
             Origin(redirecting(302, "https" + other.root[4:] + "/v1/chat/completions")) as scheme_change:
            for server in (host_change, scheme_change):
                assert_one_line_error(complete(engine_for(f"{server.root}/v1")), "another origin")
    assert other.requests == []


# --------------------------------------------------------------------------- keys in the base URL


def test_a_key_in_the_query_reaches_the_server_and_never_an_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Origin(answering(200, chat_reply())) as server:
        engine = engine_for(f"{server.root}/v1?api-key={URL_SECRET}")
        done = complete(engine)
    assert done.finish_reason != "error", done
    assert server.requests[0]["path"] == f"/v1/chat/completions?api-key={URL_SECRET}"  # the path before the query
    assert URL_SECRET not in json.dumps(engine.describe()) and "api-key=***" in engine.describe()["base_url"]


@pytest.mark.parametrize("parameter", ["api-key", "key", "API_KEY", "Token", "access_token", "apikey", "auth", "subscription-key"])
def test_a_key_in_the_query_is_redacted_from_errors(parameter, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Origin(answering(401, json.dumps({"error": {"message": "bad key"}}).encode())) as server:
        done = complete(engine_for(f"{server.root}/v1?x=1&{parameter}={URL_SECRET}"))
    error = assert_one_line_error(done, server.root, "HTTP 401", "bad key")
    assert f"{parameter}=***" in error


def test_userinfo_is_sent_as_basic_auth_never_in_the_host_name(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Origin(answering(200, chat_reply())) as server:
        engine = engine_for(server.root.replace("http://", f"http://user:{URL_SECRET}@") + "/v1")
        done = complete(engine)
    assert done.finish_reason != "error", done
    headers = server.requests[0]["headers"]
    assert headers["Authorization"] == "Basic " + base64.b64encode(f"user:{URL_SECRET}".encode()).decode()
    assert URL_SECRET not in headers["Host"]
    assert engine.describe()["base_url"] == server.root.replace("http://", "http://***@") + "/v1"


# --------------------------------------------------------------------------- hostile replies


def _not_http(request):
    request["wfile"].write(b"SURPRISE \x00\xff not an HTTP status line\r\n\r\n")
    return None


def _cut_short(request):
    return 200, {"Content-Type": "application/json", "Content-Length": "5000"}, chat_reply()[:40]


ESCAPES = "line one\nline two\r\n\x1b[31mred\x1b[0m"
BAD_REPLIES = {
    "html": (answering(200, b"<html><body>Bad gateway</body></html>"), "is not JSON"),
    "not UTF-8": (answering(200, b'{"choices": [{"message": {"content": "caf\xe9"}}]}'), "is not UTF-8 (byte 0xe9"),
    "no choices": (answering(200, b'{"error": "quota"}'), "has no choices list of objects (found keys ['error'])"),
    "empty choices": (answering(200, b'{"choices": []}'), "has no choices list"),
    "a list": (answering(200, b"[1, 2]"), "found a JSON list"),
    "choice not an object": (answering(200, b'{"choices": ["text"]}'), "has no choices list of objects"),
    "content not a string": (answering(200, b'{"choices": [{"message": {"content": 5}}]}'),
                             "has no string choices[0].message.content (found int)"),
    "no message": (answering(200, b'{"choices": [{"text": "hi"}]}'), "has no string choices[0].message.content (found nothing)"),
    "nested deep": (answering(200, b"[" * 200_000), "is not usable JSON (RecursionError"),
    "huge number": (answering(200, b'{"choices": [{"message": {"content": "x"}}], "n": ' + b"9" * 5000 + b"}"), "is not usable JSON"),
    "too large": (answering(200, b" " * (MAX_REPLY_BYTES + 10)), "is larger than 16 MiB"),
    "cut short": (_cut_short, "was cut short: 4960 of its announced bytes never came"),
    "not HTTP": (_not_http, "BadStatusLine"),
    "error body with line breaks": (answering(400, json.dumps({"error": {"message": ESCAPES}}).encode()), "line one line two"),
}


@pytest.mark.parametrize("case", list(BAD_REPLIES))
def test_a_hostile_reply_is_a_one_line_error_naming_the_server(case, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    respond, expected = BAD_REPLIES[case]
    with Origin(respond) as server:
        done = complete(engine_for(f"{server.root}/v1?key={URL_SECRET}"))
    assert_one_line_error(done, f"{server.root}/v1/chat/completions?key=***", expected)


def test_a_completions_reply_whose_text_is_not_a_string_is_an_error(tiny_llama):
    with Origin(answering(200, b'{"choices": [{"text": ["a", "list"]}]}')) as server:
        engine = engine_for(f"{server.root}/v1", api="completions", tokenizer=str(tiny_llama))
        done = engine.complete("rendered prompt", Sampling(temperature=0.0, max_new_tokens=8), 0)
    assert_one_line_error(done, server.root, "has no string choices[0].text (found list)")


def test_ill_typed_usage_and_finish_reason_are_ignored_not_fatal():
    body = {"choices": [{"message": {"content": "<answer>box</answer>"}, "finish_reason": 5}],
            "usage": {"completion_tokens": "many", "prompt_tokens": 1e400}}
    with Origin(answering(200, json.dumps(body).encode())) as server, Origin(answering(200, b'{"choices": [{"message": {"content": "x"}}], "usage": [1]}')) as other:
        done = complete(engine_for(f"{server.root}/v1"))
        also = complete(engine_for(f"{other.root}/v1"))
    assert done.finish_reason == "eos" and done.tokens == 0 and done.prompt_tokens == 0 and done.text.endswith("</answer>")
    assert also.finish_reason == "eos" and also.tokens == 0


# --------------------------------------------------------------------------- the CLI


def _run_cli(tmp_path: Path, base_url: str, env_key: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    if env_key:
        env["OPENAI_API_KEY"] = env_key
    command = [sys.executable, "-m", "tomrl", "eval", "--engine", "openai", "--model", "m", "--benchmark", "tomrl-hitom-order0",
               "--limit", "2", "--out", str(tmp_path / "run"), "heldout_n=2", f"openai.base_url={base_url}",
               "openai.max_retries=0", "openai.concurrency=1"]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)


def _everything_written(folder: Path) -> str:
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in folder.rglob("*") if p.is_file())


def test_cli_a_key_in_the_base_url_query_is_in_no_file_and_not_on_the_terminal(tmp_path):
    with Origin(answering(200, chat_reply())) as server:
        done = _run_cli(tmp_path, f"{server.root}/v1?api-key={URL_SECRET}", env_key=None)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(r["path"].endswith(f"/chat/completions?api-key={URL_SECRET}") for r in server.requests)
    assert URL_SECRET not in done.stdout + done.stderr
    assert URL_SECRET not in _everything_written(tmp_path / "run")
    assert "api-key=***" in (tmp_path / "run" / "run.json").read_text()
    assert "api-key=***" in (tmp_path / "run" / "results.json").read_text()


def test_cli_a_redirect_to_another_origin_fails_in_one_line_per_prompt(tmp_path):
    with Origin(answering(200, chat_reply())) as other:
        with Origin(redirecting(302, f"{other.root}/v1/chat/completions?stolen=1")) as server:
            done = _run_cli(tmp_path, f"{server.root}/v1?api-key={URL_SECRET}", env_key=KEY)
    assert done.returncode == 1, done.stderr[-3000:]
    assert other.requests == []
    assert "Traceback" not in done.stderr
    failures = [line for line in done.stderr.splitlines() if "another origin" in line]
    assert len(failures) == 2 and all(other.root in line and server.root in line for line in failures), done.stderr
    assert KEY not in done.stdout + done.stderr and URL_SECRET not in done.stdout + done.stderr
    assert KEY not in _everything_written(tmp_path / "run") and URL_SECRET not in _everything_written(tmp_path / "run")


def test_cli_a_server_that_replies_garbage_fails_without_a_traceback(tmp_path):
    with Origin(answering(200, b"\xff\xfe garbage")) as server:
        done = _run_cli(tmp_path, f"{server.root}/v1", env_key=KEY)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "is not UTF-8" in done.stderr
    assert KEY not in done.stdout + done.stderr
