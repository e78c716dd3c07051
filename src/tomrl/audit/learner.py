"""A learned no-ToM baseline: classifiers that never read which agents a question names.

    from tomrl.audit.learner import learned_baseline, cross_fitted_answers, fit_learner, adversarial_filter
    result = learned_baseline(test_rows, train=train_rows)     # {"0": BestRule, ..., "all": BestRule}
    print(result["3"].rule, result["3"].accuracy.format(), result["3"].chance)
    answers = cross_fitted_answers(test_rows, "gradient boosting")   # {id: answer}, folds by story
    kept = adversarial_filter(pool, seed=0)                    # AFLite: drop the agent-blind-predictable questions

    tomrl data audit --train other_seed.jsonl --test test.jsonl    # prints "Learned agent-blind baseline"

The fixed rules of :mod:`tomrl.audit.rules` answer with one position each; a learner can combine
them. Here each *candidate answer* of a location question (the story's locations of the asked
kind, containers or rooms, plus the places the asked object really occupies) gets a row of
features (:data:`FEATURE_NAMES`) computed from the parsed story
(:func:`tomrl.audit.heuristics.parse_story`), the asked object and the question's *shape* only:

- the candidate's positions in the object's path, in its location statements, among the story's
  locations and in ``Example.choices`` (from the start and the end, one-hot up to 6 and numeric);
- whether it is the answer of each of the 66 rules of :data:`tomrl.audit.rules.RULE_FAMILY`
  (the place after the j-th exit, enter, room exit, …), and order × path-position crosses;
- counts: text mentions (and their rank), moves of the object into / out of it, moves of any
  object into it, public claims and private tells naming it, the exits, enters and "made no
  movements" stays that happened while the object was in it, the share of story events then;
- story-level features: the question's order (the number of agent names in it) and template
  (agent names and the object replaced by placeholders, hashed), numbers of path places, exits,
  enters, moves, stays, claims, tells, chapters and events, the deception flag, and the
  move/stay pattern of the asked object's chapters (per turn, per chapter and as one code).

The question contributes only its order and its template: who is named is never read, so the
features of "Where does A think B thinks …" and of "Where does C think D thinks …" are identical.
The same holds for the learners (:data:`LEARNERS`): scikit-learn's
``HistGradientBoostingClassifier`` and a standardised ``LogisticRegression``, each a per-candidate
binary classifier (candidate == gold, the shared strict normaliser); a question's answer is its
candidate of highest probability (ties: the earliest candidate). Seeds are fixed, so the same
input gives the same answers, bit for bit.

Two ways to score a learner on a set (:func:`learned_baseline`): **cross-fitted** (folds by
``Example.story_id``: a question is never answered by a model that saw its story) and **fitted on
a training set** (another seed of the same generator, ``--train`` of ``tomrl data audit``). Per
order the better learner is kept; that choice is made on the audited questions themselves, so it
is in-sample and optimistic (as the rules' search is); ``cross_validated`` repeats the choice on
even-indexed questions and scores it on odd-indexed ones.

:func:`adversarial_filter` is AFLite (Le Bras et al. 2020, "Adversarial Filters of Dataset
Biases"): it removes the questions these agent-blind learners predict right most often when
held out, so that what remains needs more than the order of events.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from dataclasses import dataclass
from typing import Iterable, Literal, Sequence, get_args

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from tomrl.audit.heuristics import _EVENT, StoryFacts, _place_of, _walk, is_location_question, parsed, read_question
from tomrl.audit.rules import (MAX_POSITION, RULE_FAMILY, BestRule, Timeline, _normalised, best_result, chance_of, held_out_hits,
                               most_hits, timeline)
from tomrl.schema import Example
from tomrl.stats import accuracy

Learner = Literal["gradient boosting", "logistic regression"]
LEARNERS: tuple[Learner, ...] = get_args(Learner)  # the learners, in tie-break order

MAX_TURNS = 12  # move/stay turns of the asked object's chapters given one feature each
MAX_CHAPTERS = 4
MAX_ORDER = 4  # order one-hots and crosses: 0 … MAX_ORDER (higher orders share the last)
TEMPLATE_BUCKETS = 9973

_STAY = re.compile(r"\b[A-Z][a-z]+(?:-[A-Z][a-z]+)? made no movements?\b")


# ------------------------------------------------------------------------------- features


def _names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    story = [
        "order", *[f"order_is_{o}" for o in range(MAX_ORDER + 1)], "template_id", "asks_room", "asks_really",
        "asks_beginning", "asks_think", "asks_look", "candidates", "path_places", "path_length", "said_length",
        "story_locations", "exits", "enters", "object_moves", "all_moves", "stays", "public_claims", "private_tells",
        "chapters", "events", "deception", "object_returns_to_start", "pattern_code", "pattern_length",
        "pattern_moves", *[f"turn_{t}_move" for t in range(1, MAX_TURNS + 1)],
        *[f"chapter_{c}_code" for c in range(1, MAX_CHAPTERS + 1)], "has_choices", "choices",
    ]
    candidate = [
        *[f"is_{rule}" for rule in RULE_FAMILY],
        "in_path", "path_first", "path_first_from_end", "path_last", "path_last_from_end", "path_occurrences",
        "in_said", "said_first", "said_first_from_end", "said_last_from_end", "said_occurrences",
        "location_index", "location_index_from_end", "choice_index", "choice_index_from_end",
        "mentions", "mention_share", "mention_rank", "object_moves_into", "object_moves_out", "moves_into",
        "public_claims_naming", "private_tells_naming", "claims_about_object_naming",
        "exits_while_there", "room_exits_while_there", "enters_while_there", "stays_while_there", "event_share_there",
        "first_arrival", "last_departure", "is_start", "is_end", "candidate_index",
        *[f"order_{o}_x_path_{side}_{k}" for o in range(MAX_ORDER + 1) for side in ("start", "end") for k in range(1, MAX_POSITION + 1)],
    ]
    return tuple(story), tuple(candidate)


_STORY_FEATURES, _CANDIDATE_FEATURES = _names()
# Column names of the feature matrix: story-level features first, then per-candidate ones.
FEATURE_NAMES: tuple[str, ...] = _STORY_FEATURES + _CANDIDATE_FEATURES
_COLUMN = {name: index for index, name in enumerate(FEATURE_NAMES)}
# Columns that depend on the question (order, template, choices), filled per question; the rest is cached per story.
_QUESTION_COLUMNS = {name: _COLUMN[name] for name in (
    "order", *[f"order_is_{o}" for o in range(MAX_ORDER + 1)], "template_id", "asks_really", "asks_beginning",
    "asks_think", "asks_look", "has_choices", "choices", "choice_index", "choice_index_from_end")}
_CROSS_START = _COLUMN["order_0_x_path_start_1"]
# The "candidate is rule path_start_k / path_end_k" columns, copied into the crosses with the question's order.
_PATH_COLUMNS = [_COLUMN[f"is_path_{side}_{k}"] for side in ("start", "end") for k in range(1, MAX_POSITION + 1)]


def _position(items: Sequence[str], value: str, from_end: bool, last: bool = False) -> int:
    """1-based position of ``value`` in ``items`` (its first or last occurrence), counted from the start or end; 0 if absent."""
    indices = [i for i, item in enumerate(items) if item == value]
    if not indices:
        return 0
    i = indices[-1] if last else indices[0]
    return len(items) - i if from_end else i + 1


def _chapters_and_steps(facts: StoryFacts, thing: str | None, asks_room: bool) -> tuple[list[tuple[str, str | None, int]], list[str], list[list[str]]]:
    """The story as steps ``(kind, place of the object after it, chapter)`` with "stay" steps merged in
    (the parser skips "X made no movements …"), and the move/stay turns of the asked object's chapters."""
    starts = [m.start() for m in _EVENT.finditer(facts.text)]  # parse_story makes one event per match
    stays = [m.start() for m in _STAY.finditer(facts.text)] if len(starts) == len(facts.events) else []
    steps: list[tuple[str, str | None, int]] = []
    chapter_things: dict[int, set[str]] = {}
    chapter = 0
    stay_index = 0
    place: str | None = None
    # events and stays in text order: before each event, the stays that precede it in the text
    for (e, where, container_room), start in zip(_walk(facts), starts):
        while stay_index < len(stays) and stays[stay_index] < start:
            steps.append(("stay", place, chapter))
            stay_index += 1
        if e.kind == "enter":
            chapter += 1
        if e.kind in ("place", "move") and e.thing:
            chapter_things.setdefault(chapter, set()).add(e.thing)
        place = _place_of(thing, asks_room, where, container_room, facts.rooms) if thing else None
        kind = ("public" if e.public else "tell") if e.kind == "claim" else e.kind
        steps.append((f"object_{kind}" if e.thing == thing and kind in ("move", "place") else kind, place, chapter))
    steps += [("stay", place, chapter)] * (len(stays) - stay_index)
    own = {c for c, things in chapter_things.items() if thing in things}
    # One pass over the steps, grouped by chapter (a scan of every step per chapter was quadratic in long stories).
    turns: list[str] = []
    by_chapter: dict[int, list[str]] = {c: [] for c in own}
    for kind, _, c in steps:
        if c in own and kind in ("object_move", "stay"):
            turn = "M" if kind == "object_move" else "S"
            turns.append(turn)
            by_chapter[c].append(turn)
    return steps, turns, [by_chapter[c] for c in sorted(own)]


