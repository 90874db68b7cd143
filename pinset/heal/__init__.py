"""Healing a pin set: the work of `pinset refresh`, `pinset rebase` and `rebase --as-series` (docs/heal.md), above sim.

What sim itself uses lives below it: the apply modes and ledger resolution in pinset.sim (modes, resolve), the
ledger file format in pinset.config.ledger.
"""
