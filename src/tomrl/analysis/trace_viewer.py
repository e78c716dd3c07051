"""Side-by-side traces: the same questions answered by several models, read against the oracle.

    from tomrl.analysis.trace_viewer import trace_views
    views, notes = trace_views([("before: smollm2-135m", base_eval), ("after: rl", rl_eval)], count=6, seed=0)
    # views: tomrl.analysis.document.TraceView blocks for the report (tomrl report adds them)

For evaluations (``tomrl eval`` folders) that answered the same questions (matched by benchmark
and question id), a seeded handful of questions is drawn, spread over the orders of belief
(round robin over the orders, shuffled within each). Each is shown with its story, question and
gold answer, the oracle's belief chain for the asked object (reality, each asked agent's own
belief, and each nested belief the question builds on, from
:class:`tomrl.world.oracle.BeliefOracle` in the story's parsed world), and each model's trace,
answer and verdict. In every trace the first statement the oracle judges false is marked: the
statements are found and judged by the fidelity reward's parser
(:func:`tomrl.rewards.fidelity.parse_statements` / :func:`~tomrl.rewards.fidelity.check_statements`,
with the reward's default options, :class:`~tomrl.rewards.fidelity.FidelityOptions`: a belief is
true if the chain held it at some moment of the story, an "at first" one if it was the chain's
first belief), so "false" has the reward's definition. A statement is located in the trace by the
words the parser read it from (its clause); where those words also occur earlier, e.g. in a
skipped hypothetical, the mark may land on the earlier copy. Statements about where an object really is count too. Questions
whose stories the parser reads (tomrl's Hi-ToM and ToMi stories, the official Hi-ToM texts) are
preferred; other stories are shown without the oracle.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

from tomrl.analysis.document import TraceColumn, TraceView
from tomrl.analysis.runs import Evaluation, benchmark_examples, query_chain
from tomrl.analysis.trace_shares import asked_agents, mentions_every_agent, reflection_phrases, story_style
from tomrl.io import iter_jsonl
from tomrl.schema import Example

MAX_STATEMENT_NOTES = 6  # statements listed under a trace; the rest are counted
MAX_CANDIDATES = 400  # questions tried before giving up on finding ones the oracle can read
_PROMPT_STORY = re.compile(r"Story:\s*\n?(?P<story>.*?)\nQuestion:\s*(?P<question>[^\n]*)", re.DOTALL)


@dataclass(frozen=True)
class JudgedTrace:
    """A trace's statements judged by the oracle, and where the first false one is in the trace."""

    mark: tuple[int, int] | None  # [start, end) of the first false statement in the text
    notes: tuple[str, ...]  # one line per statement, in order of appearance
    false: int
    checked: int


def judge_trace(text: str, world) -> JudgedTrace:
    """Find the statements of ``text``'s reasoning (a completion with its prefill in front) in
    ``world`` (a :class:`tomrl.rewards.fidelity.StoryWorld`), judge them, and locate the first false one."""
    from tomrl.rewards.fidelity import FidelityOptions, check_statements, parse_statements, reasoning_text

    reasoning = reasoning_text(text, "")
    options = FidelityOptions()  # judged as the fidelity reward judges by default
    checked = check_statements(parse_statements(reasoning, world).statements, world, options.timing,
                               getattr(options, "consistency", False))
    base = max(0, text.find(reasoning.strip()[:80])) if reasoning.strip() else 0
    cursor, mark, notes = base, None, []
    for item in checked:
        words = item.statement.text
        position = text.find(words, cursor)
        if position < 0:
            position = text.find(words, base)
        if position >= 0:
            cursor = position
        if item.verdict == "false" and mark is None and position >= 0:
            mark = (position, position + len(words))
        if len(notes) < MAX_STATEMENT_NOTES:
            symbol = {"true": "✓ true", "false": "✗ false", "unknown": "? unknown"}[item.verdict]
            oracle = ""
            if item.verdict == "false":
                who = " thinks ".join(item.statement.chain) or "reality"
                moment = getattr(item, "judged_at", "any")
                if moment == "first":
                    oracle = f" (oracle: {who} at first → {item.held[0]})"
                elif moment == "final" or len(item.held) <= 1:
                    oracle = f" (oracle: {who} → {item.final_belief})"
                else:
                    oracle = f" (oracle: {who} → {item.final_belief}; held {', '.join(item.held)} during the story)"
            notes.append(f"{symbol}: {item.statement.describe()}{oracle}")
    if len(checked) > MAX_STATEMENT_NOTES:
        notes.append(f"… and {len(checked) - MAX_STATEMENT_NOTES} more statements")
    if not checked:
        notes.append("no statement about where an object is or is believed to be")
    false = sum(1 for c in checked if c.verdict == "false")
    return JudgedTrace(mark, tuple(notes), false, sum(1 for c in checked if c.verdict != "unknown"))


