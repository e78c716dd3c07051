"""FANToM's list questions: ``paper_eval`` replays the official ``evaluate_list_q``; ``strict`` is stricter.

A casebook of hand-written answers, each with the verdict of FANToM's rule (checked against a copy of
that rule) and of tomrl's strict set equality; plus, where the real ``fantom_v1.json`` is installed
under the shared data, synthetic answers to every list question of it.
"""

from __future__ import annotations

import json

import pytest

from tomrl.loaders.registry import load
from tomrl.rewards.answer import answers_match, check_answer, fantom_list_check, list_names


# ----------------------------------------------------------------------------- the official rule


def official_evaluate_list_q(qa: dict, model_response: str) -> tuple[bool, bool, bool]:
    """A COPY of the official rule: ``FantomEvalAgent.evaluate_list_q`` in ``eval_fantom.py`` of
    github.com/skywalker023/fantom, commit ebd35eb5c9eb157c24bc7bcffac66ae138eaed44 (lines 156-183),
    with ``self`` dropped. ``evaluate_response`` calls it on the raw prediction, with no other
    preprocessing (the text after the last "Answer:" is cut out at generation, in ``parse_response``)."""
    excluded_aware_character = False
    included_unaware_character = False
    for character in qa['correct_answer']:
        if character.lower() not in model_response.lower():
            excluded_aware_character = True
            break

    for character in qa['wrong_answer']:
        if character.lower() in model_response.lower():
            included_unaware_character = True
            break

    return not(excluded_aware_character or included_unaware_character), excluded_aware_character, included_unaware_character


# ----------------------------------------------------------------------------- the casebook

ALICE_BOB = (["Alice", "Bob"], ["Carol"])
NOBODY = ([], ["Carol"])
TOM = (["Tom"], ["Ann"])

# (aware, unaware, answer, FANToM's verdict, strict's verdict, why they differ where they do)
CASES = [
    (*ALICE_BOB, "Alice, Bob", True, True, ""),
    (*ALICE_BOB, "Bob, Alice", True, True, ""),
    (*ALICE_BOB, "Bob and Alice", True, True, ""),
    (*ALICE_BOB, "bob; alice.", True, True, ""),
    (*ALICE_BOB, "ALICE, BOB", True, True, ""),
    (*ALICE_BOB, "Alice & Bob", True, True, ""),
    (*ALICE_BOB, "Alice/Bob", True, True, ""),
    (*ALICE_BOB, "Alice\nBob", True, True, ""),
    (*ALICE_BOB, "Alice", False, False, ""),
    (*ALICE_BOB, "Alice, Bob, Carol", False, False, ""),
    (*ALICE_BOB, "Alice, Bob, and maybe Carol", False, False, ""),
    (*ALICE_BOB, "Alice, Bob (not Carol)", False, False, ""),
    (*ALICE_BOB, "I don't know", False, False, ""),
    (*ALICE_BOB, "Alice and Bob know about it.", True, False, "prose: 'bob know about it' is not a name"),
    (*ALICE_BOB, "Both Alice and Bob were there when it came up, so they know.", True, False, "prose"),
    (*ALICE_BOB, "The answer is Alice and Bob", True, False, "prose"),
    (*ALICE_BOB, "Alice Smith, Bob Jones", True, False, "full names are other items than first names"),
    (*ALICE_BOB, "- Alice\n- Bob", True, False, "bullets stay part of the items"),
    (*ALICE_BOB, "1. Alice\n2. Bob", True, False, "numbered list"),
    (*ALICE_BOB, "Alice, Bob, David", True, False, "an extra name that is not a listed unaware character"),
    (*ALICE_BOB, "alicebob", True, False, "names glued together"),
    (*ALICE_BOB, "Alice and Bob's friend", True, False, "extra words"),
    (["Alice", "Bob"], [], "Alice, Bob, Carol, David, Eve", True, False, "hedging: naming everyone passes when no one is unaware"),
    (*NOBODY, "none", True, True, ""),
    (*NOBODY, "Nobody", True, True, ""),
    (*NOBODY, "Nobody knows", True, False, "'nobody knows' is not the empty set's word"),
    (*NOBODY, "No one knows about it.", True, False, "prose"),
    (*NOBODY, "", True, False, "an empty answer: FANToM finds no unaware name in it, strict reads no answer"),
    (*NOBODY, "Carol", False, False, ""),
    (*NOBODY, "No one except Carol", False, False, ""),
    (["Alice"], ["Carol"], "", False, False, ""),
    (["Alice"], ["Bob", "Carol"], "Only Alice knows; Bob and Carol left.", False, False, ""),
    (["Alice"], ["Bob"], "alice.", True, True, ""),
    (["Alice"], ["Bob"], "The Alice", True, True, ""),
    (["Alice"], ["Al"], "Alice", False, True, "SUBSTRING: the unaware 'Al' is found inside the aware 'Alice'"),
    (*TOM, "Tom", True, True, ""),
    (*TOM, "I will tell you tomorrow", True, False, "'tom' inside 'tomorrow' counts for FANToM"),
    (*TOM, "Tom and Joanne", False, False, ""),
    (*TOM, "Tom, Anna", False, False, ""),
    ([], [], "Nobody", True, True, ""),
]


