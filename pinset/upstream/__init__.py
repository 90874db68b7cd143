"""Upstream sources: a private git mirror in the cache, and llama.cpp trees vendored in PyPI sdists."""
