"""Arguments shared by several verbs."""

from __future__ import annotations

import argparse

from pinset.config.schema import load_pinset
from pinset.store import Store


def add_config_args(parser: argparse.ArgumentParser, builds: bool = True) -> None:
    parser.add_argument("-c", "--config", default="pins.yaml", help="pin set file (default: pins.yaml)")
    if builds:
        parser.add_argument("--builds", help="comma-separated builds or selectors (tags:b*:3, pypi:PKG>=V) "
                                             "to use instead of pins.yaml's")
    parser.add_argument("--cache", help="cache folder (default: $PINSET_CACHE or $XDG_CACHE_HOME/pinset)")


def open_config(args, require_pins: bool = True):
    pinset = load_pinset(args.config, require_pins=require_pins)
    return pinset, Store.open(args.cache)