def _gold(aware: list[str]) -> str:
    return ", ".join(aware) if aware else "none"  # as tomrl.loaders.fantom writes a list question's answer


def test_the_casebook_is_large_and_covers_both_directions():
    assert len(CASES) >= 30
    assert sum(official != strict for *_, official, strict, _why in CASES) >= 15
    assert all(bool(why) == (official != strict) for *_, official, strict, why in CASES)  # every difference is explained


@pytest.mark.parametrize("aware, unaware, answer, official, strict, why", CASES, ids=[repr(case[2]) for case in CASES])
def test_paper_eval_replays_the_official_rule(aware, unaware, answer, official, strict, why):
    qa = {"correct_answer": aware, "wrong_answer": unaware}
    assert official_evaluate_list_q(qa, answer)[0] is official  # the hand verdict is the official rule's
    gold = _gold(aware)
    assert list_names(gold) == aware
    for question_type in ("answerability:list", "info_accessibility:list"):
        completion = f"reasoning</think><answer>{answer}</answer>"
        check = check_answer(completion, gold, "paper_eval", question_type=question_type, unaware=unaware)
        assert check.correct is official and check.extracted == answer.strip()
        assert answers_match(answer, gold, "paper_eval", question_type, unaware=unaware) is official
    correct, missing, included = fantom_list_check(answer, aware, unaware)
    _, excluded_aware, included_unaware = official_evaluate_list_q(qa, answer)
    assert (correct, bool(missing), bool(included)) == (official, excluded_aware, included_unaware)


@pytest.mark.parametrize("aware, unaware, answer, official, strict, why", CASES, ids=[repr(case[2]) for case in CASES])
def test_strict_stays_stricter_where_documented(aware, unaware, answer, official, strict, why):
    check = check_answer(f"reasoning</think><answer>{answer}</answer>", _gold(aware), "strict",
                         question_type="answerability:list", unaware=unaware)
    assert check.correct is strict
    # strict accepts nothing FANToM rejects, except where FANToM finds an unaware name inside another word
    assert not (strict and not official) or why.startswith("SUBSTRING")


def test_paper_eval_reads_the_last_answer_tag_and_reasons_name_the_names():
    unaware = ["Carol"]
    # The rule is applied to the extracted answer: names outside the last tag do not count.
    assert check_answer("Carol? <answer>Carol</answer> no: <answer>Alice, Bob</answer>", "Alice, Bob", "paper_eval",
                        question_type="answerability:list", unaware=unaware).correct
    no_tag = check_answer("Alice, Bob", "Alice, Bob", "paper_eval", question_type="answerability:list", unaware=unaware)
    assert not no_tag.correct and no_tag.extracted is None  # no answer tag, no answer (FANToM's prompt has no tags)
    wrong = check_answer("<answer>Alice and Carol</answer>", "Alice, Bob", "paper_eval",
                         question_type="answerability:list", unaware=unaware)
    assert not wrong.correct and "Bob" in wrong.reason and "Carol" in wrong.reason
    # A lone name given as a string is a name, not a list of letters.
    assert not check_answer("<answer>Alice, Bob, Carol</answer>", "Alice, Bob", "paper_eval", question_type="answerability:list",
                            unaware="Carol").correct


# ----------------------------------------------------------------------------- the real data, where installed


