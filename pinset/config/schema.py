"""The pins.yaml schema.

The file is parsed into YAML nodes first (not plain dicts) so that every error can name the line
it comes from. Validation stops at the first problem: one clear message, exit code 2.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote, urlsplit

import yaml

from pinset import runner
from pinset.config.ledger import resolution_files
from pinset.config.patches import Parsed, SeriesProblem, parse_all, patch_series, single_patch
from pinset.config.reading import compose, decode_utf8, read_regular_file
from pinset.config.selectors import AGE_RULE, age_seconds, looks_like_selector, parse_selector, specifier
from pinset.errors import ConfigError, ToolchainError

SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
FULL_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
PR_URL_RE = re.compile(r"^https?://[^/]+/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)/pull/(?P<number>\d+)/?$")
# a PR's commit as GitHub links it: the PR and the exact commit in one URL
PR_COMMIT_URL_RE = re.compile(r"^(?P<pr>https?://[^/]+/[\w.-]+/[\w.-]+/pull/\d+)/commits/(?P<commit>[0-9a-fA-F]{40})/?$")
PYPI_BUILD_RE = re.compile(r"^pypi:(?P<package>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)$")
# Ids name folders (refresh's scratch, rebase's worktree, `each: true` sub-pins): parts split by single `/`,
# none starting with `.` (so no `..`, `.`, empty or hidden part), the first character a letter or digit.
PIN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.#+-]*(?:/[A-Za-z0-9_#+-][A-Za-z0-9_.#+-]*)*$")
PIN_ID_RULE = "letters, digits and _.#+-, parts split by single `/`, none starting with `.`"
BUILD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./+-]*$")

TOP_KEYS = {"upstream", "builds", "pins", "cuda", "description", "gpus", "unions", "checks"}
PIN_KEYS = {"id", "patches", "pr", "commit", "required", "checks", "unchecked", "description", "evidence",
            "repo", "each", "skip-unless-open", "unions"}
# A PR pin with `skip-unless-open: true` is left out of the set (status `not-open`) once its pull request is
# merged or closed (Unsloth's pr-set.json `"required": false`); while its state is unknown it is applied.
SKIP_UNLESS_OPEN = "skip-unless-open"
CUDA_KEYS = {"architectures", "flags"}
GPU_CLASS_KEYS = {"runs-on", "architectures"}
EVIDENCE_KINDS = ("verify", "gpu-verify", "kld", "bench")  # a pin's `evidence:` items (sim/evidence.py)
CUDA_FLAG_RE = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*")


def cuda_flag_problem(flag: str) -> str | None:
    """The one check of an extra CMake flag of the CUDA build: pins.yaml's cuda.flags and verify's --cuda-flags."""
    return None if CUDA_FLAG_RE.fullmatch(flag) else f"malformed CMake flag {flag!r} (e.g. -DGGML_CUDA_FA=OFF)"


GPU_CLASS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# CMAKE_CUDA_ARCHITECTURES: compute capabilities ("90", "90a", "100f", "86-real"), separated by ; or ,
# (one spelling once normalised), or one of CMake's keywords. Anything else fails in CMake minutes later.
_ONE_ARCH = r"[0-9]{2,3}[af]?(-real|-virtual)?"
ARCH_RE = re.compile(rf"\s*(native|all|all-major|{_ONE_ARCH}(\s*[;,]\s*{_ONE_ARCH})*)\s*")
CHECK_KINDS = {   # kind: (keys it needs, keys it takes); every kind also takes `feature:` (a label)
    "backend-op": ({"op"}, {"op", "params", "mode", "feature"}),
    "ctest": ({"name"}, {"name", "feature"}),
    "command": ({"argv", "expect"}, {"argv", "expect", "timeout", "feature"}),
    # test-llama-archs -a ARCH: a synthetic model of the architecture decoded on the backend, against the CPU
    "arch": ({"name"}, {"name", "seed", "feature"}),
    # test-mtmd-impl [TESTS]: libmtmd's own unit tests (a projector check runs Unsloth's test_projector_registry)
    "mtmd": (set(), {"tests", "projector", "feature"}),
}
# llama.cpp's architecture names (llm_arch_name: "llama", "qwen3moe", "gpt-oss", "t5encoder")
ARCH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
ARCH_SEED = 1234  # test-llama-archs -s: the same synthetic weights and tokens on every run (the program's default is random)
MTMD_PROJECTOR_TESTS = "test_projector_registry"  # what Unsloth's mtmd probe runs for a projector


@dataclass(frozen=True)
class PrRef:
    url: str
    owner: str
    repo: str
    number: int

    @property
    def ref(self) -> str:
        return f"pull/{self.number}/head"


@dataclass(frozen=True)
class FeatureCheck:
    """One check run by `pinset verify` (kind: backend-op, ctest, command, arch or mtmd), of a pin or of the
    pin set (a feature upstream now carries: the check outlives its pin)."""

    kind: str
    op: str | None = None
    params: str | None = None  # regex on the test-backend-ops case description
    mode: str = "test"
    name: str | None = None    # ctest: the test; arch: the architecture
    argv: tuple[str, ...] = ()
    expect: str | None = None
    timeout: float = 600.0
    line: int = 0
    seed: int = ARCH_SEED      # arch: test-llama-archs -s
    tests: str | None = None   # mtmd: test-mtmd-impl's filter (a regex the test's whole name must match)
    projector: str | None = None  # mtmd: the projector the check is about (a label; the run is `tests`)
    feature: str | None = None    # the feature the check proves (a label, shown in results)

    def describe(self) -> str:
        if self.kind == "backend-op":
            text = f"backend-op {self.op}" + (f" /{self.params}/" if self.params else "")
        elif self.kind == "ctest":
            text = f"ctest {self.name}"
        elif self.kind == "arch":
            text = f"arch {self.name}"
        elif self.kind == "mtmd":
            text = "mtmd" + (f" /{self.tests}/" if self.tests else "") + (
                f" projector {self.projector}" if self.projector else "")
        else:
            text = "command " + " ".join(self.argv)
        return text + (f" [feature {self.feature}]" if self.feature else "")


@dataclass(frozen=True)
class PinSpec:
    id: str
    patches: Path | None = None  # folder of format-patch files, or one .patch file (absolute)
    pr: PrRef | None = None
    commit: str | None = None
    required: bool = True
    checks: tuple[FeatureCheck, ...] = ()
    unchecked: str | None = None
    description: str | None = None
    line: int = 0
    series: tuple[Path, ...] = ()  # the patch files, in order, as checked when pins.yaml was read
    evidence: tuple[str, ...] | None = None  # `evidence:` kinds replacing the derived ones (sim/evidence.py)
    repo: str | None = None  # PR pins from a fork: the repository (URL or absolute path) the commit is fetched from
    skip_unless_open: bool = False  # `skip-unless-open: true`: left out once its PR is merged or closed
    unions: bool = False     # `unions:` (the pin's, else the pin set's): provable add/add conflicts are unioned (sim/unions.py)

    @property
    def kind(self) -> str:
        return "patches" if self.patches is not None else "pr"

    def patch_files(self) -> list[Path]:
        return list(self.series)

    @property
    def digest(self) -> str:
        """What the pin applies, in 16 hex (sim's per-pin `digest`): a PR pin's commit; a series' patch files
        (bytes, in order) and its recorded resolutions (name and bytes). It changes when the series is refreshed,
        rebased or replaced, never when upstream moves under it: `pinset history` counts the changes."""
        if self.patches is None:
            return (self.commit or "")[:16]
        h = hashlib.sha256()
        for patch in self.patch_files():
            h.update(hashlib.sha256(patch.read_bytes()).digest())
        for recorded in resolution_files(self.patches):
            h.update(recorded.name.encode() + b"\0" + hashlib.sha256(recorded.read_bytes()).digest())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class GpuClass:
    """A GPU class the pin set is verified on (pins.yaml `gpus:`): the CI runners that hold it and the
    CUDA architectures its builds are made for."""

    name: str
    runs_on: tuple[str, ...]    # runner labels (GitHub Actions `runs-on`)
    architectures: str          # CMAKE_CUDA_ARCHITECTURES of this class's builds ("90")
    line: int = 0
    runs_on_span: tuple[int, int] = field(default=(0, 0), compare=False)  # where runs-on's value is in the text


@dataclass(frozen=True)
class PinSet:
    path: Path
    upstream: str | None
    builds: tuple[str, ...]
    pins: tuple[PinSpec, ...]
    cuda_architectures: str | None = None
    description: str | None = None
    text: str = field(default="", repr=False)
    cuda_flags: tuple[str, ...] = ()  # extra CMake -D flags of every CUDA build (verify, kld, bench, model)
    gpus: tuple[GpuClass, ...] = ()   # the GPU classes a CI matrix verifies on (`pinset matrix`)
    checks: tuple[FeatureCheck, ...] = ()  # pin-set-level checks (`checks:` at the top): run on every build

    @property
    def digest(self) -> str:
        """Hash of the pin set's content: the file plus every patch it names. The runner labels of `gpus:`
        (`runs-on`) are left out: they say where CI runs, not what is pinned, so moving a class to other
        runners keeps the PR comment (whose marker is this digest) and the results made before."""
        text = self.text
        for start, end in sorted((g.runs_on_span for g in self.gpus if g.runs_on_span[1]), reverse=True):
            text = text[:start] + text[end:]
        h = hashlib.sha256(text.encode())
        for pin in self.pins:
            h.update(pin.id.encode())
            if pin.patches is not None:
                for patch in pin.patch_files():
                    h.update(patch.read_bytes())
                for recorded in resolution_files(pin.patches):  # they change what is applied
                    h.update(recorded.name.encode(errors="surrogateescape") + b"\0" + recorded.read_bytes())
            else:
                h.update((pin.commit or "").encode())
        return h.hexdigest()[:16]

    def gpu_class(self, name: str) -> GpuClass:
        for gpu in self.gpus:
            if gpu.name == name:
                return gpu
        known = ", ".join(g.name for g in self.gpus) or "none: add a `gpus:` mapping"
        raise ConfigError(self.path, 0, "gpus", f"no GPU class {name!r} (known: {known})")

    def pin(self, pin_id: str) -> PinSpec:
        for pin in self.pins:
            if pin.id == pin_id:
                return pin
        raise KeyError(pin_id)


class _Reader:
    """Walks YAML nodes and raises ConfigError with the node's line number."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, node, key, message) -> NoReturn:
        line = node.start_mark.line + 1 if node is not None else 0
        raise ConfigError(self.path, line, key, message)

    def mapping(self, node, key, allowed):
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, key, f"must be a mapping, got {_kind(node)}")
        out = {}
        for k_node, v_node in node.value:
            if not isinstance(k_node, yaml.ScalarNode):
                self.fail(k_node, key, "keys must be plain strings")
            name = k_node.value
            sub = f"{key}.{name}" if key else name
            if allowed is not None and name not in allowed:
                self.fail(k_node, sub, f"unknown key (allowed: {', '.join(sorted(allowed))})")
            if name in out:
                self.fail(k_node, sub, "duplicate key")
            out[name] = v_node
        return out

    def string(self, node, key) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag.endswith(":null"):
            self.fail(node, key, f"must be a string, got {_kind(node)}")
        if not node.value.strip():
            self.fail(node, key, "must not be empty")
        return node.value

    def boolean(self, node, key) -> bool:
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":bool"):
            if node.value.lower() in ("true", "yes", "on"):
                return True
            if node.value.lower() in ("false", "no", "off"):
                return False
        self.fail(node, key, f"must be true or false, got {node.value!r}" if isinstance(node, yaml.ScalarNode) else "must be true or false")

    def seconds(self, node, key) -> float:
        """A finite, positive number (YAML's own int and float syntax: 90, 1.5e3, 0x10; and 1e3)."""
        value = None
        if isinstance(node, yaml.ScalarNode) and node.tag.rsplit(":", 1)[-1] in ("int", "float"):
            try:
                value = float(_SCALARS.construct_object(node, deep=True))
            except (ValueError, TypeError, OverflowError, yaml.YAMLError):
                value = None
        elif isinstance(node, yaml.ScalarNode) and node.style is None and _EXPONENT.fullmatch(node.value):
            value = float(node.value)  # YAML 1.1 reads `1e3` (no dot, no sign) as a string; YAML 1.2 and people do not
        if value is None:
            self.fail(node, key, f"must be a number of seconds, got {_kind(node)}")
        if not math.isfinite(value) or value <= 0:
            self.fail(node, key, f"must be a finite number of seconds > 0, got {node.value!r}")
        if value > runner.MAX_TIMEOUT_S:
            self.fail(node, key, f"must be at most {runner.MAX_TIMEOUT_S} seconds (11 days), got {node.value!r}")
        return value

    def local_path(self, node, key, base: Path) -> tuple[str, Path]:
        """A string naming a local path (relative to pins.yaml's folder), and that path made absolute."""
        text = self.string(node, key)
        if "\0" in text:
            self.fail(node, key, "a path cannot contain a NUL character")
        try:
            return text, (base / text).expanduser().resolve()
        except (OSError, RuntimeError, ValueError) as exc:
            self.fail(node, key, f"unusable path {text!r}: {exc}")

    def sequence(self, node, key):
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, key, f"must be a list, got {_kind(node)}")
        return node.value


