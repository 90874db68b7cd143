"""`pinset schema`: the JSON Schema of pins.yaml, for editors (generated from the reader's schema)."""

from __future__ import annotations

import json
import sys

from pinset.commands.paths import OUTPUT_FILE, add_path
from pinset.config.json_schema import pins_schema
from pinset.output import write_text


def add_parser(sub):
    p = sub.add_parser(
        "schema", help="print the JSON Schema of pins.yaml (for editors)",
        description="Print the JSON Schema (draft 2020-12) of pins.yaml, generated from the schema pinset reads "
                    "it with; the same text ships as pinset/data/pins.schema.json. Point your editor's YAML "
                    "language server at it (`# yaml-language-server: $schema=PATH` on pins.yaml's first line) "
                    "to see key, type and pattern errors as you type; the checks that need the disk (patch "
                    "files, local repositories) remain pinset's.")
    add_path(p, "-o", "--out", role=OUTPUT_FILE, help="write it into this file instead of stdout")
    p.add_argument("--kind", choices=("pins", *RESULT_KINDS), default="pins",
                   help="whose schema: pins.yaml (default), or the --json document of import, apply, refresh or bump")
    return p


RESULT_KINDS = ("import", "apply", "refresh", "bump")


def result_schema(kind: str) -> dict:
    """The JSON Schema (draft 2020-12) of a result kind's document, from the module beside its producer."""
    from pinset.bump import model as bump_model
    from pinset.config import import_model
    from pinset.heal import model as refresh_model
    from pinset.sim import apply_model

    body = {"import": import_model, "apply": apply_model, "refresh": refresh_model, "bump": bump_model}[kind].JSON_SCHEMA
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://pinset.invalid/{kind}.schema.json", "title": f"pinset {kind} --json", **body}


def text(kind: str = "pins") -> str:
    return json.dumps(pins_schema() if kind == "pins" else result_schema(kind), indent=2) + "\n"


def run(args) -> int:
    kind = getattr(args, "kind", "pins")
    if args.out:
        write_text(args.out, text(kind))
    else:
        sys.stdout.write(text(kind))
    return 0