def _question_set(set_id: str, aware: list[str], unaware: list[str]) -> dict:
    listing = {"question": "Who knows?", "correct_answer": aware, "wrong_answer": unaware}
    return {"set_id": set_id, "short_context": "Lee: My dog is called Bori.", "full_context": "Lee: My dog is called Bori.",
            "factQA": {"question": "What is the dog called?", "correct_answer": "Bori"}, "beliefQAs": [],
            "answerabilityQA_list": listing, "infoAccessibilityQA_list": listing}


def _assert_list_questions_scored_as_fantom_scores_them(file) -> int:
    """Synthetic answers to every list question of a fantom_v1.json, through the loader: the aware
    names in prose, plus one unaware name, everyone, nobody. Returns the number of checks."""
    examples = [e for e in load("fantom", path=file) if e.question_type.endswith(":list")]
    assert examples
    checked = 0
    for example in examples:
        aware, unaware = example.meta["answer_list"], example.meta["wrong_answer_list"]
        qa = {"correct_answer": aware, "wrong_answer": unaware}
        responses = ["I think " + " and ".join(aware) + " know about it.", ", ".join(aware + unaware[:1]),
                     "Everyone: " + ", ".join(aware + unaware), "Nobody knows."]
        for response in responses:
            check = check_answer(f"<answer>{response}</answer>", example.answer, "paper_eval",
                                 question_type=example.question_type, unaware=unaware)
            assert check.correct is official_evaluate_list_q(qa, response)[0], (example.id, response)
            checked += 1
    return checked


def test_list_questions_of_a_written_file_are_scored_as_fantom_scores_them(tmp_path):
    sets = [_question_set("1-0-0", ["Lee"], ["Kim"]), _question_set("1-0-1", ["Lee", "Kim"], []),
            _question_set("2-0-0", [], ["Ann", "Joanne"]), _question_set("3-0-0", ["Alice"], ["Al"])]
    file = tmp_path / "fantom_v1.json"
    file.write_text(json.dumps(sets))
    assert _assert_list_questions_scored_as_fantom_scores_them(file) == 4 * 2 * 4


def test_every_list_question_of_the_real_data_is_scored_as_fantom_scores_it(shared_data):
    for name in ("fantom_v1.json", "fantom_v1.jsonl"):
        if (shared_data / "fantom" / name).is_file():
            _assert_list_questions_scored_as_fantom_scores_them(shared_data / "fantom" / name)
            return
    pytest.skip(f"no fantom_v1.json under {shared_data / 'fantom'} (see its PROVENANCE.md)")


def test_evaluation_validation_and_the_reward_all_read_the_unaware_names(tmp_path):
    """One answer checker, one rule: ``tomrl eval``'s scorer, the validation scorer and an answer reward (whose
    rows carry ``meta`` as JSON) each take the unaware names from the example, so "Lee, Kim" is wrong
    under ``paper_eval`` when Kim is unaware, and "Lee" is right."""
    from tomrl.evaluation.runner import score
    from tomrl.rewards.answer import unaware_names
    from tomrl.rewards.functions import AnswerReward, paper_a_score
    from tomrl.training.run import dataset_row
    from tomrl.training.validation import score_completions

    file = tmp_path / "fantom_v1.json"
    file.write_text(json.dumps([_question_set("1-0-0", ["Lee"], ["Kim"])]))
    example = next(e for e in load("fantom", path=file) if e.question_type.endswith(":list"))
    row = dataset_row(example, "prompt", "")
    assert unaware_names(example.meta) == ("Kim",) and unaware_names(row["meta"]) == ("Kim",)
    assert unaware_names({"wrong_answer_list": "Kim"}) == ("Kim",) and unaware_names("not json") == () and unaware_names(None) == ()
    reward = AnswerReward("list_check", "paper_eval", paper_a_score, prefill="")
    for text, right in (("<answer>Lee, Kim</answer>", False), ("<answer>Lee</answer>", True)):
        assert score(text, example.answer, "", ("paper_eval",), example.question_type, unaware_names(example.meta))["paper_correct"] is right
        assert score_completions([example], [(text, 5)], "paper_eval", "").rows[0]["correct"] is right
        columns = {key: value for key, value in row.items() if key not in ("prompt", "prefill")}
        assert reward.score(text, **columns).correct is right
