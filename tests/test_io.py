"""tomrl.io: atomic writes."""

from __future__ import annotations

import stat

from tomrl.io import atomic_write_text


def test_atomic_write_gives_the_permissions_open_gives(tmp_path):
    # mkstemp creates 0600 files; results and reports must be as readable as any file the user writes.
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic_write_text(tmp_path / "atomic.txt", "x")
    assert stat.S_IMODE((tmp_path / "atomic.txt").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