_SCALARS = yaml.constructor.SafeConstructor()
_EXPONENT = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+")


def _kind(node) -> str:
    if node is None:
        return "nothing"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag.endswith(":null"):
        return "null"
    return repr(node.value)


def load_pinset(path: str | Path, *, require_pins: bool = True) -> PinSet:
    """Read and validate a pins.yaml; raise ConfigError naming file, line and key."""
    path = Path(path)
    text = decode_utf8(path, read_regular_file(path, "pin set file"))
    root = compose(path, text)
    r = _Reader(path)
    if root is None:
        raise ConfigError(path, 0, None, "file is empty")
    top = r.mapping(root, "", TOP_KEYS)

    upstream = r.string(top["upstream"], "upstream") if "upstream" in top else None
    if upstream is not None:
        _check_upstream(r, top["upstream"], upstream, path.parent)

    builds: list[str] = []
    if "builds" not in top:
        r.fail(root, "builds", "missing (list the upstream builds to test: tags, commits or pypi:PKG==VER)")
    for node in r.sequence(top["builds"], "builds"):
        name = _read_build(r, node, upstream)
        if name in builds:
            r.fail(node, "builds[]", f"duplicate build {name!r}")
        builds.append(name)
    if not builds:
        r.fail(top["builds"], "builds", "empty list")

    cuda_arch = None
    cuda_flags: list[str] = []
    if "cuda" in top:
        cuda = r.mapping(top["cuda"], "cuda", CUDA_KEYS)
        for node in (r.sequence(cuda["flags"], "cuda.flags") if "flags" in cuda else []):
            flag = r.string(node, "cuda.flags[]")
            if problem := cuda_flag_problem(flag):
                r.fail(node, "cuda.flags[]", problem)
            cuda_flags.append(flag)
        if "architectures" in cuda:
            cuda_arch = r.string(cuda["architectures"], "cuda.architectures")
            if not ARCH_RE.fullmatch(cuda_arch):
                r.fail(cuda["architectures"], "cuda.architectures", f"malformed {cuda_arch!r} (e.g. \"90\" or \"86;90\")")

    gpus = _read_gpus(r, top["gpus"]) if "gpus" in top else ()

    pins: list[PinSpec] = []
    seen: dict[str, int] = {}
    pin_nodes = r.sequence(top["pins"], "pins") if "pins" in top else []
    parsed = parse_all(_patch_places(r, pin_nodes, path.parent))   # every pin's patches checked by one git
    unions = r.boolean(top["unions"], "unions") if "unions" in top else False
    for index, node in enumerate(pin_nodes):
        for pin in _read_pin(r, node, f"pins[{index}]", path.parent, upstream, parsed, unions):
            if pin.id in seen:
                r.fail(node, f"pins[{index}].id", f"duplicate id {pin.id!r} (first on line {seen[pin.id]})")
            seen[pin.id] = pin.line
            pins.append(pin)
    if require_pins and not pins:
        r.fail(top.get("pins", root), "pins", "no pins listed (this command needs at least one)")

    description = r.string(top["description"], "description") if "description" in top else None
    checks = tuple(_read_check(r, n, f"checks[{i}]") for i, n in enumerate(
        r.sequence(top["checks"], "checks") if "checks" in top else []))
    if "checks" in top and not checks:
        r.fail(top["checks"], "checks", "empty list (list the pin set's own checks, or leave the key out)")
    return PinSet(path.resolve(), upstream, tuple(builds), tuple(pins), cuda_arch, description, text,
                  tuple(cuda_flags), gpus, checks)