def _code(turns: Sequence[str]) -> int:
    """The move/stay sequence as one integer: binary digits (move = 1) after a leading 1, so length counts."""
    value = 1
    for turn in turns[:16]:
        value = 2 * value + (turn == "M")
    return value


@functools.lru_cache(maxsize=8192)
def _story_part(story: str, thing: str | None, asks_room: bool) -> tuple[tuple[str, ...], np.ndarray]:
    """Candidates and every feature that depends on the story and the asked object only (cached; read-only)."""
    facts = parsed(story)
    t: Timeline = timeline(facts, thing, asks_room)
    candidates = tuple(dict.fromkeys(list(t.story_locations) + list(t.path)))
    steps, turns, per_chapter = _chapters_and_steps(facts, thing, asks_room)
    rule_values = [rule(t) for rule in RULE_FAMILY.values()]
    events = facts.events
    object_moves = [e for e in events if e.kind == "move" and e.thing == thing]
    claims = [e for e in events if e.kind == "claim"]
    chapters = len({c for kind, _, c in steps if kind in ("object_place", "object_move", "place", "move")})
    story = {
        "asks_room": float(asks_room),
        "candidates": len(candidates), "path_places": len(set(t.path)), "path_length": len(t.path), "said_length": len(t.said),
        "story_locations": len(t.story_locations), "exits": len(t.at_exit), "enters": len(t.at_enter),
        "object_moves": len(object_moves), "all_moves": sum(e.kind == "move" for e in events),
        "stays": sum(kind == "stay" for kind, _, _ in steps), "public_claims": sum(e.public for e in claims),
        "private_tells": sum(not e.public for e in claims), "chapters": chapters, "events": len(steps),
        "deception": float(bool(claims)), "object_returns_to_start": float(len(t.path) > 1 and t.path[0] == t.path[-1]),
        "pattern_code": _code(turns), "pattern_length": len(turns), "pattern_moves": turns.count("M"),
        **{f"turn_{i}_move": (1.0 if turns[i - 1] == "M" else 0.0) if i <= len(turns) else -1.0 for i in range(1, MAX_TURNS + 1)},
        **{f"chapter_{c}_code": _code(per_chapter[c - 1]) if c <= len(per_chapter) else 0 for c in range(1, MAX_CHAPTERS + 1)},
    }
    total_mentions = sum(t.text_counts.get(c, 0) for c in candidates) or 1
    mention_order = sorted({t.text_counts.get(c, 0) for c in candidates}, reverse=True)
    matrix = np.zeros((len(candidates), len(FEATURE_NAMES)))
    for row, c in enumerate(candidates):
        there = [place == c for _, place, _ in steps]
        arrivals = [i for i, flag in enumerate(there) if flag]
        values = dict(story)
        values.update({f"is_{rule}": float(value == c) for rule, value in zip(RULE_FAMILY, rule_values)})
        values.update({
            "in_path": float(c in t.path), "path_first": _position(t.path, c, False), "path_first_from_end": _position(t.path, c, True),
            "path_last": _position(t.path, c, False, last=True), "path_last_from_end": _position(t.path, c, True, last=True),
            "path_occurrences": t.path.count(c), "in_said": float(c in t.said), "said_first": _position(t.said, c, False),
            "said_first_from_end": _position(t.said, c, True), "said_last_from_end": _position(t.said, c, True, last=True),
            "said_occurrences": t.said.count(c), "location_index": _position(t.story_locations, c, False),
            "location_index_from_end": _position(t.story_locations, c, True),
            "mentions": t.text_counts.get(c, 0), "mention_share": t.text_counts.get(c, 0) / total_mentions,
            "mention_rank": mention_order.index(t.text_counts.get(c, 0)) + 1,
            "object_moves_into": sum(e.location == c for e in object_moves),
            "object_moves_out": sum(1 for a, b in zip(t.path, t.path[1:]) if a == c),
            "moves_into": sum(e.kind == "move" and e.location == c for e in events),
            "public_claims_naming": sum(e.public and e.location == c for e in claims),
            "private_tells_naming": sum(not e.public and e.location == c for e in claims),
            "claims_about_object_naming": sum(e.thing == thing and e.location == c for e in claims),
            "exits_while_there": sum(p == c for p in t.at_exit), "room_exits_while_there": sum(p == c for p in t.at_room_exit),
            "enters_while_there": sum(p == c for p in t.at_enter),
            "stays_while_there": sum(kind == "stay" and place == c for kind, place, _ in steps),
            "event_share_there": sum(there) / len(steps) if steps else 0.0,
            "first_arrival": (arrivals[0] + 1) / len(steps) if arrivals else -1.0,
            "last_departure": (arrivals[-1] + 1) / len(steps) if arrivals else -1.0,
            "is_start": float(bool(t.path) and t.path[0] == c), "is_end": float(bool(t.path) and t.path[-1] == c),
            "candidate_index": row + 1,
        })
        for name, value in values.items():
            matrix[row, _COLUMN[name]] = value
    matrix.setflags(write=False)
    return candidates, matrix


