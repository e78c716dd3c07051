"""Safety: no remote code unless asked, safetensors only, OpenAI-compatible clients with timeouts,
retries with backoff, and API keys that are never logged.

Faults injected: a model folder whose config points at its own Python code (which would leave a
marker file if it ran); a model folder holding only a pickled ``pytorch_model.bin``; a local HTTP
server that fails (503, 429 with Retry-After, 400), answers too slowly, or echoes the request's
``Authorization`` header back in its error body.
"""

from __future__ import annotations

import ast
import http.server
import json
import threading
import time
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT

SOURCE = REPO_ROOT / "src" / "tomrl"
SECRET = "sk-tomrl-test-SECRET-0123456789"

# --------------------------------------------------------------------------- remote code


# transformers copies a repository's code into its modules cache before running it, so the
# marker's path is written into the code itself.
EVIL_CODE = '''
from pathlib import Path
Path(MARKER).write_text("yes")
from transformers import PretrainedConfig, PreTrainedModel
class EvilConfig(PretrainedConfig):
    model_type = "tomrl_evil"
class EvilModel(PreTrainedModel):
    config_class = EvilConfig
'''


@pytest.fixture
def remote_code_model(tmp_path) -> Path:
    folder = tmp_path / "tomrl-remote-code-probe"
    folder.mkdir()
    (folder / "evil.py").write_text(EVIL_CODE.replace("MARKER", repr(str(folder / "REMOTE_CODE_RAN"))))
    config = {"model_type": "tomrl_evil", "architectures": ["EvilModel"],
              "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["evil.EvilTokenizer", None]}}))
    return folder


def test_load_model_never_runs_remote_code_by_default(remote_code_model):
    from tomrl.models import load_model, load_tokenizer

    with pytest.raises(Exception):
        load_model(str(remote_code_model))
    with pytest.raises(Exception):
        load_tokenizer(str(remote_code_model))
    assert not (remote_code_model / "REMOTE_CODE_RAN").exists()
    # Control: the folder's code does run once the user allows it (so the test above can fail).
    import shutil

    from transformers import dynamic_module_utils

    try:
        load_model(str(remote_code_model), trust_remote_code=True)
    except Exception:  # noqa: BLE001 - the fake model has no weights; only the marker matters
        pass
    finally:  # transformers copied the code into its modules cache: take it out again
        copied = Path(dynamic_module_utils.HF_MODULES_CACHE) / "transformers_modules" / remote_code_model.name.replace("-", "_hyphen_")
        shutil.rmtree(copied, ignore_errors=True)
    assert (remote_code_model / "REMOTE_CODE_RAN").exists()


def test_eval_never_runs_remote_code_by_default(remote_code_model, tmp_path, capsys):
    from tomrl.cli import main

    try:
        code = main(["eval", "--model", str(remote_code_model), "--benchmark", "tomrl-hitom-order0", "--limit", "1",
                     "--out", str(tmp_path / "run"), "heldout_n=1"])
    except Exception:  # noqa: BLE001 - any refusal will do here; clean errors are tested elsewhere
        code = 1
    assert code != 0
    assert not (remote_code_model / "REMOTE_CODE_RAN").exists()


def _calls_with_keyword(tree: ast.AST, keyword: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == keyword:
                    yield node, kw


def test_no_source_file_turns_remote_code_on():
    """trust_remote_code is only ever passed on from a parameter or config value, never set to True."""
    offenders = []
    for path in SOURCE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, kw in _calls_with_keyword(tree, "trust_remote_code"):
            if isinstance(kw.value, ast.Constant) and kw.value.value is not False:
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert not offenders, offenders


def test_remote_code_is_off_in_every_config_default():
    import dataclasses

    from tomrl.evaluation.config import EvalConfig
    from tomrl.training.config import TrainConfig

    for cls in (EvalConfig, TrainConfig):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if "trust_remote_code" in fields:
            assert fields["trust_remote_code"].default is False, cls


# --------------------------------------------------------------------------- safetensors only


@pytest.fixture(scope="module")
def pickled_model(tmp_path_factory) -> Path:
    """A tiny model saved only as pytorch_model.bin (a pickle), and a marker-free check of loading it."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder = tmp_path_factory.mktemp("pickled-model")
    config = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=64)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    config.save_pretrained(folder)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    assert not list(folder.glob("*.safetensors"))
    return folder


def test_load_model_refuses_pickled_weights(pickled_model):
    from tomrl.models import load_model

    with pytest.raises(OSError, match="safetensors"):
        load_model(str(pickled_model))
    # Control: transformers itself would unpickle it.
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(str(pickled_model)) is not None


def test_training_loads_models_as_safetensors_only():
    from tomrl.config import load_config
    from tomrl.training.config import TrainConfig
    from tomrl.training.run import grpo_arguments

    args = grpo_arguments(load_config(TrainConfig, str(REPO_ROOT / "configs/train/smoke_cpu.yaml"), ["run_dir=/tmp/unused"]))
    assert args.model_init_kwargs.get("use_safetensors") is True


def test_vllm_engine_asks_for_safetensors():
    tree = ast.parse((SOURCE / "generation" / "vllm.py").read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LLM"]
    assert calls
    for call in calls:
        formats = [kw.value for kw in call.keywords if kw.arg == "load_format"]
        assert formats and isinstance(formats[0], ast.Constant) and formats[0].value == "safetensors"


def test_no_pickle_loading_in_the_package():
    """No pickle.load / torch.load (pickle-based) / numpy allow_pickle (other than an explicit False) in tomrl's own code.

    The one exception: ``torch.load(..., weights_only=True)``, torch's restricted unpickler that builds tensors and
    allow-listed types only (the checkpoint check reads what the trainer would load on resume with it)."""
    offenders = []
    for path in SOURCE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = getattr(node.func.value, "id", "")
                restricted = (owner, node.func.attr) == ("torch", "load") and any(
                    kw.arg == "weights_only" and isinstance(kw.value, ast.Constant) and kw.value.value is True for kw in node.keywords)
                if (owner, node.func.attr) in {("pickle", "load"), ("pickle", "loads"), ("torch", "load"), ("joblib", "load")} and not restricted:
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
        for node, kw in _calls_with_keyword(tree, "allow_pickle"):
            if not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert not offenders, offenders


# --------------------------------------------------------------------------- OpenAI-compatible client


class FakeServer:
    """A local OpenAI-compatible server scripted per request: list of (status, body, delay_s, headers)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status, reply, delay, headers = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                if callable(reply):
                    reply = reply(self.headers, body)
                time.sleep(delay)
                data = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): what the test wants

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def chat_reply(text: str = "r</think><answer>green_drawer</answer>") -> dict:
    return {"choices": [{"message": {"content": text}, "finish_reason": "stop"}], "usage": {"completion_tokens": 5, "prompt_tokens": 9}}


def _engine(server: FakeServer, **settings):
    from tomrl.evaluation.config import OpenAISettings
    from tomrl.generation.openai import OpenAIEngine

    slept: list[float] = []
    engine = OpenAIEngine("m", OpenAISettings(base_url=server.base_url, **settings), sleep=slept.append)
    return engine, slept


def _sampling():
    from tomrl.generation.base import Sampling

    return Sampling(temperature=0.0, max_new_tokens=8)


def test_retries_server_errors_with_growing_backoff():
    with FakeServer([(503, {"error": "busy"}, 0, None), (502, {}, 0, None), (500, {}, 0, None), (200, chat_reply(), 0, None)]) as server:
        engine, slept = _engine(server, backoff_s=1.0, max_retries=5)
        done = engine.complete([{"role": "user", "content": "q"}], _sampling(), 0)
    assert done.finish_reason != "error" and done.text.endswith("</answer>")
    assert engine.retries_used == 3 and len(server.requests) == 4
    for attempt, seconds in enumerate(slept):  # base 1 s doubling, jitter in [0.5, 1.5)
        assert 0.5 * 2**attempt <= seconds < 1.5 * 2**attempt, slept


def test_honours_retry_after_on_429():
    with FakeServer([(429, {"error": "slow down"}, 0, {"Retry-After": "7"}), (200, chat_reply(), 0, None)]) as server:
        engine, slept = _engine(server)
        assert engine.complete([{"role": "user", "content": "q"}], _sampling(), 0).finish_reason != "error"
    assert slept == [7.0]


def test_client_errors_fail_at_once_and_are_not_recorded():
    with FakeServer([(400, {"error": {"message": "bad request"}}, 0, None)]) as server:
        engine, slept = _engine(server)
        done = engine.complete([{"role": "user", "content": "q"}], _sampling(), 0)
    assert done.finish_reason == "error" and "HTTP 400" in done.error and "bad request" in done.error
    assert slept == [] and len(server.requests) == 1


def test_a_slow_server_times_out_and_is_retried_then_given_up():
    with FakeServer([(200, chat_reply(), 2.0, None)]) as server:
        engine, slept = _engine(server, timeout_s=0.3, max_retries=1, backoff_s=0.01)
        started = time.perf_counter()
        done = engine.complete([{"role": "user", "content": "q"}], _sampling(), 0)
        seconds = time.perf_counter() - started
    assert done.finish_reason == "error" and "gave up after 2 attempts" in done.error
    assert len(server.requests) == 2 and len(slept) == 1
    assert seconds < 1.9, f"each attempt must stop at the 0.3 s timeout, took {seconds:.1f} s"


def _run_openai_eval(tmp_path, server: FakeServer, monkeypatch, capsys) -> tuple[int, str]:
    from tomrl.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    code = main(["eval", "--engine", "openai", "--model", "m", "--benchmark", "tomrl-hitom-order0", "--limit", "3",
                 "--out", str(tmp_path / "run"), "heldout_n=3", f"openai.base_url={server.base_url}", "openai.max_retries=1",
                 "openai.backoff_s=0.01"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _everything_written(folder: Path) -> str:
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in folder.rglob("*") if p.is_file())


def test_api_key_is_sent_but_never_logged_or_saved(tmp_path, monkeypatch, capsys):
    with FakeServer([(200, chat_reply(), 0, None)]) as server:
        code, printed = _run_openai_eval(tmp_path, server, monkeypatch, capsys)
    assert code == 0, printed
    assert all(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
    assert SECRET not in printed and SECRET not in _everything_written(tmp_path / "run")
    assert "OPENAI_API_KEY" in (tmp_path / "run" / "results.json").read_text()  # the variable's name, not its value


def _echo_headers(headers, body):
    return {"error": {"message": f"invalid key in {headers.get('Authorization')}"}}


def test_api_key_is_never_logged_even_when_the_server_echoes_it(tmp_path, monkeypatch, capsys):
    with FakeServer([(401, _echo_headers, 0, None)]) as server:
        code, printed = _run_openai_eval(tmp_path, server, monkeypatch, capsys)
    assert code == 1  # the prompts failed and are left for a retry
    assert SECRET not in printed and SECRET not in _everything_written(tmp_path / "run")
