"""One process per run folder: a second ``tomrl eval`` / ``train`` / ``demo`` on the same folder fails at once.

Without a lock two evaluations into one ``--out`` both generated every answer and interleaved their
rows. ``tomrl.io.locked_folder`` takes an exclusive lock (``filelock``) on ``.NAME.lock`` beside the
run folder; the loser exits 2 with one line naming the holder's pid. The kernel drops the lock when
the holder dies, so a killed run never leaves its folder locked.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from reliability_helpers import REPO_ROOT, cli_env, complete_lines, kill, run_cli, start_cli, wait_until

from tomrl.cli import main

SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")

HOLDER = """
import sys, time
from tomrl.io import locked_folder
with locked_folder(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def held_lock(tmp_path):
    """A child process holding the lock of ``tmp_path / 'run'``; yields (folder, pid)."""
    folder = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    yield folder, child.pid
    kill(child)


def _verb_args(verb: str, folder) -> list[str]:
    return {
        "eval": ["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0", "--limit", "2", "--out", str(folder), "heldout_n=2"],
        "train": ["train", "--config", SMOKE, f"run_dir={folder}"],
        "demo": ["demo", f"out_dir={folder}"],
    }[verb]


@pytest.mark.parametrize("verb", ["eval", "train", "demo"])
def test_a_second_process_on_a_locked_folder_fails_naming_the_holder(held_lock, verb, capsys, hermetic_home, monkeypatch):
    monkeypatch.setenv("TOMRL_HOME", str(hermetic_home))
    folder, pid = held_lock
    assert main(_verb_args(verb, folder)) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("tomrl: error:") and "Traceback" not in err, err
    assert f"in use by tomrl (pid {pid})" in lines[-1]
    assert not folder.exists()  # nothing was done


def test_the_lock_goes_with_a_killed_holder(tmp_path):
    from tomrl.io import locked_folder

    folder = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    kill(child, signal.SIGKILL)
    with locked_folder(folder):
        pass
    assert not list(tmp_path.glob(".*.lock")), "the lock file is left behind"


def test_two_evaluations_into_one_folder_do_the_work_once(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    out = tmp_path / "run"
    args = ["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0", "--limit", "8", "--greedy", "--out", str(out),
            "heldout_n=8", "max_new_tokens=256", "batch_size=1", "hf_mode=slots"]
    first = start_cli(args, env, tmp_path, tmp_path / "first.log")
    try:
        assert wait_until(lambda: (tmp_path / ".run.lock").exists(), first, timeout=120)
        second = run_cli(args, env, tmp_path)
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"in use by tomrl eval (pid {first.pid})" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        code = first.wait(timeout=600)
    assert code == 0, (tmp_path / "first.log").read_text()[-2000:]
    rows = complete_lines(out / "samples.jsonl")
    assert len(rows) == 8
