"""pinset: keep a llama.cpp pin set alive on moving upstream builds."""

__version__ = "0.1.0"
# The version of every JSON document pinset writes (and the versions `pinset report` reads) is in
# pinset.results.SCHEMAS / READS, the one registry.
