"""`pinset matrix`: its model (model.py) and the building of its cells (cells.py)."""
