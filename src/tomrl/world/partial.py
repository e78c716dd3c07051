"""Partial-ToM answers: one agent's first-order belief standing in for a nested belief.

    from tomrl.world.oracle import BeliefOracle
    from tomrl.world.partial import PARTIAL_RULES, partial_answers, nesting_required
    oracle = BeliefOracle(events)
    partial_answers(oracle, ("Anna", "Ben", "Cleo"), "apple")   # {"first_named": "red_box", ...}
    nesting_required(oracle, ("Anna", "Ben", "Cleo"), "apple")  # True: no single agent's belief is the answer

A question of order k >= 2 ("where does A think B thinks C thinks the O is?") can often be
answered right without nesting: the first-order belief of one agent of the chain may already be
the gold. A reader who tracks what *one* person saw, but not what one person thinks another saw,
gets such a question right. Each rule here picks one agent of the chain by a fixed criterion that
needs no nesting, and answers with that agent's own first-order belief (from the belief oracle):

- ``first_named`` / ``last_named``: the first / last agent named in the question;
- ``left_first`` / ``left_last``: the agent of the chain whose first exit from a room comes
  earliest / latest in the story (agents who never leave count as leaving last);
- ``oldest_knowledge`` / ``newest_knowledge``: the agent whose belief about the object was last
  updated earliest / latest (:meth:`BeliefOracle.belief_source`).

A question is **nesting-required** when no agent of its chain has a first-order belief equal to
the gold, so that none of these rules (nor any other choice of one agent) can answer it.
Orders 0 and 1 are never nesting-required: order 1 *is* a first-order belief.

The world layer holds these so that the generators (which pick questions) and the audit (which
measures them, :mod:`tomrl.audit.partial`) share one definition.
"""

from __future__ import annotations

from typing import Callable, Sequence

from tomrl.world.oracle import BeliefOracle
from tomrl.world.world import Exit

# A rule picks one agent of the chain: rule(oracle, chain, obj) -> agent.
PartialRule = Callable[[BeliefOracle, tuple[str, ...], str], str]


def _first_exit(oracle: BeliefOracle, agent: str) -> int:
    for index, event in enumerate(oracle.events):
        if isinstance(event, Exit) and event.agent == agent:
            return index
    return len(oracle.events)


def _knowledge(oracle: BeliefOracle, agent: str, obj: str) -> int:
    source = oracle.belief_source((agent,), obj)
    return -2 if source is None else source


def _by(key: Callable[[BeliefOracle, str, str], int], latest: bool) -> PartialRule:
    def rule(oracle: BeliefOracle, chain: tuple[str, ...], obj: str) -> str:
        keys = [key(oracle, agent, obj) for agent in chain]
        best = max(keys) if latest else min(keys)
        return chain[keys.index(best)]  # ties: the agent named first

    return rule


# name -> which agent of the chain answers (its first-order belief is the rule's answer).
PARTIAL_RULES: dict[str, PartialRule] = {
    "first_named": lambda oracle, chain, obj: chain[0],
    "last_named": lambda oracle, chain, obj: chain[-1],
    "left_first": _by(lambda oracle, agent, obj: _first_exit(oracle, agent), latest=False),
    "left_last": _by(lambda oracle, agent, obj: _first_exit(oracle, agent), latest=True),
    "oldest_knowledge": _by(_knowledge, latest=False),
    "newest_knowledge": _by(_knowledge, latest=True),
}


def first_order_beliefs(oracle: BeliefOracle, chain: Sequence[str], obj: str) -> dict[str, str | None]:
    """Each agent of ``chain``: where that agent alone believes ``obj`` is."""
    return {agent: oracle.belief((agent,), obj) for agent in chain}


def partial_answers(oracle: BeliefOracle, chain: Sequence[str], obj: str) -> dict[str, str | None]:
    """Every rule of :data:`PARTIAL_RULES`: its answer to the chain's question about ``obj``."""
    chain = tuple(chain)
    beliefs = first_order_beliefs(oracle, chain, obj)
    return {name: beliefs[rule(oracle, chain, obj)] for name, rule in PARTIAL_RULES.items()}


def nesting_required(oracle: BeliefOracle, chain: Sequence[str], obj: str) -> bool:
    """Whether no single agent of ``chain`` (order >= 2) has the chain's belief as its own."""
    chain = tuple(chain)
    if len(chain) < 2:
        return False
    gold = oracle.belief(chain, obj)
    return gold not in set(first_order_beliefs(oracle, chain, obj).values())
