"""Analysis and reports: collapse, inverted difficulty, shortcuts, generalization, plots."""
