"""A full disk: one error line naming the file and the free space, and a run that resumes once space is freed.

Each test runs tomrl in a user and mount namespace (``unshare -rm``, no root needed) on a tmpfs too
small for the work, so the writes fail with a real ENOSPC; the tmpfs is then grown in place
(``mount -o remount,size=…``: it lives only as long as the namespace, so one shell script does
both) and the same command, or ``tomrl train --resume``, finishes the work. Before, the full disk
was a traceback: Python's ``OSError: [Errno 28]`` with no file name, safetensors' "I/O error: No
space left on device (os error 28)", and torch.save's "basic_ios::clear: iostream error" /
"unexpected pos", which carries no errno at all (:func:`tomrl.io.disk_full`).

    .venv/bin/python -m pytest tests/reliability/test_disk_full.py             # the two that train and resume: -m slow
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, cli_env, jsonl_rows, one_error, run_cli

SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")
TINY_RUN = ["eval.at_start=false", "eval.every_steps=0", "progress=false", "max_completion_length=8", "report_to=[]", "save_every=1"]
EVAL = ["--benchmark", "tomrl-hitom-order0", "--limit", "3", "heldout_n=3", "max_new_tokens=4"]


@pytest.fixture(scope="module")
def tmpfs_namespaces(tmp_path_factory) -> None:
    """Skip unless this machine lets an unprivileged user mount a tmpfs in a namespace of its own."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare command (util-linux) on this machine")
    mount_point = tmp_path_factory.mktemp("probe")
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {mount_point}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces with a tmpfs mount are not allowed here (unshare -rm: {probe.stderr.strip()[:200]})")


