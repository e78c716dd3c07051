"""Leakage between splits: test questions whose story (or story and question) also occurs in training.

    from tomrl.audit.leakage import find_leakage
    report = find_leakage(train_examples, test_examples)
    report.total.story_leaked, report.groups[("tomrl-paper-hitom", 4)].story_leaked   # 600 on the ToM-RL release

Stories are compared by :func:`tomrl.loaders.base.story_key` (whitespace collapsed, line numbers
dropped), so a story joined by spaces in one file and by newlines in another is the same story;
an ExploreToM infilled story also counts as its structured original (``meta["story_structure"]``).
Questions are compared after collapsing whitespace and case. A leaked *pair* (story and
question both in training) is a test question that was trained on; a leaked *story* is a test
question about a story the model was trained on (e.g. a higher order asked about it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tomrl.loaders.base import story_key, story_keys
from tomrl.schema import Example


def question_key(question: str) -> str:
    return " ".join(question.lower().split())


@dataclass
class LeakCount:
    n: int = 0  # test questions
    story_leaked: int = 0  # … whose story occurs in training
    pair_leaked: int = 0  # … whose story and question occur together in training
    answer_leaked: int = 0  # … whose story, question and gold answer occur together in training
    stories: int = 0  # distinct test stories
    stories_leaked: int = 0  # … of which occur in training

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class LeakageReport:
    train_rows: int
    train_stories: int
    total: LeakCount
    groups: dict[tuple[str, int | None], LeakCount]  # (source, order) -> counts
    leaked_ids: list[str] = field(default_factory=list)  # test ids whose story is in training

    def to_dict(self) -> dict:
        return {
            "train_rows": self.train_rows,
            "train_stories": self.train_stories,
            "total": self.total.to_dict(),
            "groups": [{"source": s, "order": o, **c.to_dict()} for (s, o), c in sorted(self.groups.items(), key=_group_sort)],
            "leaked_ids": self.leaked_ids,
        }


def _group_sort(item):
    (source, order), _ = item
    return (source, -1 if order is None else order)


def find_leakage(train: list[Example], test: list[Example]) -> LeakageReport:
    train_stories: set[str] = set()
    train_pairs: set[tuple[str, str]] = set()
    train_triples: set[tuple[str, str, str]] = set()
    for e in train:
        q = question_key(e.question)
        for key in story_keys(e):
            train_stories.add(key)
            train_pairs.add((key, q))
            train_triples.add((key, q, question_key(e.answer)))
    total = LeakCount()
    groups: dict[tuple[str, int | None], LeakCount] = {}
    story_sets: dict[tuple[str, int | None], tuple[set, set]] = {}
    all_stories: tuple[set, set] = (set(), set())
    leaked_ids = []
    for e in test:
        group = groups.setdefault((e.source, e.order), LeakCount())
        seen, leaked_stories = story_sets.setdefault((e.source, e.order), (set(), set()))
        keys = story_keys(e)
        q, a = question_key(e.question), question_key(e.answer)
        story_hit = bool(keys & train_stories)
        pair_hit = any((k, q) in train_pairs for k in keys)
        answer_hit = any((k, q, a) in train_triples for k in keys)
        main = story_key(e.story)
        for counts, (stories, leaked) in ((group, (seen, leaked_stories)), (total, all_stories)):
            counts.n += 1
            counts.story_leaked += story_hit
            counts.pair_leaked += pair_hit
            counts.answer_leaked += answer_hit
            stories.add(main)
            if story_hit:
                leaked.add(main)
        if story_hit:
            leaked_ids.append(e.id)
    for key, (stories, leaked) in story_sets.items():
        groups[key].stories, groups[key].stories_leaked = len(stories), len(leaked)
    total.stories, total.stories_leaked = len(all_stories[0]), len(all_stories[1])
    return LeakageReport(len(train), len({story_key(e.story) for e in train}), total, groups, leaked_ids)
