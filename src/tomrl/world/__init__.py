"""World model and belief oracle: agents, rooms, containers, objects, events, and who believes what.

    from tomrl.world.parsers import parse_hitom_story, parse_question
    from tomrl.world.oracle import BeliefOracle
    oracle = BeliefOracle(parse_hitom_story(story_text))
    oracle.belief(("Anna", "Ben"), "apple")     # where Anna thinks Ben thinks the apple is

- :mod:`tomrl.world.world`     events, queries and the world setup
- :mod:`tomrl.world.oracle`    the belief oracle and its semantics (read its docstring)
- :mod:`tomrl.world.parsers`   official Hi-ToM / ToMi text -> events and queries
- :mod:`tomrl.world.sentences` events and queries -> Hi-ToM / ToMi text

``tomrl data verify hitom|tomi`` checks the oracle against the official labels (docs/oracle.md).
"""
