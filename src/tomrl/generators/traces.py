"""Oracle-written reasoning traces: short think-traces for a supervised warm start.

    from tomrl.generators.traces import reasoning_trace
    reasoning_trace(example)                  # an Example of Hi-ToM/ToMi style (question parsed)
    reasoning_trace(events, Query(("A", "B"), "apple"))

A trace tracks the asked object through the story from the point of view of the asked agents,
in sentences the reasoning-fidelity reward can check against the oracle, and ends with the
answer's belief statement::

    The apple is in the red_box at first. Anna saw the apple moved to the blue_crate. Ben saw the
    apple moved to the blue_crate. Anna did not see the apple moved to the green_drawer. Ben saw the
    apple moved to the green_drawer. Anna thinks the apple is in the blue_crate. Ben thinks the apple
    is in the green_drawer. Anna thinks Ben thinks the apple is in the blue_crate.

Every "X thinks …" and "… is in the …" sentence is true according to the oracle at the end of
the story (tests check this); "saw" sentences list, for each move of the object, which asked
agents observed it, and claims or tells an asked agent believed are mentioned with their source.
"""

from __future__ import annotations

from typing import Sequence

from tomrl.schema import Example
from tomrl.world.oracle import BeliefOracle, Semantics
from tomrl.world.parsers import parse_question, parse_story
from tomrl.world.world import Enter, Event, Move, PrivateTell, PublicClaim, Query


def belief_sentence(chain: Sequence[str], obj: str, container: str) -> str:
    """"A thinks B thinks the O is in the C." (``chain == ()``: "The O is in the C.")"""
    if not chain:
        return f"The {obj} is in the {container}."
    return " ".join(f"{agent} thinks" for agent in chain) + f" the {obj} is in the {container}."


def reasoning_trace(example_or_events: Example | Sequence[Event], query: Query | None = None, semantics: Semantics | None = None) -> str:
    """A short trace of who saw what, ending in the belief statement that answers ``query``."""
    if isinstance(example_or_events, Example):
        example = example_or_events
        style = "tomi" if "tomi" in example.source else "hitom"
        events = parse_story(example.story, style)
        query = query or parse_question(example.question)
        semantics = semantics or example.meta.get("semantics", "joint")
    else:
        events = list(example_or_events)
        if query is None:
            raise ValueError("give the query when passing events")
    oracle = BeliefOracle(events, semantics=semantics or "joint")
    obj = query.obj
    sentences: list[str] = []
    start = oracle.initial_location(obj)
    if start is not None:
        sentences.append(f"The {obj} is in the {start} at first.")
    if query.kind == "memory":
        sentences.append(f"So the {obj} was in the {start} at the beginning.")
        return " ".join(sentences)

    asked = list(dict.fromkeys(query.chain))
    for index, event in enumerate(events):
        if isinstance(event, Move) and event.obj == obj:
            if not asked:
                sentences.append(f"{event.agent} moved the {obj} to the {event.container}.")
                continue
            seen = set(oracle.observers(index))
            for agent in asked:
                if agent in seen:
                    sentences.append(f"{agent} saw the {obj} moved to the {event.container}.")
                elif oracle.belief((agent,), obj, at=index) is not None:
                    sentences.append(f"{agent} did not see the {obj} moved to the {event.container}.")
        elif isinstance(event, (PublicClaim, PrivateTell)) and event.obj == obj and asked:
            for agent in asked:
                before, after = oracle.belief((agent,), obj, at=index), oracle.belief((agent,), obj, at=index + 1)
                if agent != event.speaker and after == event.container and before != after:
                    how = "publicly claimed" if isinstance(event, PublicClaim) else f"privately told {agent}"
                    sentences.append(f"{event.speaker} {how} that the {obj} is in the {event.container}, and {agent} believes it.")
        elif isinstance(event, Enter) and asked:
            for agent in asked:
                before, after = oracle.belief((agent,), obj, at=index), oracle.belief((agent,), obj, at=index + 1)
                if agent in event.agents and before is not None and after != before:
                    sentences.append(f"{agent} entered the {event.room} again and saw the {obj} in the {after}.")

    if query.kind == "reality" or not query.chain:
        sentences.append(belief_sentence((), obj, oracle.reality(obj) or "unknown place"))
        return " ".join(sentences)
    for agent in asked:
        belief = oracle.belief((agent,), obj)
        if belief is not None:
            sentences.append(belief_sentence((agent,), obj, belief))
    for length in range(2, len(query.chain) + 1):
        prefix = query.chain[:length]
        belief = oracle.belief(prefix, obj)
        if belief is not None:
            sentences.append(belief_sentence(prefix, obj, belief))
    return " ".join(dict.fromkeys(sentences))
