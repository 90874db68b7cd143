"""`pinset import` (issue 23 §2): a pins.yaml from an Unsloth-style pr-set.json and from an Ollama-style
checkout, one comment per pin naming its source; only the named output is written, never over a file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from pinset.cli import main
from pinset.config.schema import load_pinset
from tests.testing import GitRepo
from tests.testing.sim import by_id, run_sim

UP = "https://github.com/ggml-org/llama.cpp"
SHA1, SHA2, SHA3 = ("1" * 40, "2" * 40, "ab" * 20)


def _pr_set(tmp_path, doc) -> str:
    path = tmp_path / "pr-set.json"
    path.write_text(json.dumps(doc, indent=1))
    return str(path)


def test_a_pr_set_becomes_pins_in_order_with_required_and_sources(tmp_path, capsys):
    src = _pr_set(tmp_path, [f"{UP}/pull/107/commits/{SHA1}",
                             {"url": f"{UP}/pull/20/commits/{SHA2}", "required": False, "description": "speed-up"},
                             {"pr": f"{UP}/pull/107", "commit": SHA3.upper()}])
    out = tmp_path / "out" / "pins.yaml"
    assert main(["import", src, "-o", str(out)]) == 0
    pins = load_pinset(out).pins
    # Unsloth's "required": false is "skip once the PR is not open", not pinset's "may fail": never imported as that
    assert [(p.id, p.pr.number, p.commit, p.required) for p in pins] == [
        ("ggml-org#107", 107, SHA1, True), ("ggml-org#20", 20, SHA2, True), ("ggml-org#107-2", 107, SHA3, True)]
    text = out.read_text()
    comments = [line.strip() for line in text.splitlines() if line.startswith("  #")]
    assert comments[:2] == [f"# pr-set.json prs[0]: {UP}/pull/107/commits/{SHA1}",
                            f"# pr-set.json prs[1]: {UP}/pull/20/commits/{SHA2}"]
    assert comments[-1] == f"# pr-set.json prs[2]: {UP}/pull/107"
    doc = yaml.safe_load(text)
    assert doc["upstream"] == UP and doc["builds"] == ["tags:b*:1"] and doc["pins"][1]["description"] == "speed-up"
    assert sorted(p.name for p in out.parent.iterdir()) == ["pins.yaml"]  # nothing else written


def test_a_pr_set_mapping_names_upstream_and_builds(tmp_path):
    src = _pr_set(tmp_path, {"upstream": "https://github.com/o/llama.cpp", "builds": ["b100", "b101"],
                             "prs": [f"https://github.com/o/llama.cpp/pull/1/commits/{SHA1}"]})
    out = tmp_path / "pins.yaml"
    assert main(["import", src, "-o", str(out), "--builds", "b200"]) == 0  # the command line wins
    pinset = load_pinset(out)
    assert pinset.upstream == "https://github.com/o/llama.cpp" and pinset.builds == ("b200",)


def test_an_existing_output_is_refused_unless_forced(tmp_path, capsys):
    src = _pr_set(tmp_path, [f"{UP}/pull/1/commits/{SHA1}"])
    out = tmp_path / "pins.yaml"
    out.write_text("mine\n")
    assert main(["import", src, "-o", str(out)]) == 2
    assert "exists (give --force" in capsys.readouterr().err and out.read_text() == "mine\n"
    assert main(["import", src, "-o", str(out), "--force"]) == 0 and load_pinset(out).pins[0].commit == SHA1


def test_bad_entries_are_bad_input_naming_the_entry_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "pins.yaml"
    for doc, said in (([f"{UP}/pull/1"], "prs[0]: 'https://github.com/ggml-org/llama.cpp/pull/1' names no commit"),
                      ([f"{UP}/pull/1/commits/{SHA1}", {"url": f"{UP}/issues/3"}], "prs[1]: "),
                      ([{"url": f"{UP}/pull/1/commits/{SHA1}", "required": "no"}], "prs[0].required: must be true or false"),
                      ([{"url": f"{UP}/pull/1/commits/{SHA1}", "wanted": 1}], "prs[0].wanted: unknown key"),
                      ({"prs": []}, "prs: must be a non-empty list"),
                      ([f"https://github.com/other/repo/pull/1/commits/{SHA1}"], "belongs to other/repo")):
        src = _pr_set(tmp_path, doc)
        assert main(["import", src, "-o", str(out)]) == 2, doc
        assert said in capsys.readouterr().err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "pr-set.json"] or not out.exists()
    (tmp_path / "pr-set.json").write_text("[\n  1,\n")
    assert main(["import", str(tmp_path / "pr-set.json"), "-o", str(out)]) == 2
    assert "pr-set.json:3: not valid JSON" in capsys.readouterr().err and not out.exists()


def _ollama_checkout(tmp_path) -> tuple[GitRepo, str]:
    """A real upstream, and an Ollama-style checkout: Makefile.sync at an upstream commit, three independent
    patches made against it (not a series: each applies on the bare tree)."""
    up = GitRepo(tmp_path / "upstream")
    base = up.commit("base", {"src/a.c": "int a;\n", "src/b.c": "int b;\n", "src/c.c": "int c;\n"})
    checkout = tmp_path / "ollama"
    patches = checkout / "llama" / "patches"
    for i, rel in enumerate(["src/b.c", "src/a.c", "src/c.c"], 1):
        up.git("checkout", "-q", "-b", f"p{i}", base)
        up.commit(f"patch {i}", {rel: f"int {rel[4]} = {i};\n"})
        up.format_patch("HEAD~1..HEAD", tmp_path / f"fp{i}")
        (made,) = (tmp_path / f"fp{i}").glob("*.patch")
        patches.mkdir(parents=True, exist_ok=True)
        made.rename(patches / f"{i:04d}-{made.name[5:]}")
        up.git("checkout", "-q", "master")
    (checkout / "Makefile.sync").write_text(ollama_makefile("https://github.com/ggerganov/llama.cpp.git", base))
    for patch in patches.glob("*.patch"):   # apply-patches' stamps beside each applied patch: not patches
        (patches / f".{patch.name}ed").write_text("")
    return up, base


def ollama_makefile(upstream: str, fetch_head: str) -> str:
    """A Makefile.sync in the shape of ollama/ollama's (variables first, then targets that use them)."""
    return (f"UPSTREAM={upstream}\nWORKDIR=llama/vendor\nFETCH_HEAD={fetch_head}\n\n"
            ".PHONY: help\nhelp:\n\t@echo \"Available targets:\"\n\n"
            "PATCHES=$(wildcard llama/patches/*.patch)\n"
            "PATCHED=$(join $(dir $(PATCHES)), $(addsuffix ed, $(addprefix ., $(notdir $(PATCHES)))))\n\n"
            ".PHONY: checkout\ncheckout: $(WORKDIR)\n\tgit -C $(WORKDIR) fetch\n\tgit -C $(WORKDIR) checkout -f $(FETCH_HEAD)\n\n"
            ".PHONY: format-patches\nformat-patches: llama/patches\n\tgit -C $(WORKDIR) format-patch \\\n"
            "\t\t--no-signature \\\n\t\t--no-numbered \\\n\t\t--zero-commit \\\n\t\t-o $(realpath $<) \\\n"
            "\t\t$(FETCH_HEAD)\n\n.PHONY: print-base\nprint-base:\n\t@echo $(FETCH_HEAD)\n")