def _read_gpus(r: _Reader, node) -> tuple[GpuClass, ...]:
    """`gpus: {NAME: {runs-on: LABEL or [LABELS], architectures: "90"}}`, at least one class."""
    classes = []
    for name, body in r.mapping(node, "gpus", None).items():
        key = f"gpus.{name}"
        if not GPU_CLASS_RE.match(name):
            r.fail(body, key, f"malformed GPU class name {name!r} (letters, digits and _.-)")
        fields = r.mapping(body, key, GPU_CLASS_KEYS)
        for needed in sorted(GPU_CLASS_KEYS - set(fields)):
            r.fail(body, f"{key}.{needed}", "missing")
        labels_node = fields["runs-on"]
        labels = [r.string(labels_node, f"{key}.runs-on")] if isinstance(labels_node, yaml.ScalarNode) else \
            [r.string(n, f"{key}.runs-on[]") for n in r.sequence(labels_node, f"{key}.runs-on")]
        if not labels:
            r.fail(labels_node, f"{key}.runs-on", "empty list (the runner labels of this GPU class)")
        for label in labels:
            if label != label.strip() or "," in label:
                r.fail(labels_node, f"{key}.runs-on", f"malformed runner label {label!r}")
        if len(set(labels)) != len(labels):
            r.fail(labels_node, f"{key}.runs-on", "duplicate runner label")
        arch_node = fields["architectures"]
        if isinstance(arch_node, yaml.ScalarNode) and arch_node.tag.endswith(":int"):
            arch = arch_node.value  # architectures: 90
        else:
            arch = r.string(arch_node, f"{key}.architectures")
        if not ARCH_RE.fullmatch(arch):
            r.fail(arch_node, f"{key}.architectures", f"malformed {arch!r} (e.g. \"90\" or \"86;90\")")
        classes.append(GpuClass(name, tuple(labels), arch, body.start_mark.line + 1,
                                (labels_node.start_mark.index, labels_node.end_mark.index)))
    if not classes:
        r.fail(node, "gpus", "empty mapping (name at least one GPU class, or leave `gpus:` out)")
    return tuple(classes)


