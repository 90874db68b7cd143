"""One rule for every verb: an output never overwrites, deletes or lands inside one of the command's inputs.

Every option of every verb is declared here by its argparse `dest` as an output file, an output folder,
an input file, an input folder or not a path; `pinset.cli` checks the parsed arguments of whichever verb
runs against this declaration before dispatch, so no verb can forget it. A new option that is in none of
the sets fails tests/cli/test_outputs_inputs.py until it is declared.

What is checked, before any work (bad input, exit 2, nothing changed):
- every output can be written (a file output is not a folder, a folder output not a file, a writable place);
- no output is an input (pins.yaml, the pins' patch files and folders, models, program folders, result
  and noise/expect/sim files, the programs in a program folder), compared by real path and by (device,
  inode), so a symbolic or a hard link to an input counts as the input; no output is an input folder, and
  no `*.patch` output is written into a patch folder (it would join the series);
- no two outputs of the same command are the same path.
`pinset import` reads its source: a pr-set.json, or an Ollama-style checkout's Makefile.sync and patch queue
(`llama/patches/`, whose files become the pins' patch files): none of them is an output, and no new `*.patch`
output goes into the queue.
"""

from __future__ import annotations

import os
from pathlib import Path

from pinset.config.paths import pin_paths

OUTPUT_FILES = frozenset({"json", "markdown", "csv", "plot"})
OUTPUT_FOLDERS = frozenset({"out", "logs", "log_dir", "worktree", "as_series"})
INPUT_FILES = frozenset({"config", "model", "vs_model", "noise_from", "text", "expect", "reanalyse", "sim",
                         "results", "source"})
INPUT_FOLDERS = frozenset({"base_bin", "head_bin", "bin", "llama_tree"})
# Options that name no file pinset reads or writes here: build names, counts, flags, URLs, strings for a
# workflow, and the cache (pinset's own folder, checked by the store).
NOT_PATHS = frozenset({
    "help", "builds", "build", "cache", "verify", "cuda", "jobs", "no_progress", "good", "bad", "pin", "bare",
    "ops", "backend", "cpu_params", "cuda_flags", "gpu_class", "op_timeout", "op_jobs", "base_commit",
    "head_commit", "cuda_architectures", "ctx", "chunks", "cpu", "gpu_layers", "threads", "vs_model_name",
    "rounds", "max_time", "max_rounds", "repetitions", "aa", "keep_busy_rounds", "llama_bench_args", "arch",
    "size", "quant", "method", "other_quant", "name", "vocab", "tie_embeddings", "n_layer", "n_embd", "n_head",
    "n_head_kv", "head_dim", "n_ff", "n_expert", "n_expert_used", "expert_ff", "seed", "imatrix_chunks",
    "force", "drop_f16", "gpus", "kld_model", "bench_model", "bench_args", "verify_args", "results_dir",
    "pinset_command", "post", "dry_run", "api_url", "command", "model_command", "version",
    "older_than", "format", "upstream", "abort", "cont", "onto", "pins", "write",
    "branch", "push", "repo",
})
DECLARED = OUTPUT_FILES | OUTPUT_FOLDERS | INPUT_FILES | INPUT_FOLDERS | NOT_PATHS
# An option whose dest means something else in one verb (an `--out` that is a file) says so on its action:
# `p.add_argument("--out", ...).pinset_io = "output-file"`; that wins over the table.
KINDS = {"output-file": OUTPUT_FILES, "output-folder": OUTPUT_FOLDERS, "input-file": INPUT_FILES,
         "input-folder": INPUT_FOLDERS, "none": NOT_PATHS}


def kind_of(action) -> str | None:
    """What an argparse action names: one of KINDS, None when undeclared."""
    declared = getattr(action, "pinset_io", None)
    if declared is not None:
        if declared not in KINDS:
            raise ValueError(f"{action.dest}: pinset_io {declared!r} is none of {sorted(KINDS)}")
        return declared
    return next((kind for kind, dests in KINDS.items() if action.dest in dests), None)


