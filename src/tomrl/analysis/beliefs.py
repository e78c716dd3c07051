"""Does a reasoning trace state what some agent believes? Asked of the fidelity reward's parser.

    from tomrl.analysis.beliefs import states_a_belief
    states_a_belief(completion, prefill="<think>", story=example.story, source=example.source)
    # True / False, or None when the story's source has no parser (the trace is then not counted)

The reasoning-collapse detector tracks the share of traces that still name an agent's belief
("Anna thinks the apple is in the red_box"). The statements are found by
:func:`tomrl.rewards.fidelity.check_reasoning` — the same parser, in the same story world, that
the fidelity reward uses — so "a belief statement" has one definition in tomrl. A statement
about where an object *really* is (an empty chain) is not a belief; negated, hypothetical and
reported-speech statements, which the parser skips, do not count either.
"""

from __future__ import annotations


def states_a_belief(completion: str, prefill: str, story: str | None, source: str | None) -> bool | None:
    """Whether ``completion``'s reasoning states at least one agent's belief about the story."""
    from tomrl.rewards.fidelity import SOURCE_STYLES, check_reasoning, reasoning_text

    style = SOURCE_STYLES.get(str(source).lower()) if source else None
    if style is None or not story:
        return None
    report = check_reasoning(reasoning_text(completion, prefill), story, style)
    if report.score is None:  # the story could not be parsed
        return None
    return any(checked.statement.chain for checked in report.statements)