def _template(question: str, facts: StoryFacts, thing: str | None) -> str:
    """The question with every story agent and the asked thing replaced by placeholders."""
    text = question
    if thing:
        text = re.sub(rf"\b{re.escape(thing)}\b", "<thing>", text, flags=re.IGNORECASE)
    for agent in sorted(facts.agents, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(agent)}\b", "<agent>", text)
    return " ".join(text.lower().split())


def question_order(question: str, facts: StoryFacts) -> int:
    """How many agent names the question contains (each occurrence counts): its order, read agent-blind."""
    return sum(len(re.findall(rf"\b{re.escape(agent)}\b", question)) for agent in facts.agents)


def features(example: Example) -> tuple[tuple[str, ...], np.ndarray]:
    """The candidate answers of a location question and their feature matrix (rows: candidates,
    columns: :data:`FEATURE_NAMES`); ``((), empty)`` for a question that does not ask for a location."""
    if not is_location_question(example.question):
        return (), np.zeros((0, len(FEATURE_NAMES)))
    facts = parsed(example.story)
    info = read_question(facts, example.question)
    candidates, cached = _story_part(example.story, info.thing, info.asks_room)
    matrix = np.array(cached)
    order = question_order(example.question, facts)
    template = _template(example.question, facts, info.thing)
    lowered = example.question.lower()
    choices = [_normalised(c) for c in example.choices or []]
    column = _QUESTION_COLUMNS
    matrix[:, column["order"]] = order
    for o in range(MAX_ORDER + 1):
        matrix[:, column[f"order_is_{o}"]] = float(min(order, MAX_ORDER) == o)
    matrix[:, column["template_id"]] = int(hashlib.sha256(template.encode()).hexdigest(), 16) % TEMPLATE_BUCKETS
    matrix[:, column["asks_really"]] = float("really" in lowered)
    matrix[:, column["asks_beginning"]] = float("beginning" in lowered)
    matrix[:, column["asks_think"]] = float("think" in lowered)
    matrix[:, column["asks_look"]] = float("look" in lowered or "search" in lowered)
    matrix[:, column["has_choices"]] = float(bool(choices))
    matrix[:, column["choices"]] = len(choices)
    cross = _CROSS_START + min(order, MAX_ORDER) * len(_PATH_COLUMNS)
    for row, c in enumerate(candidates):
        matrix[row, column["choice_index"]] = _position(choices, _normalised(c), False)
        matrix[row, column["choice_index_from_end"]] = _position(choices, _normalised(c), True)
        matrix[row, cross:cross + len(_PATH_COLUMNS)] = matrix[row, _PATH_COLUMNS]
    return candidates, matrix


