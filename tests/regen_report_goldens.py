"""Regenerate the golden PR comments of `pinset report` from the recorded results in tests/fixtures/report/.

    python -m tests.regen_report_goldens            # rewrite tests/golden/report/<scenario>.md
    python -m tests.regen_report_goldens --check    # exit 1 if any golden is out of date
    PINSET_CACHE=/tmp/pscache python -m tests.regen_report_goldens --resim
        # first re-run `pinset sim` on tests/fixtures/report/pins/*.yaml (needs the 0.3.35/0.3.36
        # imports in that cache) and refresh <scenario>/sim.json, then rewrite the goldens

A scenario is a folder tests/fixtures/report/<name>/ holding result files (*.json, all passed to
`pinset report`) and optionally scenario.yaml with `config: <pins.yaml relative to the folder>`.
To add recorded results, drop them into a new folder and run this; review the diff of the golden.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from tests import testing

ROOT = testing.TESTS
FIXTURES = testing.FIXTURES / "report"
GOLDEN = testing.GOLDEN / "report"


def scenarios() -> list[str]:
    return sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and any(p.glob("*.json")))


def scenario_config(name: str) -> Path | None:
    meta = FIXTURES / name / "scenario.yaml"
    if not meta.is_file():
        return None
    config = (yaml.safe_load(meta.read_text()) or {}).get("config")
    return (FIXTURES / name / config).resolve() if config else None


def report_argv(name: str, markdown: Path, json_out: Path | None = None) -> list[str]:
    folder = FIXTURES / name
    argv = ["report", *(str(p) for p in sorted(folder.glob("*.json"))), "--markdown", str(markdown)]
    config = scenario_config(name)
    if config:
        argv += ["-c", str(config)]
    if json_out:
        argv += ["--json", str(json_out)]
    return argv


def render(name: str, workdir: Path) -> tuple[int, str]:
    from pinset.cli import main

    out = workdir / f"{name}.md"
    rc = main(report_argv(name, out))
    return rc, out.read_text(encoding="utf-8")


def resim() -> None:
    """Refresh each scenario's sim.json from a real `pinset sim` of its pins.yaml."""
    from pinset.cli import main

    for name in scenarios():
        config = scenario_config(name) or (FIXTURES / "pins" / "pins.yaml")
        target = FIXTURES / name / "sim.json"
        if target.exists():
            rc = main(["sim", "-c", str(config), "--json", str(target)])
            print(f"sim {config.name} -> {target.relative_to(ROOT)} (exit {rc})")


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a golden differs")
    parser.add_argument("--resim", action="store_true", help="re-run pinset sim for the sim.json files first")
    args = parser.parse_args(argv)
    if args.resim:
        resim()
    GOLDEN.mkdir(parents=True, exist_ok=True)
    stale = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in scenarios():
            rc, text = render(name, Path(tmp))
            golden = GOLDEN / f"{name}.md"
            same = golden.is_file() and golden.read_text(encoding="utf-8") == text
            if args.check:
                stale += not same
                print(f"{name}: {'ok' if same else 'differs'} (report exit {rc})")
            else:
                golden.write_text(text, encoding="utf-8")
                print(f"{name}: {'unchanged' if same else 'written'} {golden.relative_to(ROOT.parent)} (report exit {rc})")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
