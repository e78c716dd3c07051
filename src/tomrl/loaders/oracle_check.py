"""Mark the rows whose official label the belief oracle disputes (Hi-ToM and ToMi).

    from tomrl.loaders.oracle_check import flag_disputes
    examples = flag_disputes(examples, style="hitom")
    [e.id for e in examples if e.meta["oracle_disputes"]]

Each example gets ``meta["oracle_answer"]`` (the answer :func:`tomrl.world.parsers.answer_question`
derives from the story, or ``None`` when it cannot parse or decide it), ``meta["oracle_disputes"]``
(``True`` when that answer differs from the gold label; ``None`` when the oracle failed on the row)
and ``meta["oracle_error"]`` where it failed.
"""

from __future__ import annotations

from typing import Literal

from tomrl.schema import Example


def flag_disputes(examples: list[Example], style: Literal["hitom", "tomi"]) -> list[Example]:
    from tomrl.world.parsers import answer_question  # imported here: loading the world model takes most of a second

    flagged = []
    for example in examples:
        meta = dict(example.meta)
        try:
            answer = answer_question(example.story, example.question.strip(), style=style)
        except Exception as err:  # unparsable row: recorded, not fatal
            meta.update(oracle_answer=None, oracle_disputes=None, oracle_error=f"{type(err).__name__}: {err}")
        else:
            meta.update(oracle_answer=answer, oracle_disputes=answer != example.answer)
        flagged.append(example.replace(meta=meta))
    return flagged
