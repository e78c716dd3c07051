"""Where outputs go: devices, FIFOs, symlinks, unwritable paths, and temporary files a kill left.

``tomrl.io.atomic_open`` writes a temporary sibling and renames it over the target. A target that
is not a regular file (``/dev/null``, a FIFO, ``/dev/stdout``) must be written through or refused,
never replaced by the rename; an output that cannot be written at all is one error line on every
verb; a temporary file a SIGKILL left behind is removed by the next write to the same name.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest
from reliability_helpers import REPO_ROOT, cli_env, leftover_temp_files, one_error, run_cli

from tomrl.cli import main
from tomrl.io import BadInputError, atomic_write_text

GENERATE = ["data", "generate", "hitom", "--n", "3"]
SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_a_character_device_is_written_through_not_replaced(tmp_path, capsys):
    device = tmp_path / "nul"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a second /dev/null
    assert main([*GENERATE, "--out", str(device)]) == 0
    assert stat.S_ISCHR(os.lstat(device).st_mode), "the device was replaced by a regular file"
    assert not leftover_temp_files(tmp_path)


def test_a_fifo_is_written_through_when_read_and_refused_without_a_reader(tmp_path, capsys):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    # No reader: one error at once, not a hang, and the FIFO stays.
    assert main([*GENERATE, "--out", str(fifo)]) == 2
    assert "FIFO with no reader" in one_error(capsys.readouterr().err)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    # With a reader the rows arrive through it.
    reader = subprocess.Popen([sys.executable, "-c", f"import sys; sys.stdout.write(open({str(fifo)!r}).read())"], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while main([*GENERATE, "--out", str(fifo)]) != 0:  # until the reader has opened its end
        assert time.monotonic() < deadline
        time.sleep(0.1)
    received = reader.communicate(timeout=60)[0]
    assert len(received.splitlines()) == 3
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_dev_stdout_and_links_into_proc_are_written_through(tmp_path, hermetic_home):
    link = tmp_path / "so"
    link.symlink_to("/proc/self/fd/1")
    for out in ("/dev/stdout", str(link)):
        result = run_cli([*GENERATE, "--out", out], cli_env(hermetic_home), tmp_path, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count('"story"') == 3, result.stdout[:500]
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert not leftover_temp_files(tmp_path)


def test_a_symlink_to_a_regular_file_keeps_its_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_folder_or_socket_target_is_refused(tmp_path):
    import socket

    with pytest.raises(BadInputError, match="is a folder"):
        atomic_write_text(tmp_path, "x")
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with pytest.raises(BadInputError, match="is a socket"):
            atomic_write_text(path, "x")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()


def _unwritable_outputs(tmp_path):
    """(label, path) pairs that no verb can write to, whoever runs the test."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    return [
        ("a file as parent", a_file / "out"),
        ("a name over 255 bytes", tmp_path / ("n" * 300)),
        ("a parent under /proc", "/proc/no_such_folder/out"),
    ]


VERBS_WITH_OUT = {
    "data generate": lambda out, data: [*GENERATE, "--out", str(out)],
    "data check": lambda out, data: ["data", "check", str(data), "--out", str(out)],
    "data load": lambda out, data: ["data", "load", "jsonl", "--path", str(data), "--out", str(out)],
    "data verify": lambda out, data: ["data", "verify", str(data), "--json", str(out)],
    "data audit": lambda out, data: ["data", "audit", "--test", str(data), "--json", str(out)],
    "reward score": lambda out, data: ["reward", "score", "--reward", "strict", "--input", str(data), "--out", str(out)],
    "eval": lambda out, data: ["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0", "--limit", "1", "--out", str(out),
                               "heldout_n=2", "max_new_tokens=4"],
    "report": lambda out, data: ["report", str(data.parent / "no_runs_here"), "--out", str(out)],
    "export verl": lambda out, data: ["export", "verl", "--config", SMOKE, "--out", str(out)],
    "train": lambda out, data: ["train", "--config", SMOKE, f"run_dir={out}"],
    "demo": lambda out, data: ["demo", f"out_dir={out}"],
}


FOLDER_VERBS = {"eval", "train", "demo", "export verl", "report"}  # their output is a folder


@pytest.mark.parametrize("verb", sorted(VERBS_WITH_OUT))
def test_an_unwritable_out_is_one_error_line_on_every_verb(tmp_path, verb, generated_examples, hermetic_home, capsys, monkeypatch):
    from tomrl.io import write_jsonl

    monkeypatch.setenv("TOMRL_HOME", str(hermetic_home))
    data = tmp_path / "data.jsonl"
    hitom, _ = generated_examples
    if verb == "reward score":
        write_jsonl(data, [{"completion": "<think>x</think><answer>box</answer>", "answer": "box"}])
    else:
        write_jsonl(data, [e.to_dict() for e in hitom])
    outputs = _unwritable_outputs(tmp_path)
    if verb in FOLDER_VERBS:
        outputs.append(("an existing file where a folder is expected", tmp_path / "a_file"))
    for label, out in outputs:
        code = main(VERBS_WITH_OUT[verb](out, data))
        err = capsys.readouterr().err
        assert code == 2, (verb, label, err)
        one_error(err)


def test_a_read_only_folder_is_one_error_line(tmp_path, hermetic_home):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    tmp_path.chmod(0o755)
    command = [sys.executable, "-m", "tomrl", *GENERATE, "--out", str(folder / "x.jsonl")]
    if os.geteuid() == 0:  # root writes anywhere: run as nobody
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    try:
        result = subprocess.run(command, env=cli_env(hermetic_home, HOME=str(tmp_path)), cwd="/", capture_output=True, text=True, timeout=120)
    finally:
        folder.chmod(0o700)
    assert result.returncode == 2, result.stderr
    assert one_error(result.stderr) == f"tomrl: error: {folder / 'x.jsonl'}: Permission denied"


KILLED_WRITER = """
import sys, time
from tomrl.io import atomic_open
with atomic_open(sys.argv[1]) as handle:
    handle.write("half")
    handle.flush()
    print("writing", flush=True)
    time.sleep(600)
"""


def test_a_temporary_file_left_by_a_kill_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "out.json"
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    # While the writer lives, another write leaves its temporary file alone.
    atomic_write_text(target, "first")
    assert len(leftover_temp_files(tmp_path)) == 1
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    atomic_write_text(target, "second")
    assert not leftover_temp_files(tmp_path)
    assert target.read_text() == "second"