# ------------------------------------------------------------------------------- learners


def _model(learner: Learner, seed: int):
    if learner == "gradient boosting":
        # no early stopping: its validation split would make the fit depend on more than the seed
        return HistGradientBoostingClassifier(max_iter=100, learning_rate=0.08, max_leaf_nodes=15, min_samples_leaf=10,
                                              l2_regularization=1.0, early_stopping=False, random_state=seed)
    if learner == "logistic regression":
        return make_pipeline(StandardScaler(), LogisticRegression(C=0.3, solver="newton-cholesky", max_iter=500))
    raise ValueError(f"unknown learner {learner!r}; one of {', '.join(LEARNERS)}")


def _rows(examples: Iterable[Example]) -> tuple[list[Example], list[tuple[str, ...]], np.ndarray, np.ndarray]:
    """Location questions with candidates, their candidates, the stacked features and the targets (candidate == gold)."""
    kept, candidate_lists, matrices, targets = [], [], [], []
    for e in examples:
        candidates, matrix = features(e)
        if not candidates:
            continue
        gold = _normalised(e.answer)
        kept.append(e)
        candidate_lists.append(candidates)
        matrices.append(matrix)
        targets += [int(bool(gold) and _normalised(c) == gold) for c in candidates]
    x = np.vstack(matrices) if matrices else np.zeros((0, len(FEATURE_NAMES)))
    return kept, candidate_lists, x, np.array(targets, dtype=int)


