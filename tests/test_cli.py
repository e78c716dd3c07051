"""CLI wiring: every verb exists and has --help; user errors exit 2 with a clear message."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tomrl.cli import COMMANDS, main

VERBS = []
for verb, target in COMMANDS.items():
    if isinstance(target, str):
        VERBS.append([verb])
    else:
        VERBS.extend([verb, action] for action in target)


@pytest.mark.parametrize("words", VERBS, ids=" ".join)
def test_every_verb_has_help(words, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*words, "--help"])
    assert exit_info.value.code == 0
    assert "usage: tomrl " + " ".join(words) in capsys.readouterr().out


def test_required_verbs_exist():
    for words in (["data", "generate"], ["data", "load"], ["data", "audit"], ["reward", "score"], ["eval"], ["train"],
                  ["report"], ["models", "list"], ["models", "prepare"], ["demo"]):
        assert words in VERBS


def test_unknown_config_key_exits_2(capsys):
    assert main(["demo", "modle=x"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'modle'" in err and "did you mean 'model'" in err


def test_console_entry_point_runs():
    result = subprocess.run([sys.executable, "-m", "tomrl", "--help"], capture_output=True, text=True, check=True)
    assert "data" in result.stdout and "demo" in result.stdout