def _read_build(r: _Reader, node, upstream: str | None) -> str:
    """One `builds:` entry: a build name, a selector string, or a selector mapping (normalised to its string)."""
    if isinstance(node, yaml.MappingNode):
        fields = r.mapping(node, "builds[]", {"tags", "pypi"})
        if len(fields) != 1:
            r.fail(node, "builds[]", "a selector mapping has one key: tags or pypi")
        (kind, body), = fields.items()
        key = f"builds[].{kind}"
        if kind == "tags":
            sel = r.mapping(body, key, {"match", "newest", "min-age"})
            for name in ("match", "newest"):
                if name not in sel:
                    r.fail(body, f"{key}.{name}", "missing")
            text = f"tags:{r.string(sel['match'], key + '.match')}:{_count(r, sel['newest'], key + '.newest')}"
            text += _min_age(r, sel, key)
        else:
            sel = r.mapping(body, key, {"package", "versions", "newest", "min-age"})
            for name in ("package", "versions"):
                if name not in sel:
                    r.fail(body, f"{key}.{name}", "missing")
            package = r.string(sel["package"], key + ".package")
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", package):
                r.fail(sel["package"], key + ".package", f"malformed package name {package!r}")
            try:
                text = f"pypi:{package}{specifier(r.string(sel['versions'], key + '.versions'))}"
            except ValueError as exc:
                r.fail(sel["versions"], key + ".versions", str(exc))
            if "newest" in sel:
                text += f":{_count(r, sel['newest'], key + '.newest')}"
            text += _min_age(r, sel, key)
    else:
        text = r.string(node, "builds[]")
    if PYPI_BUILD_RE.match(text) or BUILD_RE.match(text):
        if not PYPI_BUILD_RE.match(text) and upstream is None:
            r.fail(node, "builds[]", f"build {text!r} needs an `upstream:` git URL or path")
        return text
    if not looks_like_selector(text):
        r.fail(node, "builds[]", f"malformed build {text!r} (a tag, a commit sha, pypi:PACKAGE==VERSION, "
                                 "or a selector tags:PATTERN:N / pypi:PACKAGE>=VERSION)")
    try:
        selector = parse_selector(text)
    except ValueError as exc:
        r.fail(node, "builds[]", str(exc))
    if text.startswith("tags:") and upstream is None:
        r.fail(node, "builds[]", f"tag selector {text!r} needs an `upstream:` git URL or path")
    return str(selector)


