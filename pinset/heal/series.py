"""Replacing a pin's patch folder all at once.

The new folder is made beside the old one (a copy of everything in it but the `*.patch` files, then the
new series and new ledger files), and the two are swapped by one `renameat2(RENAME_EXCHANGE)`: a reader,
or a run killed at any moment, sees the old folder or the new one, never a mix. Where the system has no
exchange, two renames (a killed run then leaves the old folder as `.NAME.pinset-old-*` beside it).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import uuid
from pathlib import Path

from pinset.config.ledger import RESOLUTIONS_DIR
from pinset.errors import PinsetError

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def stage_folder(folder: Path, patches: list[Path], resolutions: dict[str, str] | None = None) -> Path:
    """The new folder beside `folder`: its other files kept, its `*.patch` replaced by `patches`,
    `resolutions` (file name -> text) added to its ledger."""
    new = folder.parent / f".{folder.name}.pinset-new-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copytree(folder, new, symlinks=True)
        for old in new.glob("*.patch"):
            old.unlink()
        for patch in patches:
            shutil.copyfile(patch, new / patch.name)
        if resolutions:
            (new / RESOLUTIONS_DIR).mkdir(exist_ok=True)
            for name, text in resolutions.items():
                (new / RESOLUTIONS_DIR / name).write_text(text, encoding="utf-8")
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return new


def swap_in(staged: Path, folder: Path) -> None:
    """Put `staged` at `folder` in one step; the old folder is removed."""
    if _exchange(staged, folder):
        shutil.rmtree(staged, ignore_errors=True)   # now holds the old folder
        return
    old = folder.parent / f".{folder.name}.pinset-old-{uuid.uuid4().hex[:8]}"
    os.rename(folder, old)
    os.rename(staged, folder)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: no exchange here
        return False
    raise OSError(err, os.strerror(err), str(b))


def write_folders(items) -> None:
    """Stage every (folder, patches, resolutions) first, then swap each in: a failure while staging
    changes no folder. A pin of one patch file (`patches: x.patch`, or `each: true`) is that file alone,
    replaced by a rename; the folder around it holds other pins' files."""
    staged = []
    try:
        for folder, patches, resolutions in items:
            staged.append((stage_file(folder, patches, resolutions) if not folder.is_dir()
                           else stage_folder(folder, patches, resolutions), folder))
    except BaseException:
        for new, _ in staged:
            shutil.rmtree(new, ignore_errors=True) if new.is_dir() else new.unlink(missing_ok=True)
        raise
    for n, (new, folder) in enumerate(staged):
        try:
            if new.is_dir():
                swap_in(new, folder)
            else:
                os.replace(new, folder)
        except BaseException:   # Ctrl-C between two pins: the ones not swapped in yet leave nothing behind
            for later, target in staged[n:]:
                if target.exists():   # (not amid swap_in's two-rename fallback: there `later` is all there is)
                    shutil.rmtree(later, ignore_errors=True) if later.is_dir() else later.unlink(missing_ok=True)
            raise


def stage_file(path: Path, patches: list[Path], resolutions) -> Path:
    """The new text of a one-file pin, beside it (a hidden temp file, renamed over it later)."""
    if len(patches) != 1 or resolutions:
        raise PinsetError(f"{path}: a pin of one patch file takes one patch and no resolutions "
                          f"(got {len(patches)} patches{', resolutions' if resolutions else ''}); nothing written")
    new = path.parent / f".{path.name}.pinset-new-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copyfile(patches[0], new)
    except BaseException:
        new.unlink(missing_ok=True)
        raise
    return new
