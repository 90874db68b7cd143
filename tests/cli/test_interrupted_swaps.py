"""Interrupted writes (issue 40, class 4): every replacement of a user's folder goes through pinset/swap.py.
Real signals on real `pinset` processes, at exact points of the swap (an LD_PRELOAD shim on rename(2) that
raises the signal in the process itself just before the rename it names, and refuses renameat2's exchange
where asked, as NFS, CIFS and vfat do):
- Ctrl-C (SIGINT) anywhere in the swap: exit 130 with the folder swapped or untouched, never missing, nothing
  staged left beside it;
- SIGKILL while the new folder is staged: the old folder in place, byte-identical;
- SIGKILL between the two renames of a system without exchange: any verb that reads pins.yaml next completes
  the swap before it reads.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.heal.test_heal_refresh import moved  # noqa: F401  (the fixture)
from tests.testing import child_env

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* SHIM_NO_EXCHANGE=1: no RENAME_EXCHANGE here (renameat2 fails with EINVAL, as on NFS, CIFS, vfat). */
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    static int (*real)(int, const char *, int, const char *, unsigned int);
    const char *refuse = getenv("SHIM_NO_EXCHANGE");
    if (refuse && *refuse) { errno = EINVAL; return -1; }
    if (!real) real = (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
    return real(olddirfd, oldpath, newdirfd, newpath, flags);
}

/* SHIM_AT=TEXT, SHIM_SIGNAL=N: the process gets signal N (raise: its own) just before the rename whose source
   contains TEXT (or, SHIM_EXACT=1, is TEXT); the rename then happens unless the signal killed the process. */
int rename(const char *oldpath, const char *newpath) {
    static int (*real)(const char *, const char *);
    const char *at = getenv("SHIM_AT");
    const char *exact = getenv("SHIM_EXACT");
    const char *sig = getenv("SHIM_SIGNAL");
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    if (at && *at && sig && ((exact && *exact) ? strcmp(oldpath, at) == 0 : strstr(oldpath, at) != NULL))
        raise(atoi(sig));
    return real(oldpath, newpath);
}
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the LD_PRELOAD shim on rename cannot be built")
    folder = tmp_path_factory.mktemp("shim")
    (folder / "shim.c").write_text(SHIM)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(folder / "shim.so"), str(folder / "shim.c"), "-ldl"],
                   check=True)
    return folder / "shim.so"


def _pinset(tmp_path, shim, *args: str, at: str = "", signal: int = 0, exact: bool = False,
            no_exchange: bool = False) -> subprocess.CompletedProcess:
    env = child_env(LD_PRELOAD=str(shim), SHIM_AT=at, SHIM_SIGNAL=str(signal), SHIM_EXACT="1" if exact else "",
                    SHIM_NO_EXCHANGE="1" if no_exchange else "", PINSET_CACHE=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "pinset", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _refresh(tmp_path, shim, pins_yaml, **kw) -> subprocess.CompletedProcess:
    return _pinset(tmp_path, shim, "refresh", "p", "-c", str(pins_yaml), "--onto", "b3", "--write", **kw)


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _hidden(folder):
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith("."))


def _refreshed(tmp_path, shim, pins_yaml, folder) -> dict:
    """The folder as an uninterrupted refresh writes it (on a copy of the workspace)."""
    copy = tmp_path / "copy"
    shutil.copytree(pins_yaml.parent / "patches", copy / "patches")
    shutil.copy(pins_yaml, copy / "pins.yaml")
    done = _refresh(tmp_path, shim, copy / "pins.yaml")
    assert done.returncode == 0, done.stderr
    return _files(copy / "patches" / "p")


@pytest.mark.parametrize("where,no_exchange", [("first rename", True), ("second rename", True), ("staged", True),
                                               ("staged", False)],
                         ids=["first of two renames", "second of two renames", "staged", "staged, exchange"])
def test_ctrl_c_in_the_swap_completes_or_rolls_back_before_exit_130(moved, tmp_path, shim, where,  # noqa: F811
                                                                    no_exchange):
    _, pins_yaml, folder = moved
    old = _files(folder)
    new = _refreshed(tmp_path, shim, pins_yaml, folder)
    at, exact = {"first rename": (str(folder), True), "second rename": (".p.pinset-new-", False),
                 "staged": (".p.pinset-part-", False)}[where]
    done = _refresh(tmp_path, shim, pins_yaml, at=at, exact=exact, signal=2, no_exchange=no_exchange)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    assert folder.is_dir(), f"{folder} missing after Ctrl-C: {_hidden(folder)}"
    assert _files(folder) in (old, new)
    assert _hidden(folder) == [], "nothing staged is left beside the folder"


@pytest.mark.parametrize("no_exchange", [True, False], ids=["two renames", "exchange"])
def test_sigkill_while_staging_leaves_the_old_folder_byte_identical(moved, tmp_path, shim, no_exchange):  # noqa: F811
    _, pins_yaml, folder = moved
    old = _files(folder)
    done = _refresh(tmp_path, shim, pins_yaml, at=".p.pinset-part-", signal=9, no_exchange=no_exchange)
    assert done.returncode == -9
    assert _files(folder) == old


VERBS = {
    "sim": lambda tmp_path, pins_yaml: ["sim", "-c", str(pins_yaml), "--json", str(tmp_path / "s.json")],
    "pick": lambda tmp_path, pins_yaml: ["pick", "-c", str(pins_yaml), "--json", str(tmp_path / "p.json")],
    "matrix": lambda tmp_path, pins_yaml: ["matrix", "-c", str(pins_yaml), "--gpus", "cpu", "--json",
                                           str(tmp_path / "m.json")],
    "report": lambda tmp_path, pins_yaml: ["report", "-c", str(pins_yaml), "--json", str(tmp_path / "r.json")],
}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_any_verb_that_reads_pins_yaml_completes_a_half_swap_first(moved, tmp_path, shim, verb):  # noqa: F811
    _, pins_yaml, folder = moved
    new = _refreshed(tmp_path, shim, pins_yaml, folder)
    killed = _refresh(tmp_path, shim, pins_yaml, at=".p.pinset-new-", signal=9, no_exchange=True)
    assert killed.returncode == -9 and not folder.exists()   # between the two renames: what a kill there leaves
    done = _pinset(tmp_path, shim, *VERBS[verb](tmp_path, pins_yaml))
    assert "completed the replacement a killed run" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert _files(folder) == new and _hidden(folder) == []
