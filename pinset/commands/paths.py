"""Where a verb's option that names a path says what it is, and the one check `pinset.cli` runs with it.

`add_path(parser, "--json", role=OUTPUT_FILE, ...)` is `add_argument` plus a tag on the argparse action: its
role, and where the verb knows more than the value (the pins' patch files behind `-c`, import's patch queue,
verify's logs folder next to `--json`) a `derived` hook. After parsing, `pinset.cli` calls `check_arguments`
once, before dispatch: it reads the roles back from the actions of the chosen verb and applies the rule
(`pinset.outputs_rule.check_outputs`), so no verb checks (or forgets) it itself. An option that names no path
declares nothing; tests/cli/test_outputs_inputs.py fails on one that looks like a path and says nothing.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pinset.errors import PinsetError
from pinset.outputs_rule import check_outputs

Role = Literal["output-file", "output-folder", "input-file", "input-folder", "unguarded"]
OUTPUT_FILE: Role = "output-file"
OUTPUT_FOLDER: Role = "output-folder"
INPUT_FILE: Role = "input-file"
INPUT_FOLDER: Role = "input-folder"
# names a path this rule does not guard: pinset's own cache (the store checks it), a path on a CI runner
UNGUARDED: Role = "unguarded"
ROLES: tuple[Role, ...] = (OUTPUT_FILE, OUTPUT_FOLDER, INPUT_FILE, INPUT_FOLDER, UNGUARDED)

# What an option brings about besides its own value, from the whole parsed command line: path -> how a message
# names it. On an input option every folder named is a sealed input folder (a patch folder or queue: no new
# `*.patch` in it) and every other path an input file; on an output option, more outputs of its kind.
Derived = Callable[[argparse.Namespace], dict[str, str]]

_ROLE, _DERIVED, _STDOUT = "pinset_role", "pinset_derived", "pinset_stdout"


def add_path(parser: argparse._ActionsContainer, *flags: str, role: Role, derived: Derived | None = None,
             stdout: str | None = None, **kwargs: Any) -> argparse.Action:
    """`parser.add_argument(*flags, **kwargs)` for an option that names a path, tagged with its role where it is
    defined. `stdout`: the value that means standard output, not a path: `-` for every output file (`--json -`,
    written by pinset.output.write_text), unless the verb says otherwise."""
    if role not in ROLES:
        raise ValueError(f"{flags}: role {role!r} is none of {list(ROLES)}")
    if role == OUTPUT_FILE and stdout is None:
        stdout = "-"
        if kwargs.get("type") is Path:   # `-` stays the word (Path("./-"), a file named "-", prints as "-" too)
            kwargs["type"] = _path_or_stdout
    action = parser.add_argument(*flags, **kwargs)
    setattr(action, _ROLE, role)
    setattr(action, _DERIVED, derived)
    setattr(action, _STDOUT, stdout)
    return action


def _path_or_stdout(value: str):
    return value if value == "-" else Path(value)


def _is_stdout(value, stdout) -> bool:
    """`value` is the word for standard output (a str: a Path named "-" is a file, `./-`)."""
    return stdout is not None and isinstance(value, str) and value == stdout


def stdout_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The output options of the chosen verb given as standard output (`--json -`)."""
    values = vars(args)
    return [_flag(a) for a in chosen_actions(parser, args) if role_of(a) == OUTPUT_FILE and getattr(a, _STDOUT, None)
            and any(_is_stdout(v, getattr(a, _STDOUT)) for v in _as_list(values.get(a.dest)))]


def role_of(action: argparse.Action) -> Role | None:
    """The role `add_path` gave the action; None for an option that names no path."""
    return getattr(action, _ROLE, None)


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The rule over one parsed command line: the declared actions of the verb (and sub-verb) `args` chose."""
    declared: dict[str, argparse.Action] = {}
    for action in chosen_actions(parser, args):
        if role_of(action) is not None:
            declared.setdefault(action.dest, action)
    values = vars(args)

    def named(*roles: Role) -> list[argparse.Action]:
        return [declared[d] for d in sorted(declared) if role_of(declared[d]) in roles]

    def given(action: argparse.Action) -> list:
        return [v for v in _as_list(values.get(action.dest))
                if v is not None and not _is_stdout(v, getattr(action, _STDOUT))]

    to_stdout = [_flag(a) for a in named(OUTPUT_FILE)
                 if any(_is_stdout(v, getattr(a, _STDOUT)) for v in _as_list(values.get(a.dest)))]
    if len(to_stdout) > 1:
        raise PinsetError(f"{' and '.join(f'{flag} -' for flag in to_stdout)}: only one output can be standard output")

    def derived(action: argparse.Action) -> dict[str, str]:
        hook = getattr(action, _DERIVED)
        return hook(args) if hook is not None else {}

    outputs: dict[Role, dict[str, Any]] = {OUTPUT_FILE: {}, OUTPUT_FOLDER: {}}
    for role, found in outputs.items():
        for action in named(role):
            found.update({_flag(action): value for value in given(action)})
        for action in named(role):
            found.update({name: path for path, name in derived(action).items()})
    if not any(outputs.values()):
        return
    inputs: dict[str, str] = {}      # path -> what it is, for the message
    input_dirs: dict[str, str] = {}
    for action in named(INPUT_FILE):
        inputs.update({str(value): str(value) for value in given(action)})
    for action in named(INPUT_FOLDER):
        input_dirs.update({str(value): f"{_flag(action)} {value}" for value in given(action)})
    sealed = set()
    for action in named(INPUT_FILE, INPUT_FOLDER):
        for path, what in derived(action).items():
            if os.path.isdir(path):
                input_dirs[path] = what
                sealed.add(path)
            else:
                inputs[path] = what
    check_outputs(outputs[OUTPUT_FILE], outputs[OUTPUT_FOLDER], inputs=inputs, input_folders=input_dirs,
                  sealed=frozenset(sealed))


def _flag(action: argparse.Action) -> str:
    """The option as the user types it (`--log-dir`), or a positional's name."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    return str(action.metavar or action.dest)


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def chosen_actions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.Action]:
    """The actions of `parser` and of each sub-verb `args` chose (`model synth`: model's, then synth's)."""
    found: list[argparse.Action] = []
    current: argparse.ArgumentParser | None = parser
    while current is not None:
        found += current._actions
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        current = sub._name_parser_map.get(getattr(args, sub.dest, None) or "") if sub is not None else None
    return found


def verb_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of every verb and sub-verb reachable from `parser` (`model synth` included)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action._name_parser_map.items():
                yield name, child
                for sub_name, grandchild in verb_parsers(child):
                    yield f"{name} {sub_name}", grandchild

