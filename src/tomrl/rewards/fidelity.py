"""Reasoning-fidelity reward: check the belief statements inside ``<think>`` against the oracle.

Paper B asks whether a reward can judge the reasoning itself rather than only the final answer.
For stories whose world tomrl can simulate (tomrl-generated Hi-ToM and ToMi, and the official
Hi-ToM / ToMi texts, which the same parsers read), it can: every statement of the form

    "Anna thinks the apple is in the red_box"              chain ("Anna",)
    "Anna believes that Ben thinks the apple is in …"     chain ("Anna", "Ben")
    "the apple is in the green drawer"                    chain () = reality
    "Ben will look for the apple in the basket"           chain ("Ben",)  (ToMi's question form)

is looked up in the belief oracle (:class:`tomrl.world.oracle.BeliefOracle`) and judged.

    from tomrl.rewards.fidelity import check_reasoning, FidelityReward
    report = check_reasoning(reasoning_text, story_text, style="hitom")
    report.score, report.checkable, report.true, report.false, report.statements
    FidelityReward()(prompts, completions, story=[...], source=[...])     # TRL reward

or ``tomrl reward score --reward fidelity --input traces.jsonl --out scored.jsonl`` (rows with
``completion``, ``story`` and ``source``).

Score (``FidelityReport.score``): ``(true − contradiction_penalty × false) / checkable``; 0.0 when
nothing is checkable, None (not applicable) when the story's source has no parser or the story does
not parse. What is checkable, skipped, true or false is listed in docs/rewards.md (Reasoning fidelity).

When is a statement true? One marked "at first" / "initially" when it is the chain's first belief;
otherwise, under ``timing`` "any", when the chain held it at some moment, under "final" when it
holds it at the end. With ``consistency`` (on by default) a chain the reasoning puts in two places
is judged at the end even under "any", so a trace stuffed with every belief each chain ever held
scores below a faithful one (tests/rewards/test_fidelity_gaming.py). The options are
:class:`FidelityOptions`, set in a training config as ``reward_options: {fidelity: {…}}`` or with
``tomrl reward score --option KEY=VALUE``.

The oracle is queried only through ``belief(chain, obj, at)`` and its event count, so any object
with that method (the :class:`BeliefSource` protocol) plugs in.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Protocol, Sequence, get_args

from pydantic import NonNegativeFloat

from tomrl.config import setting
from tomrl.rewards.answer import DEFAULT_PREFILL
from tomrl.rewards.base import Reward, RewardResult, completion_text
from tomrl.world.oracle import Semantics

Timing = Literal["any", "final"]
MAX_STATEMENTS = 256

# Dataset `source` values and the parser style of their stories.
SOURCE_STYLES: dict[str, str] = {"tomrl-hitom": "hitom", "hitom": "hitom", "hi_tom": "hitom", "tomrl-tomi": "tomi", "tomi": "tomi"}

_MENTAL_VERBS = (
    r"(?:still\s+|also\s+|probably\s+|must\s+|then\s+|now\s+)?"
    r"(?:thinks|think|thought|believes|believe|believed|knows|know|knew|assumes|assume|assumed|"
    r"expects|expect|expected|is\s+thinking|would\s+think|will\s+think|would\s+believe|will\s+believe)"
)
_LOCATION_VERBS = (
    r"(?:is|are|was|were|'s|remains|remained|stays|stayed|would\s+be|will\s+be|should\s+be|must\s+be|ends\s+up|ended\s+up)"
)
_NEGATION = re.compile(r"n't\b|\bnot\b|\bnever\b|\bno\s+longer\b", re.IGNORECASE)
_DENIAL = re.compile(r"(?:\b(?:not|n't)\s+(?:true|the\s+case)|\bfalse|\bwrong)\s+that\s+$", re.IGNORECASE)
_HYPOTHETICAL = re.compile(r"\b(?:if|whether|unless|suppose|supposing|imagine)\b", re.IGNORECASE)
# "Emma publicly claimed that …", "Logan privately told Ben that …": the story's claims may be lies.
_REPORTED_SPEECH = re.compile(
    r"\b(?:claimed|claims|claim|said|says|say|told|tells|tell|lied|lies|announced|announces|whispered|whispers)"
    r"(?:\s+(?:to\s+)?[A-Za-z_]+)?\s+(?:that\s+)?$",
    re.IGNORECASE,
)
# The writer's own voice ("I think the apple is in …") asserts reality; it adds no agent.
_FIRST_PERSON = re.compile(r"\b(?:i|we)\s+(?:think|believe|know|can\s+see|see|conclude)\s+(?:that\s+)?$", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[.;:!?\n]")
# "At first the apple is in …", "… is in the red_box initially": a statement about the start of the story.
_AT_FIRST_WORDS = r"(?:at\s+first|initially|originally|at\s+the\s+(?:beginning|start)|in\s+the\s+beginning)"
_AT_FIRST_BEFORE = re.compile(rf"\b{_AT_FIRST_WORDS}\b", re.IGNORECASE)
_AT_FIRST_AFTER = re.compile(rf"\s*,?\s*{_AT_FIRST_WORDS}\b", re.IGNORECASE)
_UNRESOLVED_SUBJECT = re.compile(
    rf"(?:\b(?:might|may|could|can|would|should)\s+)?{_MENTAL_VERBS}\s+(?:that\s+)?$|"
    r"\b(?:might|may|could)\s+(?:think|believe|expect|assume)\s+(?:that\s+)?$",
    re.IGNORECASE,
)


class BeliefSource(Protocol):
    """What the fidelity checker needs from an oracle (``BeliefOracle`` satisfies it)."""

    events: Sequence[Any]

    def belief(self, chain: Sequence[str], obj: str, at: int | None = None) -> str | None: ...


@dataclass(frozen=True)
class BeliefStatement:
    """One belief statement found in a reasoning text (names as the story writes them)."""

    chain: tuple[str, ...]
    obj: str
    container: str
    text: str  # the words it was read from
    at_first: bool = False  # "at first", "initially" …: about the chain's first belief, not the time `timing` asks

    def describe(self) -> str:
        who = " thinks ".join(self.chain)
        return f"{who + ' thinks ' if who else ''}the {self.obj} is in the {self.container}" + (" at first" if self.at_first else "")


@dataclass(frozen=True)
class CheckedStatement:
    statement: BeliefStatement
    verdict: Literal["true", "false", "unknown"]  # unknown: the chain never believed anything about it
    final_belief: str | None  # the oracle's belief for the chain at the end of the story
    held: tuple[str, ...]  # every container the chain believed at some moment
    judged_at: Literal["any", "final", "first"] = "any"  # the moment the verdict is about


@dataclass(frozen=True)
class FidelityReport:
    """The outcome for one reasoning text."""

    score: float | None
    found: int  # statements read (distinct), checkable or not
    skipped: int  # negated, hypothetical, reported speech, unresolved subject
    checkable: int
    true: int
    false: int
    final_true: int
    statements: tuple[CheckedStatement, ...] = field(default=())
    note: str = ""

    def components(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in ("found", "skipped", "checkable", "true", "false", "final_true")}

    def reason(self) -> str:
        if self.score is None:
            return self.note
        if not self.checkable:
            return f"no checkable belief statement ({self.found} found, {self.skipped} skipped)"
        text = f"{self.checkable} checkable: {self.true} true, {self.false} false"
        wrong = [c for c in self.statements if c.verdict == "false"]
        if wrong:
            first = wrong[0]
            text += f"; e.g. '{first.statement.describe()}' (oracle at the end: {first.final_belief})"
        return text


# ----------------------------------------------------------------------------- the story's world


@dataclass(frozen=True)
class StoryWorld:
    """A parsed story: its oracle and the names a reasoning text can refer to."""

    oracle: BeliefSource
    agents: tuple[str, ...]
    objects: tuple[str, ...]
    containers: tuple[str, ...]
    _held: dict = field(default_factory=dict, compare=False, repr=False)

    @functools.cached_property
    def patterns(self) -> "_Patterns":
        return _Patterns(self.agents, self.objects, self.containers)

    def held_beliefs(self, chain: tuple[str, ...], obj: str) -> tuple[tuple[str, ...], str | None]:
        """Every container ``chain`` believed ``obj`` to be in (in order), and the final one."""
        key = (chain, obj)
        if key not in self._held:
            self._held[key] = _held_beliefs(self.oracle, chain, obj)
        return self._held[key]


def _held_beliefs(oracle: BeliefSource, chain: tuple[str, ...], obj: str) -> tuple[tuple[str, ...], str | None]:
    held: list[str] = []
    for at in range(len(oracle.events) + 1):
        belief = oracle.belief(chain, obj, at=at)
        if belief is not None and belief not in held:
            held.append(belief)
    return tuple(held), oracle.belief(chain, obj)


def world_from_events(events: Iterable[Any], semantics: str = "joint") -> StoryWorld:
    """Build the oracle and the name lists of a story given as world events."""
    from tomrl.world.oracle import BeliefOracle
    from tomrl.world.world import Move, ObjectLocation, PrivateTell, PublicClaim

    events = list(events)
    oracle = BeliefOracle(events, semantics=semantics)  # type: ignore[arg-type]
    objects: dict[str, None] = {}
    containers: dict[str, None] = dict.fromkeys(oracle.setup.container_rooms)
    for event in events:
        if isinstance(event, (ObjectLocation, Move, PublicClaim, PrivateTell)):
            objects.setdefault(event.obj, None)
            containers.setdefault(event.container, None)
    return StoryWorld(oracle, tuple(oracle.setup.agents), tuple(objects), tuple(containers))


@functools.lru_cache(maxsize=512)
def world_from_story(story: str, style: str, semantics: str = "joint") -> StoryWorld:
    """Parse a Hi-ToM or ToMi story text (cached: GRPO scores many completions per story)."""
    from tomrl.world.parsers import parse_story

    return world_from_events(parse_story(story, style), semantics)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- statement parsing


def _names_pattern(names: Iterable[str]) -> str:
    # Longest first so "green_treasure_chest" wins over "chest"; "_" may be written as a space.
    alternatives = sorted({n for n in names if n}, key=len, reverse=True)
    return "|".join(r"[_\s]+".join(re.escape(part) for part in re.split(r"[_\s]+", name)) for name in alternatives)


class _Patterns:
    """Regexes built from one story's names (case-insensitive, ``_`` or spaces between words)."""

    def __init__(self, agents: Sequence[str], objects: Sequence[str], containers: Sequence[str]):
        self.agent_by_key = {_key(a): a for a in agents}
        self.object_by_key = {_key(o): o for o in objects}
        self.container_by_key = {_key(c): c for c in containers}
        agent = _names_pattern(agents) or r"(?!x)x"
        obj = _names_pattern(objects) or r"(?!x)x"
        container = _names_pattern(containers) or r"(?!x)x"
        self.location = re.compile(
            rf"\b(?:the\s+)?(?P<obj>{obj})\s+{_LOCATION_VERBS}\s+(?:still\s+|now\s+|really\s+|actually\s+)?"
            rf"(?:located\s+|kept\s+|placed\s+|hidden\s+|stored\s+)?(?:in|inside|within)\s+(?:the\s+)?(?P<container>{container})\b",
            re.IGNORECASE,
        )
        self.search = re.compile(
            rf"\b(?P<agent>{agent})\s+(?:will|would|is\s+going\s+to)\s+(?:first\s+)?(?:look|search)\s+for\s+"
            rf"(?:the\s+)?(?P<obj>{obj})\s+(?:in|inside)\s+(?:the\s+)?(?P<container>{container})\b",
            re.IGNORECASE,
        )
        self.chain_link = re.compile(
            rf"(?:\b(?P<agent>{agent})\s+{_MENTAL_VERBS}|\baccording\s+to\s+(?P<according>{agent})\s*,?)\s+(?:that\s+)?$",
            re.IGNORECASE,
        )


