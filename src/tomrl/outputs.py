"""The output guard: no output of a command replaces one of its inputs, another of its outputs, or a
folder that another kind of command made.

Every command checks its paths with :func:`check_outputs` before it writes anything, and claims its
output folder with :func:`claim_folder` (or :func:`check_folder` first and :func:`mark_folder` once its
own settings check passed)::

    from tomrl.outputs import check_outputs, claim_folder
    check_outputs({"--json": args.json_out, "--markdown": args.markdown}, inputs={"--test": args.test})
    claim_folder(cfg.out, "eval", key="--out")   # refuses a train run, a study, a demo …; then marks it

Two paths are the same when they resolve to one file: through symlinks (:meth:`Path.resolve`) and,
when both exist, hard links (:func:`os.path.samefile`). An output inside an input *data folder*
(``data load --path DIR``, the data root of a loader) is refused too. Outputs that are written through,
never replaced (``/dev/null``, ``/dev/stdout``, a FIFO), are left out of the checks.

A folder a command creates gets the marker ``.tomrl.json`` (``{"kind": "eval", "created_by": "tomrl
eval"}``); folders made before the marker existed are recognised by the files their command writes
(:func:`folder_kind`). An empty path (``--out ''``, ``out_dir: ''``) is an error, not the working folder.

A folder that is continued (a study, a demo, an evaluation, an analysis) compares its recorded settings
with the current ones through :func:`same_setting` and :func:`same_reference`, so that a folder that was
copied or moved (with what it holds) is still the same folder: a path inside the folder itself is compared
relative to the folder, a model or data path after resolving it (a relative and an absolute path, a
symlink), a data file also by its content, and a path recorded relative to the folder
(:func:`path_from_folder`) at the same place from where the folder is now.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Iterable, Mapping, Union

from tomrl.config import ConfigError
from tomrl.io import atomic_write_text, loads_json

MARKER_FILE = ".tomrl.json"

# The one list of folder kinds: kind -> the command that makes such a folder.
FOLDER_KINDS: dict[str, str] = {
    "train": "tomrl train",
    "eval": "tomrl eval",
    "study": "tomrl study",
    "demo": "tomrl demo",
    "report": "tomrl report",
    "analyze-interventions": "tomrl analyze interventions",
    "analyze-probes": "tomrl analyze probes",
    "export-verl": "tomrl export verl",
    "recipe": "tomrl data load recipe:NAME",  # replaced whole by each build: known by its files, never marked
}

# Files by which folders made before the marker are recognised. They are written by modules above this
# one (tests/reliability/test_outputs.py checks that these names are still the ones those modules use).
# Each entry is a set of names that together mark the kind.
TRAIN_FILES = ("config.yaml", "data")  # tomrl.training.run.CONFIG_FILE, and the frozen data/ folder
STUDY_FILES = (("grid.json",), ("study.yaml", "train_base.yaml"))  # tomrl.study.grid.GRID_FILE; tomrl.study.runner
DEMO_FILES = (("eval_sets",), ("comparison.json",))  # tomrl demo's stage 2 and stage 7 outputs
RECIPE_FILES = ("manifest.json", "recipe.yaml")  # tomrl.loaders.recipes.RECIPE_FOLDER_MARKER and the resolved recipe
EVAL_CARD = "run.json"  # eval: {"generation": …}; analyze interventions: {"settings": …, "models": …}
REPORT_FILES = ("report.html", "report.md")  # tomrl.analysis.document.write_document

PathArg = Union[str, os.PathLike, None]
PathArgs = Union[PathArg, Iterable[PathArg]]


class OutputClashError(ConfigError):
    """An output path that would replace an input, another output, or another command's folder."""


# ----------------------------------------------------------------------------- paths


def _as_list(value: PathArgs) -> list[PathArg]:
    if value is None or isinstance(value, (str, os.PathLike)):
        return [value]
    return list(value)


def require_path(value: PathArg, key: str) -> Path:
    """``value`` as a Path; an empty one (``--out ''``) is an error, never the working folder."""
    if value is None or not str(value).strip():
        raise OutputClashError(f"{key} is empty: give a path (an empty one would mean the working folder)")
    return Path(value).expanduser()


def resolved(path: str | os.PathLike) -> Path:
    """``path`` made absolute with symlinks followed (also for a path that does not exist yet)."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):  # a name too long, a symlink loop: compare as written
        return Path(os.path.abspath(os.path.expanduser(path)))


def _exists(path: Path) -> bool:
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


def same_path(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` are one file or folder: resolved through symlinks, hard links when both exist."""
    a, b = os.path.expanduser(a), os.path.expanduser(b)
    if _exists(Path(a)) and _exists(Path(b)):
        try:
            return os.path.samefile(a, b)
        except OSError:
            pass
    return resolved(a) == resolved(b)


