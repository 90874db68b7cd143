"""Second look at sim's apply modes and the heal verbs (review of the merged #19/#21 work)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pinset.cli import main
from tests.heal.test_heal_refresh import LINES, moved  # noqa: F401 (the fixture)
from tests.testing import first_build, interrupt_at, series, write_pins

TOP = "".join(f"top {i}\n" for i in range(5))  # five lines above: the pin's context moved (an offset)


def pinned(text: str, line: int, how: str = "pinned") -> str:
    """`text` with its line `line` changed ("line 20" -> "line 20 pinned")."""
    return text.replace(f"line {line}\n", f"line {line} {how}\n")


def two_builds(make_repo, tmp_path, base, commits, b2, folder="patches/p", patches=None, also=None):
    """Upstream b1 (files `base`) and b2 (files `b2` committed on it); the pin p, `commits` made on b1 and
    exported into `folder`, named `patches` (default: the folder) in pins.yaml, then a pin per entry of
    `also` (id -> its commits, in patches/<id>). -> (pins.yaml, p's folder)."""
    up, b1 = first_build(make_repo, base)
    out = series(up, b1, commits, tmp_path / folder, f"--base={b1}")
    pins = [("p", patches or folder)]
    for pin_id, more in (also or {}).items():
        series(up, b1, more, tmp_path / "patches" / pin_id, f"--base={b1}")
        pins.append((pin_id, f"patches/{pin_id}"))
    up.commit("upstream b2", b2)
    up.tag("b2")
    pins_yaml = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1, b2]\npins:\n" + "".join(
        f"  - id: {pin_id}\n    patches: {path}\n    unchecked: test\n" for pin_id, path in pins))
    return pins_yaml, out


def sim_modes(tmp_path, pins_yaml, pin="p"):
    out = tmp_path / f"sim-{len(list(tmp_path.glob('sim-*.json')))}.json"
    main(["sim", "-c", str(pins_yaml), "--json", str(out)])
    doc = json.loads(out.read_text())
    return {b["build"]: (q["status"], q.get("apply_mode")) for b in doc["builds"]
            for q in b["pins"] if q["id"] == pin}


def test_first_patch_offset_second_exact_is_offset(make_repo, tmp_path):
    """A 2-patch series: the first patch's hunk moved (offset), the second's applies where it says."""
    pins_yaml, _ = two_builds(make_repo, tmp_path, {"a.txt": LINES, "b.txt": LINES},
                              [("a", {"a.txt": pinned(LINES, 20)}), ("b", {"b.txt": pinned(LINES, 5)})],
                              {"a.txt": TOP + LINES})
    assert sim_modes(tmp_path, pins_yaml) == {"b1": ("applied", "exact"), "b2": ("applied", "offset")}


def test_refresh_write_of_a_single_file_pin(make_repo, tmp_path, capsys):
    """`patches: patches/one.patch`: the pin is one file, not a folder; --write replaces that file only."""
    pins_yaml, _ = two_builds(make_repo, tmp_path, {"a.txt": LINES}, [("a", {"a.txt": pinned(LINES, 20)})],
                              {"a.txt": TOP + LINES}, "patches", "patches/one.patch")
    (tmp_path / "patches" / "0001-a.patch").rename(tmp_path / "patches" / "one.patch")
    (tmp_path / "patches" / "keep.txt").write_text("mine\n")
    old = (tmp_path / "patches" / "one.patch").read_text()
    rc = main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"])
    out = capsys.readouterr()
    assert rc == 0, out
    assert sorted(p.name for p in (tmp_path / "patches").iterdir()) == ["keep.txt", "one.patch"]
    assert (tmp_path / "patches" / "one.patch").read_text() != old
    assert sim_modes(tmp_path, pins_yaml)["b2"] == ("applied", "exact")


def test_rebase_of_a_single_file_pin_is_refused_before_any_worktree(make_repo, tmp_path, capsys, monkeypatch):
    """Its resolutions would have no folder: said at the start (exit 2), not after the user resolved."""
    pins_yaml, _ = two_builds(make_repo, tmp_path, {"a.txt": LINES}, [("a", {"a.txt": pinned(LINES, 20)})],
                              {"a.txt": pinned(LINES, 20, "upstream")}, "patches", "patches/0001-a.patch")
    monkeypatch.chdir(tmp_path)
    assert main(["rebase", "p", "-c", str(pins_yaml), "--onto", "b2"]) == 2
    assert "one patch file" in capsys.readouterr().err
    assert not (tmp_path / "pinset-rebase-p").exists()


