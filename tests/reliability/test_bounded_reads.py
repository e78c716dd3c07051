"""Bounded reads: no input makes a verb wait, or work, without end (issue 27, item 5).

- **A FIFO nobody writes to** blocked ``open()`` forever in every verb that reads a file. Inputs are
  now opened by :func:`tomrl.io.open_input`: a FIFO gets ``TOMRL_INPUT_WAIT_S`` seconds (30 by
  default) for its first bytes, then one error; a FIFO with a writer (a named pipe, ``<(cat F)``, a
  producer slower than the wait after its first line) is read as before.
- **A huge line** is refused while it is read (``MAX_LINE_BYTES``, 8 MB: the longest line in the
  shared data is 6,996 bytes), in seconds, with its size; a line of exactly the limit is still read.
- **A long value in an error** (a 2 MB answer, split or story sentence) is quoted by its two ends and its
  length, so that the error stays one readable line.

Reads run in-process through :func:`tomrl.cli.main` under a SIGALRM deadline, so a read that blocks
fails its test instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tomrl.cli import main
from tomrl.io import MAX_LINE_BYTES, write_jsonl

WAIT_S = "0.5"  # TOMRL_INPUT_WAIT_S in these tests


class Blocked(BaseException):
    """Raised by the deadline's alarm: not an OSError, so the CLI cannot turn it into an exit status."""


@pytest.fixture
def deadline():
    """``deadline(seconds)``: from now, a test still running after ``seconds`` fails with :class:`Blocked`."""

    def expired(signum, frame):
        raise Blocked("the command was still reading when its deadline passed: a read that blocks")

    previous = signal.signal(signal.SIGALRM, expired)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def rows(generated_examples):
    hitom, _ = generated_examples
    return [e.to_dict() for e in hitom[:3]]


def _jsonl(rows: list[dict], completions: bool = False) -> bytes:
    """The rows as JSONL; with ``completions``, as ``tomrl reward score`` input answered right."""
    if completions:
        rows = [dict(row, completion=f"The box.</think><answer>{row['answer']}</answer>") for row in rows]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _verbs(path: Path, out: Path) -> dict[str, list[str]]:
    """Each verb that reads a JSONL file given on the command line, reading ``path``."""
    return {
        "data check": ["data", "check", str(path)],
        "data verify": ["data", "verify", str(path)],
        "data audit": ["data", "audit", "--test", str(path)],
        "reward score": ["reward", "score", "--reward", "strict", "--input", str(path), "--out", str(out / "scored.jsonl")],
        "analyze interventions": ["analyze", "interventions", "--model", "base=tiny-qwen2", "--data", str(path),
                                  "--out", str(out / "interventions")],
    }


VERBS = ["data check", "data verify", "data audit", "reward score", "analyze interventions"]


def _one_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tomrl: error:") and "Traceback" not in err, err
    return lines[0]


class Writer:
    """A thread writing ``data`` into the FIFO ``path`` (after ``delay`` s; ``pause`` s after its first line)."""

    def __init__(self, path: Path, data: bytes, delay: float = 0.2, pause: float = 0.0):
        self.path, self.data, self.delay, self.pause = path, data, delay, pause
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        time.sleep(self.delay)
        first, _, rest = self.data.partition(b"\n")
        with contextlib.suppress(BrokenPipeError), open(self.path, "wb") as handle:  # blocks until a reader opens
            handle.write(first + b"\n")
            handle.flush()
            time.sleep(self.pause)
            handle.write(rest)

    def finish(self) -> None:
        # A reader that never opened the FIFO leaves the writer blocked in open(): release it.
        if self.thread.is_alive():
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self.thread.join(timeout=10)
            os.close(fd)
        assert not self.thread.is_alive()


# ----------------------------------------------------------------------------- FIFOs


