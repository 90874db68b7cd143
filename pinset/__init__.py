"""pinset: keep a llama.cpp pin set alive on moving upstream builds."""

__version__ = "0.1.0"

# Version of the JSON documents of sim, verify, kld and bench; each kind's own version (and the versions
# `pinset report` reads) is in pinset.results.SCHEMAS / READS.
SCHEMA_VERSION = 1
