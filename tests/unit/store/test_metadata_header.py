"""The METADATA `Version` field is read as email's HeaderParser reads it (patchkit.store.target.header
does not import the email package: a cost of every `status`)."""

from __future__ import annotations

from email.parser import HeaderParser

import pytest

from patchkit.store.target import header

CASES = [
    "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.17\n\nbody\nVersion: 9\n",
    "name: x\nversion:0.5.1\n",
    "Name: sglang\nSummary: a\n  continued\nVersion: 1.0\n",
    "Name: sglang\n\nVersion: 1.0\n",
    "Name: sglang\nnot a header\nVersion: 1.0\n",
    "Version: 1.0\nVersion: 2.0\n",
    "Name: x\r\nVersion: 0.5.17\r\n\r\n",
    "",
    "Version : 1\n",
    " Version: 1\n",
    "Version: 1.0   \n",
    "  Name: x\nVersion: 1\n",
    "Name: a\n\tcont\nVersion: 2\n",
]


@pytest.mark.parametrize("text", CASES)
def test_the_version_field_is_what_email_reads(text):
    expected = HeaderParser().parsestr(text).get("Version")
    found = header(text, "Version")
    assert (found is None) == (expected is None)
    assert (found or "").strip() == (expected or "").strip()
