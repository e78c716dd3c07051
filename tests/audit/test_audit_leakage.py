"""Leakage detection on hand-made splits and on the ToM-RL release."""

from __future__ import annotations

from tomrl.audit.leakage import find_leakage
from tomrl.loaders.registry import load
from tomrl.schema import Example


def ex(i: str, story: str, question: str, answer: str = "box", order: int = 1, source: str = "s", **meta) -> Example:
    return Example(id=i, source=source, split="test", story=story, question=question, answer=answer, order=order,
                   question_type="q", deception=None, story_length=1, story_id=i, meta=meta)


def test_hand_made_leakage():
    train = [ex("t1", "A went in. The cat is in the box.", "Where is the cat?"),
             ex("t2", "B went in.\nThe dog is in the bag.", "Where does B think the dog is?", "bag")]
    test = [
        ex("a", "A went in.\nThe cat is in the box.", "Where is the cat?", order=0),  # same story (newlines), same question
        ex("b", "B went in. The  dog is in the bag.", "where does c think the dog is?", "bag", order=2),  # story only
        ex("c", "C went in.", "Where is the cat?", order=2),  # new story
        ex("d", "Another telling.", "Where does B think the dog is?", "bag", order=2, story_structure="B went in. The dog is in the bag."),
    ]
    report = find_leakage(train, test)
    assert (report.total.n, report.total.story_leaked, report.total.pair_leaked, report.total.answer_leaked) == (4, 3, 2, 2)
    assert report.leaked_ids == ["a", "b", "d"]
    order2 = report.groups[("s", 2)]
    assert (order2.n, order2.story_leaked, order2.stories, order2.stories_leaked) == (3, 2, 3, 2)
    assert report.train_stories == 2


def test_release_leakage(shared_data):
    train = load("tomrl-paper-train")
    report = find_leakage(train, load("tomrl-paper-test-merged"))
    order4 = report.groups[("tomrl-paper-hitom", 4)]
    assert (order4.n, order4.story_leaked, order4.pair_leaked) == (600, 600, 0)
    explore = [c for (source, _), c in report.groups.items() if source == "tomrl-paper-exploretom"]
    assert sum(c.n for c in explore) == 1066 and sum(c.story_leaked for c in explore) == 1027
    assert sum(c.story_leaked for (source, _), c in report.groups.items() if source == "tomrl-paper-tomi") == 0
    infilled = find_leakage(train, load("tomrl-paper-exploretom-infilled"))
    assert infilled.total.story_leaked == 1027  # the infilled stories retell leaked structured ones
