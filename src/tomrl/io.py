"""Crash-safe file writing and JSONL reading shared by every stage.

Whole files are written to a temporary file in the same folder and moved into place with
``os.replace``, so a reader (or a resumed run) sees either the old file or the new one, never
half of one; whole folders (checkpoints, ``best/``, a recipe's output) are written as
``NAME.partial`` and renamed the same way (:func:`write_folder_atomically`). Append-only logs
(``samples.jsonl``, ``metrics.jsonl``) are written a line at a time and flushed; :func:`iter_jsonl`
tolerates a torn last line only where the caller says so (``allow_torn_tail=True``), which is how
resumption drops the line a crash cut in half.

Reads are bounded: :func:`open_input` waits at most ``TOMRL_INPUT_WAIT_S`` (30 s) for a FIFO's first
bytes, and :func:`scan_jsonl` refuses a line over ``MAX_LINE_BYTES`` (8 MB) while reading it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import select
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

# Read once at import: reading the umask means setting it, which is not safe while other threads
# create files.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class BadInputError(ValueError):
    """Input that cannot be used; the message names the file, line and field."""


# A line of a JSONL file longer than this is refused while reading, before it is parsed. A ToM
# example is a few kilobytes: the longest line in the shared data is 6,996 bytes
# (tomrl_paper/tomrl_test_merged_8060.jsonl), an eval sample a completion of a few thousand tokens.
# A line a thousand times longer is not an example, and parsing and prompting it costs minutes.
MAX_LINE_BYTES = 8 * 1024 * 1024
# A line still without its end after this many bytes is not skipped to its end (/dev/zero has none):
# the read stops there.
MAX_SKIPPED_LINE_BYTES = 1024 * 1024 * 1024

# How long a reader waits for the first bytes of a FIFO (a named pipe; `<(command)` is one) before it
# gives up: opening a FIFO that nobody writes to would otherwise block forever.
INPUT_WAIT_S = 30.0
INPUT_WAIT_ENV = "TOMRL_INPUT_WAIT_S"  # overrides INPUT_WAIT_S (seconds), e.g. in tests


def shortened(text: str, limit: int = 200) -> str:
    """``text`` for an error message: whole when short, else its start and end around ``…`` with its length.

    A message quotes what it rejects; a 10 MB value quoted whole is not one readable line.
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} … {text[-half:]} ({len(text):,} characters)"