def is_inside(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both resolved)."""
    return resolved(path).is_relative_to(resolved(folder)) or same_path(path, folder)


def written_through(path: str | os.PathLike) -> bool:
    """A device, a FIFO or a link into /dev or /proc (``/dev/stdout``): written through, never replaced."""
    path = Path(path)
    try:
        if not os.path.lexists(path):
            return False
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return True
    return os.path.realpath(path).startswith(("/proc/", "/dev/"))


def check_outputs(
    outputs: Mapping[str, PathArgs],
    inputs: Mapping[str, PathArgs] | None = None,
    data_folders: Mapping[str, PathArgs] | None = None,
) -> None:
    """Refuse, before anything is written, an output that is one of the command's inputs, lies in one
    of its input data folders, or is the same path as another of its outputs.

    Each mapping goes from the flag or config key that gave the paths (``--out``, ``out_dir``) to a path,
    a list of paths or None (not given). An output given as ``''`` is an error.
    """
    # Paths are compared resolved and named in messages as they were given (os.fspath keeps "./x").
    given_outputs: list[tuple[str, str]] = []
    for key, value in outputs.items():
        for path in _as_list(value):
            if path is None:
                continue
            require_path(path, key)
            if not written_through(os.path.expanduser(path)):
                given_outputs.append((key, os.fspath(path)))
    given_inputs = [(key, os.fspath(path)) for key, value in (inputs or {}).items() for path in _as_list(value) if path]
    folders = [(key, os.fspath(path)) for key, value in (data_folders or {}).items() for path in _as_list(value) if path]
    for out_key, out in given_outputs:
        for in_key, source in given_inputs:
            if same_path(out, source):
                raise OutputClashError(
                    f"{out_key} {out} is also this command's input ({in_key} {source}): writing it would replace that input; "
                    f"choose another {out_key}"
                )
        for in_key, folder in folders:
            if is_inside(out, folder):
                raise OutputClashError(
                    f"{out_key} {out} is inside the {in_key} data folder {folder}, which this command reads; "
                    f"choose another {out_key} outside it"
                )
    for index, (key, out) in enumerate(given_outputs):
        for other_key, other in given_outputs[index + 1 :]:
            if same_path(out, other):
                raise OutputClashError(
                    f"{key} {out} and {other_key} {other} are the same file: one would overwrite the other; give them different paths"
                )


# ----------------------------------------------------------------------------- folders and their kinds


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _recognised_kind(folder: Path) -> tuple[str, Path] | None:
    """The kind of a folder made before the marker existed, and the file that shows it."""
    for kind, groups in (("train", (TRAIN_FILES,)), ("study", STUDY_FILES), ("demo", DEMO_FILES), ("recipe", (RECIPE_FILES,))):
        for names in groups:
            if all((folder / name).exists() for name in names):
                return kind, folder / names[0]
    card = _read_json(folder / EVAL_CARD)
    if isinstance(card, dict) and "generation" in card:
        return "eval", folder / EVAL_CARD
    if isinstance(card, dict) and "settings" in card and "models" in card:
        return "analyze-interventions", folder / EVAL_CARD
    results = _read_json(folder / "results.json")
    if isinstance(results, dict) and "benchmarks" in results:
        return "eval", folder / "results.json"
    if (folder / "interventions.json").is_file():
        return "analyze-interventions", folder / "interventions.json"
    if (folder / "probes.json").is_file():
        return "analyze-probes", folder / "probes.json"
    for name in REPORT_FILES:
        if (folder / name).is_file():
            return "report", folder / name
    return None


def _kind_and_evidence(folder: Path) -> tuple[str, Path] | None:
    marker = folder / MARKER_FILE
    if marker.is_file():
        content = loads_json(marker.read_bytes(), str(marker))
        kind = content.get("kind") if isinstance(content, dict) else None
        if kind not in FOLDER_KINDS:
            raise OutputClashError(
                f"{marker}: field 'kind': expected one of {', '.join(FOLDER_KINDS)}, got {kind!r}; "
                "this folder's maker is unknown: choose another output folder"
            )
        return kind, marker
    if not folder.is_dir():
        return None
    return _recognised_kind(folder)


def folder_kind(folder: str | os.PathLike) -> str | None:
    """The kind of command that made ``folder`` (its marker, else its files), or None (absent, empty, unknown)."""
    found = _kind_and_evidence(Path(folder))
    return found[0] if found else None


def check_folder(folder: PathArg, kind: str, key: str) -> Path:
    """``folder`` as a Path, if a command of ``kind`` may write there; writes nothing.

    Refused: an empty path, a file, and a folder that another kind of command made (by its marker
    or, for folders older than the marker, by its files).
    """
    if kind not in FOLDER_KINDS:
        raise ValueError(f"unknown folder kind {kind!r}; known: {', '.join(FOLDER_KINDS)}")
    path = require_path(folder, key)
    if _exists(path) and not path.is_dir():
        raise OutputClashError(f"{key} {path} is a file, not a folder: choose another {key}")
    found = _kind_and_evidence(path)
    if found is not None and found[0] != kind:
        other, evidence = found
        raise OutputClashError(
            f"{key} {path} is a folder of `{FOLDER_KINDS[other]}` ({evidence}); `{FOLDER_KINDS[kind]}` would mix its files "
            f"into it: choose another {key}"
        )
    return path


def mark_folder(folder: str | os.PathLike, kind: str) -> None:
    """Create ``folder`` (with its parents) and write its marker, unless it has one."""
    path = Path(folder).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER_FILE
    if not marker.exists():
        atomic_write_text(marker, json.dumps({"kind": kind, "created_by": FOLDER_KINDS[kind]}) + "\n")


def claim_folder(folder: PathArg, kind: str, key: str) -> Path:
    """:func:`check_folder`, then :func:`mark_folder`: the folder is this kind's from now on."""
    path = check_folder(folder, kind, key)
    mark_folder(path, kind)
    return path


