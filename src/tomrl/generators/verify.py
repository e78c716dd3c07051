"""Re-derive official Hi-ToM / ToMi labels with the oracle: tomrl data verify hitom.

    tomrl data verify hitom                 # Hi-ToM CoT-prompt labels (and VP labels), every disagreement explained
    tomrl data verify tomi                  # ToMi train/val/test, per question type, second order explained
    tomrl data verify tomi --split test --json tomi_verify.json
    tomrl data verify data/generated.jsonl  # re-derive every label of a generated (unified-schema) file
    tomrl data verify data/generated.jsonl --skip-bad   # count lines that fail the schema instead of stopping
    tomrl data verify hitom --data /path/to/shared/data

Each story is parsed from its text (:mod:`tomrl.world.parsers`) and every question answered by
the belief oracle (:mod:`tomrl.world.oracle`); agreement with the released labels is printed
per order / question type with n and a 95 % Wilson interval. Official data are read from
``--data`` (default: ``../shared/data`` beside the repository, folders ``hitom/`` and ``tomi/``).

Exit status 0 when the expected agreement is met: Hi-ToM CoT-prompt labels at least 583/600
(semantics ``joint``); ToMi first-order, memory and reality labels 100 % and every second-order
disagreement inside the two generator artifacts explained below; a generated file 100 %.
Otherwise 1.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HITOM_COTP_MIN_AGREEMENT = 583
HITOM_FILE = "hitom/hitom_data.jsonl"
TOMI_FILES = {"train": "tomi/tomi_train.jsonl", "validation": "tomi/tomi_val.jsonl", "test": "tomi/tomi_test.jsonl"}


def default_data_dir() -> Path:
    """``../shared/data`` relative to the repository root (where the project keeps benchmark data)."""
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"


# --------------------------------------------------------------------------- tables


@dataclass
class AgreementTable:
    """Agreement of oracle answers with labels, grouped by a key (order, question type, …)."""

    title: str
    group_name: str
    results: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))

    def add(self, group: Any, agrees: bool) -> None:
        self.results[str(group)].append(agrees)

    def all(self) -> list[bool]:
        return [value for values in self.results.values() for value in values]

    def rows(self) -> list[dict]:
        from tomrl.stats import accuracy

        rows = []
        for group in sorted(self.results) + ["all"]:
            values = self.all() if group == "all" else self.results[group]
            acc = accuracy(values)
            rows.append({self.group_name: group, "n": acc.n, "agree": acc.k, "rate": acc.value, "low": acc.low, "high": acc.high})
        return rows

    def format(self) -> str:
        from tomrl.stats import accuracy

        lines = [self.title, f"  {self.group_name:<22} {'n':>6} {'agree':>6}  agreement [95 % CI]"]
        for group in sorted(self.results) + ["all"]:
            values = self.all() if group == "all" else self.results[group]
            acc = accuracy(values)
            lines.append(f"  {group:<22} {acc.n:>6} {acc.k:>6}  {acc.format()}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- Hi-ToM


def _chain_words(chain: tuple[str, ...]) -> str:
    return " → ".join(chain) if chain else "reality"


def explain_hitom_disagreement(sentences: list[str], query, gold: str, semantics: str = "joint") -> str:
    """Why the oracle's answer differs from a label, in one or two sentences naming story lines."""
    from tomrl.world.oracle import BeliefOracle
    from tomrl.world.parsers import parse_sentence
    from tomrl.world.world import Move, ObjectLocation

    events = [parse_sentence(s) for s in sentences]
    oracle = BeliefOracle(events, semantics=semantics)  # type: ignore[arg-type]
    setup = oracle.setup
    obj, chain = query.obj, query.chain
    ours = oracle.answer(query)
    source = oracle.belief_source(chain, obj) if query.kind != "memory" else None

    def line(index: int | None) -> str:
        if index is None or index < 0:
            return "the start of the story"
        return f"line {index + 1} ('{sentences[index]}')"

    ever_there = setup.initial_locations.get(obj) == gold or any(
        getattr(e, "obj", None) == obj and getattr(e, "container", None) == gold for e in events
    )
    if not ever_there:
        text = f"the {obj} is never in the {gold} and nobody says it is"
        gold_room = setup.container_rooms.get(gold)
        obj_room = setup.container_rooms.get(setup.initial_locations.get(obj, ""))
        if gold_room and obj_room and gold_room != obj_room:
            text += f"; the {gold} stands in the {gold_room}, the {obj} is always in the {obj_room}"
        others = [(i, e.obj) for i, e in enumerate(events) if isinstance(e, (Move, ObjectLocation)) and e.container == gold and e.obj != obj]
        if others:
            text += f"; the {others[0][1]} is put there ({line(others[0][0])}): the label looks computed for another object"
        return text + f" (oracle: {ours}, from {line(source)})"

    other = "ordered" if semantics == "joint" else "joint"
    other_oracle = BeliefOracle(events, semantics=other)  # type: ignore[arg-type]
    if other_oracle.answer(query) == gold:
        return (
            f"the label follows the '{other}' rule of tomrl.world.oracle (the generator code's order-dependent "
            f"update, which the VP labels follow): there the chain {_chain_words(chain)} takes its belief from "
            f"{line(other_oracle.belief_source(chain, obj))}; with every joint observer's chain updated it comes from "
            f"{line(source)} (seen by {', '.join(oracle.observers(source)) if source is not None and source >= 0 else 'all'}) → {ours}"
        )
    if source is not None and source >= 0 and oracle.belief(chain, obj, at=source) == gold:
        return (
            f"{gold} is the chain {_chain_words(chain)}'s belief until {line(source)}, which all of them observed "
            f"(present: {', '.join(oracle.observers(source))}); the label ignores that line (oracle: {ours})"
        )
    puts = [i for i, e in enumerate(events) if getattr(e, "obj", None) == obj and getattr(e, "container", None) == gold]
    details = "; ".join(
        f"{line(i)} was observed by {', '.join(oracle.observers(i)) or 'nobody'}" for i in puts[-2:]
    )
    return f"no event observed by all of {_chain_words(chain)} leaves the {obj} in the {gold}: {details}; the chain's belief comes from {line(source)} → {ours}"


