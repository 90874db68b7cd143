"""Second review of redaction: the job summary ($GITHUB_STEP_SUMMARY), annotations whose properties escape
`:` (a URL's credentials then no longer look like a URL), and the program logs runner writes (--logs /
--log-dir: the command line of a git fetch names the upstream URL) keep no token and no URL credentials."""

from __future__ import annotations

import sys

from pinset import ci_annotations, runner

TOKEN = "ghp_review2SecretValue123"
URL = "https://x-access-token:hunter2pass@github.com/o/r.git"


def test_job_summary_is_redacted(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert ci_annotations.step_summary(f"## pinset sim\n\npin `a` ({TOKEN}) from {URL}\n")
    text = summary.read_text()
    assert TOKEN not in text and "hunter2pass" not in text and "***" in text


def test_annotation_properties_are_redacted(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    line = ci_annotations.command("error", f"fetch {URL} failed ({TOKEN})", file=f"{URL}/pins.yaml", title=URL)
    assert TOKEN not in line and "hunter2pass" not in line, line


def test_program_logs_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    log = tmp_path / "logs" / "git.log"
    runner.write_log(log, runner.Completed(("git", "fetch", URL), 128, f"out {TOKEN}\n", f"fatal: {URL}\n", 0.1))
    live = tmp_path / "logs" / "live.log"
    result = runner.run_streaming([sys.executable, "-c", f"print('{URL} {TOKEN}')"], log=live)
    assert result.ok
    for path in (log, live):
        text = path.read_text()
        assert TOKEN not in text and "hunter2pass" not in text and "***" in text, (path, text)
