"""Pin sets as distributors keep them (issue 23 §2): a PR commit URL, a PR from a fork (its own repository,
a real local repository standing in for it), one .patch file as a pin, a folder whose patches are each a pin."""

from __future__ import annotations

import pytest

from pinset.config.schema import load_pinset
from pinset.errors import ConfigError
from tests.testing import GitRepo, one_pin_yaml, write_pins
from tests.testing.sim import by_id, run_sim

BASE = {"src/a.c": "int a(void) { return 1; }\n", "src/b.c": "int b(void) { return 2; }\n",
        "src/c.c": "int c(void) { return 3; }\n"}


def _upstream(make_repo) -> GitRepo:
    up = make_repo("upstream")
    up.commit("base", BASE)
    up.tag("b1")
    return up


def test_a_pr_commit_url_names_the_pr_and_its_commit(make_repo, tmp_path):
    up = _upstream(make_repo)
    up.git("checkout", "-q", "-b", "pr")
    head = up.commit("pr", {"src/a.c": "int a(void) { return 11; }\n"})
    up.git("update-ref", "refs/pull/107/head", head)
    up.git("checkout", "-q", "master")
    cfg = one_pin_yaml(tmp_path / "pins.yaml", up.path, "ggml-org#107",
                       pr=f"https://github.com/ggml-org/llama.cpp/pull/107/commits/{head}")
    pin = load_pinset(cfg).pins[0]
    assert (pin.pr.number, pin.pr.url, pin.commit) == (107, "https://github.com/ggml-org/llama.cpp/pull/107", head)
    code, data = run_sim(tmp_path, cfg)
    assert code == 0 and by_id(data["builds"][0])["ggml-org#107"]["status"] == "applied"


def test_a_commit_key_that_contradicts_the_url_is_bad_input(tmp_path):
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: https://github.com/ggml-org/llama.cpp
        builds: [b1]
        pins:
          - id: p
            pr: https://github.com/ggml-org/llama.cpp/pull/107/commits/{"a" * 40}
            commit: {"b" * 40}
    """)
    with pytest.raises(ConfigError, match=r"pins.yaml:6: pins\[0\].commit: b{40} is not the commit its PR URL names"):
        load_pinset(cfg)


def _fork_with_commit(make_repo, up: GitRepo) -> tuple[GitRepo, str]:
    fork = make_repo("fork")
    fork.git("fetch", "-q", str(up.path), "master")
    fork.git("reset", "-q", "--hard", "FETCH_HEAD")
    fork.git("checkout", "-q", "-b", "feature")
    head = fork.commit("fork's change", {"src/b.c": "int b(void) { return 22; }\n"})
    return fork, head


def test_a_pr_from_a_fork_is_fetched_from_its_own_repository(make_repo, tmp_path):
    up = _upstream(make_repo)
    fork, head = _fork_with_commit(make_repo, up)  # upstream has neither the commit nor a pull/9/head
    pins = """
        upstream: {up}
        builds: [b1]
        pins:
          - id: fork#9
            pr: https://github.com/ggml-org/llama.cpp/pull/9
            commit: {head}
    """
    cfg = write_pins(tmp_path / "pins.yaml", pins.format(up=up.path, head=head) + "        repo: fork\n")
    assert load_pinset(cfg).pins[0].repo == str(fork.path)
    code, data = run_sim(tmp_path, cfg)
    pin = by_id(data["builds"][0])["fork#9"]
    assert code == 0 and pin["status"] == "applied" and pin["files"] == ["src/b.c"], pin
    # the same pin without its repository: not found, never a pass
    bare = write_pins(tmp_path / "bare.yaml", pins.format(up=up.path, head=head))
    (tmp_path / "cache2").mkdir()
    code, data = run_sim(tmp_path, bare, "--cache", str(tmp_path / "cache2"))
    assert code == 1 and by_id(data["builds"][0])["fork#9"]["status"] == "error"


def test_a_fork_that_is_not_a_repository_is_bad_input(make_repo, tmp_path):
    up = _upstream(make_repo)
    (tmp_path / "notrepo").mkdir()
    cfg = one_pin_yaml(tmp_path / "pins.yaml", up.path, "p", pr="https://github.com/ggml-org/llama.cpp/pull/9",
                       commit="a" * 40, repo="notrepo")
    with pytest.raises(ConfigError, match=r"pins\[0\].repo: 'notrepo' is not a git repository"):
        load_pinset(cfg)


def test_a_fork_pr_url_may_name_the_fork(tmp_path):
    """With `repo:` a fork's own PR is no longer 'another repository's PR'."""
    text = f"""
        upstream: https://github.com/ggml-org/llama.cpp
        builds: [b1]
        pins:
          - id: p
            pr: https://github.com/someone/llama.cpp/pull/3
            commit: {"a" * 40}
    """
    with pytest.raises(ConfigError, match="belongs to someone/llama.cpp"):
        load_pinset(write_pins(tmp_path / "a.yaml", text))
    text += "        repo: https://github.com/someone/llama.cpp\n"
    pin = load_pinset(write_pins(tmp_path / "b.yaml", text)).pins[0]
    assert pin.repo == "https://github.com/someone/llama.cpp"


def _patches(up: GitRepo, out, changes: dict[str, str]) -> list:
    """One independent patch per file, each made on the base (not a series)."""
    made = []
    for i, (rel, text) in enumerate(changes.items(), 1):
        up.git("checkout", "-q", "-b", f"p{i}", "b1")
        up.commit(f"change {rel}", {rel: text})
        up.format_patch("HEAD~1..HEAD", out / f"tmp{i}")
        made += sorted((out / f"tmp{i}").glob("*.patch"))
        up.git("checkout", "-q", "master")
    for i, path in enumerate(made, 1):
        path.rename(out / f"{i:04d}-{path.name[5:]}")
        path.parent.rmdir()
    return sorted(out.glob("*.patch"))


def test_one_patch_file_is_a_pin(make_repo, tmp_path):
    up = _upstream(make_repo)
    (patch,) = _patches(up, tmp_path / "patches", {"src/a.c": "int a(void) { return 9; }\n"})
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1]
        pins:
          - id: one
            patches: patches/{patch.name}
    """)
    assert load_pinset(cfg).pins[0].patch_files() == [patch]
    code, data = run_sim(tmp_path, cfg)
    assert code == 0 and by_id(data["builds"][0])["one"]["status"] == "applied"
    (tmp_path / "patches" / "0009-missing.patch").unlink(missing_ok=True)
    cfg.write_text(cfg.read_text().replace(patch.name, "0009-missing.patch"))
    with pytest.raises(ConfigError, match=r"pins\[0\].patches: no such file: patches/0009-missing.patch"):
        load_pinset(cfg)
    (tmp_path / "patches" / "0009-missing.patch").write_text("not a patch\n")
    with pytest.raises(ConfigError, match="0009-missing.patch: no diff in it"):
        load_pinset(cfg)


