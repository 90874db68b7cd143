"""Healing a pin set: apply modes, the resolution ledger, `pinset refresh` and `pinset rebase` (docs/heal.md)."""
