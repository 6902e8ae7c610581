"""util.parse_json: the ways JSON patchkit is given cannot be used, as one BadJson with its kind
(the server's /server_info, --expect-from labels, a model's config.json and safetensors header)."""

from __future__ import annotations

import pytest

from patchkit.base.util import BadJson, parse_json


def test_an_object_comes_back():
    assert parse_json(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert parse_json('{"a": 1}') == {"a": 1}


def test_a_list_where_any_value_will_do():
    assert parse_json(b"[1]", want_object=False) == [1]


@pytest.mark.parametrize("data, kind, detail", [
    (b"[" * 100_000 + b"]" * 100_000, BadJson.NESTED_TOO_DEEP, ""),
    (b"<html>", BadJson.NOT_JSON, "Expecting value, line 1"),
    (b'{"a":\n', BadJson.NOT_JSON, "Expecting value, line 2"),
    (b'{"a": "\xff"}', BadJson.NOT_JSON, "can't decode byte 0xff"),
    ('"\ufeff', BadJson.NOT_JSON, ""),
    (b"[1]", BadJson.NOT_AN_OBJECT, ""),
    (b"null", BadJson.NOT_AN_OBJECT, ""),
])
def test_each_way_of_failing_is_one_bad_json(data, kind, detail):
    with pytest.raises(BadJson) as caught:
        parse_json(data)
    assert caught.value.kind == kind
    assert detail in caught.value.detail
    assert isinstance(caught.value, ValueError)
