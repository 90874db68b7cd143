"""The token appears nowhere but the Authorization header, and URL credentials nowhere at all: not in the
comment body, the dry-run output, the markdown or JSON file, nor an error line, when pins.yaml or a result
file holds them."""

from __future__ import annotations

import json
import shutil

import pytest

import pinset.github.client as github_module
from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.redact import redact
from tests.testing import FIXTURES
from tests.testing.fake_github import FakeGitHub

TOKEN = "ghp_RedactMe0123456789abcdefXYZ"
URL_SECRET = "Pa55word-in-a-url"
FIX = FIXTURES / "report"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(github_module, "_default_sleep", lambda s: None)


@pytest.fixture
def leaky(tmp_path, monkeypatch):
    """The green results and their pins.yaml, with the token and URL credentials in the description, a pin's
    description and a result file's text."""
    shutil.copytree(FIX / "pins", tmp_path / "pins")
    pins = tmp_path / "pins" / "pins.yaml"
    text = pins.read_text().replace(
        "description: IQ1 quantisation speed-ups for the CUDA backend of llama-cpp-python",
        f"description: 'speed-ups, token {TOKEN}, mirror https://x-access-token:{TOKEN}@github.com/o/r.git "
        f"and https://bob:{URL_SECRET}@example.com/x'")
    text = text.replace("description: CUDA argsort block size as a named constant",
                        f"description: 'argsort, see https://{TOKEN}@github.com/o/r/pull/1'")
    pins.write_text(text)
    digest = load_pinset(pins).digest
    results = []
    for src in sorted((FIX / "green").glob("*.json")):
        doc = json.loads(src.read_text())
        doc["pinset"] = digest
        raw = json.dumps(doc)
        raw = raw.replace("build already carries this pin", f"build already carries this pin ({TOKEN})")
        (tmp_path / src.name).write_text(raw)
        results.append(str(tmp_path / src.name))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    return tmp_path, pins, results


def _clean(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text and URL_SECRET not in text, text[:2000]


def test_redact_replaces_tokens_and_url_credentials(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert redact(f"a {TOKEN} b") == "a *** b"
    assert redact(f"https://x-access-token:{TOKEN}@h/x") == "https://***@h/x"
    assert redact("git clone https://u:p@host/r and https://tok@host/r") == \
        "git clone https://***@host/r and https://***@host/r"
    assert redact("ssh://git@host/r git@github.com:o/r a@b.c") == "ssh://git@host/r git@github.com:o/r a@b.c"


def test_report_files_dry_run_and_stdout_hold_no_token(leaky, capfd):
    root, pins, results = leaky
    code = main(["report", *results, "-c", str(pins), "--markdown", str(root / "c.md"), "--json", str(root / "v.json"),
                 "--post", "o/r#7", "--dry-run"])
    out, err = capfd.readouterr()
    assert code in (0, 1), err
    md, js = (root / "c.md").read_text(), (root / "v.json").read_text()
    _clean(out, err, md, js)
    assert "speed-ups, token ***, mirror https://***@github.com/o/r.git" in md
    assert "***" in out and json.loads(js)  # the JSON still reads
    code = main(["report", *results, "-c", str(pins)])  # the comment printed to stdout
    out, err = capfd.readouterr()
    _clean(out, err)
    assert "https://***@github.com/o/r/pull/1" in out


def test_the_posted_comment_holds_no_token(leaky, capfd, monkeypatch):
    _root, pins, results = leaky
    api = FakeGitHub(token=TOKEN)
    api.thread.start()
    try:
        monkeypatch.setenv("GITHUB_API_URL", api.url)
        main(["report", *results, "-c", str(pins), "--post", "o/r#7"])
        out, err = capfd.readouterr()
        _clean(out, err)
        assert api.comments, err
        _clean(*(c["body"] for c in api.comments))
        assert "token ***" in api.comments[0]["body"]
        assert api.requests[-1][2]["Authorization"] == f"Bearer {TOKEN}"  # its one place
    finally:
        api.server.shutdown()
        api.server.server_close()


def test_an_upstream_url_with_credentials_is_shown_without_them(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    (tmp_path / "p").mkdir()
    shutil.copy(next((FIX / "pins" / "patches" / "argsort-block-size").glob("*.patch")), tmp_path / "p")
    (tmp_path / "pins.yaml").write_text(
        f"upstream: https://x-access-token:{TOKEN}@127.0.0.1:1/o/r\nbuilds: [b1]\npins:\n  - id: a\n    patches: p\n")
    code = main(["sim", "-c", str(tmp_path / "pins.yaml"), "--json", str(tmp_path / "s.json")])
    out, err = capfd.readouterr()
    assert code == 2, err
    _clean(out, err)
    assert "https://***@127.0.0.1:1/o/r" in err and err.count("\n") == 1, err
