"""Replacing a pin's patch folder all at once, recoverably: the new folder staged beside the old one (a copy of
everything in it but the `*.patch` files, then the new series and new ledger files), then swapped in by
pinset.swap (one helper for every replacement of a user's folder: the exchange or two renames, signals held
between them, the journal `recover` reads; see there).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from pinset.config.ledger import RESOLUTIONS_DIR
from pinset.disk import DiskFull, disk_refusal
from pinset.errors import PinsetError
from pinset.swap import drop, held_signals, new_tag, recover, staged_name, swap_in


def stage_new_folder(folder: Path, patches: list[Path]) -> Path:
    """A folder of `patches` alone beside `folder` (not there yet), as `part`: the caller renames it to `folder`
    when the rest of its work is done; a run killed before that leaves a `part` that `recover` removes."""
    part = staged_name(folder, "part", new_tag())
    try:
        part.mkdir(parents=True)
        for patch in patches:
            shutil.copyfile(patch, part / patch.name)
    except BaseException as exc:
        shutil.rmtree(part, ignore_errors=True)
        _refused_write(exc, folder)
        raise
    return part


def staged_file_name(path: Path) -> Path:
    """A name beside `path` for a trial copy of it that `recover` removes when the run that made it is dead."""
    return staged_name(path, "part", new_tag())


def stage_folder(folder: Path, patches: list[Path], resolutions: dict[str, str] | None = None) -> Path:
    """The new folder beside `folder`: its other files kept, its `*.patch` replaced by `patches`,
    `resolutions` (file name -> text) added to its ledger. Written as `part`, renamed `new` once whole."""
    tag = new_tag()
    part, new = staged_name(folder, "part", tag), staged_name(folder, "new", tag)
    try:
        shutil.copytree(folder, part, symlinks=True)
        for old in part.glob("*.patch"):
            old.unlink()
        for patch in patches:
            shutil.copyfile(patch, part / patch.name)
        if resolutions:
            (part / RESOLUTIONS_DIR).mkdir(exist_ok=True)
            for name, text in resolutions.items():
                (part / RESOLUTIONS_DIR / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        with held_signals():
            os.rename(part, new)
    except BaseException as exc:   # (Ctrl-C at the rename: delivered after it, so `new` goes too)
        drop(part)
        drop(new)
        _refused_write(exc, folder)
        raise
    return new


def _refused_write(exc: BaseException, folder: Path) -> None:
    """A full disk (quota, read-only) while staging: disk.DiskFull naming the path (exit 1), whether it came as
    one OSError or as copytree's list of them (shutil.Error)."""
    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) else None
    if failures:
        for item in failures:
            if isinstance(item, tuple) and len(item) == 3 and disk_refusal(str(item[2])):
                raise DiskFull(item[1], str(item[2]).split("] ", 1)[-1].split(":")[0].lower()) from None
    elif isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        raise DiskFull(exc.filename or folder, (exc.strerror or str(exc)).lower()) from None


def write_folders(items) -> None:
    """Stage every (folder, patches, resolutions) first, then swap each in: a failure while staging
    changes no folder. A pin of one patch file (`patches: x.patch`, or `each: true`) is that file alone,
    replaced by a rename; the folder around it holds other pins' files."""
    items = list(items)
    for parent in sorted({Path(folder).parent for folder, _, _ in items}):
        recover(parent)   # a dead run's half swap of these folders first (the verb said it when it read pins.yaml)
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
            swap_in(new, folder)
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
    tag = new_tag()
    part, new = staged_name(path, "part", tag), staged_name(path, "new", tag)
    try:
        shutil.copyfile(patches[0], part)
        with held_signals():
            os.rename(part, new)
    except BaseException as exc:
        part.unlink(missing_ok=True)
        new.unlink(missing_ok=True)
        _refused_write(exc, path)
        raise
    return new
