"""Fixtures for the model-provider tests (helpers live in model_helpers.py)."""

from model_helpers import make, server, sleeps  # noqa: F401 - pytest fixtures

