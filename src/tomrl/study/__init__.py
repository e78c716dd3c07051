"""Studies: declared grids of training runs (mixtures × arms × seeds × models), each evaluated on a task list.

``tomrl study --config configs/study/NAME.yaml``. Modules: :mod:`~tomrl.study.config` (the typed
config), :mod:`~tomrl.study.grid` (cells and grid.json), :mod:`~tomrl.study.arms` (the training arms
at matched budget), :mod:`~tomrl.study.runner` (train, evaluate, resume) and
:mod:`~tomrl.study.command` (the command line).
"""