def _key(name: str) -> str:
    return re.sub(r"[_\s]+", " ", name).strip().lower()


@dataclass
class _Parsed:
    statements: list[BeliefStatement]
    skipped: int


def parse_statements(reasoning: str, world: StoryWorld, limit: int = MAX_STATEMENTS) -> _Parsed:
    """Belief statements of a reasoning text, deduplicated, in order of appearance."""
    patterns = world.patterns
    found: dict[tuple, BeliefStatement] = {}
    skipped: set[tuple] = set()
    matches = [(m, "location") for m in patterns.location.finditer(reasoning)]
    matches += [(m, "search") for m in patterns.search.finditer(reasoning)]
    matches.sort(key=lambda item: item[0].start())
    previous_end = 0
    for match, kind in matches:
        if len(found) >= limit:
            break
        own_start, previous_end = previous_end, max(previous_end, match.end())
        obj = patterns.object_by_key.get(_key(match.group("obj")))
        container = patterns.container_by_key.get(_key(match.group("container")))
        if obj is None or container is None:
            continue
        start = match.start()
        chain: list[str] = []
        if kind == "search":
            chain.append(patterns.agent_by_key[_key(match.group("agent"))])
        clause_start = _clause_start(reasoning, start)
        prefix = reasoning[clause_start:start]
        while True:
            link = patterns.chain_link.search(prefix)
            if link is not None:
                name = link.group("agent") or link.group("according")
                chain.insert(0, patterns.agent_by_key[_key(name)])
                prefix = prefix[: link.start()]
                continue
            own_voice = _FIRST_PERSON.search(prefix)
            if own_voice is not None and not chain:
                prefix = prefix[: own_voice.start()]
            break
        # "At first" before the statement (not before an earlier statement of the clause) or right after it.
        at_first = bool(_AT_FIRST_BEFORE.search(reasoning, max(clause_start, own_start), start) or _AT_FIRST_AFTER.match(reasoning, match.end()))
        key = (tuple(chain), obj, container, at_first)
        if len(set(chain)) != len(chain) or _should_skip(prefix, reasoning[start : match.end()], _ends_in_question(reasoning, match.end())):
            skipped.add(key)
            continue
        words = reasoning[clause_start : match.end()].strip()[-200:]
        found.setdefault(key, BeliefStatement(tuple(chain), obj, container, words, at_first))
    skipped -= set(found)
    return _Parsed(list(found.values()), len(skipped))