class Namespace:
    """A shell script run in one user + mount namespace, whose tmpfs is mounted at ``mount``; each
    tomrl command's stdout, stderr and exit status are kept in ``logs`` (outside the tmpfs)."""

    def __init__(self, tmp_path: Path):
        self.mount = tmp_path / "mnt"
        self.logs = tmp_path / "logs"
        self.mount.mkdir()
        self.logs.mkdir()
        self.lines = ["set -u"]

    def size(self, size: str, remount: bool = False) -> None:
        options = f"remount,size={size}" if remount else f"size={size}"
        self.lines.append(f"mount -t tmpfs -o {options} tmpfs {shlex.quote(str(self.mount))}")

    def tomrl(self, name: str, *args: str) -> None:
        command = shlex.join([sys.executable, "-m", "tomrl", *args])
        log = shlex.quote(str(self.logs / name))
        self.lines.append(f"{command} > {log}.out 2> {log}.err; echo $? > {log}.rc")

    def shell(self, line: str) -> None:
        self.lines.append(line)

    def run(self, env: dict[str, str], timeout: float = 600) -> None:
        result = subprocess.run(["unshare", "-rm", "sh", "-c", "\n".join(self.lines)], env=env, cwd=self.logs, capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, result.stderr[-3000:]

    def result(self, name: str) -> tuple[int, str, str]:
        return int((self.logs / f"{name}.rc").read_text()), (self.logs / f"{name}.out").read_text(), (self.logs / f"{name}.err").read_text()


def test_data_generate_and_eval_on_a_full_disk(tmp_path, hermetic_home, tmpfs_namespaces):
    space = Namespace(tmp_path)
    out = space.mount / "hitom.jsonl"
    space.size("64k")
    space.tomrl("generate", "data", "generate", "hitom", "--n", "2000", "--out", str(out))
    space.shell(f"ls -A {shlex.quote(str(space.mount))} > {shlex.quote(str(space.logs / 'after_generate'))}")
    space.size("12k", remount=True)
    space.tomrl("eval_full", "eval", "--model", "tiny-qwen2", "--out", str(space.mount / "eval"), *EVAL)
    space.size("8m", remount=True)
    space.tomrl("eval_rerun", "eval", "--model", "tiny-qwen2", "--out", str(space.mount / "eval"), *EVAL)
    space.shell(f"cp -r {shlex.quote(str(space.mount / 'eval'))} {shlex.quote(str(tmp_path / 'eval'))}")
    space.run(cli_env(hermetic_home))

    code, _, err = space.result("generate")
    assert code == 2
    line = one_error(err, alone=False)
    assert line.startswith(f"tomrl: error: no space left on device while writing {out} (") and "MB free on that filesystem); free some space and rerun the same command" in line, line
    assert (space.logs / "after_generate").read_text() == ""  # no half file, no temporary file

    code, _, err = space.result("eval_full")
    assert code == 2
    line = one_error(err, alone=False)
    assert f"no space left on device while writing {space.mount / 'eval'}/" in line and line.endswith("free some space and rerun the same command — it resumes"), line
    code, _, err = space.result("eval_rerun")
    assert code == 0, err[-3000:]
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert results and len(jsonl_rows(tmp_path / "eval" / "samples.jsonl")) == 3


def test_train_on_a_disk_too_small_for_its_first_checkpoint(tmp_path, hermetic_home, tmpfs_namespaces):
    """torch.save runs out of space in optimizer.pt (12.9 MB of weights fit in 30 MB, not 25.8 MB more)."""
    space = Namespace(tmp_path)
    run_dir = space.mount / "run"
    space.size("30m")
    space.tomrl("train", "train", "--config", SMOKE, f"run_dir={run_dir}", "max_steps=1", *TINY_RUN)
    space.shell(f"ls -A {shlex.quote(str(run_dir / 'checkpoints'))} > {shlex.quote(str(space.logs / 'checkpoints'))}")
    space.run(cli_env(hermetic_home))

    code, _, err = space.result("train")
    assert code == 2
    line = one_error(err, alone=False)
    assert line.startswith(f"tomrl: error: no space left on device while writing {run_dir}/checkpoints/checkpoint-1 (") and line.endswith(
        f"free some space and resume with: tomrl train --resume {run_dir}"
    ), line
    assert (space.logs / "checkpoints").read_text().split() == ["README.md"]  # the partial checkpoint is gone with its space


@pytest.mark.slow  # two training runs: ~16 s idle, 28 s on the busy 2-core machine
def test_train_stopped_while_writing_final_resumes_without_training_again(tmp_path, hermetic_home, tmpfs_namespaces):
    """checkpoint-1 fits in 50 MB, final/ does not (safetensors runs out of space); ``--resume`` then
    writes final/ from checkpoint-1 without training a step past max_steps."""
    space = Namespace(tmp_path)
    run_dir = space.mount / "run"
    space.size("50m")
    space.tomrl("train", "train", "--config", SMOKE, f"run_dir={run_dir}", "max_steps=1", *TINY_RUN)
    space.shell(f"ls -A {shlex.quote(str(run_dir))} > {shlex.quote(str(space.logs / 'run_dir'))}")
    space.size("200m", remount=True)
    space.tomrl("resume", "train", "--resume", str(run_dir))
    space.shell(f"cp -r {shlex.quote(str(run_dir))} {shlex.quote(str(tmp_path / 'resumed'))}")
    space.run(cli_env(hermetic_home))

    code, _, err = space.result("train")
    assert code == 2
    line = one_error(err, alone=False)
    assert line.startswith(f"tomrl: error: no space left on device while writing {run_dir}/final/model.safetensors ("), line
    assert line.endswith(f"free some space and resume with: tomrl train --resume {run_dir}"), line
    assert "final" not in (space.logs / "run_dir").read_text().split()  # no final/ and no final.partial/
    code, out, err = space.result("resume")
    assert code == 0, err[-3000:]
    assert "writing final/ from it without training" in " ".join(out.split())
    resumed = tmp_path / "resumed"
    assert [row["step"] for row in jsonl_rows(resumed / "metrics.jsonl")] == [1]
    assert json.loads((resumed / "summary.json").read_text())["steps"] == 1
    assert (resumed / "final" / "model.safetensors").read_bytes() == (resumed / "checkpoints" / "checkpoint-1" / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_train_stopped_by_a_full_disk_resumes_to_the_uninterrupted_weights(tmp_path, hermetic_home, tmpfs_namespaces):
    """The second checkpoint does not fit (safetensors runs out of space in model.safetensors); the tmpfs is
    grown and ``--resume`` finishes the run with the weights of a run that never stopped."""
    env = cli_env(hermetic_home)
    reference = tmp_path / "reference"
    uninterrupted = run_cli(["train", "--config", SMOKE, f"run_dir={reference}", "max_steps=2", *TINY_RUN], env, tmp_path)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]

    space = Namespace(tmp_path)
    run_dir = space.mount / "run"
    space.size("48m")
    space.tomrl("train", "train", "--config", SMOKE, f"run_dir={run_dir}", "max_steps=2", *TINY_RUN)
    space.shell(f"ls -A {shlex.quote(str(run_dir / 'checkpoints'))} > {shlex.quote(str(space.logs / 'checkpoints'))}")
    space.size("200m", remount=True)
    space.tomrl("resume", "train", "--resume", str(run_dir))
    space.shell(f"cp -r {shlex.quote(str(run_dir))} {shlex.quote(str(tmp_path / 'resumed'))}")
    space.run(env)

    code, _, err = space.result("train")
    assert code == 2
    line = one_error(err, alone=False)
    assert f"no space left on device while writing {run_dir}/checkpoints/checkpoint-2 (" in line and f"resume with: tomrl train --resume {run_dir}" in line, line
    assert (space.logs / "checkpoints").read_text().split() == ["README.md", "checkpoint-1"]
    code, _, err = space.result("resume")
    assert code == 0, err[-3000:]
    resumed = tmp_path / "resumed"
    assert json.loads((resumed / "summary.json").read_text())["steps"] == 2
    assert [row["step"] for row in jsonl_rows(resumed / "metrics.jsonl")] == [1, 2]
    assert (resumed / "final" / "model.safetensors").read_bytes() == (reference / "final" / "model.safetensors").read_bytes()