@dataclass
class HitomReport:
    path: str
    prompting_type: str
    semantics: str
    by_order: AgreementTable
    by_kind: AgreementTable
    disagreements: list[dict]

    @property
    def agree(self) -> int:
        return sum(self.by_order.all())

    @property
    def n(self) -> int:
        return len(self.by_order.all())

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "prompting_type": self.prompting_type,
            "semantics": self.semantics,
            "agree": self.agree,
            "n": self.n,
            "by_order": self.by_order.rows(),
            "by_deception_and_length": self.by_kind.rows(),
            "disagreements": self.disagreements,
        }


def verify_hitom(path: str | Path, prompting_type: str = "CoTP", semantics: str = "joint", explain: bool = True) -> HitomReport:
    """Answer every Hi-ToM row of ``prompting_type`` with the oracle and compare with its label."""
    from tomrl.io import BadInputError, iter_jsonl
    from tomrl.world.oracle import BeliefOracle
    from tomrl.world.parsers import parse_hitom_story, parse_question, story_lines

    title = f"Hi-ToM {prompting_type} labels vs oracle (semantics={semantics}), {path}"
    by_order = AgreementTable(f"{title}\nby question order:", "order")
    by_kind = AgreementTable("by deception and story length (chapters):", "deception/length")
    disagreements = []
    rows = 0
    for _, row in iter_jsonl(path):
        if row.get("prompting_type") != prompting_type:
            continue
        rows += 1
        try:
            events = parse_hitom_story(row["story"])
            query = parse_question(row["question"])
        except (KeyError, ValueError) as err:
            raise BadInputError(f"{path}: sample_id {row.get('sample_id')}: {err}") from None
        answer = BeliefOracle(events, semantics=semantics).answer(query)  # type: ignore[arg-type]
        agrees = answer == row["answer"]
        by_order.add(row["question_order"], agrees)
        by_kind.add(f"{'tell' if row['deception'] else 'no tell'}/{row['story_length']}", agrees)
        if not agrees:
            disagreements.append(
                {
                    "sample_id": row["sample_id"],
                    "story_key": row.get("story_key"),
                    "order": row["question_order"],
                    "question": row["question"],
                    "label": row["answer"],
                    "oracle": answer,
                    "reason": explain_hitom_disagreement(story_lines(row["story"]), query, row["answer"], semantics) if explain else "",
                }
            )
    if rows == 0:
        raise BadInputError(f"{path}: no rows with prompting_type {prompting_type!r}")
    return HitomReport(str(path), prompting_type, semantics, by_order, by_kind, disagreements)


