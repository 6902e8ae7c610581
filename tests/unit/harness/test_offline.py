"""The fast tier is offline by construction (tests/conftest.py): a socket to anything but this
machine fails at once, and pip in a child asks no index."""

from __future__ import annotations

import os
import socket

import pytest


def test_a_connection_out_fails_at_once():
    with pytest.raises(AssertionError, match="the fast tier is offline"):
        socket.create_connection(("192.0.2.1", 9), timeout=5)  # TEST-NET-1: never routed


def test_pip_asks_no_index():
    assert os.environ.get("PIP_NO_INDEX") == "1"
