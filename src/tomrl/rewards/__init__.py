"""Answer extraction and matching (shared with evaluation), reward functions, and the
reasoning-fidelity reward.

- :mod:`tomrl.rewards.answer`: the one extractor and matcher (``check_answer``), schemes
  ``strict``, ``paper``, ``paper_eval``, ``paper_b``;
- :mod:`tomrl.rewards.functions`: the TRL reward callables, their registry ``REWARDS`` (``strict``,
  ``paper``, ``paper_b``, ``fidelity``; ``register_reward`` adds one), ``make_reward``, ``score_one``;
- :mod:`tomrl.rewards.fidelity`: belief statements in ``<think>`` checked against the oracle;
- :mod:`tomrl.rewards.command`: ``tomrl reward score --reward NAME --input FILE --out FILE``.

See docs/rewards.md.
"""
