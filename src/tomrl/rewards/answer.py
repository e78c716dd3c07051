"""The one answer extractor and matcher: training rewards and the evaluation scorer both call it.

"Correct" has one definition per *scheme*, and every stage that asks "was this right?" asks
:func:`check_answer`:

    from tomrl.rewards.answer import check_answer
    check = check_answer(completion, gold="green_drawer")                 # strict (default)
    check = check_answer(completion, gold="green_drawer", scheme="paper")  # Paper A training
    check.format_ok, check.extracted, check.correct, check.reason

A *completion* is the text the model generated after the prompt. The prompt may end with a
*prefill* (Paper A prefills the assistant turn with ``<think>``); the prefill is not part of the
completion, but the format rules count it, so pass the prefill the prompt used (default
``"<think>"``; ``""`` for prompts without one, see :mod:`tomrl.prompts`).

Schemes: ``strict`` (tomrl's default: one well-formed think block and answer block, normalised
equality), ``paper`` (Paper A's training reward: four-tag format, last answer tag, equal or *ends
with* gold), ``paper_eval`` (Paper A's evaluation: the same match, no format check) and ``paper_b``
(four-tag format, strict equality, independent). docs/rewards.md (Answer schemes) tables their
format rules, extraction and normalisation, Paper A's quirks included.

Answer kinds, read from the question type (pass ``question_type=`` where it is known; training rows
and evaluation samples carry it), change only how an extracted answer is compared:

- ``set`` (question types ending in ``:list``, FANToM's list questions; the gold is the aware
  characters joined by ", ", or "none"). ``paper_eval`` scores them exactly as FANToM's own scorer
  does (``eval_fantom.py``, ``evaluate_list_q``, github.com/skywalker023/fantom @ ebd35eb): right
  when every aware name, lower-cased, is a substring of the lower-cased answer (the last answer
  tag's text, as ``paper_eval`` reads it; an empty tag counts, no tag is no answer) and no unaware
  name is; any other words are ignored. The unaware names come from ``unaware=`` (the loader keeps
  them in ``meta["wrong_answer_list"]``); a caller that leaves it out gets only the first half checked.
  ``strict``, ``paper`` and ``paper_b`` are stricter: the answer is a set of names, order-insensitive
  ("Bob and Alice" is right for gold "Alice, Bob"), whose items (split at commas, semicolons,
  "and", "&", "/", new lines) must equal the gold's after the scheme's normalisation; "none",
  "nobody", "no one" are the empty set. So a word that is not a name ("Alice and Bob know it",
  "- Alice", "Alice Smith", "Nobody knows", "Alice, maybe Bob"), or a name that is not an aware
  character (whether or not it is a listed unaware one), makes the answer wrong under them, and a
  name hidden in another word ("Tom" in "tomorrow") never counts. Why: substring scoring rewards
  hedging (an answer naming everyone passes whenever the unaware list is empty) and cannot tell a
  name from a word containing it; the reward trained on must not pay for either. The same blindness
  gives the one case where strict accepts what FANToM rejects: an unaware name inside an answered
  name (unaware "Al", answer "Alice"). tests/rewards/test_fantom_official_rule.py replays the official
  rule on a casebook. The suffix match of the paper schemes does not apply.
- ``number`` (question type ``math``: GSM8K): the answer is read from the last ``\\boxed{…}``
  (Qwen's and Paper A's math format) if the completion has one, else from the scheme's answer
  tag, and compared as a number (``$1,024.00`` equals ``1024``). ``paper_eval``, the lenient
  pipeline, also falls back to the last number anywhere in the completion (lm-evaluation-harness's
  "flexible extract"); ``strict`` does not.
- ``text``: everything else, as above.

Every function here is total: any string (empty, megabytes long, control characters, lone
surrogates) gives an answer and never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

Scheme = Literal["strict", "paper", "paper_eval", "paper_b"]
SCHEMES: tuple[str, ...] = get_args(Scheme)
AnswerKind = Literal["text", "set", "number"]
DEFAULT_PREFILL = "<think>"
MATH_QUESTION_TYPE = "math"  # GSM8K rows (tomrl.evaluation.benchmarks.read_gsm8k)

THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE = "<think>", "</think>", "<answer>", "</answer>"
PAPER_TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)

# Anything a reader could take for a think/answer tag, whatever its case or inner spacing.
# (Written so that no two parts can match the same characters: linear time on any input.)
_ANY_TAG = re.compile(r"<\s*(?:/\s*)?(?:think|answer)\s*(?:/\s*)?>", re.IGNORECASE)
_WORD_CHARACTER = re.compile(r"\w")

_STRICT_PUNCTUATION = str.maketrans("", "", ".,;:!?'\"")
# Separators of the names in a list answer ("Alice, Bob and Carol"); commas are split before normalising.
_LIST_SEPARATORS = re.compile(r"\s*(?:[,;&/\n]|\band\b)\s*", re.IGNORECASE)
_EMPTY_LIST = frozenset({"none", "nobody", "no one", "noone", "neither", "nothing", "empty"})
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_BOXED = "\\boxed"
_PAPER_PUNCTUATION = re.compile(r"[.,;:!?]")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class AnswerCheck:
    """What one scheme made of one completion.

    ``format_ok``: the scheme's format requirement holds; ``extracted``: the answer text the
    scheme read (stripped, not normalised; None when it reads none: strict reads nothing from a
    malformed completion, the paper schemes report the last answer tag even when their format
    check fails); ``correct``: the answer counts as right under the scheme; ``reason``: one line
    saying why, for per-sample logs.
    """

    format_ok: bool
    extracted: str | None
    correct: bool
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- normalisation


def normalize(text: str, scheme: Scheme = "strict") -> str:
    """Normalise an answer (or a gold label) the way ``scheme`` compares them."""
    text = _as_text(text)
    if scheme in ("paper", "paper_eval"):
        # Paper A's order, kept as released: collapse and strip first, then delete punctuation,
        # then turn underscores into spaces (no second collapse).
        normalized = _WHITESPACE.sub(" ", text.lower()).strip()
        normalized = _PAPER_PUNCTUATION.sub("", normalized)
        return normalized.replace("_", " ")
    if scheme not in SCHEMES:
        raise ValueError(f"unknown answer scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    normalized = text.lower().replace("_", " ").translate(_STRICT_PUNCTUATION)
    normalized = _WHITESPACE.sub(" ", normalized).strip()
    if normalized.startswith("the "):
        normalized = normalized[4:]
    return normalized


def answer_kind(question_type: str | None) -> AnswerKind:
    """How answers to questions of this type are compared: ``set`` (``…:list``), ``number`` (``math``) or ``text``."""
    if isinstance(question_type, str):
        if question_type.endswith(":list"):
            return "set"
        if question_type == MATH_QUESTION_TYPE:
            return "number"
    return "text"


def answer_items(text: str | None, scheme: Scheme = "strict") -> frozenset[str]:
    """The names of a list answer, normalised as ``scheme`` normalises answers ("none" = no names)."""
    items = set()
    for part in _LIST_SEPARATORS.split(_as_text(text)):
        item = normalize(part, scheme).strip()
        if item and item not in _EMPTY_LIST:
            items.add(item)
    return frozenset(items)


def parse_number(text: str | None, lenient: bool = False) -> float | None:
    """The number an answer states: "$1,024.00" -> 1024.0, "18 dollars" -> 18.0, "\\frac{3}{4}" -> 0.75.

    Strict (the default) reads a number only when the answer holds exactly one; ``lenient`` takes
    the last one (lm-evaluation-harness's flexible extraction). None when there is none.
    """
    text = _as_text(text)
    fraction = re.fullmatch(r"\s*\$?\s*\\[dt]?frac\{(-?\d+)\}\{(\d+)\}\s*\$?\s*", text)
    if fraction and len(fraction.group(0)) < 100 and int(fraction.group(2)) != 0:
        return int(fraction.group(1)) / int(fraction.group(2))
    numbers = _NUMBER.findall(_THOUSANDS.sub("", text))
    if not numbers or (len(numbers) > 1 and not lenient):
        return None
    try:
        return float(numbers[-1])
    except (ValueError, OverflowError):
        return None


def numbers_equal(predicted: float | None, gold: float | None) -> bool:
    if predicted is None or gold is None:
        return False
    return abs(predicted - gold) <= 1e-6 * max(1.0, abs(gold))


def last_boxed(text: str | None) -> str | None:
    """The content of the last ``\\boxed{…}`` whose braces close, stripped; None if there is none."""
    text = _as_text(text)
    end = len(text)  # an earlier box that is still open here can never close (linear time on any input)
    start = text.rfind(_BOXED + "{")
    while start >= 0:
        depth = 0
        for position in range(start + len(_BOXED), end):
            if text[position] == "{":
                depth += 1
            elif text[position] == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len(_BOXED) + 1 : position].strip()
        end = start
        start = text.rfind(_BOXED + "{", 0, start)
    return None


def answers_match(
    predicted: str | None, gold: str, scheme: Scheme = "strict", question_type: str | None = None, unaware: Sequence[str] = ()
) -> bool:
    """Does an extracted answer match the gold under ``scheme``'s normaliser and matcher (and the
    question type's answer kind: a set of names, a number, or text)? ``unaware``: the names a list
    answer must not contain (FANToM's ``wrong_answer``), read only by ``paper_eval`` (see the module docstring)."""
    kind = answer_kind(question_type)
    if kind == "set" and scheme == "paper_eval":
        return predicted is not None and fantom_list_check(predicted, list_names(gold), unaware)[0]
    if predicted is None or not predicted.strip():
        return False
    if kind == "set":
        return answer_items(predicted, scheme) == answer_items(gold, scheme)
    if kind == "number":
        return numbers_equal(parse_number(predicted, lenient=scheme == "paper_eval"), parse_number(gold, lenient=True))
    if scheme in ("paper", "paper_eval"):
        norm_pred, norm_gold = normalize(predicted, scheme), normalize(gold, scheme)
        if norm_pred == norm_gold:
            return True
        return paper_suffix_match(norm_pred, norm_gold)
    norm_pred = normalize(predicted, "strict")
    return bool(norm_pred) and norm_pred == normalize(gold, "strict")


def unaware_names(meta: Any) -> tuple[str, ...]:
    """A list question's unaware characters from an example's ``meta`` (a dict, or the JSON string the
    training rows carry): the FANToM loader's ``wrong_answer_list``; () for any other question or shape.
    Every caller of :func:`check_answer` passes them, so the reward, validation and evaluation agree."""
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return ()
    names = meta.get("wrong_answer_list") if isinstance(meta, dict) else None
    if isinstance(names, str):
        return (names,)
    return tuple(name for name in names if isinstance(name, str)) if isinstance(names, (list, tuple)) else ()


def list_names(gold: str) -> list[str]:
    """The aware characters of a list question's gold, as the FANToM loader wrote it (names joined by
    ", "; "none" for nobody), in order and unnormalised: FANToM's ``qa["correct_answer"]``."""
    gold = _as_text(gold)
    if gold.strip().lower() in _EMPTY_LIST:
        return []
    return [name.strip() for name in gold.split(",") if name.strip()]


def fantom_list_check(response: str, aware: Sequence[str], unaware: Sequence[str] = ()) -> tuple[bool, list[str], list[str]]:
    """FANToM's ``evaluate_list_q`` (``eval_fantom.py`` at github.com/skywalker023/fantom @ ebd35eb),
    rule for rule: right when every aware name, lower-cased, is a substring of the lower-cased
    response and no unaware name is. Returns ``(correct, aware names not found, unaware names found)``
    (FANToM stops at the first of each; the lists only feed the reason, the verdict is the same)."""
    response = _as_text(response).lower()
    aware, unaware = _name_list(aware), _name_list(unaware)
    missing = [name for name in aware if name.lower() not in response]
    included = [name for name in unaware if name.lower() in response]
    return not (missing or included), missing, included


def _name_list(names: object) -> list[str]:
    """A list of names from what a caller passed: a lone string is one name (not its letters), None or a non-list none."""
    if isinstance(names, str):
        return [names]
    return [_as_text(name) for name in names] if isinstance(names, (list, tuple, set, frozenset)) else []


def paper_suffix_match(norm_pred: str, norm_gold: str) -> bool:
    """Paper A's "loose" match ``re.match(".*?" + re.escape(gold) + r"\\s*\\b$", pred)``.

    On Paper A-normalised text (which has no newline) that regex holds exactly when the
    prediction ends with the gold and its last character is a word character (``\\b`` at the
    end of the string). Computed directly because the regex takes time proportional to
    len(pred) × len(gold), which a megabyte-long answer turns into hours. There is no word
    boundary *before* the gold: "toolbox" matches "box".
    """
    return bool(norm_pred) and norm_pred.endswith(norm_gold) and _WORD_CHARACTER.match(norm_pred[-1]) is not None


# ----------------------------------------------------------------------------- format checks


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def paper_format_ok(completion: str, prefill: str = DEFAULT_PREFILL) -> tuple[bool, str]:
    """Paper A's format check on prefill + completion: each of the four tags once, in order."""
    text = _as_text(prefill) + _as_text(completion)
    counts = [text.count(tag) for tag in PAPER_TAGS]
    for tag, count in zip(PAPER_TAGS, counts):
        if count != 1:
            return False, f"format: {tag} appears {count} times (expected once, prefill included)"
    positions = [text.find(tag) for tag in PAPER_TAGS]
    if positions != sorted(positions):
        return False, "format: tags out of order (expected <think> … </think> <answer> … </answer>)"
    return True, "format ok"


def _strict_parse(completion: str, prefill: str) -> tuple[str | None, str]:
    """Return ``(answer, reason)``: the answer block's text if the strict format holds, else None."""
    text = _as_text(prefill) + _as_text(completion)
    tags = list(_ANY_TAG.finditer(text))
    spelled = [m.group(0) for m in tags]
    if any(tag not in PAPER_TAGS for tag in spelled):
        odd = next(tag for tag in spelled if tag not in PAPER_TAGS)
        return None, f"format: non-standard tag {odd!r}"
    if spelled == list(PAPER_TAGS):
        think_open, think_close, answer_open, answer_close = tags
        if text[: think_open.start()].strip():
            return None, "format: text before <think>"
        between = text[think_close.end() : answer_open.start()]
    elif spelled == [ANSWER_OPEN, ANSWER_CLOSE] and THINK_OPEN not in _as_text(prefill):
        answer_open, answer_close = tags
        between = ""
    else:
        return None, _describe_tag_problem(spelled, prefill)
    if between.strip():
        return None, "format: text between </think> and <answer>"
    if text[answer_close.end() :].strip():
        return None, "format: text after </answer>"
    answer = text[answer_open.end() : answer_close.start()].strip()
    if not answer:
        return None, "format: empty answer"
    return answer, "format ok"


def _describe_tag_problem(spelled: list[str], prefill: str) -> str:
    for tag in PAPER_TAGS:
        count = spelled.count(tag)
        if count > 1:
            where = " (the prefill already opened it)" if tag == THINK_OPEN and THINK_OPEN in _as_text(prefill) else ""
            return f"format: {tag} appears {count} times{where}"
    if ANSWER_OPEN not in spelled or ANSWER_CLOSE not in spelled:
        return "format: no <answer>…</answer> block"
    if THINK_OPEN in spelled and THINK_CLOSE not in spelled:
        return "format: </think> missing"
    if THINK_CLOSE in spelled and THINK_OPEN not in spelled:
        return "format: </think> without <think>"
    return "format: tags out of order (expected <think> … </think> <answer> … </answer>)"


# ----------------------------------------------------------------------------- extraction


def last_answer_tag(text: str) -> str | None:
    """Paper A's extractor: the text of the last ``<answer>…</answer>``, stripped (None if none)."""
    # Same result as the last match of re.finditer(r"<answer>(.*?)</answer>", text, re.DOTALL),
    # found with str.find: the regex rescans to the end of the text from every unclosed
    # <answer>, quadratic time on adversarial input.
    text = _as_text(text)
    found = None
    position = 0
    while True:
        start = text.find(ANSWER_OPEN, position)
        if start < 0:
            break
        end = text.find(ANSWER_CLOSE, start + len(ANSWER_OPEN))
        if end < 0:
            break
        found = (start + len(ANSWER_OPEN), end)
        position = end + len(ANSWER_CLOSE)
    return text[found[0] : found[1]].strip() if found is not None else None


def extract_answer(completion: str, scheme: Scheme = "strict", prefill: str = DEFAULT_PREFILL) -> str | None:
    """The answer ``scheme`` reads from ``completion`` (stripped, not normalised), or None.

    ``strict`` reads only from a well-formed completion; the paper schemes read the last
    ``<answer>…</answer>`` whatever surrounds it.
    """
    if scheme == "strict":
        return _strict_parse(completion, prefill)[0]
    if scheme in ("paper", "paper_b"):
        return last_answer_tag(_as_text(prefill) + _as_text(completion))
    if scheme == "paper_eval":
        return last_answer_tag(completion)
    raise ValueError(f"unknown answer scheme {scheme!r}; known: {', '.join(SCHEMES)}")


def check_answer(
    completion: str,
    gold: str,
    scheme: Scheme = "strict",
    prefill: str = DEFAULT_PREFILL,
    question_type: str | None = None,
    unaware: Sequence[str] = (),
) -> AnswerCheck:
    """Check one completion against its gold answer under ``scheme`` (see the module docstring);
    ``question_type`` selects the answer kind (:func:`answer_kind`); ``unaware``: a list question's
    unaware characters (FANToM's ``wrong_answer``, the loader's ``meta["wrong_answer_list"]``), which
    ``paper_eval`` needs to score it as FANToM does (the other schemes' set equality does not)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown answer scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    gold = _as_text(gold)
    if answer_kind(question_type) == "number":
        return _check_number(completion, gold, scheme, prefill)
    if scheme == "strict":
        answer, reason = _strict_parse(completion, prefill)
        if answer is None:
            return AnswerCheck(False, None, False, reason)
        correct = answers_match(answer, gold, "strict", question_type)
        return AnswerCheck(True, answer, correct, _verdict(answer, gold, correct, "strict", question_type))
    if scheme == "paper_eval":
        answer = last_answer_tag(completion)
        if answer is None:
            return AnswerCheck(False, None, False, "no <answer>…</answer> tag")
        if answer_kind(question_type) == "set":
            return _check_fantom_list(answer, gold, unaware)
        correct = answers_match(answer, gold, "paper_eval", question_type)
        return AnswerCheck(True, answer, correct, _verdict(answer, gold, correct, "paper_eval", question_type))
    format_ok, format_reason = paper_format_ok(completion, prefill)
    answer = last_answer_tag(_as_text(prefill) + _as_text(completion))
    if scheme == "paper":
        if not format_ok:
            return AnswerCheck(False, answer, False, format_reason)
        if not answer:
            return AnswerCheck(True, answer, False, "empty answer")
        correct = answers_match(answer, gold, "paper", question_type)
        return AnswerCheck(True, answer, correct, _verdict(answer, gold, correct, "paper", question_type))
    # paper_b: the two components are independent.
    correct = answers_match(answer, gold, "strict", question_type)
    reason = _verdict(answer, gold, correct, "strict", question_type) if answer else "no answer"
    return AnswerCheck(format_ok, answer, correct, f"{format_reason}; {reason}")


def _check_fantom_list(answer: str, gold: str, unaware: Sequence[str]) -> AnswerCheck:
    """``paper_eval`` on a list question: FANToM's ``evaluate_list_q`` on the last answer tag's text
    (an empty tag included: with no aware character it is right, as FANToM counts an empty response)."""
    correct, missing, included = fantom_list_check(answer, list_names(gold), unaware)
    if correct:
        return AnswerCheck(True, answer, True, "correct (every aware name appears, no unaware one: FANToM's evaluate_list_q)")
    return AnswerCheck(True, answer, False, f"wrong: aware names not found: {_clip(', '.join(missing)) or 'none'}; "
                                            f"unaware names present: {_clip(', '.join(included)) or 'none'}")


def _check_number(completion: str, gold: str, scheme: Scheme, prefill: str) -> AnswerCheck:
    """A math answer: the last ``\\boxed{…}`` if the completion has one, else the scheme's answer tag
    (a boxed answer inside it counts too); ``paper_eval`` falls back to the last number anywhere."""
    text = _as_text(completion)
    boxed = last_boxed(text)
    if scheme == "strict":
        answer, reason = _strict_parse(completion, prefill)
        format_ok = answer is not None or boxed is not None
        if boxed is not None:
            answer = boxed
        if not format_ok:
            return AnswerCheck(False, None, False, f"{reason}; no \\boxed{{}} answer either")
    elif scheme == "paper_eval":
        tagged = last_answer_tag(text)
        answer = boxed if boxed is not None else tagged
        format_ok = answer is not None
        if answer is None:
            numbers = _NUMBER.findall(_THOUSANDS.sub("", text))
            if not numbers:
                return AnswerCheck(False, None, False, "no \\boxed{}, no <answer> tag and no number")
            answer = numbers[-1]  # flexible extraction: the last number of the completion
    else:
        format_ok, reason = paper_format_ok(completion, prefill)
        tagged = last_answer_tag(_as_text(prefill) + text)
        answer = last_boxed(tagged) if tagged and last_boxed(tagged) is not None else (tagged if tagged is not None else boxed)
        if scheme == "paper" and not format_ok:
            return AnswerCheck(False, answer, False, reason)
    inner = last_boxed(answer)
    if inner is not None:
        answer = inner
    correct = answers_match(answer, gold, scheme, MATH_QUESTION_TYPE)
    return AnswerCheck(format_ok, answer, correct, _verdict(answer or "", gold, correct, scheme, MATH_QUESTION_TYPE))


def _verdict(answer: str, gold: str, correct: bool, scheme: Scheme, question_type: str | None = None) -> str:
    kind = answer_kind(question_type)
    if kind == "set":
        predicted, expected = answer_items(answer, scheme), answer_items(gold, scheme)
        if correct:
            return "correct (the same names, order aside)"
        missing, extra = sorted(expected - predicted), sorted(predicted - expected)
        return f"wrong: missing {_clip(', '.join(missing)) or 'none'}; not in the gold: {_clip(', '.join(extra)) or 'none'}"
    if kind == "number":
        value = parse_number(answer, lenient=scheme == "paper_eval")
        if correct:
            return f"correct (numerically equal to {_clip(gold)!r})"
        return f"wrong: {_clip(answer)!r} (number {value}) vs gold {_clip(gold)!r}" if value is not None else f"wrong: no single number in {_clip(answer)!r}"
    norm_pred, norm_gold = normalize(answer, scheme), normalize(gold, scheme)
    if correct:
        how = "equal" if norm_pred == norm_gold else "prediction ends with gold"
        return f"correct ({how} after normalisation)"
    return f"wrong: {_clip(norm_pred)!r} vs gold {_clip(norm_gold)!r}"


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
