"""Label balance on hand-made examples."""

from __future__ import annotations

from tomrl.audit.balance import answer_position, label_balance
from tomrl.schema import Example

STORY = "Al and Bo entered the den.\nThe pen is in the red_box.\nAl moved the pen to the blue_bag.\nBo moved the pen to the green_tin."


def ex(i: int, answer: str, question: str = "Where is the pen really?", order: int = 0) -> Example:
    return Example(id=str(i), source="s", split="test", story=STORY, question=question, answer=answer, order=order,
                   question_type="q", deception=None, story_length=4, story_id="x")


def test_positions_and_majority():
    rows = [ex(0, "red_box"), ex(1, "green_tin"), ex(2, "green_tin"), ex(3, "blue_bag"), ex(4, "yellow_jar"),
            ex(5, "yes", question="Does Al know? Answer yes or no.")]
    assert [answer_position(e) for e in rows] == ["first", "last", "last", "other", "absent", None]
    (row,) = label_balance(rows)
    assert row.n == 6 and row.distinct_answers == 5 and row.location_questions == 5
    assert row.top_answers[0] == ("green tin", 2)
    assert (row.majority.k, row.majority.n) == (2, 6)
    assert row.positions == {"first": 1, "last": 2, "other": 1, "absent": 1}
    assert 0 < row.entropy < 1


def test_single_answer_has_zero_entropy():
    (row,) = label_balance([ex(0, "red_box"), ex(1, "red_box")])
    assert row.entropy == 0.0 and row.majority.value == 1.0