def _clause_start(text: str, position: int) -> int:
    window_start = max(0, position - 400)
    last = None
    for last in _CLAUSE_BREAK.finditer(text, window_start, position):
        pass
    return last.end() if last is not None else window_start


def _ends_in_question(text: str, position: int) -> bool:
    match = _CLAUSE_BREAK.search(text, position, min(len(text), position + 400))
    return match is not None and match.group(0) == "?"


def _should_skip(prefix: str, core: str, is_question: bool) -> bool:
    """``prefix``: the clause before the statement, its chain of "X thinks" already removed."""
    if is_question or _NEGATION.search(core) or _DENIAL.search(prefix):
        return True
    if _HYPOTHETICAL.search(prefix) or _REPORTED_SPEECH.search(prefix):
        return True
    return _UNRESOLVED_SUBJECT.search(prefix) is not None  # "he thinks", "Ben might think", "everyone believes"


# ----------------------------------------------------------------------------- checking


def reasoning_text(completion: str, prefill: str = DEFAULT_PREFILL) -> str:
    """The reasoning part of a completion: inside ``<think>…</think>``, or before ``<answer>``."""
    text = prefill + completion
    if "</think>" in text:
        text = text.split("</think>", 1)[0]
        text = text.rsplit("<think>", 1)[-1]
    else:
        text = text.split("<answer>", 1)[0]
    return text.replace("<think>", " ").replace("</answer>", " ")