@pytest.mark.parametrize("verb", VERBS)
def test_a_fifo_with_no_writer_is_one_error_after_the_wait(verb, tmp_path, monkeypatch, capsys, deadline, hermetic_home):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", WAIT_S)
    monkeypatch.setenv("TOMRL_HOME", str(hermetic_home))  # tiny-qwen2 for analyze: the model is not what fails
    deadline(20)
    started = time.monotonic()
    assert main(_verbs(fifo, tmp_path)[verb]) == 2
    took = time.monotonic() - started
    error = _one_error(capsys.readouterr().err)
    assert f"{fifo}: no data arrived for {WAIT_S} s (a FIFO with no writer?)" in error
    assert 0.5 <= took < 15, took
    assert not (tmp_path / "scored.jsonl").exists() and not (tmp_path / "interventions").exists()


def test_the_wait_can_be_set_and_a_bad_setting_is_an_error(tmp_path, monkeypatch, capsys, deadline):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    deadline(20)
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", "soon")
    assert main(["data", "check", str(fifo)]) == 2
    assert "TOMRL_INPUT_WAIT_S='soon': expected a number of seconds" in _one_error(capsys.readouterr().err)
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", "0")
    assert main(["data", "check", str(fifo)]) == 2
    assert "no data arrived for 0 s" in _one_error(capsys.readouterr().err)