@dataclass(frozen=True)
class FittedLearner:
    """An agent-blind learner fitted on a training set; :meth:`predict` answers other questions."""

    learner: Learner
    model: object | None  # the fitted scikit-learn estimator; None when training had no positive or no negative row

    def predict(self, examples: Iterable[Example]) -> dict[str, str | None]:
        """Example id -> the candidate of highest probability (ties: the earliest); None for non-location questions."""
        examples = list(examples)
        answers: dict[str, str | None] = {e.id: None for e in examples}
        kept, candidate_lists, x, _ = _rows(examples)
        if not kept:
            return answers
        if self.model is None:
            scores = np.zeros(len(x))
        else:
            with threadpool_limits(limits=1):
                scores = self.model.predict_proba(x)[:, 1]
        start = 0
        for e, candidates in zip(kept, candidate_lists):
            answers[e.id] = candidates[int(np.argmax(scores[start:start + len(candidates)]))]
            start += len(candidates)
        return answers


def fit_learner(train_examples: Iterable[Example], learner: Learner, seed: int = 0) -> FittedLearner:
    """Fit ``learner`` on the location questions of ``train_examples`` (one model for all orders)."""
    _, _, x, y = _rows(train_examples)
    if len(set(y.tolist())) < 2:
        return FittedLearner(learner, None)
    model = _model(learner, seed)
    # One thread: these fits are small, and on a busy machine OpenMP threads slow them down several-fold.
    with threadpool_limits(limits=1):
        model.fit(x, y)
    return FittedLearner(learner, model)