def _min_age(r: _Reader, sel: dict, key: str) -> str:
    """`min-age: 48h` of a selector mapping, as the string form's `:48h` (empty when not given)."""
    if "min-age" not in sel:
        return ""
    node = sel["min-age"]
    text = node.value if isinstance(node, yaml.ScalarNode) and not node.tag.endswith(":null") else None
    try:
        age_seconds(text if text is not None else "")
    except ValueError:
        r.fail(node, f"{key}.min-age", f"must be a duration ({AGE_RULE}), got {_kind(node)}")
    return f":{text}"


def _count(r: _Reader, node, key: str) -> int:
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":int") and re.fullmatch(r"[0-9]+", node.value) \
            and 1 <= int(node.value) <= 1000:
        return int(node.value)
    r.fail(node, key, f"must be a count from 1 to 1000, got {_kind(node)}")


def _check_upstream(r: _Reader, node, value: str, base: Path) -> None:
    if value.startswith("file://"):
        local = unquote(urlsplit(value).path)
        if not local.startswith("/"):
            r.fail(node, "upstream", f"malformed URL {value!r} (file:///ABSOLUTE/PATH)")
        _check_local_repository(r, node, value, Path(local))
        return
    if re.match(r"^(https?|ssh|git)://", value) or re.match(r"^[\w.-]+@[\w.-]+:", value):
        if value.startswith(("http://", "https://")) and not re.match(r"^https?://[^/\s]+/\S+$", value):
            r.fail(node, "upstream", f"malformed URL {value!r}")
        return
    _check_local_repository(r, node, value, r.local_path(node, "upstream", base)[1])


