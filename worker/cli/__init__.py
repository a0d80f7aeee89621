"""The `longdoc` command line: one module per group of commands, registered in main.py."""

from worker.cli.main import cli, main

__all__ = ["cli", "main"]
