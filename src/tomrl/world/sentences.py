"""Write world events and queries as Hi-ToM / ToMi sentences (the forms of the official releases).

    from tomrl.world.sentences import render_story, render_question
    text = render_story(events, style="hitom")        # "1 Anna and Ben entered the kitchen.\\n2 …"
    render_question(Query(("Anna", "Ben"), "apple"), style="hitom")
    # "Where does Anna think Ben thinks the apple is?"

The forms are exactly those :mod:`tomrl.world.parsers` reads, so a generated story can be parsed
back and its labels re-derived from the text alone. Hi-ToM stories are numbered one sentence per
line; ToMi stories are one unnumbered sentence per line and ToMi's distractors carry no final
period, as in the release.
"""

from __future__ import annotations

from typing import Iterable, Literal

from tomrl.world.world import (
    Distractor,
    Enter,
    Event,
    Exit,
    Move,
    ObjectLocation,
    PrivateTell,
    PublicClaim,
    Query,
    Stay,
)

Style = Literal["hitom", "tomi"]


def join_names(names: tuple[str, ...] | list[str]) -> str:
    """``("A",)`` → "A"; ``("A", "B", "C")`` → "A, B and C" (Hi-ToM's list form, no Oxford comma)."""
    names = list(names)
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def render_event(event: Event, style: Style = "hitom") -> str:
    """One event as one sentence."""
    if isinstance(event, Enter):
        if style == "tomi" and len(event.agents) != 1:
            raise ValueError("ToMi sentences have one agent per 'entered'")
        return f"{join_names(event.agents)} entered the {event.room}."
    if isinstance(event, Exit):
        return f"{event.agent} exited the {event.room}."
    if isinstance(event, ObjectLocation):
        return f"The {event.obj} is in the {event.container}."
    if isinstance(event, Move):
        return f"{event.agent} moved the {event.obj} to the {event.container}."
    if isinstance(event, Stay):
        return f"{event.agent} made no movements and stayed in the {event.room} for 1 minute."
    if isinstance(event, PublicClaim):
        # Hi-ToM writes no article before the object in a claim.
        return f"{event.speaker} publicly claimed that {event.obj} is in the {event.container}."
    if isinstance(event, PrivateTell):
        return f"{event.speaker} privately told {event.listener} that the {event.obj} is in the {event.container}."
    if isinstance(event, Distractor):
        return event.text
    raise TypeError(f"not an event: {event!r}")


def render_story(events: Iterable[Event], style: Style = "hitom") -> str:
    """The story text: Hi-ToM numbers its lines ("1 …"), ToMi does not."""
    sentences = [render_event(event, style) for event in events]
    if style == "hitom":
        return "\n".join(f"{number} {sentence}" for number, sentence in enumerate(sentences, start=1))
    return "\n".join(sentences)


def render_question(query: Query, style: Style = "hitom") -> str:
    """The question text for a query, in the data set's wording."""
    obj = query.obj
    if query.kind == "reality":
        return f"Where is the {obj} really?"
    if query.kind == "memory":
        return f"Where was the {obj} at the beginning?"
    chain = query.chain
    if style == "tomi":
        if len(chain) == 1:
            return f"Where will {chain[0]} look for the {obj}?"
        if len(chain) == 2:
            return f"Where does {chain[0]} think that {chain[1]} searches for the {obj}?"
        raise ValueError("ToMi asks beliefs of order 1 and 2 only")
    if len(chain) == 1:
        return f"Where does {chain[0]} really think the {obj} is?"
    thinks = " ".join(f"{agent} thinks" for agent in chain[1:])
    return f"Where does {chain[0]} think {thinks} the {obj} is?"