def _chain_text(chain: Sequence[str]) -> str:
    return " thinks ".join(chain) + " thinks" if chain else "reality"


def oracle_lines(world, chain: Sequence[str], obj: str, kind: str = "belief") -> list[str]:
    """The oracle's view of the asked object: reality, each asked agent's own belief, and the
    nested beliefs the question builds on, innermost first, ending with the asked chain."""
    oracle = world.oracle
    lines = [f"reality (end of story) → {oracle.belief((), obj)}"]
    if kind == "memory":
        lines.append(f"at the start of the story → {oracle.initial_location(obj)}")
    chains: list[tuple[str, ...]] = [(agent,) for agent in chain]
    chains += [tuple(chain[i:]) for i in range(len(chain) - 2, -1, -1)]  # (C,), (B, C), (A, B, C): built inside out
    seen: set[tuple[str, ...]] = set()
    for link in chains:
        if link in seen:
            continue
        seen.add(link)
        asked = "  ← asked" if tuple(link) == tuple(chain) else ""
        lines.append(f"{_chain_text(link)} → {oracle.belief(link, obj) or 'no belief'}{asked}")
    return lines


def _read_rows(evaluation: Evaluation) -> dict[tuple[str, str], dict]:
    rows: dict[tuple[str, str], dict] = {}
    if evaluation.samples_path is None:
        return rows
    for _, row in iter_jsonl(evaluation.samples_path, allow_torn_tail=True):
        if isinstance(row.get("id"), str) and isinstance(row.get("output"), str):
            rows.setdefault((str(row.get("benchmark")), row["id"]), row)
    return rows


def _question_of(key: tuple[str, str], answers: list[tuple[Evaluation, dict]], cache: dict) -> tuple[Example | None, dict, str]:
    """``(example, the first answer's row, note)``: the question reloaded from its benchmark, or
    ``(None, row, …)`` with story and question to be read from the prompt."""
    benchmark, question_id = key
    for evaluation, _ in answers:
        cache_key = (str(evaluation.path), benchmark)
        if cache_key not in cache:
            cache[cache_key] = benchmark_examples(evaluation, benchmark)
        examples, note = cache[cache_key]
        if question_id in examples:
            return examples[question_id], answers[0][1], ""
    return None, answers[0][1], note


def _facts_and_world(example: Example | None, row: dict):
    """``(facts, world or None, chain, obj, kind, why no oracle)`` of a question."""
    from tomrl.rewards.fidelity import world_from_story
    from tomrl.world.parsers import parse_question

    if example is not None:
        story, question, gold, source = example.story, example.question, example.answer, example.source
        meta = example.meta if isinstance(example.meta, dict) else {}
        origin = ""
    else:
        match = _PROMPT_STORY.search(str(row.get("prompt", "")))
        if match is None:
            return None
        story, question = match.group("story").strip(), match.group("question").strip()
        gold, source, meta, origin = str(row.get("gold", "")), row.get("source"), {}, " (read from the prompt)"
    facts = [("story" + origin, story if "\n" in story else story + "\n"), ("question", question), ("gold", gold)]
    style = story_style(source)
    if style is None:
        return facts, None, (), "", "belief", f"no story parser for source {source!r}"
    semantics = meta.get("semantics") if meta.get("semantics") in ("joint", "ordered") else "joint"
    try:
        world = world_from_story(story, style, semantics)
    except Exception as error:  # an unparseable story: shown without the oracle
        return facts, None, (), "", "belief", f"story not parseable as {style}: {str(error)[:120]}"
    query = meta.get("query") if isinstance(meta.get("query"), dict) else None
    if query is not None and isinstance(query.get("object"), str):
        chain, obj, kind = tuple(query.get("chain") or ()), query["object"], str(query.get("kind", "belief"))
    else:
        try:
            parsed = parse_question(question)
        except ValueError:
            return facts, world, (), "", "belief", "question form not recognised by the oracle's parser"
        chain, obj, kind = parsed.chain, parsed.obj, parsed.kind
    return facts, world, chain, obj, kind, ""


