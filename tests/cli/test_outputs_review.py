"""Second review of the output-vs-input rule for the verbs merged after it was written (import, schema,
rebase --as-series): a file output is checked as a file (so `--force` / a second `schema -o` can replace
it), and import's source is one of its inputs."""

from __future__ import annotations

import json

from pinset.cli import main

URL = "https://github.com/ggml-org/llama.cpp/pull/107/commits/" + "0123456789abcdef" * 2 + "01234567"
ARGS = ["--upstream", "https://github.com/ggml-org/llama.cpp", "--builds", "b1"]


def _pr_set(tmp_path):
    src = tmp_path / "pr-set.json"
    src.write_text(json.dumps([{"url": URL, "required": True}]))
    return src


def test_import_force_replaces_an_existing_output_file(tmp_path):
    src, out = _pr_set(tmp_path), tmp_path / "pins.yaml"
    out.write_text("old\n")
    assert main(["import", str(src), "-o", str(out), "--force", *ARGS]) == 0
    assert "pins:" in out.read_text()


def test_import_never_writes_over_its_source(tmp_path):
    src = _pr_set(tmp_path)
    before = src.read_bytes()
    link = tmp_path / "link.yaml"
    link.symlink_to(src)
    for target in (src, link):
        assert main(["import", str(src), "-o", str(target), "--force", *ARGS]) == 2
    assert src.read_bytes() == before


def test_schema_out_can_be_written_again(tmp_path):
    out = tmp_path / "pins.schema.json"
    assert main(["schema", "-o", str(out)]) == 0
    assert main(["schema", "-o", str(out)]) == 0
    assert json.loads(out.read_text())


def test_schema_out_is_no_folder(tmp_path):
    assert main(["schema", "-o", str(tmp_path)]) == 2


def test_rebase_as_series_is_an_output_folder():
    from pinset import cli
    from pinset.commands.paths import OUTPUT_FOLDER, role_of, verb_parsers

    parser = cli.build_parser("rebase")
    roles = {a.dest: role_of(a) for _, p in verb_parsers(parser) for a in p._actions}
    assert roles["as_series"] == OUTPUT_FOLDER and roles["worktree"] == OUTPUT_FOLDER
