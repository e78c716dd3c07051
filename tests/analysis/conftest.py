"""Fixtures of the analysis tests; the run-folder builders live in analysis_run_folders.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from analysis_run_folders import collapsing, completion_for, write_evaluation, write_training_run


@pytest.fixture()
def build():
    return SimpleNamespace(training_run=write_training_run, evaluation=write_evaluation, collapsing=collapsing,
                           completion_for=completion_for)
