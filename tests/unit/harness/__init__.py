"""Unit tests of the test harness itself: tests/conftest.py's home and offline guard, testing/sweep.py."""
