"""Thin entry point: parse arguments, dispatch to a command module, map errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import sys

from pinset import __version__
from pinset.errors import PinsetError

COMMANDS = ["sim", "apply", "verify", "kld", "bench", "model", "report"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pinset", description="Keep a llama.cpp pin set alive on moving upstream builds.")
    parser.add_argument("--version", action="version", version=f"pinset {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"pinset.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"pinset.commands.{name}":
                continue  # verb not built yet
            raise
        module.add_parser(sub).set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args._run(args)
    except PinsetError as exc:
        print(f"pinset {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("pinset: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