def test_each_patch_of_a_folder_is_its_own_pin_in_name_order(make_repo, tmp_path):
    up = _upstream(make_repo)
    made = _patches(up, tmp_path / "llama" / "patches", {"src/c.c": "int c(void) { return 33; }\n",
                                                         "src/a.c": "int a(void) { return 11; }\n",
                                                         "src/b.c": "int b(void) { return 22; }\n"})
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1]
        pins:
          - id: ollama
            patches: llama/patches
            each: true
            required: false
    """)
    pins = load_pinset(cfg).pins
    assert [p.id for p in pins] == [f"ollama/{p.name.removesuffix('.patch')}" for p in made]
    assert [p.patch_files() for p in pins] == [[p] for p in made] and not any(p.required for p in pins)
    code, data = run_sim(tmp_path, cfg)
    got = by_id(data["builds"][0])
    assert code == 0 and [p["id"] for p in data["builds"][0]["pins"]] == [p.id for p in pins]
    assert all(got[p.id]["status"] == "applied" for p in pins)
    assert got[pins[0].id]["files"] == ["src/c.c"]


def test_each_is_for_folders_of_patches(make_repo, tmp_path):
    up = _upstream(make_repo)
    (patch,) = _patches(up, tmp_path / "patches", {"src/a.c": "int a(void) { return 9; }\n"})
    for body, message in ((f"patches: patches/{patch.name}\n                each: true", "not one file"),
                          (f"pr: https://github.com/o/r/pull/1\n                commit: {'a' * 40}\n                each: true",
                           "only a `patches:` folder takes `each`"),
                          ("patches: patches\n                each: maybe", "must be true or false")):
        cfg = write_pins(tmp_path / "pins.yaml", f"""
            upstream: {up.path}
            builds: [b1]
            pins:
              - id: x
                {body}
        """)
        with pytest.raises(ConfigError, match=message):
            load_pinset(cfg)
