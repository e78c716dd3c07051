"""tomrl: teach small language models Theory of Mind with RL from verifiable rewards.

The package is laid out in the order data flows through it:

    world/        simulated world, events and the belief oracle
    generators/   Hi-ToM- and ToMi-style story generators (labels from the oracle), verification
    loaders/      official benchmarks (Hi-ToM, ToMi, ExploreToM, OpenToM, FANToM, ToM-RL release)
    schema.py     the one Example record every stage reads and writes
    audit/        leakage and no-ToM shortcut audits
    prompts.py    chat prompts (Paper A's, chain-of-thought, multiple choice)
    rewards/      answer extraction and matching (shared with evaluation), rewards, fidelity
    training/     GRPO and REINFORCE++ on TRL
    evaluation/   benchmarks as data, generation engines, scoring, results with intervals
    analysis/     collapse / shortcut / generalization detectors, plots and reports

config.py (typed YAML configs), io.py (atomic writes), models.py (the embedded model) and
cli.py (the ``tomrl`` command) serve all stages.
"""

__version__ = "0.1.0"