def _check_local_repository(r: _Reader, node, value: str, local: Path, key: str = "upstream") -> None:
    """A local upstream must be a git repository itself (a work tree or a bare one), not a folder in one:
    git fetches from exactly that path."""
    try:
        is_dir, exists = local.is_dir(), local.exists()
    except (OSError, ValueError) as exc:
        r.fail(node, key, f"unusable path {value!r}: {exc}")
    if not exists:
        r.fail(node, key, f"not a URL and no such path: {value!r}")
    if not is_dir:
        r.fail(node, key, f"{value!r} is not a folder (a local {key} is a git repository)")
    try:
        os.listdir(local)
    except OSError as exc:
        r.fail(node, key, f"{value!r}: cannot read the folder ({(exc.strerror or str(exc)).lower()})")
    # The ceiling keeps git from finding a repository above `local`, as `git fetch` would not.
    probe = runner.run(["git", "rev-parse", "--git-dir"], cwd=local, timeout=60,
                       env={"GIT_CEILING_DIRECTORIES": str(local.parent)})
    if probe.returncode == 127:
        raise ToolchainError("git not found on PATH")
    if not probe.ok:
        reason = next((line for line in probe.stderr.splitlines() if line.strip()), probe.describe())
        r.fail(node, key, f"{value!r} is not a git repository ({reason})")


def _patch_places(r: _Reader, pin_nodes, base: Path) -> list[Path]:
    """The `patches:` path of each pin that names one (read leniently: _read_pin says what is wrong)."""
    places = []
    for node in pin_nodes:
        if isinstance(node, yaml.MappingNode):
            for k_node, v_node in node.value:
                if isinstance(k_node, yaml.ScalarNode) and k_node.value == "patches":
                    try:
                        places.append(r.local_path(v_node, "patches", base)[1])
                    except ConfigError:
                        pass
    return places


def _read_pin(r: _Reader, node, key: str, base: Path, upstream: str | None,
              parsed: Parsed = frozenset(), unions: bool = False) -> list[PinSpec]:
    """One pin, or with `each: true` one pin per patch file of the folder (id `ID/NAME`, in name order)."""
    fields = r.mapping(node, key, PIN_KEYS)
    if "id" not in fields:
        r.fail(node, f"{key}.id", "missing")
    pin_id = r.string(fields["id"], f"{key}.id")
    if not PIN_ID_RE.match(pin_id):
        r.fail(fields["id"], f"{key}.id", f"malformed id {pin_id!r} ({PIN_ID_RULE})")
    line = node.start_mark.line + 1
    has_patches, has_pr = "patches" in fields, "pr" in fields
    if has_patches == has_pr:
        r.fail(node, key, "give exactly one of `patches:` (a folder of format-patch files) or `pr:` (+ `commit:`)")

    patches: Path | None = None
    pr: PrRef | None = None
    commit: str | None = None
    series: tuple[Path, ...] = ()
    if has_patches:
        for name in ("commit", "repo", SKIP_UNLESS_OPEN):
            if name in fields:
                r.fail(fields[name], f"{key}.{name}", f"only PR pins take a {name}" if name != SKIP_UNLESS_OPEN
                       else "only PR pins take `skip-unless-open` (a patch has no pull request to be open)")
        rel, patches = r.local_path(fields["patches"], f"{key}.patches", base)
        try:
            series = single_patch(patches, rel, parsed) if rel.endswith(".patch") and not patches.is_dir() \
                else patch_series(patches, rel.rstrip("/"), parsed)
        except SeriesProblem as exc:
            r.fail(fields["patches"], f"{key}.patches", str(exc))
    else:
        if "each" in fields:
            r.fail(fields["each"], f"{key}.each", "only a `patches:` folder takes `each`")
        url = r.string(fields["pr"], f"{key}.pr")
        in_url = None
        m_commit = PR_COMMIT_URL_RE.match(url)
        if m_commit:  # .../pull/107/commits/SHA: the PR and its commit
            url, in_url = m_commit["pr"], m_commit["commit"].lower()
        m = PR_URL_RE.match(url)
        if not m:
            r.fail(fields["pr"], f"{key}.pr", f"malformed PR URL {url!r} (https://HOST/OWNER/REPO/pull/N, "
                                              "or .../pull/N/commits/SHA)")
        pr = PrRef(url.rstrip("/"), m["owner"], m["repo"], int(m["number"]))
        repo = _read_repo(r, fields["repo"], f"{key}.repo", base) if "repo" in fields else None
        if upstream is not None:
            _check_pr_origin(r, fields["pr"], f"{key}.pr", pr, upstream, repo)
        if "commit" not in fields and in_url is None:
            r.fail(node, f"{key}.commit", "missing (the exact reviewed commit sha of the PR, or a "
                                          ".../pull/N/commits/SHA URL)")
        commit = r.string(fields["commit"], f"{key}.commit").lower() if "commit" in fields else in_url
        assert commit is not None   # r.fail above when neither gives it
        if not FULL_SHA_RE.match(commit):
            r.fail(fields["commit"], f"{key}.commit", f"malformed sha {commit!r} (need 40 hex digits)")
        if in_url is not None and commit != in_url:
            r.fail(fields["commit"], f"{key}.commit", f"{commit} is not the commit its PR URL names ({in_url})")
        if upstream is None:
            r.fail(fields["pr"], f"{key}.pr", "PR pins need an `upstream:` git URL or path to fetch from")

    required = r.boolean(fields["required"], f"{key}.required") if "required" in fields else True
    checks = tuple(_read_check(r, n, f"{key}.checks[{i}]") for i, n in enumerate(
        r.sequence(fields["checks"], f"{key}.checks") if "checks" in fields else []))
    if "checks" in fields and not checks:  # as `unchecked: ""`: an empty list is no evidence, said as if it were
        r.fail(fields["checks"], f"{key}.checks", "empty list (list the feature checks, or give `unchecked: why`)")
    unchecked = r.string(fields["unchecked"], f"{key}.unchecked") if "unchecked" in fields else None
    if checks and unchecked:
        r.fail(fields["unchecked"], f"{key}.unchecked", "a pin has either checks or an `unchecked:` reason, not both")
    description = r.string(fields["description"], f"{key}.description") if "description" in fields else None
    evidence = _read_evidence(r, fields["evidence"], f"{key}.evidence") if "evidence" in fields else None
    skip_unless_open = r.boolean(fields[SKIP_UNLESS_OPEN], f"{key}.{SKIP_UNLESS_OPEN}") \
        if SKIP_UNLESS_OPEN in fields else False
    if "unions" in fields:   # the pin's own word over the pin set's
        unions = r.boolean(fields["unions"], f"{key}.unions")
    if "each" in fields and r.boolean(fields["each"], f"{key}.each"):
        if len(series) == 1 and patches is not None and not patches.is_dir():
            r.fail(fields["each"], f"{key}.each", "`each: true` is for a folder of patches, not one file")
        pins = []
        for patch in series:
            sub_id = f"{pin_id}/{patch.name.removesuffix('.patch')}"
            if not PIN_ID_RE.match(sub_id):
                r.fail(fields["patches"], f"{key}.patches", f"patch {patch.name!r} makes a malformed pin id {sub_id!r} "
                                                            f"({PIN_ID_RULE})")
            pins.append(PinSpec(sub_id, patch, None, None, required, checks, unchecked, description, line, (patch,),
                                evidence=evidence, unions=unions))
        return pins
    return [PinSpec(pin_id, patches, pr, commit, required, checks, unchecked, description, line, series,
                    repo=repo if pr is not None else None, evidence=evidence, skip_unless_open=skip_unless_open,
                    unions=unions)]


