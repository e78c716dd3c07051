"""Helpers of the reliability suite: the CLI as a subprocess, polling, killing, reading logs.

Subprocess tests run ``python -m tomrl ...`` with ``TOMRL_HOME`` pointing at the session's
hermetic home (see conftest.py), ``OMP_NUM_THREADS=1`` and no ``TOMRL_DATA``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(TOMRL_HOME=str(home), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    env.pop("TOMRL_DATA", None)
    env.update(extra)
    return env


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m tomrl ARGS`` to completion."""
    return subprocess.run([sys.executable, "-m", "tomrl", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def start_cli(args: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen:
    """``python -m tomrl ARGS`` in the background, stdout and stderr to ``log``.

    SIGINT is reset to its default in the child: a test run started in the background by a shell
    (``make test &``, nohup) inherits SIGINT *ignored*, and Python then installs no KeyboardInterrupt
    handler, so the Ctrl-C tests would see runs that cannot be interrupted.
    """
    with open(log, "w") as handle:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "tomrl", *args], env=env, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, text=True,
            preexec_fn=_default_sigint,
        )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_until(condition: Callable[[], bool], process: subprocess.Popen, timeout: float, poll: float = 0.02) -> bool:
    """Poll ``condition`` until it holds (True), the process ends or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return condition()
        time.sleep(poll)
    return False


def kill(process: subprocess.Popen, sig: int = signal.SIGKILL, timeout: float = 120) -> int:
    """Send ``sig`` to a process this test started and wait for it; its exit code."""
    if process.poll() is None:
        process.send_signal(sig)
    return process.wait(timeout=timeout)


def complete_lines(path: Path) -> list[str]:
    """The newline-terminated lines of a JSONL file (a torn last line is left out)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return [line.decode("utf-8") for line in data.split(b"\n")[:-1] if line.strip()]


def jsonl_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in complete_lines(path)]


def leftover_temp_files(folder: Path) -> list[Path]:
    """Temporary files of :func:`tomrl.io.atomic_open` (``.NAME.XXXX.tmp``) left in ``folder``."""
    return sorted(p for p in folder.rglob(".*.tmp"))


def one_error(err: str, alone: bool = True) -> str:
    """The one ``tomrl: error:`` line of a command's stderr (no traceback). ``alone``: it is all of stderr;
    else it is the last line and no other line is an error (progress lines may come before it)."""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert "Traceback" not in err, err
    if alone:
        assert len(lines) == 1 and lines[0].startswith("tomrl: error:"), err
        return lines[0]
    assert lines and lines[-1].startswith("tomrl: error:"), err
    assert sum(line.startswith("tomrl: error:") for line in lines) == 1, err
    return lines[-1]