def story_folds(examples: Sequence[Example], folds: int, seed: int = 0) -> list[int]:
    """Fold index of each example: stories (``story_id``) shuffled with ``seed`` and dealt round-robin."""
    stories = sorted({e.story_id for e in examples})
    random.Random(seed).shuffle(stories)
    folds = max(1, min(folds, len(stories)))
    fold_of = {story: i % folds for i, story in enumerate(stories)}
    return [fold_of[e.story_id] for e in examples]


def cross_fitted_answers(examples: Iterable[Example], learner: Learner, folds: int = 5, seed: int = 0) -> dict[str, str | None]:
    """Each question answered by ``learner`` fitted on the other folds, folds by story (a question is never
    answered by a model that saw its story); fewer stories than ``folds``: one fold per story; one story: all None."""
    examples = list(examples)
    answers: dict[str, str | None] = {e.id: None for e in examples}
    located = [e for e in examples if is_location_question(e.question)]
    if len({e.story_id for e in located}) < 2:
        return answers
    fold_of = story_folds(located, folds, seed)
    for fold in sorted(set(fold_of)):
        train = [e for e, f in zip(located, fold_of) if f != fold]
        test = [e for e, f in zip(located, fold_of) if f == fold]
        answers.update(fit_learner(train, learner, seed).predict(test))
    return answers


# ------------------------------------------------------------------------------- the baseline

CROSS_FITTED = "cross-fitted by story"
FITTED_ON_TRAIN = "fitted on train"


def learner_name(learner: Learner, mode: str) -> str:
    return f"learner: {learner}, {mode}"


def fit_learners(train_examples: Sequence[Example], seed: int = 0) -> list[FittedLearner]:
    """Every learner of :data:`LEARNERS` fitted on ``train_examples`` (fit once, test on many sets)."""
    return [fit_learner(train_examples, learner, seed) for learner in LEARNERS]


def learned_answers(examples: Sequence[Example], fitted: Iterable[FittedLearner] = (), seed: int = 0) -> dict[str, dict[str, dict[str, str | None]]]:
    """Every learner's answers by way of fitting and name (:func:`learner_name`): ``{CROSS_FITTED: {name:
    answers}}`` on ``examples``, plus ``FITTED_ON_TRAIN`` for the learners ``fitted`` on a training set."""
    result = {CROSS_FITTED: {learner_name(learner, CROSS_FITTED): cross_fitted_answers(examples, learner, seed=seed) for learner in LEARNERS}}
    fitted = list(fitted)
    if fitted:
        result[FITTED_ON_TRAIN] = {learner_name(f.learner, FITTED_ON_TRAIN): f.predict(examples) for f in fitted}
    return result


def best_of(examples: Iterable[Example], answer_sets: dict[str, dict[str, str | None]]) -> dict[str, BestRule]:
    """Per order (keys as :func:`tomrl.audit.rules.best_rules`: ``str(order)``, ``"None"``, ``"all"``) the answer set
    with the most right answers on that order's location questions (ties: the earlier set); ``"all"`` answers each
    question with its order's best. The choice is in-sample; ``cross_validated`` chooses on even-indexed questions
    and scores on odd-indexed ones."""
    groups: dict[int | None, list[Example]] = {}
    for e in examples:
        if is_location_question(e.question):
            groups.setdefault(e.order, []).append(e)
    names = list(answer_sets)
    result: dict[str, BestRule] = {}
    if not names:
        return result
    combined: tuple[list[bool], list[float], list[bool], dict[str, str | None]] = ([], [], [], {})
    for order in sorted(groups, key=lambda o: -1 if o is None else o):
        members = groups[order]
        hits = [[bool(_normalised(answer_sets[n].get(e.id))) and _normalised(answer_sets[n].get(e.id)) == _normalised(e.answer)
                 for n in names] for e in members]
        chosen = most_hits(hits)
        correct = [row[chosen] for row in hits]
        held_out = held_out_hits(hits)
        chances = [chance_of(e.story, e.question, e.answer) for e in members]
        answers = {e.id: answer_sets[names[chosen]].get(e.id) for e in members}
        result[str(order)] = best_result(names[chosen], correct, chances, held_out, answers)
        for pool, part in zip(combined, (correct, chances, held_out)):
            pool += part
        combined[3].update(answers)
    if groups:
        result["all"] = best_result("by order", *combined)
    return result


