"""Story generators (Hi-ToM and ToMi style) whose labels come from the belief oracle.

    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    examples = generate(GenerateConfig(benchmark="hitom", n=100, seed=0))   # list[tomrl.schema.Example]

Command line: ``tomrl data generate hitom --n 1000 --seed 0 --out FILE`` (see
:mod:`tomrl.generators.command`); labels checked against the official data sets by
``tomrl data verify hitom|tomi`` (:mod:`tomrl.generators.verify`). Held-out test sets free of
agent-agnostic shortcuts: ``shortcut_neutral`` (:mod:`tomrl.generators.neutral`) and
``vocabulary: heldout`` (:mod:`tomrl.generators.vocabulary`).
"""

from tomrl.generators.dataset import generate

__all__ = ["generate"]