def format_hitom(report: HitomReport) -> str:
    lines = [report.by_order.format(), report.by_kind.format()]
    if report.disagreements:
        lines.append(f"disagreements ({len(report.disagreements)}):")
        for d in report.disagreements:
            lines.append(f"  sample_id {d['sample_id']} ({d['story_key']}, order {d['order']}): {d['question']}")
            lines.append(f"      label {d['label']}, oracle {d['oracle']}: {d['reason']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- ToMi

TOMI_ARTIFACT_NOTE = """\
Why ToMi's second-order labels disagree (all of them name the object's true final location):
  (A) the third agent enters the room of the move, at any point of the story. ToMi's generator
      (tomi/story.py) inserts that entry into the text at a random position but executes it on its
      oracle after the whole story, with an observer list that still holds both main agents, so it
      writes the final location into both second-order beliefs.
  (B) the mover leaves after the move and the other agent comes back (second-order false belief):
      the labels say each thinks the other knows the new place, though they were never in the room
      together after the move - as if the re-entry were executed with the mover still on its
      observer list (the release was made by an older generator; the repository's code no longer
      does this).
Under the physical-observation rule neither event tells one main agent what the other believes."""


def tomi_second_order_case(events, query) -> str:
    """Which release artifact (A, B, or none) can touch this second-order question's label."""
    from tomrl.world.world import Enter, Exit, Move

    moves = [i for i, e in enumerate(events) if isinstance(e, Move)]
    if not moves:
        return "none"
    move_index = moves[0]
    mover = events[move_index].agent
    location: dict[str, str | None] = {}
    for e in events[:move_index]:
        if isinstance(e, Enter):
            for agent in e.agents:
                location[agent] = e.room
        elif isinstance(e, Exit):
            location[e.agent] = None
    room = location.get(mover)
    third_enters = any(isinstance(e, Enter) and e.room == room and not set(e.agents) & set(query.chain) for e in events)
    if third_enters:
        return "A: third agent enters the room"
    mover_left = False
    for e in events[move_index + 1 :]:
        if isinstance(e, Exit) and e.agent == mover:
            mover_left = True
        if mover_left and isinstance(e, Enter) and e.room == room and set(e.agents) & (set(query.chain) - {mover}):
            return "B: returns after the mover left"
    return "none"


@dataclass
class TomiReport:
    by_type: AgreementTable
    by_subtype: AgreementTable
    second_order_cases: dict[str, dict[str, int]]
    examples: list[dict]

    def first_order_memory_reality_perfect(self) -> bool:
        return all(all(self.by_type.results[t]) for t in ("first_order", "memory", "reality") if t in self.by_type.results)

    def second_order_explained(self) -> bool:
        none = self.second_order_cases.get("none", {})
        explained = all(c["label_is_true_location"] == c["n"] for k, c in self.second_order_cases.items() if k != "none")
        return none.get("agree", 0) == none.get("n", 0) and explained

    def to_dict(self) -> dict:
        return {
            "by_question_type": self.by_type.rows(),
            "by_release_type": self.by_subtype.rows(),
            "second_order_cases": self.second_order_cases,
            "disagreement_examples": self.examples,
        }


def verify_tomi(paths: dict[str, Path]) -> TomiReport:
    """Answer every ToMi question with the oracle (``joint``) and compare with its label."""
    from tomrl.io import BadInputError, iter_jsonl
    from tomrl.world.oracle import BeliefOracle
    from tomrl.world.parsers import parse_question, parse_tomi_story

    names = ", ".join(f"{split} ({path})" for split, path in paths.items())
    by_type = AgreementTable(f"ToMi labels vs oracle (semantics=joint), {names}\nby question type:", "question_type")
    by_subtype = AgreementTable("by release question type (tom = answer differs from the true location):", "release_type")
    cases: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "agree": 0, "label_is_true_location": 0})
    examples: list[dict] = []
    for split, path in paths.items():
        cache: dict[str, BeliefOracle] = {}
        for line_number, row in iter_jsonl(path):
            try:
                oracle = cache.get(row["story"])
                if oracle is None:
                    oracle = cache[row["story"]] = BeliefOracle(parse_tomi_story(row["story"]), semantics="joint")
                query = parse_question(row["question"])
            except (KeyError, ValueError) as err:
                raise BadInputError(f"{path}:{line_number}: {err}") from None
            answer = oracle.answer(query)
            agrees = answer == row["answer"]
            release_type = row["question_type"]
            base = release_type.split("_")[0] + "_order" if release_type.startswith(("first", "second")) else release_type
            by_type.add(base, agrees)
            by_subtype.add(release_type.replace("_0_", "_").replace("_1_", "_"), agrees)
            if base == "second_order":
                case = tomi_second_order_case(oracle.events, query)
                cases[case]["n"] += 1
                cases[case]["agree"] += agrees
                cases[case]["label_is_true_location"] += row["answer"] == oracle.reality(query.obj)
                if not agrees and len(examples) < 3 and all(e["case"] != case for e in examples):
                    examples.append({"split": split, "id": row.get("id"), "case": case, "story": row["story"], "question": row["question"], "label": row["answer"], "oracle": answer})
    return TomiReport(by_type, by_subtype, dict(cases), examples)