def _read_repo(r: _Reader, node, key: str, base: Path) -> str:
    """A PR pin's own repository (a fork): a hosted git URL, or a local repository (as for `upstream:`)."""
    value = r.string(node, key)
    if re.match(r"^(https?|ssh|git)://", value) or re.match(r"^[\w.-]+@[\w.-]+:", value):
        if value.startswith(("http://", "https://")) and not re.match(r"^https?://[^/\s]+/\S+$", value):
            r.fail(node, key, f"malformed URL {value!r}")
        return value
    local = Path(unquote(urlsplit(value).path)) if value.startswith("file://") else r.local_path(node, key, base)[1]
    _check_local_repository(r, node, value, local, key)
    return str(local)


def _read_evidence(r: _Reader, node, key: str) -> tuple[str, ...]:
    """`evidence: [verify, kld]`: the kinds of evidence this pin needs, replacing the ones its files imply."""
    items = r.sequence(node, key)
    if not items:
        r.fail(node, key, f"empty list (give at least `verify`; kinds: {', '.join(EVIDENCE_KINDS)})")
    kinds: list[str] = []
    for i, item in enumerate(items):
        kind = r.string(item, f"{key}[{i}]")
        if kind not in EVIDENCE_KINDS:
            r.fail(item, f"{key}[{i}]", f"unknown evidence kind {kind!r} (kinds: {', '.join(EVIDENCE_KINDS)})")
        if kind in kinds:
            r.fail(item, f"{key}[{i}]", f"{kind!r} given twice")
        kinds.append(kind)
    return tuple(k for k in EVIDENCE_KINDS if k in kinds)


def _repository_of(url: str) -> tuple[str, str] | None:
    """(host, owner/repo) of a hosted git URL (https, ssh, git or scp-like), lower-cased; None if not one."""
    m = re.match(r"^[\w.-]+@(?P<host>[\w.-]+):(?P<path>[^/].*)$", url)
    if m and "://" not in url:
        host, path = m["host"], m["path"]
    elif re.match(r"^(https?|ssh|git)://", url):
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    else:
        return None
    path = path.strip("/").removesuffix(".git").lower()
    return host.lower(), path


repository_of = _repository_of   # the importers' name for it


