"""Crash-safe file writing and JSONL reading shared by every stage.

Whole files are written to a temporary file in the same folder and moved into place with
``os.replace``, so a reader (or a resumed run) sees either the old file or the new one, never
half of one. Append-only logs (``samples.jsonl``, ``metrics.jsonl``) are written a line at a
time and flushed; :func:`read_jsonl` tolerates a torn last line only where the caller says so
(``allow_torn_tail=True``), which is how resumption drops the line a crash cut in half.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

# Read once at import: reading the umask means setting it, which is not safe while other threads
# create files.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class BadInputError(ValueError):
    """Input that cannot be used; the message names the file, line and field."""


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[Any]:
    """Open a temporary sibling of ``path`` for writing; move it over ``path`` on success only."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    # mkstemp makes the file 0600; give it the permissions open() would (0666 less the umask), so
    # results and reports stay readable by the group as the user's umask says.
    os.chmod(tmp, 0o666 & ~_UMASK)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def write_jsonl(path: str | Path, rows: Any) -> int:
    """Write an iterable of JSON-able rows atomically; returns the number written."""
    count = 0
    with atomic_open(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def scan_jsonl(path: str | Path) -> Iterator[tuple[int, dict | None, str | None]]:
    """Yield ``(line_number, object, None)`` per non-empty line, or ``(line_number, None, error)``.

    The error names the file and line (non-UTF-8 bytes, invalid or truncated JSON, a non-object),
    so callers can stop on it or, when the user asked to skip bad lines, count it.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise BadInputError(f"{path}: is a directory, expected a JSONL file") from None
    lines = raw.split(b"\n")
    for index, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{index}"
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as err:
            yield index, None, f"{where}: not valid UTF-8 ({err.reason} at byte {err.start})"
            continue
        except json.JSONDecodeError as err:
            torn = " (the last line has no newline: a write cut short?)" if index == len(lines) else ""
            yield index, None, f"{where}: invalid JSON ({err.msg} at column {err.colno}){torn}"
            continue
        if not isinstance(obj, dict):
            yield index, None, f"{where}: expected a JSON object, got {type(obj).__name__}"
            continue
        yield index, obj, None


def iter_jsonl(path: str | Path, allow_torn_tail: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-empty line; the first bad line raises.

    With ``allow_torn_tail`` a final line that is not valid JSON and has no newline (the mark of
    a write cut short by a crash) is skipped instead of raising.
    """
    path = Path(path)
    for index, obj, error in scan_jsonl(path):
        if error is None:
            yield index, obj
        elif allow_torn_tail and "write cut short" in error:
            return
        else:
            raise BadInputError(error)


class JsonlAppender:
    """Append rows to a JSONL log, one flushed line each, for resumable runs."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self._handle = open(self.path, "a", encoding="utf-8")

    def _repair_torn_tail(self) -> None:
        # A crash mid-write leaves a last line without its newline; cut it so the next append
        # does not glue a new row onto half of an old one.
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as handle:
                handle.truncate(keep)

    def write(self, row: dict) -> None:
        self._handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "JsonlAppender":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
