"""pins.yaml: the schema in one place, with errors that name file, key and line."""
