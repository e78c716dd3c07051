"""tomrl.io: atomic writes of files and folders."""

from __future__ import annotations

import stat

import pytest

from tomrl.io import PARTIAL_SUFFIX, RETIRED_SUFFIX, atomic_write_text, recover_interrupted_publish, write_folder_atomically


def test_atomic_write_gives_the_permissions_open_gives(tmp_path):
    # mkstemp creates 0600 files; results and reports must be as readable as any file the user writes.
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic_write_text(tmp_path / "atomic.txt", "x")
    assert stat.S_IMODE((tmp_path / "atomic.txt").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def _write_version(version: int):
    return lambda folder: (folder / "state.txt").write_text(str(version))


def test_a_folder_is_replaced_whole(tmp_path):
    target = tmp_path / "best"
    write_folder_atomically(target, _write_version(1))
    (target / "stale.txt").write_text("from version 1")
    write_folder_atomically(target, _write_version(2))
    assert sorted(p.name for p in target.iterdir()) == ["state.txt"] and (target / "state.txt").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]  # no .partial left


def test_a_failed_write_leaves_the_old_folder(tmp_path):
    target = tmp_path / "best"
    write_folder_atomically(target, _write_version(1))

    def fail(folder):
        (folder / "state.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_folder_atomically(target, fail)
    assert (target / "state.txt").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["best"]


def test_recovery_puts_back_the_folder_a_crash_moved_aside(tmp_path):
    # A crash between publish_folder's two renames: the old folder is only TARGET.old.partial.
    target = tmp_path / "out"
    write_folder_atomically(target, _write_version(1))
    target.rename(tmp_path / f"out{RETIRED_SUFFIX}")
    (tmp_path / f"out{PARTIAL_SUFFIX}").mkdir()  # the new one, half written
    recover_interrupted_publish(target)
    assert (target / "state.txt").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # After the second rename the new folder is in place: the retired copy is only deleted.
    (tmp_path / f"out{RETIRED_SUFFIX}").mkdir()
    recover_interrupted_publish(target)
    assert (target / "state.txt").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
