"""Secrets never written to disk: credentials in a URL, and a key given where its variable's name belongs.

``openai.base_url=http://user:KEY@host/v1`` was hidden on stderr but stored in ``run.json`` and
``results.json``; ``openai.api_key_env=sk-…`` was accepted and saved. Every JSON file and saved
config now passes through :func:`tomrl.io.redact_secrets`, and ``api_key_env`` must be a variable name.
"""

from __future__ import annotations

import json

import pytest
from test_safety import SECRET, FakeServer, _everything_written, chat_reply

from tomrl.cli import main
from tomrl.config import ConfigError, load_config
from tomrl.evaluation.config import EvalConfig, generation_settings
from tomrl.io import atomic_write_json, redact_secrets


def test_credentials_in_a_base_url_are_never_stored(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeServer([(200, chat_reply(), 0, None)]) as server:
        url = server.base_url.replace("http://", f"http://user:{SECRET}@")
        code = main(["eval", "--engine", "openai", "--model", "m", "--benchmark", "tomrl-hitom-order0", "--limit", "2",
                     "--out", str(tmp_path / "run"), "heldout_n=2", f"openai.base_url={url}", "openai.max_retries=0"])
    printed = capsys.readouterr()
    assert code in (0, 1), printed.err
    written = _everything_written(tmp_path / "run")
    assert (tmp_path / "run" / "run.json").exists() and (tmp_path / "run" / "results.json").exists()
    assert SECRET not in written and SECRET not in printed.out + printed.err
    assert "user:" not in written
    assert "http://***@127.0.0.1" in (tmp_path / "run" / "results.json").read_text()


def test_a_rerun_with_the_same_url_resumes_its_folder(tmp_path):
    """run.json stores the redacted URL; the resume check compares it with the redacted one."""
    cfg = load_config(EvalConfig, None, ["engine=openai", f"openai.base_url=http://u:{SECRET}@host/v1"])
    assert generation_settings(cfg)["openai_base_url"] == "http://***@host/v1"


@pytest.mark.parametrize("value", [SECRET, "sk-proj-abcdefghijklmnopqrstuvwxyz0123", "hf_" + "a1B2" * 9, "my key"])
def test_a_key_given_as_the_variable_name_is_refused_without_echoing_it(value):
    with pytest.raises(ConfigError) as err:
        load_config(EvalConfig, None, [f"openai.api_key_env={value}"])
    assert "must name the environment variable" in str(err.value)
    assert value not in str(err.value) or value == "my key"


def test_variable_names_are_accepted():
    for name in ("OPENAI_API_KEY", "MY_SERVER_KEY", "_X1"):
        assert load_config(EvalConfig, None, [f"openai.api_key_env={name}"]).openai.api_key_env == name


def test_every_json_file_is_redacted(tmp_path):
    atomic_write_json(tmp_path / "x.json", {"url": f"https://user:{SECRET}@example.com/v1", "nested": [{"key": SECRET}],
                                           "plain": "http://127.0.0.1:8000/v1"})
    text = (tmp_path / "x.json").read_text()
    assert SECRET not in text
    assert json.loads(text)["plain"] == "http://127.0.0.1:8000/v1"
    assert redact_secrets("ftp://a@b/c") == "ftp://***@b/c"