def test_an_ollama_checkout_becomes_one_folder_pin_each_patch_a_pin_and_sims_green(tmp_path, capsys):
    up, base = _ollama_checkout(tmp_path)
    out = tmp_path / "distro" / "pins.yaml"
    assert main(["import", str(tmp_path / "ollama"), "-o", str(out), "--upstream", str(up.path)]) == 0
    pinset = load_pinset(out)
    queue = tmp_path / "ollama" / "llama" / "patches"
    names = sorted(p.name for p in queue.glob("*.patch"))
    assert len(names) == 3 and len(list(queue.iterdir())) == 6   # and the three `.NAME.patched` stamps
    assert [p.id for p in pinset.pins] == [f"ollama/{n.removesuffix('.patch')}" for n in names]
    assert pinset.builds == (base,) and all(len(p.patch_files()) == 1 for p in pinset.pins)
    text = out.read_text()
    # one folder pin with `each: true`, not one pin per file
    assert yaml.safe_load(text)["pins"] == [{"id": "ollama", "patches": "../ollama/llama/patches", "each": True}]
    assert f"(Makefile.sync FETCH_HEAD {base[:12]})" in text
    assert "1 folder pin (each of its 3 patches a pin)" in capsys.readouterr().err
    code, data = run_sim(tmp_path, out)
    got = by_id(data["builds"][0])
    assert code == 0 and all(got[p.id]["status"] == "applied" for p in pinset.pins)
    # a patch added to the queue later is a pin without another import
    up.git("checkout", "-q", "-b", "p4", base)
    up.commit("patch 4", {"src/d.c": "int d = 4;\n"})
    up.format_patch("HEAD~1..HEAD", tmp_path / "fp4")
    (made,) = (tmp_path / "fp4").glob("*.patch")
    made.rename(queue / "0004-patch-4.patch")
    assert [p.id for p in load_pinset(out).pins][-1] == "ollama/0004-patch-4"
    # without --upstream: the Makefile's own
    again = tmp_path / "distro" / "second.yaml"
    assert main(["import", str(tmp_path / "ollama"), "-o", str(again)]) == 0
    assert load_pinset(again).upstream == "https://github.com/ggerganov/llama.cpp.git"