def check_statements(
    statements: Sequence[BeliefStatement], world: StoryWorld, timing: Timing = "any", consistency: bool = False
) -> list[CheckedStatement]:
    """Judge each statement against the oracle.

    ``timing`` says which moment an unqualified statement is about (any moment of the story, or its end);
    a statement marked ``at_first`` is about the chain's first belief. With ``consistency``, a chain and
    object that the statements put in two or more places (unqualified) are judged at the end of the story
    whatever ``timing`` says: one belief cannot be in two places at once, so at most one of them is true.
    (Off by default here, statement by statement, for callers that judge single statements; the reward and
    :func:`check_reasoning` turn it on by default.)
    """
    places: dict[tuple, set[str]] = {}
    for statement in statements:
        if not statement.at_first:
            places.setdefault((statement.chain, statement.obj), set()).add(statement.container)
    checked = []
    for statement in statements:
        held, final = world.held_beliefs(statement.chain, statement.obj)
        if statement.at_first:
            moment = "first"
        elif timing == "final" or (consistency and len(places[(statement.chain, statement.obj)]) > 1):
            moment = "final"
        else:
            moment = "any"
        if not held:
            verdict = "unknown"
        elif moment == "first":
            verdict = "true" if held[0] == statement.container else "false"
        elif moment == "final":
            verdict = "true" if final == statement.container else "false"
        else:
            verdict = "true" if statement.container in held else "false"
        checked.append(CheckedStatement(statement, verdict, final, held, moment))  # type: ignore[arg-type]
    return checked


