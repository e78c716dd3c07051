"""The no-ToM baseline: per order the better of the best rule and the agent-blind learner."""

from __future__ import annotations

from tomrl.audit.baseline import no_tom_baseline
from tomrl.audit.heuristics import answers_match, parsed, read_question
from tomrl.audit.learner import learned_baseline
from tomrl.audit.rules import best_rules, timeline
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig


def test_baseline_takes_the_better_part_per_order_and_covers_its_questions():
    rows = generate(GenerateConfig(benchmark="hitom", n=160, seed=5, orders=[0, 2], agents=4, lengths=[1],
                                   deception=[False], distractor_prob=0.0))
    # order 2: the first place when the story has an even number of stays, else the last: no one rule says
    # that, a learner that combines the two positions with the count can
    noisy = []
    for e in rows:
        if e.order == 2:
            facts = parsed(e.story)
            info = read_question(facts, e.question)
            path = timeline(facts, info.thing, info.asks_room).path
            e = e.replace(answer=path[0] if e.story.count("made no movements") % 2 == 0 else path[-1])
        noisy.append(e)
    baseline = no_tom_baseline(noisy)
    rules = best_rules(noisy)
    learned = learned_baseline(noisy)
    assert set(baseline) == {"0", "2", "all"}
    for key in ("0", "2"):
        chosen = baseline[key]
        better = learned[key] if learned[key].accuracy.value > rules[key].accuracy.value else rules[key]
        assert (chosen.rule, chosen.accuracy) == (better.rule, better.accuracy)
        ids = {e.id for e in noisy if str(e.order) == key}
        assert set(chosen.answers) == ids
        hits = [answers_match(chosen.answers[e.id], e.answer) for e in noisy if e.id in ids]
        assert sum(hits) == chosen.accuracy.k
    assert baseline["0"].rule == "path_end_1"  # a tie at 100 %: the rule
    assert baseline["2"].rule.startswith("learner: ") and rules["2"].accuracy.value < 0.75 < baseline["2"].accuracy.value
    combined = baseline["all"]
    assert combined.n == len(noisy) and combined.accuracy.k == baseline["0"].accuracy.k + baseline["2"].accuracy.k
    assert set(combined.answers) == {e.id for e in noisy}
