"""Test helpers shared by tests/ (kept out of tests/ like pre-commit's `testing/`)."""