def _column(label: str, row: dict, world, agents: tuple[str, ...] | None) -> TraceColumn:
    from tomrl.rewards.fidelity import reasoning_text

    prefill = row.get("prefill") if isinstance(row.get("prefill"), str) else ""
    text = prefill + row["output"]
    answer = row.get("extracted") or row.get("paper_extracted") or ""
    correct = row.get("correct")
    outcome = "correct" if correct is True else ("wrong" if correct is False else "not scored")
    if row.get("format_ok") is False:
        outcome += " (format failure)"
    notes: list[str] = []
    mark = None
    if world is not None:
        judged = judge_trace(text, world)
        mark, notes = judged.mark, list(judged.notes)
    reasoning = reasoning_text(text, "")
    if agents:
        missing = [a for a in agents if not mentions_every_agent(reasoning, (a,))]
        notes.append("names every asked agent" if not missing else f"does not name {', '.join(missing)}")
    phrases = reflection_phrases(reasoning)
    if phrases:
        notes.append("self-reflection: " + ", ".join(dict.fromkeys(p.lower() for p in phrases)))
    return TraceColumn(label, outcome, str(answer), text, mark, tuple(notes))


def _candidate_order(keys: list[tuple[str, str]], orders: dict[tuple[str, str], int | None], seed: int) -> list[tuple[str, str]]:
    """Keys round robin over the orders (ascending), seeded shuffle within each order."""
    rng = random.Random(seed)
    by_order: dict[int | None, list[tuple[str, str]]] = {}
    for key in sorted(keys):
        by_order.setdefault(orders.get(key), []).append(key)
    queues = []
    for order in sorted(by_order, key=lambda o: (o is None, o or 0)):
        group = by_order[order]
        rng.shuffle(group)
        queues.append(group)
    result = []
    while any(queues):
        for queue in queues:
            if queue:
                result.append(queue.pop(0))
    return result


def trace_views(
    evaluations: Sequence[tuple[str, Evaluation]], *, count: int = 6, seed: int = 0, max_models: int = 4
) -> tuple[list[TraceView], list[str]]:
    """Up to ``count`` questions answered by two or more of ``evaluations`` ((label, evaluation),
    the columns in this order, at most ``max_models``), and notes on what was left out."""
    notes: list[str] = []
    if count <= 0:
        return [], notes
    usable = [(label, e) for label, e in evaluations if e.samples_path is not None]
    if len(usable) < len(evaluations):
        notes.append(f"{len(evaluations) - len(usable)} evaluation(s) have no samples.jsonl and are not shown")
    if len(usable) > max_models:
        notes.append(f"traces of {len(usable) - max_models} more evaluation(s) are not shown (at most {max_models} side by side: "
                     f"{', '.join(label for label, _ in usable[max_models:])})")
        usable = usable[:max_models]
    rows = [(label, evaluation, _read_rows(evaluation)) for label, evaluation in usable]
    answered: dict[tuple[str, str], list[tuple[str, Evaluation, dict]]] = {}
    for label, evaluation, by_key in rows:
        for key, row in by_key.items():
            answered.setdefault(key, []).append((label, evaluation, row))
    shared = [key for key, answers in answered.items() if len(answers) >= 2]
    if not shared:
        if len(usable) >= 2:
            notes.append("no question was answered by two or more of the evaluations (matched by benchmark and id)")
        return [], notes
    orders = {key: answered[key][0][2].get("order") if isinstance(answered[key][0][2].get("order"), int) else None
              for key in shared}
    cache: dict = {}
    with_oracle, without_oracle = [], []
    for key in _candidate_order(shared, orders, seed)[:MAX_CANDIDATES]:
        answers = answered[key]
        example, row, load_note = _question_of(key, [(e, r) for _, e, r in answers], cache)
        built = _facts_and_world(example, row)
        if built is None:
            if load_note:
                notes.append(load_note)
            continue
        facts, world, chain, obj, kind, why = built
        if world is not None and obj:
            facts.append(("oracle", "\n".join(oracle_lines(world, chain, obj, kind))))
        else:
            facts.append(("oracle", f"not available: {why}"))
        if obj:
            agents: tuple[str, ...] | None = tuple(chain)
        else:
            agents = asked_agents(query_chain(example) if example is not None else None, dict(facts)["question"])[0]
        title = f"{key[0]} · {key[1]} · order {orders[key] if orders[key] is not None else '–'}"
        view = TraceView(title, tuple(facts), tuple(_column(label, r, world if obj else None, agents or None)
                                                    for label, _, r in answers))
        (with_oracle if world is not None and obj else without_oracle).append(view)
        if len(with_oracle) >= count:
            break
    # Questions the oracle can read first; the others fill up when there are too few of them.
    return (with_oracle + without_oracle)[:count], list(dict.fromkeys(notes))
