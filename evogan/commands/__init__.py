"""One module per ``evogan`` subcommand: ``add_parser(subparsers, name)`` sets ``handler``."""
