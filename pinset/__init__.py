"""pinset: keep a llama.cpp pin set alive on moving upstream builds."""

__version__ = "0.1.0"

# Version of the JSON documents written by every verb; `pinset report` refuses other versions.
SCHEMA_VERSION = 1
