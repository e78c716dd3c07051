"""Data audits: leakage between splits, label balance and no-ToM answer shortcuts.

``leakage`` (stories and questions shared with training), ``balance`` (answer distribution and
position), ``heuristics`` (the story parser and the answers that need no Theory of Mind, with
their accuracy table), ``rules`` (the search for the best agent-agnostic rule), ``report`` (JSON and Markdown), ``command`` (``tomrl data audit``).
User guide: docs/datasets.md.
"""