def _check_pr_origin(r: _Reader, node, key: str, pr: PrRef, upstream: str, repo: str | None = None) -> None:
    """A PR pin is fetched from upstream as pull/N/head: a PR of another host or repository would
    silently be a different PR (or none). A pin with its own `repo:` (a fork) may name a PR of that one."""
    if repo is not None and (fork := _repository_of(repo)) is not None and \
            fork[1] == f"{pr.owner}/{pr.repo}".lower().removesuffix(".git"):
        return
    origin = _repository_of(upstream)
    if origin is None:  # a local path or file:// upstream: its hosting is unknown
        return
    host, repo = origin
    pr_host = (urlsplit(pr.url).hostname or "").lower()
    if pr_host != host:
        r.fail(node, key, f"PR {pr.url} is on {pr_host}, but upstream is on {host} "
                          f"(pinset fetches {pr.ref} from upstream)")
    pr_repo = f"{pr.owner}/{pr.repo}".lower().removesuffix(".git")
    if repo.count("/") == 1 and pr_repo != repo:
        r.fail(node, key, f"PR {pr.url} belongs to {pr.owner}/{pr.repo}, but upstream is {repo} "
                          f"(pinset fetches {pr.ref} from upstream: that would be another PR)")


def _read_check(r: _Reader, node, key: str) -> FeatureCheck:
    outer = r.mapping(node, key, set(CHECK_KINDS))
    if len(outer) != 1:
        r.fail(node, key, f"one check kind per entry ({', '.join(sorted(CHECK_KINDS))})")
    (kind, body), = outer.items()
    needed, allowed = CHECK_KINDS[kind]
    sub = f"{key}.{kind}"
    fields = r.mapping(body, sub, allowed)
    for name in sorted(needed - set(fields)):
        r.fail(body, f"{sub}.{name}", "missing")
    line = node.start_mark.line + 1
    feature = r.string(fields["feature"], f"{sub}.feature") if "feature" in fields else None
    if kind == "arch":
        arch = r.string(fields["name"], f"{sub}.name")
        if not ARCH_NAME_RE.match(arch):
            r.fail(fields["name"], f"{sub}.name", f"malformed architecture name {arch!r} (as llama.cpp names it: "
                                                  "qwen3moe, gpt-oss)")
        seed = _seed(r, fields["seed"], f"{sub}.seed") if "seed" in fields else ARCH_SEED
        return FeatureCheck(kind, name=arch, seed=seed, line=line, feature=feature)
    if kind == "mtmd":
        projector = r.string(fields["projector"], f"{sub}.projector") if "projector" in fields else None
        tests = r.string(fields["tests"], f"{sub}.tests") if "tests" in fields else None
        if tests is not None:
            _check_regex(r, fields["tests"], f"{sub}.tests", tests)
        elif projector is not None:
            tests = MTMD_PROJECTOR_TESTS
        return FeatureCheck(kind, tests=tests, projector=projector, line=line, feature=feature)
    if kind == "backend-op":
        op = r.string(fields["op"], f"{sub}.op")
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", op):
            r.fail(fields["op"], f"{sub}.op", f"malformed op name {op!r} (e.g. MUL_MAT)")
        params = r.string(fields["params"], f"{sub}.params") if "params" in fields else None
        if params is not None:
            _check_regex(r, fields["params"], f"{sub}.params", params)
        mode = r.string(fields["mode"], f"{sub}.mode") if "mode" in fields else "test"
        if mode not in ("test", "perf"):
            r.fail(fields["mode"], f"{sub}.mode", "must be test or perf")
        return FeatureCheck(kind, op=op, params=params, mode=mode, line=line, feature=feature)
    if kind == "ctest":
        return FeatureCheck(kind, name=r.string(fields["name"], f"{sub}.name"), line=line, feature=feature)
    argv = tuple(r.string(n, f"{sub}.argv[]") for n in r.sequence(fields["argv"], f"{sub}.argv"))
    if not argv:
        r.fail(fields["argv"], f"{sub}.argv", "empty list")
    expect = r.string(fields["expect"], f"{sub}.expect")
    _check_regex(r, fields["expect"], f"{sub}.expect", expect)
    timeout = r.seconds(fields["timeout"], f"{sub}.timeout") if "timeout" in fields else 600.0
    return FeatureCheck(kind, argv=argv, expect=expect, timeout=timeout, line=line, feature=feature)


def _seed(r: _Reader, node, key: str) -> int:
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":int") and re.fullmatch(r"[0-9]{1,19}", node.value) \
            and int(node.value) < 2 ** 63:
        return int(node.value)
    r.fail(node, key, f"must be a whole number from 0 to 2^63-1, got {_kind(node)}")


def _check_regex(r: _Reader, node, key: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        r.fail(node, key, f"bad regular expression: {exc}")