def test_an_ollama_checkout_without_fetch_head_or_patches_is_bad_input(tmp_path, capsys):
    _ollama_checkout(tmp_path)
    make = tmp_path / "ollama" / "Makefile.sync"
    make.write_text("UPSTREAM=x\nFETCH_HEAD=main\n")
    out = tmp_path / "pins.yaml"
    assert main(["import", str(tmp_path / "ollama"), "-o", str(out)]) == 2
    assert "Makefile.sync:2: FETCH_HEAD: 'main' is not a commit (4 to 40 hex digits)" in capsys.readouterr().err
    make.unlink()
    assert main(["import", str(tmp_path / "ollama"), "-o", str(out)]) == 2
    assert "not an Ollama-style checkout" in capsys.readouterr().err and not out.exists()


def _snapshot(folder) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def test_import_never_writes_over_or_into_its_own_inputs(tmp_path, capsys):
    _ollama_checkout(tmp_path)
    checkout = tmp_path / "ollama"
    queue = checkout / "llama" / "patches"
    (queue / "README").write_text("the queue's own notes\n")       # a file inside the queue that is no patch
    first = sorted(queue.glob("*.patch"))[0]
    (tmp_path / "queue-link").symlink_to(queue, target_is_directory=True)
    (tmp_path / "patch-link.patch").symlink_to(first)
    (tmp_path / "checkout-link").symlink_to(checkout, target_is_directory=True)
    before = _snapshot(tmp_path)
    for source in (checkout, tmp_path / "checkout-link"):
        for out in (first, queue / "README", checkout / "Makefile.sync", queue / "0009-new.patch",
                    tmp_path / "queue-link" / first.name, tmp_path / "queue-link" / "0009-new.patch",
                    tmp_path / "patch-link.patch"):
            assert main(["import", str(source), "-o", str(out), "--force"]) == 2, out
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "input" in err and "--out" in err, err
            assert _snapshot(tmp_path) == before, out
    # beside the queue, not in it, is fine
    assert main(["import", str(checkout), "-o", str(checkout / "pins.yaml")]) == 0


def test_a_pr_set_through_a_link_is_an_input_too(tmp_path, capsys):
    src = _pr_set(tmp_path, [f"{UP}/pull/1/commits/{SHA1}"])
    (tmp_path / "link.json").symlink_to(src)
    before = (tmp_path / "pr-set.json").read_bytes()
    assert main(["import", src, "-o", str(tmp_path / "link.json"), "--force"]) == 2
    assert "input" in capsys.readouterr().err and (tmp_path / "pr-set.json").read_bytes() == before


def test_the_same_commit_twice_or_one_id_twice_is_refused_naming_both_entries(tmp_path, capsys):
    out = tmp_path / "pins.yaml"
    for doc, said in (([f"{UP}/pull/107/commits/{SHA1}", f"{UP}/pull/20/commits/{SHA2}",
                        {"pr": f"{UP}/pull/107", "commit": SHA1.upper()}], ("prs[0]", "prs[2]", SHA1[:12])),
                      ([{"url": f"{UP}/pull/1/commits/{SHA1}", "id": "mine"},
                        {"url": f"{UP}/pull/2/commits/{SHA2}", "id": "mine"}], ("prs[0]", "prs[1]", "'mine'")),
                      ([f"{UP}/pull/1/commits/{SHA1}",
                        {"url": f"{UP}/pull/2/commits/{SHA2}", "id": "ggml-org#1"}], ("prs[0]", "prs[1]", "ggml-org#1"))):
        src = _pr_set(tmp_path, doc)
        assert main(["import", src, "-o", str(out)]) == 2, doc
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and all(s in err for s in said), err
        assert not out.exists()