@pytest.mark.parametrize("verb", ["data check", "data verify", "data audit", "reward score"])
def test_a_fifo_with_a_writer_is_read_as_a_file(verb, rows, tmp_path, monkeypatch, capsys, deadline):
    """The writer starts after the reader and pauses after its first line for longer than the wait,
    which only bounds the wait for the first bytes."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", "2")
    writer = Writer(fifo, _jsonl(rows, completions=verb == "reward score"), delay=0.3, pause=2.5)
    deadline(60)
    try:
        code = main(_verbs(fifo, tmp_path)[verb])
    finally:
        writer.finish()
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    if verb == "data check":
        assert "3 rows passed, 0 skipped" in out
    if verb == "reward score":
        scored = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text().splitlines()]
        assert [row["correct"] for row in scored] == [True, True, True]


def test_process_substitution_is_read(rows, tmp_path, capsys, deadline):
    """``tomrl data check <(cat rows.jsonl)``: an anonymous pipe named /dev/fd/N."""
    read_end, write_end = os.pipe()
    data = _jsonl(rows)

    def write() -> None:
        with os.fdopen(write_end, "wb") as handle:
            handle.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    deadline(30)
    try:
        assert main(["data", "check", f"/dev/fd/{read_end}"]) == 0
    finally:
        thread.join(timeout=10)
        os.close(read_end)
    assert "3 rows passed" in capsys.readouterr().out


class ReadTwice(BaseException):
    """Raised (by an audit hook) when a watched FIFO is opened a second time: that open would block for good."""


_OPENS: dict[str, int] = {}  # watched path -> times opened


def _count_opens(event: str, args: tuple) -> None:
    reader = threading.current_thread() is threading.main_thread()  # the Writer thread opens it too
    if event == "open" and _OPENS and reader and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if path in _OPENS:
            _OPENS[path] += 1
            if _OPENS[path] > 1:
                raise ReadTwice(f"{path} opened a second time: its writer has finished, so that open never returns")


sys.addaudithook(_count_opens)  # a hook cannot be removed; it does nothing while _OPENS is empty


def test_analyze_interventions_reads_a_fifo_with_a_writer(rows, tmp_path, monkeypatch, capsys, deadline, hermetic_home):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setenv("TOMRL_HOME", str(hermetic_home))
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", "2")
    writer = Writer(fifo, _jsonl(rows))
    _OPENS[str(fifo)] = 0
    deadline(60)
    try:
        code = main(_verbs(fifo, tmp_path)["analyze interventions"] + ["--limit", "1", "--max-new-tokens", "1", "--answer-tokens", "1"])
    finally:
        _OPENS.clear()
        signal.setitimer(signal.ITIMER_REAL, 0)
        writer.finish()
    assert code == 0, capsys.readouterr().err


# ----------------------------------------------------------------------------- huge lines


def _padded_row(row: dict, line_bytes: int) -> dict:
    """``row`` with ``meta.pad`` sized so that its JSON line (without the newline) is ``line_bytes`` long."""
    base = dict(row, meta=dict(row["meta"], pad=""))
    missing = line_bytes - len(json.dumps(base, ensure_ascii=False).encode())
    assert missing >= 0
    return dict(row, meta=dict(row["meta"], pad="x" * missing))


def _huge_file(rows: list[dict], path: Path) -> Path:
    """Three rows, the second 10 MB long."""
    write_jsonl(path, [rows[0], _padded_row(rows[1], 10 * 2**20), rows[2]])
    return path


@pytest.fixture
def huge_file(rows, tmp_path) -> Path:
    return _huge_file(rows, tmp_path / "huge.jsonl")


@pytest.mark.parametrize("verb", VERBS)
def test_a_10_mb_line_is_one_error_in_seconds(verb, rows, tmp_path, monkeypatch, capsys, deadline, hermetic_home):
    monkeypatch.setenv("TOMRL_HOME", str(hermetic_home))
    if verb == "reward score":
        rows = [json.loads(line) for line in _jsonl(rows, completions=True).splitlines()]
    huge_file = _huge_file(rows, tmp_path / "huge.jsonl")
    deadline(60)
    started = time.monotonic()
    assert main(_verbs(huge_file, tmp_path)[verb]) == 2
    took = time.monotonic() - started
    error = _one_error(capsys.readouterr().err)
    assert f"{huge_file}:2: line longer than 8 MB, the limit for one example (this line is 10.0 MB)" in error
    assert len(error) < 300 and took < 20, (len(error), took)


def test_a_10_mb_line_is_skipped_and_counted_with_skip_bad(huge_file, tmp_path, capsys, deadline):
    deadline(60)
    started = time.monotonic()
    assert main(["data", "check", "--skip-bad", str(huge_file), "--out", str(tmp_path / "clean.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "2 rows passed, 1 skipped" in out and "huge.jsonl:2: line longer than 8 MB" in out
    assert len((tmp_path / "clean.jsonl").read_text().splitlines()) == 2
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("over", [0, 1])
def test_a_line_of_exactly_the_limit_is_read_and_one_byte_more_is_not(over, rows, tmp_path, capsys, deadline):
    path = tmp_path / "edge.jsonl"
    write_jsonl(path, [rows[0], _padded_row(rows[1], MAX_LINE_BYTES + over)])
    assert len(path.read_bytes().splitlines()[1]) == MAX_LINE_BYTES + over
    deadline(60)
    code = main(["data", "check", str(path)])
    out, err = capsys.readouterr()
    if over:
        assert code == 2 and "edge.jsonl:2: line longer than 8 MB" in _one_error(err)
    else:
        assert code == 0 and "2 rows passed, 0 skipped" in out, err


def test_a_line_with_no_end_stops_the_read(capsys, deadline):
    """``/dev/zero`` has no newline: the read stops after 1 GB instead of running forever."""
    deadline(60)
    started = time.monotonic()
    assert main(["data", "check", "--skip-bad", "/dev/zero"]) == 2
    assert "/dev/zero:1: line longer than 1 GB and still no end" in _one_error(capsys.readouterr().err)
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("verb, field, value", [
    ("check", "answer", "box " * 2**19),  # 2 MB: not in the story
    ("check", "split", "x" * 2**21),
    ("verify", "story", "Anna " * 2**19),  # one sentence the parser does not know
])
def test_an_error_quotes_a_long_value_cut_short(verb, field, value, rows, tmp_path, capsys, deadline):
    """The one error line names the file, line and field, and quotes a 2 MB value by its ends and the length
    (of the value, or of the parser's message quoting it)."""
    path = tmp_path / "long.jsonl"
    write_jsonl(path, [rows[0], dict(rows[1], **{field: value})])
    deadline(60)
    assert main(["data", verb, str(path)]) == 2
    error = _one_error(capsys.readouterr().err)
    assert f"long.jsonl:2: field '{field}'" in error and re.search(r"\([23],\d{3},\d{3} characters\)", error), error
    assert len(error) < 400, len(error)


# ----------------------------------------------------------------------------- configs and JSON data files

GENERATE_CONFIG = b"benchmark: hitom\nn: 4\nseed: 3\n"


def _config_verbs(config: str, out: Path) -> dict[str, list[str]]:
    """Verbs that read a YAML ``--config`` (through :func:`tomrl.config.read_yaml`)."""
    return {
        "train": ["train", "--config", config],
        "data generate": ["data", "generate", "hitom", "--config", config, "--out", str(out / "generated.jsonl")],
        "eval": ["eval", "--config", config, "--model", "tiny-qwen2", "--benchmark", "hitom", "--out", str(out / "eval")],
    }


@pytest.mark.parametrize("verb", ["train", "data generate", "eval"])
def test_a_config_fifo_with_no_writer_is_one_error_after_the_wait(verb, tmp_path, monkeypatch, capsys, deadline):
    """``--config FIFO`` blocked in ``open()`` for good (``read_yaml`` read it with ``Path.read_text``)."""
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", WAIT_S)
    deadline(20)
    assert main(_config_verbs(str(fifo), out)[verb]) == 2
    assert f"{fifo}: no data arrived for {WAIT_S} s (a FIFO with no writer?)" in _one_error(capsys.readouterr().err)
    assert not out.exists()


def test_a_config_fifo_with_a_writer_is_read_as_a_file(tmp_path, monkeypatch, capsys, deadline):
    """``tomrl data generate hitom --config <(…)``: the config arrives through a pipe and is used."""
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", "5")
    writer = Writer(fifo, GENERATE_CONFIG, pause=0.3)
    deadline(60)
    try:
        assert main(_config_verbs(str(fifo), out)["data generate"]) == 0, capsys.readouterr().err
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        writer.finish()
    rows = [json.loads(line) for line in (out / "generated.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and "seed 3" in capsys.readouterr().out


@pytest.mark.parametrize("config, message", [
    ("", "'': an empty path; give a YAML config"),  # Path("") is the working folder: ".: Is a directory"
    ("FOLDER", "FOLDER: is a folder, expected a YAML config"),
    ("/dev/zero", "/dev/zero: over 16 MB, too large for a YAML config"),  # read whole, it never ends
])
def test_a_config_that_is_not_a_file_is_one_error(config, message, tmp_path, capsys, deadline):
    folder = tmp_path / "folder"
    folder.mkdir()
    config, message = config.replace("FOLDER", str(folder)), message.replace("FOLDER", str(folder))
    out = tmp_path / "out"
    deadline(30)
    for verb in ("data generate", "eval"):
        assert main(_config_verbs(config, out)[verb]) == 2
        assert message in _one_error(capsys.readouterr().err), verb
    assert not out.exists()


def test_a_json_data_file_that_is_a_fifo_is_read_or_one_error(tmp_path, monkeypatch, deadline):
    """:func:`tomrl.loaders.base.read_json_file` (OpenToM's and FANToM's JSON files) opens with ``open_input`` too."""
    from tomrl.io import BadInputError
    from tomrl.loaders.base import read_json_file

    fifo = tmp_path / "data.json"
    os.mkfifo(fifo)
    monkeypatch.setenv("TOMRL_INPUT_WAIT_S", WAIT_S)
    deadline(20)
    with pytest.raises(BadInputError, match=rf"{re.escape(str(fifo))}: no data arrived for {WAIT_S} s"):
        read_json_file(fifo)
    writer = Writer(fifo, b'{"a": [1,\n2]}\n')
    try:
        assert read_json_file(fifo) == {"a": [1, 2]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        writer.finish()
