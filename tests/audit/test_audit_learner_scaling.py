"""The learner's story features are linear in the story: a long story (a ToMi story repeated to megabytes,
one chapter per "entered") is featurised in seconds, and grouping the move/stay turns by chapter in one
pass gives what a scan of every step per chapter gave (issue 27: that scan took 13 s for a 1 MB story)."""

from __future__ import annotations

import time

import pytest

from tomrl.audit.heuristics import is_location_question, parsed, read_question
from tomrl.audit.learner import _chapters_and_steps, features
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.schema import Example


def location_questions(benchmark: str, seed: int) -> list[Example]:
    examples = generate(GenerateConfig(benchmark=benchmark, n=60, seed=seed))
    return [e for e in examples if is_location_question(e.question)]


def long_story(example: Example, size: int) -> Example:
    """``example`` with its story repeated to ``size`` characters: the asked object is in every chapter."""
    repeats = size // (len(example.story) + 1) + 1
    return example.replace(story="\n".join([example.story] * repeats), id=f"long-{size}", story_id=f"long-{size}")


def scanned_per_chapter(steps: list[tuple[str, str | None, int]]) -> tuple[list[str], list[list[str]]]:
    """The turns and per-chapter turns as the former code computed them: every step scanned once per chapter."""
    own = {c for kind, _, c in steps if kind in ("object_move", "object_place")}  # the chapters that place or move the object
    turns = [("M" if kind == "object_move" else "S") for kind, _, c in steps if c in own and kind in ("object_move", "stay")]
    per_chapter = [[("M" if kind == "object_move" else "S") for kind, _, c in steps if c == ch and kind in ("object_move", "stay")]
                   for ch in sorted(own)]
    return turns, per_chapter


@pytest.mark.parametrize("benchmark", ["hitom", "tomi"])
def test_turns_by_chapter_equal_a_scan_per_chapter(benchmark):
    examples = location_questions(benchmark, seed=5)
    examples.append(long_story(examples[0], 20_000))
    most = 0
    for example in examples:
        facts = parsed(example.story)
        info = read_question(facts, example.question)
        steps, turns, per_chapter = _chapters_and_steps(facts, info.thing, info.asks_room)
        assert (turns, per_chapter) == scanned_per_chapter(steps), example.id
        most = max(most, len(per_chapter))
    assert most > 10  # the long story: its object in every one of many chapters


@pytest.mark.parametrize("benchmark", ["hitom", "tomi"])
def test_a_3_mb_story_is_featurised_in_seconds(benchmark):
    """3 MB: the ToMi story has about 15,000 chapters. The scan per chapter took 35 s for it here; now under 1 s."""
    example = long_story(location_questions(benchmark, seed=6)[0], 3_000_000)
    started = time.perf_counter()
    candidates, matrix = features(example)
    seconds = time.perf_counter() - started
    assert candidates and matrix.shape[0] == len(candidates)
    assert seconds < 10, f"{seconds:.1f} s for a {len(example.story) / 1e6:.1f} MB story"
