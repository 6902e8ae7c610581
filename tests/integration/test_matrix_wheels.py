"""matrix and track read the files they need straight from the cached wheels: nothing is
unpacked, a download says so on stderr (a terminal or not), verdicts are cached."""

from __future__ import annotations

import os

import pytest

from patchkit.releases import manifest
from patchkit.engine import identity, registry, upstream, verdicts
from patchkit.releases.pristine import WheelSource
from testing.cli import run
from testing.releases import HOME, MODEL_CONFIG, pristine

pytestmark = pytest.mark.integration

VERSIONS = ("0.5.17", "0.5.18", "0.5.19")


@pytest.fixture
def wheels_home(tmp_path, monkeypatch):
    """A PATCHKIT_HOME whose wheels/ holds (links to) the tests' cached wheels of VERSIONS."""
    home = tmp_path / "home"
    (home / "wheels").mkdir(parents=True)
    for version in VERSIONS:
        pristine(version)  # makes sure the tests' cache has the wheel
        wheel = next((HOME / "wheels").glob(f"sglang-{version}-*.whl"))
        os.symlink(wheel, home / "wheels" / wheel.name)
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    return home


def written(home) -> list[str]:
    """What a command left in PATCHKIT_HOME, but the cache of patchkit's own patch digests
    (identity.json): a process that has digested the patches already (an earlier test in it)
    does not write it, so whether it is there says nothing about the releases."""
    return sorted(p.name for p in home.iterdir() if p.name != identity.CACHE_FILE)


def test_matrix_reads_wheels_and_caches_verdicts(wheels_home, monkeypatch):
    cold = run("matrix", "--from", VERSIONS[0], "--to", VERSIONS[-1], "--json")
    assert cold.exit_code == 0, cold.stderr
    assert written(wheels_home) == ["wheels"]  # nothing unpacked, nothing to cache
    states = {row["id"]: row["states"] for row in cold.json()["patches"]}
    assert states["mtp-layer-detection"] == {"0.5.17": "applies", "0.5.18": "upstream-fixed", "0.5.19": "upstream-fixed"}
    # Every verdict came from the committed manifests, by hashes (the patch sources and every file
    # each patch reads are the recorded ones) ...
    for version in VERSIONS:
        assert sorted(verdicts.from_manifest(WheelSource(version))) == registry.patch_ids(), version
    # ... and the probes, judging every patch on the real files (libcst), say the same; their
    # verdicts are cached.
    monkeypatch.setattr(verdicts, "from_manifest", lambda source: {})
    judged = run("matrix", "--from", VERSIONS[0], "--to", VERSIONS[-1], "--json")
    assert judged.stdout == cold.stdout
    assert written(wheels_home) == ["verdicts.json", "wheels"]
    monkeypatch.setattr(upstream, "_judge", lambda *args: pytest.fail("a cached verdict was judged again"))
    warm = run("matrix", "--from", VERSIONS[0], "--to", VERSIONS[-1], "--json")
    assert warm.stdout == cold.stdout


def test_matrix_and_list_say_where_upstreams_fix_is_narrower(wheels_home):
    # mtp-layer-detection: upstream (0.5.18+) sets the draft depth to 1, the patch reads it.
    table = run("matrix", "--from", VERSIONS[0], "--to", VERSIONS[-1], "--json").json()
    details = {row["id"]: row["details"] for row in table["patches"]}
    narrower = details.pop("mtp-layer-detection")
    assert sorted(narrower) == ["0.5.18", "0.5.19"] and not any(details.values())
    assert all(text.startswith("upstream's fix is narrower than this patch: ") for text in narrower.values())
    text = run("matrix", "--from", VERSIONS[0], "--to", VERSIONS[-1]).stdout
    assert "upstream-fixed* " in text and f"* mtp-layer-detection (0.5.18-0.5.19): {narrower['0.5.18']}" in text
    listed = {row["id"]: row for row in run("list", "--json").json()["patches"]}
    assert narrower["0.5.18"].endswith(listed["mtp-layer-detection"]["upstream_narrower"])
    # Declared by two patches; symm-mem-kill-switch's narrower fix (sglang#40485) is in no release yet.
    assert [pid for pid, row in listed.items() if row["upstream_narrower"]] == ["mtp-layer-detection", "symm-mem-kill-switch"]


class _Altered:
    """A release whose one file has other bytes than the release's."""

    def __init__(self, source: WheelSource, rel: str) -> None:
        self.source, self.rel, self.version = source, rel, source.version

    def read(self, rel: str) -> bytes | None:
        data = self.source.read(rel)
        return data + b"\n# changed\n" if rel == self.rel and data is not None else data


def test_manifest_verdicts_are_not_used_for_other_inputs(wheels_home, tmp_path):
    source = WheelSource("0.5.19")
    # Other bytes in a file a patch reads: that patch (and only the patches reading it) is judged.
    settled = verdicts.from_manifest(_Altered(source, MODEL_CONFIG))
    readers = {pid for pid, entry in manifest.load("0.5.19").patches.items() if MODEL_CONFIG in entry.reads}
    assert readers and set(registry.patch_ids()) - set(settled) == readers
    # Another patch set (here one patch more, from --patches): the manifest says nothing about it.
    extra = tmp_path / "set"  # (not tmp_path itself: its home/ holds symlinks out, which a set may not hold)
    extra.mkdir()
    (extra / "extra_patch.py").write_text("# a patch module of another set\n")
    with registry.running(registry.PatchSets([str(extra)])):
        assert verdicts.from_manifest(source) == {}
    assert len(verdicts.from_manifest(source)) == len(registry.patch_ids())


def test_wheel_source_reads_the_release_files(wheels_home):
    source = WheelSource("0.5.19")
    tree = pristine("0.5.19")
    rel = "sglang/srt/configs/model_config.py"
    assert source.read(rel) == (tree / rel).read_bytes()
    assert source.read("sglang/no/such/file.py") is None
    assert source.python_files() == sorted(p.relative_to(tree).as_posix() for p in (tree / "sglang").rglob("*.py"))


def test_download_progress_is_shown_off_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    # A real download from the package index (the smallest release); CliRunner's stderr is no terminal.
    result = run("matrix", "--from", "0.5.10", "--to", "0.5.10", "--json")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    done = [line for line in lines if line.startswith("downloaded SGLang 0.5.10: sglang-0.5.10-")]
    assert len(done) == 1 and " MB in " in done[0] and done[0].endswith(", done"), lines
    home = set(written(tmp_path / "home"))
    assert "wheels" in home and home <= {"wheels", "verdicts.json"}, home  # nothing unpacked
    # Beside the wheel only the cache's lock file (releases.CACHE_LOCK), empty.
    assert sorted(p.name for p in (tmp_path / "home" / "wheels").iterdir()) == sorted(
        [".lock", done[0].split(": ")[1].split(",")[0]])
