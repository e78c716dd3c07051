"""Placeholder for CLI verbs whose stage is not built yet: they exist, say so, and exit 3."""

from __future__ import annotations

import argparse


def placeholder(issue: int, what: str):
    """Return ``(register, run)`` for a verb that accepts any arguments and reports it is pending."""

    def register(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(args: argparse.Namespace) -> int:
        raise NotImplementedError(f"{what} is not implemented yet (issue #{issue}).")

    return register, run