def test_as_series_of_a_pr_pin_named_by_its_commit_url(make_repo, tmp_path, capsys):
    """`pr: .../pull/N/commits/SHA` and no `commit:` key (a form pins.yaml takes): converted like the other."""
    from pinset.config.schema import load_pinset
    from tests.heal.test_heal_as_series import make_pr

    up, head = make_pr(make_repo)
    cfg = tmp_path / "pins.yaml"
    cfg.write_text(f"upstream: {up.path}\nbuilds: [b1]\npins:\n"
                   f"  - id: ggml-org#7\n"
                   f"    pr: https://github.com/ggml-org/llama.cpp/pull/7/commits/{head}   # reviewed\n"
                   f"    unchecked: none\n")
    rc = main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"])
    out = capsys.readouterr()
    assert rc == 0, out
    spec = load_pinset(cfg).pin("ggml-org#7")
    assert spec.pr is None and spec.patches == (tmp_path / "patches" / "pr7").resolve()
    assert head in cfg.read_text() and "# reviewed" in cfg.read_text()


def test_second_patch_conflicts_is_named_after_the_whole_tries(make_repo, tmp_path):
    """Both whole-series tries fail: the patch-by-patch pass starts again from the build (the index
    restored) and names the second patch, not the first, which applies (with an offset)."""
    pins_yaml, _ = two_builds(make_repo, tmp_path, {"a.txt": LINES, "b.txt": LINES},
                              [("a", {"a.txt": pinned(LINES, 20)}), ("b", {"b.txt": pinned(LINES, 5)})],
                              {"a.txt": TOP + LINES, "b.txt": pinned(LINES, 5, "upstream")})
    out = tmp_path / "sim.json"
    main(["sim", "-c", str(pins_yaml), "--json", str(out)])
    doc = json.loads(out.read_text())
    pin = next(q for b in doc["builds"] if b["build"] == "b2" for q in b["pins"] if q["id"] == "p")
    assert pin["status"] == "conflict"
    assert "0002-b.patch" in json.dumps(pin) and "0001-a.patch" not in pin.get("detail", "")