def format_tomi(report: TomiReport) -> str:
    lines = [report.by_type.format(), report.by_subtype.format(), "second-order questions by the release artifact that can touch them:"]
    lines.append(f"  {'case':<36} {'n':>6} {'agree':>6} {'label = true location':>22}")
    for case in sorted(report.second_order_cases):
        c = report.second_order_cases[case]
        lines.append(f"  {case:<36} {c['n']:>6} {c['agree']:>6} {c['label_is_true_location']:>22}")
    lines.append(TOMI_ARTIFACT_NOTE)
    for example in report.examples:
        story = "\n      ".join(example["story"].splitlines())
        lines.append(f"  example ({example['case']}), {example['id']}:\n      {story}\n      {example['question']} label {example['label']}, oracle {example['oracle']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- generated files


def verify_examples(path: str | Path, skip_bad: bool = False, report=None) -> tuple[AgreementTable, list[dict]]:
    """Re-derive every label of a unified-schema file from its story and question text alone.

    With ``skip_bad`` lines that fail the schema are counted in ``report`` (a
    :class:`tomrl.schema.ReadReport`) instead of stopping the check.
    """
    from tomrl.io import BadInputError, shortened
    from tomrl.schema import ReadReport, read_examples
    from tomrl.world.oracle import BeliefOracle
    from tomrl.world.parsers import parse_question, parse_story

    table = AgreementTable(f"labels of {path} re-derived from the story text (oracle semantics from meta.semantics):", "source/question_type")
    wrong: list[dict] = []
    cache: dict[tuple[str, str], BeliefOracle] = {}
    report = report if report is not None else ReadReport(str(path))
    for example in read_examples(path, skip_bad=skip_bad, report=report):
        style = "tomi" if "tomi" in example.source else "hitom"
        semantics = example.meta.get("semantics", "joint")
        key = (example.story, semantics)
        where = f"{path}:{report.line_numbers.get(example.id, '?')}"
        try:  # a story or question the parsers do not know is this line's fault, named as such
            if key not in cache:
                cache[key] = BeliefOracle(parse_story(example.story, style), semantics=semantics)
            answer = cache[key].answer(parse_question(example.question))
        except ValueError as err:
            problem = f"{where}: field '{'story' if key not in cache else 'question'}': {shortened(str(err))}"
            if not skip_bad:
                raise BadInputError(problem) from None
            report.skipped.append(problem)
            continue
        agrees = answer == example.answer
        table.add(f"{example.source}/{example.question_type}", agrees)
        if not agrees:
            wrong.append({"id": example.id, "question": example.question, "label": example.answer, "rederived": answer})
    return table, wrong


# --------------------------------------------------------------------------- command


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("benchmark", metavar="BENCHMARK", help="'hitom', 'tomi', or a unified-schema JSONL file to re-derive")
    parser.add_argument("--data", help="folder holding hitom/ and tomi/ (default: ../shared/data beside the repo)")
    parser.add_argument("--split", action="append", choices=sorted(TOMI_FILES), help="ToMi split(s) to check (default: all three)")
    parser.add_argument("--semantics", choices=["joint", "ordered"], help="Hi-ToM: check only the CoTP labels under this rule")
    parser.add_argument("--json", dest="json_out", help="also write the report as JSON to this file")
    parser.add_argument("--skip-bad", action="store_true", help="a JSONL FILE: skip (and count) lines that fail the schema instead of stopping")


def run(args: argparse.Namespace) -> int:
    from tomrl.io import BadInputError, atomic_write_json
    from tomrl.outputs import check_outputs

    data = Path(args.data) if args.data else default_data_dir()
    if args.benchmark in ("hitom", "tomi") and not data.is_dir():
        raise BadInputError(f"{data}: data folder not found (give --data pointing at the folder with hitom/ and tomi/)")
    read = {"hitom": [data / HITOM_FILE], "tomi": [data / TOMI_FILES[split] for split in args.split or TOMI_FILES]}
    check_outputs({"--json": args.json_out}, inputs={"BENCHMARK": read.get(args.benchmark, args.benchmark)})
    if args.benchmark == "hitom":
        path = data / HITOM_FILE
        if not path.is_file():
            raise BadInputError(f"{path}: Hi-ToM data file not found")
        cotp = verify_hitom(path, "CoTP", args.semantics or "joint")
        print(format_hitom(cotp))
        report: dict = {"cotp": cotp.to_dict()}
        if args.semantics is None:
            vp = verify_hitom(path, "VP", "ordered")
            print()
            print(format_hitom(vp))
            report["vp"] = vp.to_dict()
        ok = cotp.semantics != "joint" or cotp.agree >= HITOM_COTP_MIN_AGREEMENT
        print(
            f"\nHi-ToM CoT-prompt agreement: {cotp.agree}/{cotp.n} (semantics {cotp.semantics}); "
            f"required >= {HITOM_COTP_MIN_AGREEMENT}/600 with 'joint': {'met' if ok else 'NOT met'}"
        )
    elif args.benchmark == "tomi":
        splits = args.split or list(TOMI_FILES)
        paths = {split: data / TOMI_FILES[split] for split in splits}
        for path in paths.values():
            if not path.is_file():
                raise BadInputError(f"{path}: ToMi data file not found")
        tomi = verify_tomi(paths)
        print(format_tomi(tomi))
        report = tomi.to_dict()
        ok = tomi.first_order_memory_reality_perfect() and tomi.second_order_explained()
        print(
            f"\nfirst-order, memory and reality labels all re-derived: {tomi.first_order_memory_reality_perfect()}; "
            f"every second-order disagreement inside cases A/B, and the labels there the true location: {tomi.second_order_explained()}"
        )
    else:
        path = Path(args.benchmark)
        if not path.exists():  # a FIFO (`<(zcat rows.jsonl.gz)`) is read too; a folder is refused by the reader
            raise BadInputError(f"{path}: not 'hitom', 'tomi' or an existing JSONL file")
        from tomrl.schema import ReadReport

        read_report = ReadReport(str(path))
        table, wrong = verify_examples(path, skip_bad=args.skip_bad, report=read_report)
        print(table.format())
        for w in wrong[:20]:
            print(f"  {w['id']}: {w['question']} label {w['label']}, re-derived {w['rederived']}")
        if args.skip_bad:
            print(f"skipped {len(read_report.skipped)} bad lines" + (f" (first: {read_report.skipped[0]})" if read_report.skipped else ""))
        report = {"by_type": table.rows(), "disagreements": wrong, "skipped_lines": read_report.skipped}
        verified = len(table.all())
        ok = not wrong and verified > 0
        if not verified:
            print(f"nothing verified: no row of {path} could be read and re-derived" + (" (every line was skipped as bad)" if read_report.skipped else "")
                  + "; this is a failure (exit 1), not a pass")
    if args.json_out is not None:
        atomic_write_json(args.json_out, report)
    return 0 if ok else 1
