"""One module per verb: each has add_parser(subparsers) and run(args) -> exit code."""
