"""A small OpenAI-compatible HTTP server on 127.0.0.1 for the engine and resume tests.

It stands in for a remote API (the thing under test is tomrl's client, not the server): it answers
``/v1/chat/completions`` and ``/v1/completions`` the way OpenAI's API does (the stop string removed,
no ``stop_reason`` field), can fail the first requests with a given status, can be slow, and
records every request's path, headers and body.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAIServer:
    def __init__(
        self,
        answer: str = "box",
        delay_s: float = 0.0,
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: str | None = None,
        answer_fn=None,
    ):
        self.answer = answer
        self.answer_fn = answer_fn  # prompt text -> answer, instead of the fixed answer
        self.delay_s = delay_s
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.retry_after = retry_after
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    number = len(server.requests)
                if number <= server.fail_first:
                    self.send_response(server.fail_status)
                    if server.retry_after is not None:
                        self.send_header("Retry-After", server.retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(json.dumps({"error": {"message": "try again later"}}).encode())
                    return
                if server.delay_s:
                    time.sleep(server.delay_s)
                prompt = body["messages"][-1]["content"] if "messages" in body else body.get("prompt", "")
                answer = server.answer_fn(prompt) if server.answer_fn else server.answer
                text = f"<think>they moved it</think><answer>{answer}</answer>"
                if "</answer>" in (body.get("stop") or []):
                    text = text[: -len("</answer>")]  # the stop string stripped, as OpenAI does
                if self.path.endswith("/chat/completions"):
                    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                elif self.path.endswith("/completions"):
                    choice = {"index": 0, "text": text, "finish_reason": "stop"}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                reply = {"choices": [choice], "usage": {"prompt_tokens": 50, "completion_tokens": 9}}
                data = json.dumps(reply).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAIServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
