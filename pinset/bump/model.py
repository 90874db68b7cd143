"""The JSON Schema (draft 2020-12) of `pinset bump --json` (kind "bump"; the model is pinset.bump.BumpResult,
registered in pinset/results.py): what a workflow step reads after a bump.

- outcome: "pushed" (the branch is on the remote, `pull_request` says what became of the PR), "committed" (no
  --push), "dry-run", "current" (nothing newer, or nothing to change), "blocked" (a required pin fails on `new`:
  `failing`), "held" (the branch holds a commit pinset did not make: `held`); `ok` is false for the last two
  (exit 1).
- old / new: the shipped build before and the build moved to (null where not known: nothing newer; held, which
  stops before any build is read); commit: the bump commit (on `branch`); pushed: the remote got a new commit;
  branch_moved: the local branch moved.
"""

from __future__ import annotations

from pinset.results import STARTED_SCHEMA

OUTCOMES = ("blocked", "held", "current", "dry-run", "committed", "pushed")
_STR_OR_NULL = {"type": ["string", "null"]}
JSON_SCHEMA = {
    "type": "object",
    "required": ["schema", "kind", "ok", "outcome", "old", "new", "branch", "commit", "pushed", "branch_moved",
                 "pull_request", "title", "failing", "refreshed", "held", "note"],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": 1}, "kind": {"const": "bump"}, "started": STARTED_SCHEMA, "ok": {"type": "boolean"}, "outcome": {"enum": list(OUTCOMES)},
        "old": _STR_OR_NULL, "new": _STR_OR_NULL, "branch": {"type": "string"}, "commit": _STR_OR_NULL,
        "pushed": {"type": "boolean"}, "branch_moved": {"type": "boolean"}, "title": _STR_OR_NULL, "note": _STR_OR_NULL,
        "pull_request": {"oneOf": [{"type": "null"}, {
            "type": "object", "additionalProperties": False, "required": ["action", "url"],
            "properties": {"action": {"enum": ["created", "updated", "unchanged"]}, "url": {"type": "string"}}}]},
        "failing": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["pin", "status", "fix"],
            "properties": {"pin": {"type": "string"}, "status": {"type": "string"}, "fix": {"type": "string"}}}},
        "refreshed": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["pin", "mode", "folder", "files"],
            "properties": {"pin": {"type": "string"}, "mode": {"type": "string"}, "folder": {"type": "string"},
                           "files": {"type": "array", "items": {"type": "string"}}}}},
        "held": {"oneOf": [{"type": "null"}, {
            "type": "object", "additionalProperties": False, "required": ["branch", "hand_back", "commits"],
            "properties": {"branch": {"type": "string"}, "hand_back": {"type": "string"}, "commits": {
                "type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False, "required": ["sha", "committer", "subject"],
                    "properties": {"sha": {"type": "string"}, "committer": {"type": "string"},
                                   "subject": {"type": "string"}}}}}}]},
    },
}
