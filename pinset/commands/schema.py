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
    return p


def text() -> str:
    return json.dumps(pins_schema(), indent=2) + "\n"


def run(args) -> int:
    if args.out:
        write_text(args.out, text())
    else:
        sys.stdout.write(text())
    return 0
