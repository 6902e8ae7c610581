"""`versions.plain` orders and equates the spellings it takes as packaging's `Version` does, and
refuses (None) every other spelling, which packaging then decides: what `status` and a no-op
`apply` compare (the manifests' names, the installed release) without importing packaging."""

from __future__ import annotations

import itertools

import pytest
from packaging.version import Version

from patchkit.base.errors import TargetError, UsageError
from patchkit.releases import manifest, versions

PLAIN = ["0.5.17", "0.5.17.0", "0.5.17.0.0", "00.05.017", "0.5.9", "0.5.10", "0.5.15.post1", "0.5.15.post0",
         "0.5.15.post10", "0.5.15.0.post1", "0.5.16", "0", "0.0", "1", "1.0", "0.5", "0.5.0.1", "2026.12.7",
         *manifest.available()]
# Each a version packaging reads (or refuses), but not in the plain form: packaging decides it.
OTHER = ["v0.5.17", "V0.5.17", " 0.5.17", "0.5.17\n", "0.5.17+cu130", "0.5.19.post1.dev3+cu130.torch2.9",
         "0.5.17rc1", "0.5.17a1", "0.5.17.dev0", "0.5.17-post1", "0.5.17post1", "0.5.17.post", "0.5.17.POST1",
         "1!0.5.17", "0.5.x", "", ".", "0.5.", ".5", "0..5", "latest", "٠.٥.١٧", "0.5.1٧", "1" * 65]


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_spelling_is_one(text):
    assert versions.plain(text) is not None


@pytest.mark.parametrize("text", OTHER)
def test_any_other_spelling_is_packagings(text):
    assert versions.plain(text) is None


def test_plain_keys_order_and_equate_as_packaging_does():
    for a, b in itertools.product(PLAIN, repeat=2):
        ka, kb, va, vb = versions.plain(a), versions.plain(b), Version(a), Version(b)
        assert (ka == kb, ka < kb, ka > kb) == (va == vb, va < vb, va > vb), (a, b)  # type: ignore[operator]


def test_ordered_and_same_agree_with_packaging_on_any_mix():
    mixed = PLAIN + ["v0.5.17", "0.5.17+cu130", "0.5.17rc1", "0.5.15.post1.dev0"]
    assert versions.ordered(PLAIN) == sorted(PLAIN, key=Version)
    assert versions.ordered(mixed) == sorted(mixed, key=Version)
    for a, b in itertools.product(mixed, repeat=2):
        assert versions.same(a, b) == (Version(a) == Version(b)), (a, b)


def test_check_refuses_what_parse_refuses():
    for text in PLAIN + ["v0.5.17", "0.5.17+cu130"]:
        versions.check(text)
    for text in ["latest", "0.5.x", "", "1" * 65]:
        with pytest.raises(UsageError):
            versions.parse(text)
        with pytest.raises(TargetError):
            versions.check(text, error=TargetError)


@pytest.mark.parametrize("spelling", ["0.5.17", "0.5.17.0", "v0.5.17", "0.5.17+cu130", " 0.5.17 "])
def test_a_manifest_is_found_and_matched_under_any_spelling_of_its_release(spelling):
    found = manifest.find(spelling)
    assert found is not None and found.version == "0.5.17"
    assert manifest.matches(found, spelling)
    assert not manifest.matches(found, "0.5.16") and not manifest.matches(found, "0.5.17.post1")
    assert not manifest.matches(found, "not a version")
    assert manifest.find("0.5.17.post1") is None and manifest.find("0.5.1") is None


def test_one_release_has_one_spelling_for_a_name():
    """`bump`'s default folder (issue 40.1): 0.5.21.0, 0.5.21 and v0.5.21 are one release, one name;
    only zeros from the fourth part on go, so 0.6.0 and a post or pre release keep theirs."""
    from patchkit.releases.versions import spelled

    assert {spelled(text) for text in ("0.5.21.0", "0.5.21", "v0.5.21", "0.5.21.0.0")} == {"0.5.21"}
    assert [spelled(text) for text in ("0.6.0", "0.5.21.0.post1", "0.5.21.1", "0.5.21.0rc1")] == [
        "0.6.0", "0.5.21.post1", "0.5.21.1", "0.5.21rc1"]
