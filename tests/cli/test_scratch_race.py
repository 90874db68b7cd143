"""A scratch folder another run's cleaner removes between its mkdir and its lock gets a new name.

CI stress of 8 concurrent `pinset sim` on a fresh cache: one run in 20 died with "no such file or directory:
CACHE/tmp/mirror-PID-XXXX": its folder was made, not yet held, and another run's clean_scratch (which takes
every folder nobody holds) removed it before the open.
"""

from __future__ import annotations

import os
from pathlib import Path

from pinset import store
from pinset.store import clean_scratch, scratch_dir


def test_a_folder_cleaned_before_it_is_held_is_made_again(tmp_path, monkeypatch):
    real_open = os.open
    taken: list[Path] = []

    def open_after_a_cleaner(path, flags, *args, **kwargs):
        if not taken and Path(path).parent == tmp_path and Path(path).name.startswith("mirror-"):
            taken.append(Path(path))
            assert clean_scratch(tmp_path) == [Path(path)]  # the other run's cleaner, between mkdir and open
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(store.os, "open", open_after_a_cleaner)
    held = scratch_dir(tmp_path, "mirror-")
    try:
        assert taken and held.path != taken[0] and held.path.is_dir()
        assert clean_scratch(tmp_path) == []   # held: no cleaner takes it now
    finally:
        held.close()
    assert not held.path.exists()
