"""Subcommands of `python -m softswitch`: one module each, with register(subparsers)."""
