"""pins.yaml: the schema in one place, with errors that name file, key and line."""

from pinset.config.schema import (  # noqa: F401
    FeatureCheck,
    PinSet,
    PinSpec,
    PrRef,
    load_pinset,
)
