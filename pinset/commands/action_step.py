"""The composite action's step (action.yml at the repository root): run one pinset verb with the step's inputs
and expose its JSON document as step outputs.

Inputs come as environment variables (never spliced into the script: a PR title in `args` cannot become a
command): PINSET_ACTION_VERB, PINSET_ACTION_ARGS (split like a shell would, without running one),
PINSET_ACTION_CONFIG (-c, empty: the verb's default ./pins.yaml), PINSET_ACTION_FAIL (`false`: a red result,
exit 1, does not fail the step; bad input, exit 2, always does). The verb's JSON goes to
$RUNNER_TEMP/pinset-VERB.json unless ARGS name a --json file; written to $GITHUB_OUTPUT:

    exit-code   the verb's exit code
    json-file   the JSON document's path ("" for a verb that writes none: check, rebase, schema)
    json        the document on one line (fromJSON() reads it)
    ok, kind, outcome, picked, pinset, ...   each top-level scalar of the document (`_` as `-`)

Run as `python -m pinset.commands.action_step`; the verb runs as `python -m pinset VERB ...` with the same Python.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

NO_JSON = {"check", "rebase", "schema", "model"}    # verbs that write no result document
NO_CONFIG = {"report", "import", "schema", "cache", "model"}   # verbs without -c/--config


def main(env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    verb = env.get("PINSET_ACTION_VERB", "").strip()
    if not verb:
        print("::error::pinset action: the `verb` input is empty (e.g. sim, pick, check)", flush=True)
        return 2
    try:
        args = shlex.split(env.get("PINSET_ACTION_ARGS", ""))
    except ValueError as exc:
        print(f"::error::pinset action: the `args` input does not split into words ({exc})", flush=True)
        return 2
    config = env.get("PINSET_ACTION_CONFIG", "").strip()
    if config and verb not in NO_CONFIG and not {"-c", "--config"} & set(args):
        args = ["-c", config, *args]
    json_file = ""
    if verb not in NO_JSON:
        given = [a for a in args if a == "--json" or a.startswith("--json=")]
        if given:
            i = args.index(given[0])
            json_file = given[0].split("=", 1)[1] if "=" in given[0] else (args[i + 1] if i + 1 < len(args) else "")
        else:
            folder = Path(env.get("RUNNER_TEMP") or ".")
            json_file = str(folder / f"pinset-{verb}-{uuid.uuid4().hex[:8]}.json")
            args += ["--json", json_file]
    code = subprocess.run([sys.executable, "-m", "pinset", verb, *args], env=env).returncode
    outputs = {"exit-code": str(code), "json-file": json_file, "json": ""}
    if json_file and Path(json_file).is_file():
        try:
            doc = json.loads(Path(json_file).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = None
        if isinstance(doc, dict):
            outputs["json"] = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
            for key, value in doc.items():
                if isinstance(value, (str, int, float, bool)) or value is None:
                    name = key.replace("_", "-")
                    outputs.setdefault(name, "" if value is None else json.dumps(value) if isinstance(value, bool)
                                       else str(value))
    _write_outputs(env.get("GITHUB_OUTPUT"), outputs)
    if code == 1 and env.get("PINSET_ACTION_FAIL", "true").strip().lower() == "false":
        print(f"::warning::pinset {verb}: exit 1 (red), not failing the step (fail-on-red: false)", flush=True)
        return 0
    return code


def _write_outputs(path: str | None, outputs: dict[str, str]) -> None:
    """GITHUB_OUTPUT's multi-line form (NAME<<DELIMITER) for every value: no value can end another's."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for name, value in outputs.items():
            delimiter = f"pinset_{uuid.uuid4().hex}"
            f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


if __name__ == "__main__":
    sys.exit(main())
