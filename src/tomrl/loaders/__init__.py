"""Loaders that turn official benchmark files into unified Example records.

One module per source (``hitom``, ``tomi``, ``exploretom``, ``opentom``, ``fantom``,
``tomrl_paper`` for the ToM-RL release, ``jsonl_file`` for a user's own unified file), the shared
pieces in ``base`` (dataset card, data root, row checks, story identity), the belief oracle's label
check in ``oracle_check``, every loader by name in ``registry``, an experiment's splits built from
loaders as declared in YAML in ``recipes``, and ``tomrl data load`` in ``command``. User guide:
docs/datasets.md.
"""
