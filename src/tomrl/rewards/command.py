"""Score completions with a reward: tomrl reward score --reward NAME --input FILE --out FILE.

    tomrl reward score --reward strict --input completions.jsonl --out scored.jsonl
    tomrl reward score --reward paper --prefill '' --input cot_completions.jsonl --out scored.jsonl
    tomrl reward score --reward fidelity --input traces.jsonl --out scored.jsonl --skip-bad   # rows need story, source
    tomrl reward score --reward fidelity --option timing=final --option contradiction_penalty=2 --input traces.jsonl --out scored.jsonl

Each input line holds ``completion`` (text, or a list of chat messages) and ``answer`` (the gold);
other fields are kept and passed to the reward as columns (a ``prefill`` field overrides
``--prefill`` for its row). Each output line adds ``score``, ``format_ok``, ``correct``,
``extracted``, ``components`` and ``reason``; the file is written atomically, and the mean score,
format rate and accuracy (95 % Wilson interval, n) are printed. Any string scores (a malformed
completion is a format failure); only a line that is not a JSON object, or lacks a string
``completion`` / ``answer``, is an input error (exit 2, naming file, line and field), which
``--skip-bad`` leaves out of the output and counts instead. ``--option KEY=VALUE`` sets an option of
the reward (the keys of a training config's ``reward_options.NAME``, listed by ``--help``; values read
as YAML), checked as the training config checks them.
"""

from __future__ import annotations

import argparse
import json


def register(parser: argparse.ArgumentParser) -> None:
    from tomrl.rewards.functions import REWARDS, reward_options_help, rewards_help

    parser.add_argument("--reward", required=True, choices=list(REWARDS), help=f"reward to apply: {rewards_help()}")
    parser.add_argument("--input", required=True, help="JSONL with 'completion' and 'answer' per line")
    parser.add_argument("--out", required=True, help="JSONL to write, one scored row per input row")
    parser.add_argument(
        "--prefill",
        default="<think>",
        help="text the prompts ended with, before the completion (default '<think>', Paper A's; '' for none)",
    )
    parser.add_argument("--skip-bad", action="store_true", help="skip bad input lines (counted and listed) instead of stopping at the first")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="an option of the reward (repeatable; value read as YAML), as reward_options.NAME.KEY of a training config; listed below",
    )
    parser.epilog = "reward options (--option KEY=VALUE, or reward_options.NAME.KEY in a training config):\n" + "\n".join(
        f"  {line}" for line in reward_options_help().splitlines())


def _completion_ok(value) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(m, dict) for m in value)


SHOWN_SKIPS = 5


def _score_row(reward, row: dict, where: str):
    """The reward's result for one input row; a row the reward cannot take raises BadInputError."""
    from tomrl.io import BadInputError

    if "completion" not in row:
        raise BadInputError(f"{where}: field 'completion': missing")
    if not _completion_ok(row["completion"]):
        raise BadInputError(f"{where}: field 'completion': expected a string or a list of messages, got {type(row['completion']).__name__}")
    if reward.needs and "answer" in reward.needs:
        if "answer" not in row:
            raise BadInputError(f"{where}: field 'answer': missing")
        if not isinstance(row["answer"], str):
            raise BadInputError(f"{where}: field 'answer': expected a string, got {type(row['answer']).__name__}")
    columns = {key: value for key, value in row.items() if key not in ("completion", "answer", "prefill")}
    prefill = row.get("prefill")
    if prefill is not None and not isinstance(prefill, str):
        raise BadInputError(f"{where}: field 'prefill': expected a string, got {type(prefill).__name__}")
    try:
        return reward.score(row["completion"], answer=row.get("answer"), prefill=prefill, **columns)
    except ValueError as error:  # e.g. a fidelity row without its story
        raise BadInputError(f"{where}: {error}") from None


def reward_from_args(name: str, prefill: str, option_items: list[str]):
    """The reward ``name`` with the ``--option KEY=VALUE`` items (a ConfigError names what is wrong)."""
    from tomrl.config import ConfigError, parse_overrides
    from tomrl.rewards.functions import make_reward

    for item in option_items:
        if "=" not in item:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE")
    options = parse_overrides(option_items)
    try:
        return make_reward(name, prefill=prefill, **options)
    except TypeError as error:  # a reward that takes no options
        raise ConfigError(f"--option: {error}") from None


def run(args: argparse.Namespace) -> int:
    from tomrl.io import BadInputError, atomic_open, scan_jsonl
    from tomrl.stats import accuracy

    from tomrl.outputs import check_outputs

    reward = reward_from_args(args.reward, args.prefill, args.option)
    check_outputs({"--out": args.out}, inputs={"--input": args.input})
    scores: list[float] = []
    format_flags: list[bool] = []
    correct_flags: list[bool] = []
    not_applicable = 0
    skipped: list[str] = []
    with atomic_open(args.out) as handle:
        for line_number, row, line_error in scan_jsonl(args.input):
            try:
                if line_error is not None:
                    raise BadInputError(line_error)
                result = _score_row(reward, row, f"{args.input}:{line_number}")
            except BadInputError as error:
                if not args.skip_bad:
                    raise
                skipped.append(str(error))
                continue
            scored = {**row, **{k: v for k, v in result.to_dict().items() if k != "reward"}}
            # ensure_ascii: lone surrogates (legal in JSON escapes) cannot be written as UTF-8.
            handle.write(json.dumps(scored, ensure_ascii=True) + "\n")
            if result.score is None:
                not_applicable += 1
                continue
            scores.append(result.score)
            format_flags.append(result.format_ok)
            correct_flags.append(result.correct)
    total = len(scores) + not_applicable
    if skipped:
        print(f"{args.input}: skipped {len(skipped)} bad lines (--skip-bad); they are not in {args.out}")
        for reason in skipped[:SHOWN_SKIPS]:
            print(f"  skipped: {reason}")
        if len(skipped) > SHOWN_SKIPS:
            print(f"  … and {len(skipped) - SHOWN_SKIPS} more")
    if total == 0:
        print(f"{args.input}: no rows; wrote an empty {args.out}")
        return 0
    options = f", options {reward.options}" if hasattr(reward, "options") else ""
    print(f"reward {args.reward} (prefill {args.prefill!r}{options}) on {args.input}: {total} rows -> {args.out}")
    if scores:
        print(f"  mean score   {sum(scores) / len(scores):.4f}  (n={len(scores)})")
        print(f"  format ok    {accuracy(format_flags).format()}")
        print(f"  {reward.correct_means:<12} {accuracy(correct_flags).format()}")
    if not_applicable:
        print(f"  not applicable (score null): {not_applicable}")
    return 0
