"""Load a benchmark, or build a recipe, as unified JSONL: tomrl data load NAME --out FILE.

    tomrl data load --list                                      # every data set, recipe and card
    tomrl data load hitom --card                                # one data set's card
    tomrl data load hitom --out data/hitom.jsonl                # Hi-ToM, CoT-prompt labels
    tomrl data load tomi split=train --out data/tomi_train.jsonl
    tomrl data load exploretom story_form=infilled exclude_binary=true --out e.jsonl
    tomrl data load hitom --path ~/Hi-ToM_dataset/Hi-ToM_data.json --out hitom.jsonl   # your own copy
    tomrl data load tomrl-paper-train --data /mnt/benchmarks --out train.jsonl          # another data root
    tomrl data load recipe:tomrl-paper --out data/tomrl-paper   # a recipe: a folder of splits
    tomrl data load recipe:my_recipe.yaml --out data/mine

Loader options are ``key=value`` words right after the name (values parsed as YAML). The data root is ``$TOMRL_DATA`` or
``<repo>/../shared/data``; ``--data`` overrides both. A recipe writes ``train.jsonl``,
``validation.jsonl``, ``test/<name>.jsonl``, the resolved ``recipe.yaml`` and ``manifest.json`` as one
folder, all or nothing (built in ``OUT.partial``, then renamed; an earlier recipe folder at ``OUT`` is
replaced whole, any other non-empty folder is refused).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="data set name (see --list), or recipe:NAME / recipe:FILE.yaml")
    parser.add_argument("options", nargs="*", metavar="key=value", help="loader options, e.g. split=train")
    parser.add_argument("--out", help="output JSONL file (a folder for recipe:…)")
    parser.add_argument("--path", help="the data set's file or folder (e.g. your copy of the original release)")
    parser.add_argument("--data", help="data root holding hitom/, tomi/, … (default: $TOMRL_DATA or ../shared/data)")
    parser.add_argument("--list", action="store_true", help="list the data sets and recipes")
    parser.add_argument("--card", action="store_true", help="print the data set's card and options")


def _card_text(name: str) -> str:
    from tomrl.loaders.registry import get_loader

    loader = get_loader(name)
    card = loader.card
    lines = [f"{name}: {card.title}", f"  source:   {card.source}", f"  license:  {card.license}", f"  paper:    {card.paper}"]
    if card.evaluation_only:
        lines.append("  EVALUATION ONLY: recipes refuse it in train/validation splits")
    if card.counts:
        lines.append("  counts:   " + "; ".join(f"{k} {v:,}" for k, v in card.counts.items()))
    for problem in card.known_problems:
        lines.append(f"  problem:  {problem}")
    for note in card.notes:
        lines.append(f"  note:     {note}")
    for key, option in loader.options.items():
        choices = f" ({' | '.join(map(str, option.choices))})" if option.choices else ""
        lines.append(f"  option:   {key}={option.default}{choices}: {option.help}")
    if card.how_to_obtain:
        lines.append(f"  obtain:   {card.how_to_obtain}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from tomrl.config import ConfigError, parse_overrides

    if args.data:
        os.environ["TOMRL_DATA"] = str(Path(args.data).expanduser())
    if args.list:
        from tomrl.loaders.registry import LOADERS
        from tomrl.loaders.recipes import load_recipe, recipe_names

        print("Data sets (tomrl data load NAME --out FILE):")
        for name, loader in LOADERS.items():
            rows = loader.card.counts.get("rows")
            flag = "  [evaluation only]" if loader.card.evaluation_only else ""
            print(f"  {name:34s} {f'{rows:,} rows' if rows else '':>12s}  {loader.card.title}{flag}")
        print("\nRecipes (tomrl data load recipe:NAME --out DIR):")
        for name in recipe_names():
            recipe = load_recipe(name)
            print(f"  {name:34s} paper {recipe.paper:5s} {recipe.description.strip().split('. ')[0][:90]}")
        return 0
    if not args.name:
        raise ConfigError("give a data set name (tomrl data load --list shows them)")
    if args.card:
        print(_card_text(args.name))
        return 0
    if args.out is None:
        raise ConfigError("--out is required")
    from tomrl.outputs import check_outputs

    # --path is the loader's input: a file, or a folder of files (nothing may be written inside it).
    folder = args.path if args.path and Path(args.path).expanduser().is_dir() else None
    recipe = args.name.removeprefix("recipe:") if args.name.startswith("recipe:") else None
    recipe_file = recipe if recipe and Path(recipe).expanduser().is_file() else None  # else a shipped recipe's name
    check_outputs({"--out": args.out}, inputs={"--path": args.path, "recipe:": recipe_file}, data_folders={"--path": folder})
    if args.name.startswith("recipe:"):
        if args.options or args.path:
            raise ConfigError("recipes take no loader options or --path: put them in the recipe's components")
        from tomrl.loaders.recipes import write_recipe
        from tomrl.outputs import check_folder

        check_folder(args.out, "recipe", key="--out")  # not a train run, an eval, a study … (the whole folder is replaced)
        _, manifest = write_recipe(args.name.removeprefix("recipe:"), args.out)
        print(f"recipe {manifest['recipe']} (paper {manifest['paper']}, seed {manifest['seed']}) -> {args.out}")
        for key, info in manifest["files"].items():
            print(f"  {info['file']:42s} {info['rows']:>7,} rows")
        for note in manifest["notes"]:
            print(f"  note: {note}", file=sys.stderr)
        return 0
    from tomrl.loaders.registry import get_loader, load
    from tomrl.schema import write_examples

    options = parse_overrides(args.options)
    examples = load(args.name, args.path, **options)
    count = write_examples(args.out, examples)
    by_order: dict = {}
    for e in examples:
        by_order[e.order] = by_order.get(e.order, 0) + 1
    orders = ", ".join(f"{'n/a' if k is None else k}: {v}" for k, v in sorted(by_order.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
    print(f"{args.name}: {count:,} examples -> {args.out} (by order: {orders})")
    card = get_loader(args.name).card
    if card.evaluation_only:
        print(f"note: {args.name} is evaluation-only: its authors forbid training on it.", file=sys.stderr)
    disputed = sum(1 for e in examples if e.meta.get("oracle_disputes"))
    if disputed:
        print(f"note: the belief oracle disputes {disputed} labels (meta.oracle_disputes).", file=sys.stderr)
    return 0