def learned_baseline(examples: Iterable[Example], train: Sequence[Example] | None = None, seed: int = 0) -> dict[str, BestRule]:
    """The better agent-blind learner per order: gradient boosting or logistic regression, cross-fitted by story
    and, when ``train`` is given, also fitted on ``train``. Choosing the better one on the audited questions is
    in-sample, so optimistic (as :func:`tomrl.audit.rules.best_rules` is); see :func:`best_of`."""
    examples = list(examples)
    by_mode = learned_answers(examples, fit_learners(train, seed) if train is not None else (), seed)
    return best_of(examples, {name: answers for answer_sets in by_mode.values() for name, answers in answer_sets.items()})


def learned_by_mode(examples: Iterable[Example], fitted: Iterable[FittedLearner] = (), seed: int = 0) -> dict[str, dict[str, BestRule]]:
    """The better learner per order, apart for each way of fitting: ``{CROSS_FITTED: {key: BestRule}}``, plus
    ``FITTED_ON_TRAIN`` when learners fitted on a training set (:func:`fit_learners`) are given."""
    examples = list(examples)
    return {mode: best_of(examples, answer_sets) for mode, answer_sets in learned_answers(examples, fitted, seed).items()}


# ------------------------------------------------------------------------------- AFLite


def adversarial_filter(examples: Iterable[Example], *, partitions: int = 16, threshold: float = 0.75,
                       remove_fraction: float = 0.05, min_keep: float = 0.5, max_rounds: int = 20,
                       learner: Learner = "logistic regression", seed: int = 0) -> list[Example]:
    """AFLite (Le Bras et al. 2020): drop the questions an agent-blind learner gets right when held out.

    Each round splits the current pool ``partitions`` times into random halves *by story*, fits
    ``learner`` on one half and answers the other; a question's *predictability* is the share of
    the times it was held out that the answer was right. The ``remove_fraction`` of the pool with
    the highest predictability, among those at or above ``threshold``, is removed (fewer if fewer
    qualify). Rounds repeat until no question qualifies, the pool would drop below ``min_keep`` of
    its start, or ``max_rounds`` is reached. Questions that do not ask for a location are never
    removed. Returns the kept examples in their input order; deterministic given ``seed``.
    """
    examples = list(examples)
    pool = [e for e in examples if is_location_question(e.question)]
    floor = int(np.ceil(min_keep * len(pool)))
    rng = random.Random(seed)
    for _ in range(max_rounds):
        stories = sorted({e.story_id for e in pool})
        if len(stories) < 2 or len(pool) <= floor:
            break
        right = {e.id: 0 for e in pool}
        held = {e.id: 0 for e in pool}
        for _ in range(partitions):
            shuffled = list(stories)
            rng.shuffle(shuffled)
            train_stories = set(shuffled[: len(shuffled) // 2])
            train = [e for e in pool if e.story_id in train_stories]
            test = [e for e in pool if e.story_id not in train_stories]
            answers = fit_learner(train, learner, seed).predict(test)
            for e in test:
                held[e.id] += 1
                guess = _normalised(answers[e.id])
                right[e.id] += bool(guess) and guess == _normalised(e.answer)
        scores = {i: right[i] / held[i] for i in right if held[i]}
        qualifying = sorted((i for i, s in scores.items() if s >= threshold), key=lambda i: (-scores[i], i))
        quota = min(max(1, int(remove_fraction * len(pool))), len(pool) - floor)
        removed = set(qualifying[:quota])
        if not removed:
            break
        pool = [e for e in pool if e.id not in removed]
    kept = {e.id for e in pool}
    return [e for e in examples if e.id in kept or not is_location_question(e.question)]