def test_two_commits_of_one_pr_get_their_own_ids_and_it_is_said(tmp_path, capsys):
    src = _pr_set(tmp_path, [f"{UP}/pull/107/commits/{SHA1}", {"pr": f"{UP}/pull/107", "commit": SHA3}])
    out = tmp_path / "pins.yaml"
    assert main(["import", src, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "prs[1]" in err and "ggml-org#107-2" in err and "prs[0]" in err
    assert [p.id for p in load_pinset(out).pins] == ["ggml-org#107", "ggml-org#107-2"]


def test_a_deeply_nested_pr_set_is_one_line_exit_2(tmp_path, capsys):
    src = tmp_path / "pr-set.json"
    for text in ("[" * 200_000 + "]" * 200_000, '{"prs": ' + "[" * 50_000 + "]" * 50_000 + "}"):
        src.write_text(text)
        assert main(["import", str(src), "-o", str(tmp_path / "pins.yaml")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(src) in err and not (tmp_path / "pins.yaml").exists()


def test_an_abbreviated_fetch_head_is_resolved_against_upstream_as_git_does(tmp_path, capsys):
    """Ollama's real Makefile.sync: `FETCH_HEAD=ec98e2002` (nine hex digits). pins.yaml gets the full commit of
    upstream it names; unknown (or only in the cache from another repository) and ambiguous are one line, exit 2."""
    up, base = _ollama_checkout(tmp_path)
    make = tmp_path / "ollama" / "Makefile.sync"
    make.write_text(ollama_makefile("https://github.com/ggml-org/llama.cpp.git", base[:9]))   # as ollama's: 9 digits
    out = tmp_path / "distro" / "pins.yaml"
    assert main(["import", str(tmp_path / "ollama"), "-o", str(out), "--upstream", str(up.path)]) == 0
    assert load_pinset(out).builds == (base,)
    assert f"FETCH_HEAD {base[:9]} = {base[:12]}" in out.read_text()
    # --builds replaces FETCH_HEAD: nothing to resolve
    assert main(["import", str(tmp_path / "ollama"), "-o", str(out), "--upstream", str(up.path), "--force",
                 "--builds", base]) == 0
    # a commit the cache holds from another repository is not upstream's
    other = GitRepo(tmp_path / "other")
    stranger = other.commit("elsewhere", {"x": "1\n"})
    GitRepo(tmp_path / "fetcher").git("fetch", "-q", str(other.path), "master")   # not into the cache: a control
    from pinset.store import Store
    from pinset.upstream.mirror import Mirror
    with Mirror(Store.open(tmp_path / "cache").mirror) as mirror:
        assert mirror.fetch(str(other.path), [f"+refs/heads/master:refs/pinset/test/{stranger}"]).ok
        assert mirror.has_commit(stranger)
    capsys.readouterr()
    for prefix, said in ((stranger[:9], "no commit of upstream"), ("0000000", "no commit of upstream")):
        make.write_text(f"FETCH_HEAD={prefix}\n")
        assert main(["import", str(tmp_path / "ollama"), "-o", str(out), "--upstream", str(up.path), "--force"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"FETCH_HEAD {prefix}: {said}" in err, err
    assert load_pinset(out).builds == (base,)   # the refused imports left the earlier output as it was


def test_an_ambiguous_abbreviated_fetch_head_names_the_candidates(tmp_path, capsys):
    up, base = _ollama_checkout(tmp_path)
    # many commits in one fast-import: two of them share their first four hex digits (as git would refuse)
    stream = "".join(f"commit refs/heads/many\nmark :{i}\ncommitter t <t@t> {1700000000 + i} +0000\ndata {len(str(i))}\n{i}\n"
                     + (f"from {base}\n" if i == 1 else "") + "M 644 inline n\ndata 1\nx\n\n" for i in range(1, 1200))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=up.path, input=stream, text=True, check=True)
    seen: dict[str, str] = {}
    prefix = None
    for oid in up.git("rev-list", "many").split():
        if oid[:4] in seen:
            prefix = oid[:4]
            break
        seen[oid[:4]] = oid
    assert prefix is not None
    (tmp_path / "ollama" / "Makefile.sync").write_text(f"FETCH_HEAD={prefix}\n")
    out = tmp_path / "pins.yaml"
    assert main(["import", str(tmp_path / "ollama"), "-o", str(out), "--upstream", str(up.path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"FETCH_HEAD {prefix}: ambiguous, " in err and seen[prefix][:12] in err
    assert not out.exists()


# --- Unsloth's real files, in their shape ---------------------------------------------------------------------
# scripts/unsloth/pr-set.json: a `_doc` list of prose above `prs`, most entries PRs of the fork unslothai/llama.cpp
# (upstream is ggml-org/llama.cpp), one `{"url", "required": false}`; feature-checks.json: `_doc`, `schema: 1`,
# features keyed by name with an `owner` pin (null once upstream carries the feature), checks of kinds arch /
# backend-op / mtmd, `unchecked` reasons keyed by pin. The texts here are made up; the shapes are theirs.
FORK = "https://github.com/unslothai/llama.cpp"
SHA4, SHA5 = "4" * 40, "5" * 40


def _unsloth_files(tmp_path) -> tuple[str, str]:
    pr_set = {"_doc": ["PRs merged into the nightly, each an exact commit:",
                       "  https://github.com/ggml-org/llama.cpp/pull/N/commits/SHA",
                       "Use {\"url\": \"...\", \"required\": false} for an entry skipped once it is not open."],
              "prs": [f"{FORK}/pull/107/commits/{SHA1}", f"{UP}/pull/25731/commits/{SHA2}",
                      {"url": f"{FORK}/pull/70/commits/{SHA3}", "required": False},
                      f"{FORK}/pull/95/commits/{SHA4}"]}
    checks = {"_doc": ["The test that proves each shipped feature works.", "", "kinds: arch, backend-op, mtmd"],
              "schema": 1,
              "features": {
                  "inkling": {"owner": "ggml-org#25731", "checks": [
                      {"kind": "arch", "arch": "inkling"}, {"kind": "backend-op", "op": "FLASH_ATTN_EXT"},
                      {"kind": "mtmd", "projector": "inkling"}]},
                  "kimi-k3": {"owner": "unslothai#70", "checks": [{"kind": "arch", "arch": "kimi-k3"}]},
                  "iq1-grids": {"owner": "unslothai#107", "checks": [
                      {"kind": "backend-op", "op": "MUL_MAT", "params": "type_a=iq1_s"}]},
                  "diffusion-gemma": {"owner": None, "checks": [{"kind": "arch", "arch": "diffusion-gemma"}]}},
              "unchecked": {"unslothai#95": "sampling penalties; no feature surface of its own to probe",
                            "unslothai#999": "a pin no longer in the set"}}
    a, b = tmp_path / "pr-set.json", tmp_path / "feature-checks.json"
    a.write_text(json.dumps(pr_set, indent=2))
    b.write_text(json.dumps(checks, indent=2))
    return str(a), str(b)


def test_unsloths_files_import_unchanged(tmp_path, capsys):
    pr_set, checks = _unsloth_files(tmp_path)
    out = tmp_path / "pins.yaml"
    assert main(["import", pr_set, checks, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    pinset = load_pinset(out)
    pins = {p.id: p for p in pinset.pins}
    assert list(pins) == ["unslothai#107", "ggml-org#25731", "unslothai#70", "unslothai#95"]   # the order kept
    # the fork's PRs are fetched from the fork
    assert [(p.id, p.repo) for p in pinset.pins] == [("unslothai#107", FORK), ("ggml-org#25731", None),
                                                     ("unslothai#70", FORK), ("unslothai#95", FORK)]
    assert "3 PRs of a fork of ggml-org/llama.cpp (https://github.com/unslothai/llama.cpp)" in err
    # `_doc` kept as comments, both files'
    text = out.read_text()
    assert "# PRs merged into the nightly, each an exact commit:\n#   https://github.com/ggml-org/llama.cpp/pull/N" in text
    assert "# The test that proves each shipped feature works.\n#\n# kinds: arch, backend-op, mtmd" in text
    # required: false is Unsloth's "skip once not open", never pinset's "may fail"
    assert all(p.required for p in pinset.pins)
    assert 'prs[2]: "required": false means "skip once its PR is not open"' in err or "skip-unless-open" in text
    # checks on their owner pins, labelled with their feature; the owner-less feature's on the pin set
    assert [c.describe() for c in pins["ggml-org#25731"].checks] == [
        "arch inkling [feature inkling]", "backend-op FLASH_ATTN_EXT [feature inkling]",
        "mtmd /test_projector_registry/ projector inkling [feature inkling]"]
    assert [(c.kind, c.name, c.feature) for c in pins["unslothai#70"].checks] == [("arch", "kimi-k3", "kimi-k3")]
    assert [(c.op, c.params) for c in pins["unslothai#107"].checks] == [("MUL_MAT", "type_a=iq1_s")]
    assert [(c.kind, c.name, c.feature) for c in pinset.checks] == [("arch", "diffusion-gemma", "diffusion-gemma")]
    assert pins["unslothai#95"].unchecked == "sampling penalties; no feature surface of its own to probe"
    assert "unchecked.unslothai#999: no such pin in the pin set (dropped)" in err
    assert "4 pins, 6 checks (1 of the pin set) from" in err
    # the JSON schema takes what the import wrote
    import jsonschema

    from pinset.config.json_schema import pins_schema
    assert list(jsonschema.Draft202012Validator(pins_schema()).iter_errors(yaml.safe_load(text))) == []


def test_unsloths_pr_set_alone_and_a_fork_of_another_name(tmp_path, capsys):
    pr_set, _ = _unsloth_files(tmp_path)
    out = tmp_path / "pins.yaml"
    assert main(["import", pr_set, "-o", str(out)]) == 0
    assert [p.checks for p in load_pinset(out).pins] == [()] * 4
    capsys.readouterr()
    src = _pr_set(tmp_path, {"_doc": "one line of notes", "prs": [f"https://github.com/someone/fork/pull/3/commits/{SHA1}"]})
    assert main(["import", src, "-o", str(tmp_path / "second.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "belongs to someone/fork" in err
    assert '"repo": "https://github.com/someone/fork"' in err and not (tmp_path / "second.yaml").exists()
    # with the fork named, it is its pin's repository
    _pr_set(tmp_path, {"prs": [{"url": f"https://github.com/someone/fork/pull/3/commits/{SHA1}",
                                "repo": "https://github.com/someone/fork"}]})
    assert main(["import", src, "-o", str(tmp_path / "second.yaml")]) == 0
    assert load_pinset(tmp_path / "second.yaml").pins[0].repo == "https://github.com/someone/fork"


def _rewrite(path: str, change) -> None:
    doc = json.loads(open(path).read())
    change(doc)
    open(path, "w").write(json.dumps(doc))


def test_feature_checks_that_do_not_fit_the_pin_set_are_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "pins.yaml"
    for change, said in (
            (lambda d: d["features"]["kimi-k3"].update(owner="unslothai#239"),
             "features.kimi-k3.owner: 'unslothai#239' names no pin of the pin set (pins: unslothai#107, "),
            (lambda d: d["features"]["kimi-k3"]["checks"].append({"kind": "llama-bench"}),
             "features.kimi-k3.checks[1].kind: 'llama-bench' is not a check kind pinset runs"),
            (lambda d: d["features"]["kimi-k3"]["checks"].append({"kind": "arch"}), "features.kimi-k3.checks[1].arch: missing"),
            (lambda d: d["features"]["kimi-k3"]["checks"].append({"kind": "arch", "arch": "x", "gpu": True}),
             "features.kimi-k3.checks[1].gpu: unknown key for a arch check"),
            (lambda d: d["features"]["kimi-k3"].update(checks=[]), "features.kimi-k3.checks: must be a non-empty list"),
            (lambda d: d["unchecked"].update({"unslothai#70": "why"}), "unchecked.unslothai#70: the pin also owns features"),
            (lambda d: d.update(schema=2), "schema: 2 is not a feature-checks.json schema pinset reads (1)"),
            (lambda d: d.update(extra=1), "unknown key 'extra'"),
            (lambda d: d["features"]["kimi-k3"]["checks"].append({"kind": "arch", "arch": "bad name"}),
             "checks[1].arch.name: malformed architecture name 'bad name'")):
        pr_set, checks = _unsloth_files(tmp_path)
        _rewrite(checks, change)
        assert main(["import", pr_set, checks, "-o", str(out)]) == 2, said
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err, err
        assert not out.exists()
    # feature-checks.json alone: its owners name pins of a pr-set.json
    pr_set, checks = _unsloth_files(tmp_path)
    assert main(["import", checks, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "give the pr-set.json too" in err and not out.exists()


def test_required_false_becomes_the_pin_key_of_pr_states(tmp_path):
    """Unsloth's `"required": false` ("skip once its PR is not open") is written as `skip-unless-open: true`, the
    pin staying required, and the written pins.yaml reads back with that key."""
    from pinset.config import importers

    pr_set, _ = _unsloth_files(tmp_path)
    text = importers.to_yaml(importers.from_pr_set(Path(pr_set), None, None), "header")
    pins = yaml.safe_load(text)["pins"]
    assert [(p["id"], p.get("skip-unless-open"), p.get("required")) for p in pins] == [
        ("unslothai#107", None, None), ("ggml-org#25731", None, None), ("unslothai#70", True, None),
        ("unslothai#95", None, None)]
    assert "cannot read PR states" not in text


def test_feature_checks_onto_an_existing_pins_yaml_only_add_lines(tmp_path, capsys):
    """feature-checks.json alone goes onto the pins.yaml that has its owners (`--onto`): the output is that file
    with lines added (its comments, order and spelling kept), the checks under their pins, the owner-less ones at
    the end as the pin set's own; its pins that have checks already, or `each: true` patches, are not touched."""
    _, checks = _unsloth_files(tmp_path)
    mine = tmp_path / "pins.yaml"
    mine.write_text(f"""# my pin set, kept by hand
upstream: {UP}
builds: [b100]   # the shipped build
pins:
  - id: unslothai#107
    pr: {FORK}/pull/107/commits/{SHA1}
    repo: {FORK}   # the fork
  # inkling, still upstream's PR
  - id: ggml-org#25731
    pr: {UP}/pull/25731/commits/{SHA2}
    description: >-
      banded attention,
      two lines

  # kimi, ours
  - id: unslothai#70
    pr: {FORK}/pull/70/commits/{SHA3}
    repo: {FORK}
    evidence: [verify]
  - {{id: unslothai#95, pr: {FORK}/pull/95/commits/{SHA4}, repo: {FORK}}}
""")
    out = tmp_path / "pins-checked.yaml"
    # the flow-style pin would take an unchecked reason: refused, naming its line
    assert main(["import", checks, "--onto", str(mine), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pins.yaml:20: pin unslothai#95: written in flow style" in err
    assert not out.exists()
    _rewrite(checks, lambda d: d["unchecked"].pop("unslothai#95"))
    assert main(["import", checks, "--onto", str(mine), "-o", str(out)]) == 0
    before, after = mine.read_text().splitlines(), out.read_text().splitlines()
    import difflib
    ops = {tag for tag, *_ in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes()}
    assert ops == {"equal", "insert"}   # only lines added
    text = out.read_text()
    assert "      two lines\n    checks:\n" in text and "    checks:\n      # feature-checks.json features.kimi-k3" in text
    assert text.index("features.inkling") < text.index("# kimi, ours")   # the next pin keeps its comment
    pinset = load_pinset(out)
    pins = {p.id: p for p in pinset.pins}
    assert [c.describe() for c in pins["ggml-org#25731"].checks][0] == "arch inkling [feature inkling]"
    assert pins["ggml-org#25731"].description == "banded attention, two lines"
    assert [c.name for c in pins["unslothai#70"].checks] == ["kimi-k3"] and pins["unslothai#70"].evidence == ("verify",)
    assert [c.name for c in pinset.checks] == ["diffusion-gemma"]
    assert "1 pin(s) with no feature check and no unchecked reason: unslothai#95" in capsys.readouterr().err
    # again onto the output: its pins have checks now
    again = tmp_path / "again.yaml"
    assert main(["import", checks, "--onto", str(out), "-o", str(again)]) == 2
    err = capsys.readouterr().err.strip()
    assert "pin unslothai#107: has checks already" in err and not again.exists()
    # never written over the pins.yaml it reads
    assert main(["import", checks, "--onto", str(mine), "-o", str(mine), "--force"]) == 2
    assert "input" in capsys.readouterr().err and mine.read_text().splitlines() == before