def test_users_apply_ignore_whitespace_does_not_make_a_conflict_apply(make_repo, tmp_path, monkeypatch):
    """`apply.ignoreWhitespace=change` in the user's git config let `git apply` take a patch whose context
    upstream re-indented, "cleanly": sim said applied (exact) on one machine and conflict on another."""
    text = LINES.replace("line 19\n", "line  19\n")
    pins_yaml, _ = two_builds(make_repo, tmp_path, {"a.txt": text}, [("a", {"a.txt": pinned(text, 20)})],
                              {"a.txt": LINES})   # b2 re-indents line 19
    plain = sim_modes(tmp_path, pins_yaml)
    assert plain["b2"][0] == "conflict"
    gitconfig = tmp_path / "user.gitconfig"
    gitconfig.write_text("[apply]\n\tignoreWhitespace = change\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "cache2"))
    assert sim_modes(tmp_path, pins_yaml) == plain


def test_rebase_interrupted_while_the_worktree_is_made_leaves_nothing(make_repo, tmp_path, capsys, monkeypatch):
    """Ctrl-C during `git worktree add` (seconds on a llama.cpp tree): no half-made ./pinset-rebase-p left,
    which --abort would not recognise and --onto would refuse."""
    from pinset.heal.worktree import Worktree

    pins_yaml, _ = two_builds(make_repo, tmp_path, {"a.txt": LINES}, [("a", {"a.txt": pinned(LINES, 20)})],
                              {"a.txt": pinned(LINES, 20, "upstream")})
    real = Worktree.add.__func__

    def interrupted(cls, mirror, path, commit):
        real(cls, mirror, path, commit)
        raise KeyboardInterrupt

    monkeypatch.setattr(Worktree, "add", classmethod(interrupted))
    monkeypatch.chdir(tmp_path)
    assert main(["rebase", "p", "-c", str(pins_yaml), "--onto", "b2"]) == 130
    from pinset.commands.rebase import default_worktree
    assert not (tmp_path / "pinset-rebase-p").exists()
    assert not default_worktree(Path(os.environ["PINSET_CACHE"]), pins_yaml, "p").exists()


def test_refresh_of_a_renumbered_series_whose_commits_share_a_subject(make_repo, tmp_path, capsys):
    """Files 0002-fix.patch, 0003-fix.patch (the first patch dropped once): format-patch names the new
    ones 0001-fix.patch, 0002-fix.patch, and renaming the first onto its old name must not overwrite the second."""
    pins_yaml, folder = two_builds(make_repo, tmp_path, {"a.txt": LINES},
                                   [("fix", {"a.txt": pinned(LINES, 20)}),
                                    ("fix", {"a.txt": pinned(pinned(LINES, 20), 30)})],
                                   {"a.txt": TOP + LINES})
    (folder / "0002-fix.patch").rename(folder / "0003-fix.patch")
    (folder / "0001-fix.patch").rename(folder / "0002-fix.patch")
    rc = main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"])
    out = capsys.readouterr()
    assert rc == 0, out
    assert sorted(p.name for p in folder.iterdir()) == ["0002-fix.patch", "0003-fix.patch"]
    assert "line 30 pinned" not in (folder / "0002-fix.patch").read_text()
    assert "+line 30 pinned" in (folder / "0003-fix.patch").read_text()
    assert sim_modes(tmp_path, pins_yaml)["b2"] == ("applied", "exact")


def test_interrupt_between_two_pins_swaps_leaves_no_staged_folder(make_repo, tmp_path, capsys, monkeypatch):
    """Ctrl-C after the first pin's folder was swapped in: the second pin's staged copy is removed too."""
    import pinset.heal.series as refresh_cmd  # write_folders and swap_in live in the heal stage

    pins_yaml, _ = two_builds(make_repo, tmp_path, {"a.txt": LINES, "b.txt": LINES},
                              [("a", {"a.txt": pinned(LINES, 20)})], {"a.txt": TOP + LINES, "b.txt": TOP + LINES},
                              also={"q": [("b", {"b.txt": pinned(LINES, 20)})]})
    monkeypatch.setattr(refresh_cmd, "swap_in", interrupt_at(2, refresh_cmd.swap_in))
    assert main(["refresh", "-c", str(pins_yaml), "--onto", "b2", "--write"]) == 130
    assert not list((tmp_path / "patches").glob(".*")), list((tmp_path / "patches").iterdir())


def test_as_series_interrupted_while_copying_leaves_nothing(make_repo, tmp_path, capsys, monkeypatch):
    from tests.heal.test_heal_as_series import setup

    _, _, cfg = setup(tmp_path, make_repo)
    before = cfg.read_bytes()
    monkeypatch.setattr("pinset.heal.as_series.shutil.copyfile", interrupt_at(2, __import__("shutil").copyfile))
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 130
    assert cfg.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "patches").iterdir()) == ["first"]


def test_default_refresh_leaves_pins_applied_by_recorded_resolution(moved, tmp_path, capsys):  # noqa: F811
    """After a rebase onto b4 the older builds apply the pin by its recorded resolution: a plain
    `pinset refresh --onto b2` (default: the offset and 3-way series, as its help says) must not pick it
    and fail the whole command at `git am -3`; it has nothing to refresh and changes nothing."""
    from tests.heal.test_heal_rebase import resolve_line_20, start

    _, pins_yaml, folder = moved
    wt = tmp_path / "wt"
    assert start(pins_yaml, wt) == 1
    resolve_line_20(wt)
    assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(wt)]) == 0
    assert sim_modes(tmp_path, pins_yaml)["b2"] == ("applied", "resolution")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    capsys.readouterr()
    rc = main(["refresh", "-c", str(pins_yaml), "--onto", "b2", "--write"])
    out = capsys.readouterr()
    assert rc == 0, out
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"]) == 1
    assert "pinset rebase p --onto b2" in capsys.readouterr().out
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
