"""Generate Hi-ToM- or ToMi-style data: tomrl data generate hitom --n N --seed S --out FILE.

    tomrl data generate hitom --n 1000 --seed 0 --out data/hitom_generated.jsonl
    tomrl data generate hitom --n 500 --orders 0,1 --lengths 1 --deception off --out easy.jsonl
    tomrl data generate hitom --n 2000 --stories 600 --orders 0,1,2,3 --split train --out train.jsonl
    tomrl data generate hitom --n 600 --orders 4 --split test --exclude train.jsonl --out test_o4.jsonl
    tomrl data generate hitom --n 600 --split test --exclude messy.jsonl --skip-bad --out test.jsonl
    tomrl data generate hitom --n 3000 --split-fractions train=0.8,validation=0.1,test=0.1 --out all.jsonl
    tomrl data generate tomi --n 600 --stories 100 --out tomi_generated.jsonl
    tomrl data generate hitom --config configs/generate/hitom_paper_a_train.yaml --out train.jsonl seed=3

Writes unified-schema JSONL (:mod:`tomrl.schema`) atomically and prints counts per split, order
and question type. The options are shortcuts for config keys; any key of GenerateConfig (listed
below) can also be given as ``key=value`` after the options. Same config and seed → the same bytes.
"""

from __future__ import annotations

import argparse

from tomrl.config import ConfigError, describe_text, load_config
from tomrl.generators.config import GenerateConfig


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _fractions(text: str) -> dict[str, float]:
    result = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            result[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected split=fraction pairs like train=0.8,test=0.2, got {text!r}") from None
    return result


def register(parser: argparse.ArgumentParser) -> None:
    parser.epilog = describe_text(GenerateConfig)
    parser.add_argument("benchmark", choices=["hitom", "tomi"], help="story style")
    parser.add_argument("--out", required=True, help="output JSONL file (unified schema)")
    parser.add_argument("--config", help="YAML file with GenerateConfig keys (configs/generate/*.yaml)")
    parser.add_argument("--n", type=int, help="number of questions")
    parser.add_argument("--seed", type=int, help="random seed")
    parser.add_argument("--stories", type=int, help="number of distinct stories (default: one per question)")
    parser.add_argument("--orders", type=_int_list, help="Hi-ToM orders, e.g. 0,1,2,3")
    parser.add_argument("--lengths", type=_int_list, help="Hi-ToM chapters per story, e.g. 1,2,3")
    parser.add_argument("--deception", choices=["on", "off", "both"], help="Hi-ToM claims and tells")
    parser.add_argument("--agents", type=int, help="Hi-ToM agents per story (2-5)")
    parser.add_argument("--split", choices=["train", "validation", "test"], help="put every story in this split")
    parser.add_argument("--split-fractions", type=_fractions, help="e.g. train=0.8,validation=0.1,test=0.1")
    parser.add_argument("--exclude", action="append", default=[], help="JSONL file whose stories must not be generated (repeatable)")
    parser.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip (and count) bad lines of the --exclude files instead of stopping; their story texts stay excluded",
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="any GenerateConfig key")
    _accept_trailing_overrides(parser)


def _accept_trailing_overrides(parser: argparse.ArgumentParser) -> None:
    """Let ``key=value`` follow the options too (argparse alone stops after the first positionals)."""
    parse_known = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        namespace, extras = parse_known(args, namespace)
        trailing = [e for e in extras if "=" in e and not e.startswith("-")]
        namespace.overrides = list(namespace.overrides or []) + trailing
        return namespace, [e for e in extras if e not in trailing]

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def config_from_args(args: argparse.Namespace) -> GenerateConfig:
    overrides = [f"benchmark={args.benchmark}"]
    for key in ("n", "seed", "stories", "agents"):
        value = getattr(args, key)
        if value is not None:
            overrides.append(f"{key}={value}")
    if args.orders is not None:
        overrides.append(f"orders={args.orders}")
    if args.lengths is not None:
        overrides.append(f"lengths={args.lengths}")
    if args.deception is not None:
        overrides.append("deception=" + {"on": "[true]", "off": "[false]", "both": "[false, true]"}[args.deception])
    if args.split is not None and args.split_fractions is not None:
        raise ConfigError("give --split or --split-fractions, not both")
    if args.split is not None:
        overrides.append(f"split_fractions={{{args.split}: 1.0}}")
    if args.split_fractions is not None:
        overrides.append("split_fractions={" + ", ".join(f"{k}: {v}" for k, v in args.split_fractions.items()) + "}")
    if args.exclude:
        overrides.append("exclude_stories_from=[" + ", ".join(f"'{p}'" for p in args.exclude) + "]")
    return load_config(GenerateConfig, args.config, overrides + list(args.overrides))


def run(args: argparse.Namespace) -> int:
    from collections import Counter

    from tomrl.generators import generate
    from tomrl.outputs import check_outputs
    from tomrl.schema import write_examples

    cfg = config_from_args(args)
    # --exclude and exclude_stories_from= (flag, config file or override) end up in one list.
    check_outputs({"--out": args.out}, inputs={"--config": args.config, "--exclude": cfg.exclude_stories_from})
    reports: list = []
    examples = generate(cfg, skip_bad=args.skip_bad, reports=reports)
    for report in reports:
        if report.skipped:
            print(f"{report.path}: skipped {len(report.skipped)} bad lines (first: {report.skipped[0]})")
    write_examples(args.out, examples)
    stories = Counter(e.split for e in {e.story_id: e for e in examples}.values())
    print(f"wrote {len(examples)} {cfg.benchmark} questions about {sum(stories.values())} stories to {args.out} (seed {cfg.seed})")
    for split in ("train", "validation", "test"):
        subset = [e for e in examples if e.split == split]
        if not subset:
            continue
        by_type = Counter(e.question_type for e in subset)
        kinds = ", ".join(f"{name} {count}" for name, count in sorted(by_type.items()))
        print(f"  {split}: {len(subset)} questions, {stories[split]} stories — {kinds}")
    return 0
