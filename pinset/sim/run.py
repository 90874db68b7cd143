"""The sim stage as one call: config -> builds -> prepared pins -> SimResult (used by sim, apply, verify)."""

from __future__ import annotations

from dataclasses import dataclass

from pinset.config.schema import BUILD_RE, PYPI_BUILD_RE, PinSet
from pinset.config.selectors import looks_like_selector, parse_selector, split_builds
from pinset.errors import PinsetError
from pinset.sim.engine import Simulator
from pinset.sim.model import BuildResult, SimResult
from pinset.sim.pins import PreparedPin, carried_symbols, prepare_pins
from pinset.store import Store
from pinset.upstream.builds import Build, resolve_builds
from pinset.upstream.mirror import Mirror


@dataclass
class Simulation:
    """The simulated builds and the mirror holding their trees: use as `with simulate(...) as sim:`,
    which closes the mirror (its lock and temporary files) however the block ends."""

    pinset: PinSet
    builds: list[Build]
    result: SimResult
    mirror: Mirror                      # open until the `with` block ends
    prepared: dict[str, PreparedPin]

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc) -> None:
        self.mirror.close()

    def feature_symbols(self, build: BuildResult) -> set[str]:
        """Feature symbols of the pins `build` carries (what verify looks for in its programs)."""
        return carried_symbols(self.prepared, build)

    def build(self, name: str):
        """(Build, BuildResult) for one build name."""
        for build, result in zip(self.builds, self.result.builds):
            if build.name == name:
                return build, result
        raise PinsetError(f"build {name!r} is not among the simulated builds")


def pick_builds(pinset: PinSet, selection: str | None, flag: str = "--builds") -> list[str]:
    """The builds of pins.yaml, or those named by `flag` (which may add new ones); errors name that flag."""
    if not selection:
        return list(pinset.builds)
    pieces = [piece.strip() for piece in selection.split(",")]
    if not any(pieces):
        raise PinsetError(f"{flag}: empty list")
    for i, piece in enumerate(pieces):
        if not piece:
            raise PinsetError(f"{flag} {selection!r}: entry {i + 1} is empty")
    names = split_builds(selection)
    for i, name in enumerate(names):
        if name in names[:i]:
            raise PinsetError(f"{flag}: duplicate build {name!r}")
        if looks_like_selector(name):
            try:
                names[i] = str(parse_selector(name))
            except ValueError as exc:
                raise PinsetError(f"{flag}: {exc}") from None
        elif not (PYPI_BUILD_RE.match(name) or BUILD_RE.match(name)):
            raise PinsetError(f"{flag}: malformed build {name!r} (a tag, a commit sha, pypi:PACKAGE==VERSION, "
                              "or a selector tags:PATTERN:N / pypi:PACKAGE>=VERSION)")
        if not name.startswith("pypi:") and pinset.upstream is None:
            raise PinsetError(f"{flag}: {name!r} needs an `upstream:` in {pinset.path.name}")
    return names


def simulate(pinset: PinSet, build_names: list[str], store: Store) -> Simulation:
    mirror = Mirror(store.mirror)
    try:
        builds = resolve_builds(build_names, pinset.upstream, pinset.path.parent, store, mirror)
        prepared = prepare_pins(pinset, store, mirror)
        result = Simulator(pinset, mirror, prepared).run(builds)
    except BaseException:
        mirror.close()
        raise
    return Simulation(pinset, builds, result, mirror, prepared)
