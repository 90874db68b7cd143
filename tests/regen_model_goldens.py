"""Golden files of the result models: every recorded result file read through its kind's model and written
again (`to_json`), and every report scenario's JSON verdict. They prove a refactor of the models or of the
report leaves what pinset writes byte-identical.

    python -m tests.regen_model_goldens            # rewrite tests/golden/models/ and tests/golden/report/*.json
    python -m tests.regen_model_goldens --check    # exit 1 if any golden is out of date
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from tests import testing

REPO = testing.ROOT
GOLDEN = testing.GOLDEN / "models"
REPORT_GOLDEN = testing.GOLDEN / "report"
# Recorded result files of every kind: the report scenarios, the nightly pick/blame run, bench fixtures and the
# published H200 and bench-decides results.
SOURCES = ("tests/fixtures", "reports")
KINDS = ("sim", "verify", "kld", "bench", "pick", "blame", "report")


def result_files() -> list[Path]:
    out = []
    for source in SOURCES:
        for path in sorted((REPO / source).rglob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(data, dict) and data.get("kind") in KINDS:
                out.append(path)
    return out


def golden_name(path: Path) -> str:
    return str(path.relative_to(REPO)).replace("/", "__")


def round_trip(path: Path) -> str:
    """The file read through its model and written as the producer writes it (output.write_json)."""
    from pinset.report.load import load_result
    from pinset.report.model import ReportResult
    from pinset.results import read_document

    doc, kind, _schema, _raw = read_document(path)
    data = ReportResult.from_json(doc).to_json() if kind == "report" else load_result(path).data
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def report_outputs(workdir: Path) -> dict[str, str]:
    """scenario -> the JSON `pinset report` writes for it."""
    from pinset.cli import main
    from tests.regen_report_goldens import report_argv, scenarios

    out = {}
    for name in scenarios():
        target = workdir / f"{name}.json"
        main(report_argv(name, workdir / f"{name}.md", target))
        text = target.read_text(encoding="utf-8")
        # the run's UTC start time (pinset.results.STARTED) is the one line that differs from run to run
        text, stamps = re.subn(r'\n  "started": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",', "", text, count=1)
        assert stamps == 1, f"{target}: no start time after schema and kind"
        out[name] = text
    return out


def expected_round_trip(path: Path) -> str:
    """What reading and writing `path` must give: its golden, or (a file of the current schema, which comes back
    as it was written, so it needs none) the file itself."""
    golden = GOLDEN / golden_name(path)
    return golden.read_text(encoding="utf-8") if golden.is_file() else path.read_text(encoding="utf-8")


def expected() -> dict[Path, str | None]:
    """Golden path -> its text; None: no golden (the round trip gives the file's own bytes)."""
    import tempfile

    want: dict[Path, str | None] = {}
    for p in result_files():
        text = round_trip(p)
        want[GOLDEN / golden_name(p)] = None if text == p.read_text(encoding="utf-8") else text
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in report_outputs(Path(tmp)).items():
            want[REPORT_GOLDEN / f"{name}.json"] = text
    return want


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a golden differs")
    args = parser.parse_args(argv)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    stale = 0
    for path, text in expected().items():
        if text is None:
            if path.is_file():
                stale += 1
                print(f"{path.relative_to(REPO)}: {'not needed' if args.check else 'removed'}")
                if not args.check:
                    path.unlink()
            continue
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        stale += not same
        if not same:
            print(f"{path.relative_to(REPO)}: {'differs' if args.check else 'written'}")
            if not args.check:
                path.write_text(text, encoding="utf-8")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
