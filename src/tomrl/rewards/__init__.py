"""Answer extraction and matching (shared with evaluation) and reward functions."""
