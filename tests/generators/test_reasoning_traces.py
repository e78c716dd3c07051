"""Oracle-written reasoning traces state only what the oracle holds, and end in the answer."""

from __future__ import annotations

import re

from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.generators.traces import reasoning_trace
from tomrl.world.oracle import BeliefOracle
from tomrl.world.parsers import parse_story
from tomrl.world.world import Enter, Exit, Move, ObjectLocation, Query

STATEMENT = re.compile(r"((?:[A-Z][a-z]+ thinks )*)the ([a-z_]+) is in the ([a-z_]+)\.", re.IGNORECASE)


def test_trace_by_hand():
    events = [
        Enter(("Anna", "Ben"), "kitchen"),
        ObjectLocation("apple", "red_box"),
        Move("Anna", "apple", "blue_crate"),
        Exit("Anna", "kitchen"),
        Move("Ben", "apple", "green_drawer"),
    ]
    trace = reasoning_trace(events, Query(("Anna", "Ben"), "apple"))
    assert trace == (
        "The apple is in the red_box at first. Anna saw the apple moved to the blue_crate. "
        "Ben saw the apple moved to the blue_crate. Anna did not see the apple moved to the green_drawer. "
        "Ben saw the apple moved to the green_drawer. Anna thinks the apple is in the blue_crate. "
        "Ben thinks the apple is in the green_drawer. Anna thinks Ben thinks the apple is in the blue_crate."
    )


def test_every_statement_of_generated_traces_is_true_and_the_last_gives_the_answer():
    for benchmark in ("hitom", "tomi"):
        for example in generate(GenerateConfig(benchmark=benchmark, n=120, stories=40, seed=6)):
            trace = reasoning_trace(example)
            oracle = BeliefOracle(parse_story(example.story, benchmark))
            if example.question_type == "memory":
                assert trace.endswith(f"So the {example.meta['query']['object']} was in the {example.answer} at the beginning.")
                continue
            statements = STATEMENT.findall(trace)
            assert statements, trace
            for thinks, obj, container in statements:
                chain = tuple(name for name in thinks.split(" thinks ") if name.strip())
                assert oracle.belief(chain, obj) == container, (trace, chain)
            last_chain = tuple(name for name in statements[-1][0].split(" thinks ") if name.strip())
            assert last_chain == tuple(example.meta["query"]["chain"]) and statements[-1][2] == example.answer
            assert trace.endswith(f"the {example.answer}.")