def quoted(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut in the middle like :func:`shortened` when longer than ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    half = limit // 2
    return f"{text[:half] + '…' + text[-half:]!r} ({len(text):,} characters)"


class FolderInUseError(BadInputError):
    """Another process holds the lock of a run folder."""


def _temp_prefix(path: Path) -> str:
    # Cut long names so that ".NAME.PID.XXXXXXXX.tmp" stays within the 255-byte limit of a file
    # name whenever NAME itself does.
    name = path.name.encode("utf-8")[:200].decode("utf-8", "ignore")
    return f".{name}."


def _remove_stale_temp_files(path: Path) -> None:
    """Delete temporary siblings of ``path`` left by writers that were killed (their pid is gone).

    Temporary names carry the writer's pid (``.NAME.PID.XXXX.tmp``), so a file a live process is
    still writing is never touched.
    """
    prefix = _temp_prefix(path)
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return
    for sibling in siblings:
        name = sibling.name
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid_text = name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            sibling.unlink()


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _write_through_target(path: Path) -> bool:
    """True when ``path`` must be opened and written in place rather than replaced by a rename.

    A device (``/dev/null``), a FIFO, ``/dev/stdout`` or a link into ``/proc`` or ``/dev`` is
    written through; a renamed file would silently take its place. A folder or a socket is refused.
    """
    if not os.path.lexists(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:  # a dangling symlink: written at its target (below)
        return False
    if stat.S_ISDIR(mode):
        raise BadInputError(f"{path}: is a folder, expected a file")
    if stat.S_ISSOCK(mode):
        raise BadInputError(f"{path}: is a socket; cannot write an output there")
    if not stat.S_ISREG(mode):
        return True  # character/block device, FIFO
    real = os.path.realpath(path)
    return real.startswith(("/proc/", "/dev/"))


@contextlib.contextmanager
def _open_through(path: Path, mode: str, encoding: str | None) -> Iterator[Any]:
    flags = os.O_WRONLY | os.O_NONBLOCK  # a FIFO nobody reads fails at once (ENXIO) instead of hanging
    if stat.S_ISREG(os.stat(path).st_mode):
        flags |= os.O_APPEND  # /dev/stdout redirected to a file: after what was printed, not over it
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise BadInputError(f"{path}: is a FIFO with no reader; start the reader first") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
        yield handle


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[Any]:
    """Open a temporary sibling of ``path`` for writing; move it over ``path`` on success only.

    ``path`` that is a device, a FIFO or ``/dev/stdout`` is written through instead (never
    replaced); a symlink to a regular file keeps its link: the file it points to is replaced.
    """
    path = Path(path)
    if _write_through_target(path):
        with _open_through(path, mode, encoding) as handle:
            yield handle
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise BadInputError(f"{path}: is a folder, expected a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_files(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(path)}{os.getpid()}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # name the file the user asked for, not the temporary one
        raise type(err)(err.errno, err.strerror, str(path)) from None
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


PARTIAL_SUFFIX = ".partial"  # a folder being written, never read as data
RETIRED_SUFFIX = ".old" + PARTIAL_SUFFIX  # the folder being replaced, between the two renames of a publish


def write_folder_atomically(target: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(staging)`` on an empty ``TARGET.partial``, then publish it as ``target`` (all or nothing)."""
    target = Path(target)
    staging = target.with_name(target.name + PARTIAL_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)  # left by a crashed earlier write
    staging.mkdir(parents=True)
    try:
        write(staging)
        publish_folder(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def publish_folder(staging: Path, target: Path) -> None:
    """Move the fully written folder ``staging`` to ``target``, replacing an earlier ``target`` whole.

    Two renames (``target`` to ``TARGET.old.partial``, ``staging`` to ``target``), so a reader sees the
    old folder or the new one, never a mix; :func:`recover_interrupted_publish` undoes a crash between them.
    """
    for path in staging.rglob("*"):  # the contents reach the disk before the rename makes them visible
        if path.is_file():
            _fsync(path)
    retired = target.with_name(target.name + RETIRED_SUFFIX)
    shutil.rmtree(retired, ignore_errors=True)  # a stale copy from an earlier crash
    if target.exists():
        os.replace(target, retired)
        try:
            os.replace(staging, target)
        except BaseException:
            os.replace(retired, target)
            raise
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, target)
    with contextlib.suppress(OSError):  # make the renames durable; some file systems cannot sync a folder
        _fsync(target.parent)


def recover_interrupted_publish(target: str | Path) -> None:
    """Clean up what a crashed :func:`write_folder_atomically` left beside ``target``: ``TARGET.partial``
    goes, and ``TARGET.old.partial`` is put back when ``target`` is missing (a crash between the renames)."""
    target = Path(target)
    shutil.rmtree(target.with_name(target.name + PARTIAL_SUFFIX), ignore_errors=True)
    retired = target.with_name(target.name + RETIRED_SUFFIX)
    if retired.is_dir() and not target.exists():
        os.replace(retired, target)
    shutil.rmtree(retired, ignore_errors=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Credentials that must never reach a file or the terminal: the user:password part of a URL, a key
# given as a URL parameter (?api-key=…, &token=…), and strings shaped like API keys (OpenAI sk-…,
# Hugging Face hf_…, Groq gsk_…, xAI xai-…). Redaction runs on every JSON write and error message,
# so every pattern must search in time linear in the text: each starts with a literal or a
# one-character class, and an attempt scans only a stretch that the next attempt cannot scan again
# (the scheme-first pattern used before re-scanned each alphanumeric run from every one of its
# letters: 12 s for a 100 kB line). tests/reliability/test_secrets_redaction.py times them on 10 MB.
#   Userinfo runs from '://' to the last '@' before the next '/' or whitespace, so a password with
# an unescaped '@' is hidden whole; "http://host?to=me@example.com" loses "host?to=me" too, harmless.
_URL_CREDENTIALS = re.compile(r"://[^/\s]+@")
# A parameter whose name ends, in any case, in one of these words: api-key, api_key, apikey, key,
# subscription-key, token, access_token, auth, client_secret, password, sig (signed URLs). The name
# is matched greedily up to '=' and its ending checked by look-behinds, which is several times faster
# than trying the words at each of its characters.
_SECRET_PARAMETER_ENDINGS = ("key", "token", "secret", "password", "auth", "sig", "signature")
_URL_PARAMETER_CREDENTIALS = re.compile(
    r"([?&#;][\w.~-]*=)(?:" + "|".join(f"(?<={word}=)" for word in _SECRET_PARAMETER_ENDINGS) + r")[^&#\s\"'<>]+",
    re.IGNORECASE,
)
_KEY_LIKE = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{40,})")
REDACTED = "***"


def redact_secrets(value: Any) -> Any:
    """``value`` with credentials in URLs (``http://u:KEY@host`` → ``http://***@host``,
    ``…/v1?api-key=KEY`` → ``…/v1?api-key=***``) and key-like strings replaced by ``***``, in strings
    nested anywhere in dicts, lists and tuples. Linear in the length of each string."""
    if isinstance(value, str):
        value = _URL_CREDENTIALS.sub(f"://{REDACTED}@", value)
        value = _URL_PARAMETER_CREDENTIALS.sub(_redacted_parameter, value)
        return _KEY_LIKE.sub(REDACTED, value)
    if isinstance(value, dict):
        return {key: redact_secrets(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_secrets(item) for item in value)
    return value


def _redacted_parameter(match: re.Match) -> str:
    # A function, not the template r"\g<1>***": Python 3.11 expands templates in Python, twice as slow.
    return match.group(1) + REDACTED


def looks_like_a_key(value: str) -> bool:
    """Whether ``value`` is shaped like an API key (see :func:`redact_secrets`)."""
    return bool(_KEY_LIKE.search(value))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as JSON, atomically; credentials in URLs and key-like strings are redacted."""
    atomic_write_text(path, json.dumps(redact_secrets(obj), indent=2, ensure_ascii=False, default=str) + "\n")


def write_jsonl(path: str | Path, rows: Any) -> int:
    """Write an iterable of JSON-able rows atomically; returns the number written."""
    count = 0
    with atomic_open(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


class DuplicateKeyError(ValueError):
    """A JSON object or YAML mapping that gives one key twice (the first value would be lost)."""


def _object_without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise DuplicateKeyError(f"duplicate key '{twice}'")
    return obj


def loads_json(text: str | bytes, where: str) -> Any:
    """``json.loads`` that refuses duplicate keys and deep nesting with one BadInputError naming ``where``."""
    try:
        return json.loads(text, object_pairs_hook=_object_without_duplicate_keys)
    except DuplicateKeyError as err:
        raise BadInputError(f"{where}: {err}") from None
    except json.JSONDecodeError as err:
        raise BadInputError(f"{where}: invalid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise BadInputError(f"{where}: JSON nested too deeply") from None


def input_wait_s() -> float:
    """Seconds :func:`open_input` waits for a FIFO's first bytes: ``TOMRL_INPUT_WAIT_S``, else 30."""
    text = os.environ.get(INPUT_WAIT_ENV, "").strip()
    if not text:
        return INPUT_WAIT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise BadInputError(f"{INPUT_WAIT_ENV}={text!r}: expected a number of seconds >= 0")
    return seconds


def open_input(path: str | Path, expected: str = "a file") -> BinaryIO:
    """Open the input ``path`` for reading bytes, without ever blocking on it for good.

    A FIFO is opened without waiting for a writer, then given :func:`input_wait_s` seconds for its
    first bytes (or its writer's end): a FIFO that nobody writes to is one error, not a hang, while
    one with a writer (``<(zcat data.jsonl.gz)``) is read as it comes. A missing path or a folder is
    one error naming it; ``expected`` says what should be there (``"a JSONL file"``).
    """
    if not str(path).strip():  # Path("") is the working folder
        raise BadInputError(f"{path!r}: an empty path; give {expected}")
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: open() returns at once on a FIFO
    except FileNotFoundError:
        raise BadInputError(f"{path}: file not found") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise BadInputError(f"{path}: is a folder, expected {expected}")
        if stat.S_ISFIFO(mode):
            wait = input_wait_s()
            poller = select.poll()
            poller.register(fd, select.POLLIN)  # POLLHUP (a writer came and went) is always reported
            if not poller.poll(wait * 1000):
                raise BadInputError(
                    f"{path}: no data arrived for {wait:g} s (a FIFO with no writer?); start the writer first "
                    f"or give a regular file ({INPUT_WAIT_ENV} sets the wait)"
                )
        os.set_blocking(fd, True)  # from here a FIFO has a writer: wait for its data as usual
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# A torch.save that runs out of space fails as a RuntimeError ("basic_ios::clear: iostream error",
# "unexpected pos"): its C++ writer drops the errno. Such a failure on a file system left with less
# than this much free space is taken for a full disk.
NEARLY_FULL_BYTES = 64 * 1024 * 1024


def disk_full(err: BaseException, folder: str | Path | None = None) -> int | None:
    """``errno.ENOSPC`` or ``errno.EDQUOT`` when ``err`` (or what caused it) is a write that ran out of
    space, else None. A torch.save failure counts when ``folder``'s file system is nearly full."""
    seen: list[BaseException] = []
    while err is not None and err not in seen:
        seen.append(err)
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return err.errno
        text = str(err)
        if "No space left on device" in text or "os error 28" in text:  # safetensors and tokenizers (Rust) say it in words
            return errno.ENOSPC
        if "Disk quota exceeded" in text or "os error 122" in text:
            return errno.EDQUOT
        err = err.__cause__ or err.__context__
    torch_writer = any(isinstance(e, RuntimeError) and ("iostream error" in str(e) or "unexpected pos" in str(e)) for e in seen)
    free = free_bytes(folder) if torch_writer and folder is not None else None
    return errno.ENOSPC if free is not None and free < NEARLY_FULL_BYTES else None


def free_bytes(path: str | Path) -> int | None:
    """Free space (for this user) on the file system holding ``path`` or its nearest existing parent."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def scan_jsonl(path: str | Path) -> Iterator[tuple[int, dict | None, str | None]]:
    """Yield ``(line_number, object, None)`` per non-empty line, or ``(line_number, None, error)``.

    The error names the file and line (non-UTF-8 bytes, invalid or truncated JSON, a non-object, a
    line over ``MAX_LINE_BYTES``), so callers can stop on it or, when the user asked to skip bad
    lines, count it. The file is read through :func:`open_input` (a FIFO with no writer is an error).
    """
    path = Path(path)
    with open_input(path, "a JSONL file") as handle:
        index = 0
        while True:
            # Bounded reads: a huge line is refused when it is read, not after it is parsed.
            line = handle.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            index += 1
            where = f"{path}:{index}"
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                size = len(line)
                while line and not line.endswith(b"\n"):  # skip the rest of the line, counting it
                    if size > MAX_SKIPPED_LINE_BYTES:
                        raise BadInputError(
                            f"{where}: line longer than {MAX_SKIPPED_LINE_BYTES // 2**30} GB and still no end; not a JSONL file"
                        )
                    line = handle.readline(MAX_LINE_BYTES)
                    size += len(line)
                yield index, None, (
                    f"{where}: line longer than {MAX_LINE_BYTES // 2**20} MB, the limit for one example "
                    f"(this line is {_megabytes(size)}); not a data row"
                )
                continue
            if not line.strip():
                continue
            try:
                obj = json.loads(line.decode("utf-8"), object_pairs_hook=_object_without_duplicate_keys)
            except DuplicateKeyError as err:
                yield index, None, f"{where}: {err}"
                continue
            except UnicodeDecodeError as err:
                yield index, None, f"{where}: not valid UTF-8 ({err.reason} at byte {err.start})"
                continue
            except json.JSONDecodeError as err:
                torn = " (the last line has no newline: a write cut short?)" if not line.endswith(b"\n") else ""
                yield index, None, f"{where}: invalid JSON ({err.msg} at column {err.colno}){torn}"
                continue
            except RecursionError:
                yield index, None, f"{where}: JSON nested too deeply"
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


@contextlib.contextmanager
def locked_folder(folder: str | Path, verb: str = "tomrl") -> Iterator[None]:
    """Hold an exclusive lock on the run folder ``folder`` (``.NAME.lock`` beside it) while working.

    A second process on the same folder fails at once with :class:`FolderInUseError` naming the
    holder's pid, instead of redoing (and interleaving) the same work. The lock file sits beside the
    folder so that it also guards the folder's creation; the kernel drops it when the holder dies.
    """
    from filelock import FileLock, Timeout

    folder = Path(os.path.abspath(folder))  # "." and "runs/x/" have a name too
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock_path = folder.with_name(f".{folder.name}.lock")
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        try:
            pid, _, holder = lock_path.read_text(encoding="utf-8").strip().partition(" ")
        except OSError:
            pid, holder = "", ""
        raise FolderInUseError(
            f"{folder} is in use by {holder or 'another process'} (pid {pid or 'unknown'}); "
            "wait for it to finish or choose another output folder"
        ) from None
    try:
        with open(lock_path, "r+", encoding="utf-8") as handle:  # the lock's own file: no other writer
            handle.truncate(0)
            handle.write(f"{os.getpid()} {verb}\n")
        yield
    finally:
        # Unlinked while still held: a waiting process that opened this inode sees it unlinked
        # (filelock checks) and retries on a fresh file, so no lock file is left behind.
        with contextlib.suppress(OSError):
            lock_path.unlink()
        lock.release()