def score_statements(checked: Sequence[CheckedStatement], skipped: int = 0, contradiction_penalty: float = 1.0) -> FidelityReport:
    """Count verdicts and score them: (true − penalty × false) / checkable, 0.0 when none."""
    judged = [c for c in checked if c.verdict != "unknown"]
    true = sum(c.verdict == "true" for c in judged)
    false = sum(c.verdict == "false" for c in judged)
    final_true = sum(c.final_belief == c.statement.container for c in judged)
    score = (true - contradiction_penalty * false) / len(judged) if judged else 0.0
    return FidelityReport(score, len(checked) + skipped, skipped + len(checked) - len(judged), len(judged), true, false, final_true, tuple(checked))


def check_reasoning(
    reasoning: str, story: str, style: str = "hitom", semantics: str = "joint", timing: Timing = "any", contradiction_penalty: float = 1.0,
    consistency: bool = True,
) -> FidelityReport:
    """Parse ``reasoning``'s belief statements and judge them against ``story``'s oracle (options: :class:`FidelityOptions`)."""
    try:
        world = world_from_story(story, style, semantics)
    except Exception as error:  # a reward must not stop training over one odd story
        return FidelityReport(None, 0, 0, 0, 0, 0, 0, note=f"story not parseable as {style}: {error}")
    parsed = parse_statements(reasoning, world)
    return score_statements(check_statements(parsed.statements, world, timing, consistency), parsed.skipped, contradiction_penalty)


# ----------------------------------------------------------------------------- the reward


@dataclass(frozen=True)
class FidelityOptions:
    """Options of the fidelity reward (``reward_options: {fidelity: {…}}`` in a training config)."""

    timing: Timing = setting(
        "any",
        help="the moment an unqualified statement is about: any = true if its chain held that belief at some moment of the story; "
        "final = at the end ('at first' / 'initially' statements are always judged against the chain's first belief)",
    )
    contradiction_penalty: NonNegativeFloat = setting(1.0, help="weight of each false statement against the true ones (>= 0)")
    semantics: Semantics | None = setting(None, help="oracle rule of the labels; null = the row's meta.semantics, else joint")
    consistency: bool = setting(
        True,
        help="a chain and object the trace puts in two or more places (not marked 'at first') are judged at the end of the story even "
        "under timing any, so at most one is true: listing every place a chain ever believed cannot score as a faithful trace does; "
        "false = each statement judged alone",
    )


class FidelityReward(Reward):
    """TRL reward: the fidelity score of each completion's reasoning (columns ``story``, ``source``).

    ``source`` picks the story parser (see ``SOURCE_STYLES``); an optional ``meta`` column's
    ``semantics`` (written by tomrl's generators) picks the oracle rule the labels used.
    """

    name = "fidelity"
    needs = ("story", "source")
    optional = ("prefill", "meta")
    correct_means = "no false statement"

    def __init__(self, prefill: str = DEFAULT_PREFILL, options: FidelityOptions = FidelityOptions()):
        self.options = options
        super().__init__(prefill)

    def score(self, completion: Any, answer: Any = None, prefill: str | None = None, story: Any = None, source: Any = None, meta: Any = None, **columns: Any) -> RewardResult:
        prefill = self.prefill if prefill is None else prefill
        if not isinstance(story, str) or not story.strip():
            raise ValueError("reward 'fidelity' needs the story text (column 'story')")
        style = SOURCE_STYLES.get(str(source).lower()) if source is not None else None
        if style is None:
            report = FidelityReport(None, 0, 0, 0, 0, 0, 0, note=f"no story parser for source {source!r} (known: {', '.join(SOURCE_STYLES)})")
        else:
            semantics = self.options.semantics or _meta_semantics(meta) or "joint"
            reasoning = reasoning_text(completion_text(completion), prefill)
            report = check_reasoning(reasoning, story, style, semantics, self.options.timing, self.options.contradiction_penalty,
                                     self.options.consistency)
        return RewardResult(
            reward=self.name,
            score=report.score,
            format_ok=report.score is not None,
            correct=bool(report.checkable) and report.false == 0,
            extracted=None,
            components=report.components(),
            reason=report.reason(),
        )

    def __repr__(self) -> str:
        return f"FidelityReward(prefill={self.prefill!r}, options={self.options!r})"


def _meta_semantics(meta: Any) -> str | None:
    """``meta.semantics`` of a row: a dict, or the JSON text tomrl train's dataset rows carry (tomrl.training.run.dataset_row)."""
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    semantics = meta.get("semantics") if isinstance(meta, dict) else None
    return semantics if semantics in get_args(Semantics) else None
