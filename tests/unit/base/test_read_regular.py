"""patchkit.base.util.read_regular's bound: a file larger than `limit` is refused unread, and one whose
size says less than it holds (a file of /proc: st_size 0) is read no further than `limit` + 1 bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchkit.base.util import TooLarge, read_regular


@pytest.fixture
def bytes_read(monkeypatch) -> list[int]:
    """The size of every os.read's answer while the test runs."""
    sizes: list[int] = []
    real = os.read

    def counting(fd: int, n: int) -> bytes:
        data = real(fd, n)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counting)
    return sizes


def test_a_larger_file_is_refused_unread(tmp_path, bytes_read):
    big = tmp_path / "big"
    with big.open("wb") as handle:
        handle.truncate(300 << 20)  # sparse: no disk used
    with pytest.raises(TooLarge, match="314,572,800 bytes, more than the 1,000"):
        read_regular(big, 1000)
    assert sum(bytes_read) == 0


def test_a_file_whose_size_says_less_is_read_no_further_than_the_limit(bytes_read):
    status = Path("/proc/self/status")  # a few kB, st_size 0
    assert os.stat(status).st_size == 0 and len(read_regular(status)) > 200
    bytes_read.clear()
    with pytest.raises(TooLarge):
        read_regular(status, 100)
    assert sum(bytes_read) == 101, bytes_read
