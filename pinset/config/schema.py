"""The pins.yaml schema.

The file is parsed into YAML nodes first (not plain dicts) so that every error can name the line
it comes from. Validation stops at the first problem: one clear message, exit code 2.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pinset.errors import ConfigError

SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
FULL_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
PR_URL_RE = re.compile(r"^https?://[^/]+/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)/pull/(?P<number>\d+)/?$")
PYPI_BUILD_RE = re.compile(r"^pypi:(?P<package>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)$")
PIN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.#/+-]*$")
BUILD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./+-]*$")

TOP_KEYS = {"upstream", "builds", "pins", "cuda", "description", "gpus"}
PIN_KEYS = {"id", "patches", "pr", "commit", "required", "checks", "unchecked", "description"}
CUDA_KEYS = {"architectures", "flags"}
GPU_CLASS_KEYS = {"runs-on", "architectures"}
GPU_CLASS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
ARCH_RE = re.compile(r"[0-9a-z;,_-]+")
CHECK_KINDS = {
    "backend-op": ({"op"}, {"op", "params", "mode"}),
    "ctest": ({"name"}, {"name"}),
    "command": ({"argv", "expect"}, {"argv", "expect", "timeout"}),
}


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
    """One per-pin check run by `pinset verify` (kind: backend-op, ctest or command)."""

    kind: str
    op: str | None = None
    params: str | None = None  # regex on the test-backend-ops case description
    mode: str = "test"
    name: str | None = None
    argv: tuple[str, ...] = ()
    expect: str | None = None
    timeout: float = 600.0
    line: int = 0

    def describe(self) -> str:
        if self.kind == "backend-op":
            return f"backend-op {self.op}" + (f" /{self.params}/" if self.params else "")
        if self.kind == "ctest":
            return f"ctest {self.name}"
        return "command " + " ".join(self.argv)


@dataclass(frozen=True)
class PinSpec:
    id: str
    patches: Path | None = None  # folder of format-patch files (absolute)
    pr: PrRef | None = None
    commit: str | None = None
    required: bool = True
    checks: tuple[FeatureCheck, ...] = ()
    unchecked: str | None = None
    description: str | None = None
    line: int = 0

    @property
    def kind(self) -> str:
        return "patches" if self.patches is not None else "pr"

    def patch_files(self) -> list[Path]:
        return sorted(p for p in self.patches.iterdir() if p.is_file() and p.suffix == ".patch")


@dataclass(frozen=True)
class GpuClass:
    """A GPU class the pin set is verified on (pins.yaml `gpus:`): the CI runners that hold it and the
    CUDA architectures its builds are made for."""

    name: str
    runs_on: tuple[str, ...]    # runner labels (GitHub Actions `runs-on`)
    architectures: str          # CMAKE_CUDA_ARCHITECTURES of this class's builds ("90")
    line: int = 0


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

    @property
    def digest(self) -> str:
        """Hash of the pin set's content: the file plus every patch it names."""
        h = hashlib.sha256(self.text.encode())
        for pin in self.pins:
            h.update(pin.id.encode())
            if pin.patches is not None:
                for patch in pin.patch_files():
                    h.update(patch.read_bytes())
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

    def fail(self, node, key, message):
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
            return node.value.lower() in ("true", "yes", "on")
        self.fail(node, key, f"must be true or false, got {node.value!r}" if isinstance(node, yaml.ScalarNode) else "must be true or false")

    def number(self, node, key) -> float:
        if isinstance(node, yaml.ScalarNode) and (node.tag.endswith(":int") or node.tag.endswith(":float")):
            return float(node.value)
        self.fail(node, key, "must be a number")

    def sequence(self, node, key):
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, key, f"must be a list, got {_kind(node)}")
        return node.value


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
    if not path.is_file():
        raise ConfigError(path, 0, None, "no such file")
    text = path.read_text(encoding="utf-8")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(path, mark.line + 1 if mark else 0, None, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
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
        name = r.string(node, "builds[]")
        if not (PYPI_BUILD_RE.match(name) or BUILD_RE.match(name)):
            r.fail(node, "builds[]", f"malformed build {name!r} (a tag, a commit sha or pypi:PACKAGE==VERSION)")
        if name in builds:
            r.fail(node, "builds[]", f"duplicate build {name!r}")
        if not PYPI_BUILD_RE.match(name) and upstream is None:
            r.fail(node, "builds[]", f"build {name!r} needs an `upstream:` git URL or path")
        builds.append(name)
    if not builds:
        r.fail(top["builds"], "builds", "empty list")

    cuda_arch = None
    cuda_flags: list[str] = []
    if "cuda" in top:
        cuda = r.mapping(top["cuda"], "cuda", CUDA_KEYS)
        for node in (r.sequence(cuda["flags"], "cuda.flags") if "flags" in cuda else []):
            flag = r.string(node, "cuda.flags[]")
            if not re.fullmatch(r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*", flag):
                r.fail(node, "cuda.flags[]", f"malformed CMake flag {flag!r} (e.g. -DGGML_CUDA_FA=OFF)")
            cuda_flags.append(flag)
        if "architectures" in cuda:
            cuda_arch = r.string(cuda["architectures"], "cuda.architectures")
            if not ARCH_RE.fullmatch(cuda_arch):
                r.fail(cuda["architectures"], "cuda.architectures", f"malformed {cuda_arch!r} (e.g. \"90\" or \"86;90\")")

    gpus = _read_gpus(r, top["gpus"]) if "gpus" in top else ()

    pins: list[PinSpec] = []
    seen: dict[str, int] = {}
    pin_nodes = r.sequence(top["pins"], "pins") if "pins" in top else []
    for index, node in enumerate(pin_nodes):
        pin = _read_pin(r, node, f"pins[{index}]", path.parent, upstream)
        if pin.id in seen:
            r.fail(node, f"pins[{index}].id", f"duplicate id {pin.id!r} (first on line {seen[pin.id]})")
        seen[pin.id] = pin.line
        pins.append(pin)
    if require_pins and not pins:
        r.fail(top.get("pins", root), "pins", "no pins listed (this command needs at least one)")

    description = r.string(top["description"], "description") if "description" in top else None
    return PinSet(path.resolve(), upstream, tuple(builds), tuple(pins), cuda_arch, description, text,
                  tuple(cuda_flags), gpus)


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
        classes.append(GpuClass(name, tuple(labels), arch, body.start_mark.line + 1))
    if not classes:
        r.fail(node, "gpus", "empty mapping (name at least one GPU class, or leave `gpus:` out)")
    return tuple(classes)


def _check_upstream(r: _Reader, node, value: str, base: Path) -> None:
    if re.match(r"^(https?|ssh|git|file)://", value) or re.match(r"^[\w.-]+@[\w.-]+:", value):
        if value.startswith(("http://", "https://")) and not re.match(r"^https?://[^/\s]+/\S+$", value):
            r.fail(node, "upstream", f"malformed URL {value!r}")
        return
    local = (base / value).expanduser()
    if not local.exists():
        r.fail(node, "upstream", f"not a URL and no such path: {value!r}")


def _read_pin(r: _Reader, node, key: str, base: Path, upstream: str | None) -> PinSpec:
    fields = r.mapping(node, key, PIN_KEYS)
    if "id" not in fields:
        r.fail(node, f"{key}.id", "missing")
    pin_id = r.string(fields["id"], f"{key}.id")
    if not PIN_ID_RE.match(pin_id):
        r.fail(fields["id"], f"{key}.id", f"malformed id {pin_id!r} (letters, digits and _.#/+-)")
    line = node.start_mark.line + 1
    has_patches, has_pr = "patches" in fields, "pr" in fields
    if has_patches == has_pr:
        r.fail(node, key, "give exactly one of `patches:` (a folder of format-patch files) or `pr:` (+ `commit:`)")

    patches = pr = commit = None
    if has_patches:
        if "commit" in fields:
            r.fail(fields["commit"], f"{key}.commit", "only PR pins take a commit")
        rel = r.string(fields["patches"], f"{key}.patches")
        patches = (base / rel).resolve()
        if not patches.is_dir():
            r.fail(fields["patches"], f"{key}.patches", f"no such folder: {rel}")
        if not any(p.suffix == ".patch" for p in patches.iterdir()):
            r.fail(fields["patches"], f"{key}.patches", f"folder {rel} has no *.patch files")
    else:
        url = r.string(fields["pr"], f"{key}.pr")
        m = PR_URL_RE.match(url)
        if not m:
            r.fail(fields["pr"], f"{key}.pr", f"malformed PR URL {url!r} (https://HOST/OWNER/REPO/pull/N)")
        pr = PrRef(url.rstrip("/"), m["owner"], m["repo"], int(m["number"]))
        if "commit" not in fields:
            r.fail(node, f"{key}.commit", "missing (the exact reviewed commit sha of the PR)")
        commit = r.string(fields["commit"], f"{key}.commit").lower()
        if not FULL_SHA_RE.match(commit):
            r.fail(fields["commit"], f"{key}.commit", f"malformed sha {commit!r} (need 40 hex digits)")
        if upstream is None:
            r.fail(fields["pr"], f"{key}.pr", "PR pins need an `upstream:` git URL or path to fetch from")

    required = r.boolean(fields["required"], f"{key}.required") if "required" in fields else True
    checks = tuple(_read_check(r, n, f"{key}.checks[{i}]") for i, n in enumerate(
        r.sequence(fields["checks"], f"{key}.checks") if "checks" in fields else []))
    unchecked = r.string(fields["unchecked"], f"{key}.unchecked") if "unchecked" in fields else None
    if checks and unchecked:
        r.fail(fields["unchecked"], f"{key}.unchecked", "a pin has either checks or an `unchecked:` reason, not both")
    description = r.string(fields["description"], f"{key}.description") if "description" in fields else None
    return PinSpec(pin_id, patches, pr, commit, required, checks, unchecked, description, line)


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
        return FeatureCheck(kind, op=op, params=params, mode=mode, line=line)
    if kind == "ctest":
        return FeatureCheck(kind, name=r.string(fields["name"], f"{sub}.name"), line=line)
    argv = tuple(r.string(n, f"{sub}.argv[]") for n in r.sequence(fields["argv"], f"{sub}.argv"))
    if not argv:
        r.fail(fields["argv"], f"{sub}.argv", "empty list")
    expect = r.string(fields["expect"], f"{sub}.expect")
    _check_regex(r, fields["expect"], f"{sub}.expect", expect)
    timeout = r.number(fields["timeout"], f"{sub}.timeout") if "timeout" in fields else 600.0
    return FeatureCheck(kind, argv=argv, expect=expect, timeout=timeout, line=line)


def _check_regex(r: _Reader, node, key: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        r.fail(node, key, f"bad regular expression: {exc}")