# ----------------------------------------------------------------------------- folder identity


def path_from_folder(value: object, folder: str | os.PathLike) -> str | None:
    """``value`` (a model or data reference) as a path relative to ``folder``, both resolved, when it names an
    existing local file or folder; None otherwise (a hub id, an embedded model's name, an API model).

    Recorded beside a setting, it recognises the same reference after the folder was moved or copied together
    with what it refers to (a study's evaluation of ``STUDY_DIR/runs/CELL/final``: ``../../../runs/CELL/final``).
    """
    if not isinstance(value, str) or not value.strip() or _not_a_path(value):
        return None
    path = Path(value).expanduser()
    if not _exists(path):
        return None
    return os.path.relpath(resolved(path), resolved(folder))


def _not_a_path(value: str) -> bool:
    return "\n" in value or "\0" in value or len(value) > 4096


def _digest(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def same_content(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` are regular files with the same bytes (same size, same SHA-256)."""
    a, b = Path(a).expanduser(), Path(b).expanduser()
    try:
        if not (a.is_file() and b.is_file()) or a.stat().st_size != b.stat().st_size:
            return False
    except (OSError, ValueError):
        return False
    first = _digest(a)
    return first is not None and first == _digest(b)


def same_reference(
    before: object, now: object, folder: str | os.PathLike | None = None, before_from_folder: str | None = None
) -> bool:
    """Whether a recorded model or data reference ``before`` and the current ``now`` name the same thing.

    Equal strings; else, when ``now`` names an existing local path: the same file or folder once resolved (a
    relative and an absolute path, a symlink, a hard link); the same place relative to ``folder`` as recorded
    (``before_from_folder``, from :func:`path_from_folder`: the folder moved with the model); or two files with
    the same content. Names that are not local paths (hub ids, embedded models) compare as written.
    """
    if before == now:
        return True
    if not isinstance(before, str) or not isinstance(now, str) or _not_a_path(before) or _not_a_path(now):
        return False
    if not _exists(Path(now).expanduser()):
        return False
    if same_path(before, now):
        return True
    if before_from_folder is not None and folder is not None and path_from_folder(now, folder) == before_from_folder:
        return True
    return same_content(before, now)


def same_setting(
    before: object, now: object, before_folder: str | os.PathLike | None = None, now_folder: str | os.PathLike | None = None
) -> bool:
    """Whether a recorded setting (a JSON value: nested dicts and lists) and the current one agree.

    Values are compared item by item; two strings that differ still agree when they name a path inside the
    folder itself at the same place relative to it (``before_folder``: where the folder was when the setting
    was recorded, ``now_folder``: where it is now), or the same file or folder (:func:`same_reference`).
    """
    if isinstance(before, dict) and isinstance(now, dict):
        return before.keys() == now.keys() and all(same_setting(before[k], now[k], before_folder, now_folder) for k in before)
    if isinstance(before, list) and isinstance(now, list):
        return len(before) == len(now) and all(same_setting(a, b, before_folder, now_folder) for a, b in zip(before, now))
    if before == now:
        return True
    if not isinstance(before, str) or not isinstance(now, str) or not before.strip() or not now.strip():
        return False
    if _not_a_path(before) or _not_a_path(now):
        return False
    if before_folder is not None and now_folder is not None and is_inside(before, before_folder) and is_inside(now, now_folder):
        return os.path.relpath(resolved(before), resolved(before_folder)) == os.path.relpath(resolved(now), resolved(now_folder))
    return same_reference(before, now)


__all__ = [
    "FOLDER_KINDS",
    "MARKER_FILE",
    "OutputClashError",
    "check_folder",
    "check_outputs",
    "claim_folder",
    "folder_kind",
    "is_inside",
    "mark_folder",
    "path_from_folder",
    "require_path",
    "same_content",
    "same_path",
    "same_reference",
    "same_setting",
    "written_through",
]
