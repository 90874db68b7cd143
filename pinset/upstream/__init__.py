"""Upstream sources: a private git mirror in the cache, and llama.cpp trees vendored in PyPI sdists."""

from pinset.upstream.builds import Build, resolve_builds  # noqa: F401
from pinset.upstream.mirror import Mirror  # noqa: F401
