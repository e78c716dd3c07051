# The two set-up commands of the README. Both create .venv and install what they need.
.PHONY: demo test test-slow setup

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/tomrl demo

test: setup
	.venv/bin/python -m pytest -m "not slow" -q

test-slow: setup
	.venv/bin/tomrl models prepare smollm2-135m   # the slow tests include the real embedded model
	.venv/bin/python -m pytest -m slow -q -rs