def _flag(parser_actions: dict[str, str], dest: str) -> str:
    return parser_actions.get(dest, "--" + dest.replace("_", "-"))


def check_arguments(args, flags: dict[str, str] | None = None, kinds: dict[str, str] | None = None) -> None:
    """The rule over one parsed command line (`flags`: dest -> the option's name as the user types it;
    `kinds`: dest -> its kind, from the verb's parser; the table where not given)."""
    from pinset.output import check_outputs

    flags = flags or {}
    values = vars(args)
    kinds = kinds or {}

    def named(kind: str) -> list[str]:
        return sorted(d for d in values if kinds.get(d, next((k for k, ds in KINDS.items() if d in ds), None)) == kind)

    files = {_flag(flags, d): values[d] for d in named("output-file") if values[d] is not None}
    folders = {_flag(flags, d): values[d] for d in named("output-folder") if values[d] is not None}
    if not files and not folders:
        return
    inputs: dict[str, str] = {}      # path -> what it is, for the message
    input_dirs: dict[str, str] = {}
    for dest in named("input-file"):
        for value in _as_list(values[dest]):
            inputs[str(value)] = str(value)
    for dest in named("input-folder"):
        for value in _as_list(values[dest]):
            input_dirs[str(value)] = f"{_flag(flags, dest)} {value}"
    sealed = set()
    if values.get("command") == "import" and values.get("source") is not None:
        for path, what in import_inputs(values["source"]).items():
            if os.path.isdir(path):
                input_dirs[path] = what
                sealed.add(path)
            else:
                inputs[path] = what
    config = values.get("config")
    if config is None and "build" in values and not any(values.get(d) for d in INPUT_FOLDERS):
        config = "pins.yaml"  # kld, bench, model synth read it when no program folder is given
        if os.path.isfile(config):
            inputs[config] = config
    if config is not None:
        for path in pin_paths(config):
            if os.path.isdir(path):
                input_dirs[path] = f"patches of {config}"
                sealed.add(path)
            else:
                inputs[path] = f"a patch of {config}"
    check_outputs(files, folders, inputs=inputs, input_folders=input_dirs, sealed=frozenset(sealed))


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def import_inputs(source: str | os.PathLike) -> dict[str, str]:
    """What `pinset import` reads from `source` (path -> what it is): a pr-set.json itself; of an Ollama-style
    checkout its Makefile.sync, its patch folder (a sealed input folder: no new `*.patch` in it) and so every patch
    file in it, the pins' patch files of the pins.yaml it writes."""
    path = Path(source).expanduser()
    if not path.is_dir():
        return {str(path): str(path)}
    found = {str(path / "Makefile.sync"): f"Makefile.sync of the checkout {source}"}
    queue = path / "llama" / "patches"
    if queue.is_dir():
        found[str(queue)] = f"the patch queue of the checkout {source}"
    return found


def verb_parsers(parser):
    """(name, parser) of every verb and sub-verb reachable from `parser` (`model synth` included)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield name, child
                for sub_name, grandchild in verb_parsers(child):
                    yield f"{name} {sub_name}", grandchild


def option_names(parser, argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(dest -> the option as typed (`--log-dir`), dest -> its kind) for the options of the verb `argv` chose."""
    names: dict[str, str] = {}
    kinds: dict[str, str] = {}
    chosen = [a for a in argv if not a.startswith("-")]
    for name, child in verb_parsers(parser):
        if name.split() == chosen[:len(name.split())]:
            for action in child._actions:
                if action.option_strings:
                    names[action.dest] = max(action.option_strings, key=len)
                else:
                    names.setdefault(action.dest, action.metavar or action.dest)
                kind = kind_of(action)
                if kind is not None:
                    kinds[action.dest] = kind
    return names, kinds
