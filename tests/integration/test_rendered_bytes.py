"""Byte identity of the v2 patch API on the real releases, and the two silent-splicing bugs of
the old API reproduced on real release files."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from patchkit.engine import patch_status
from patchkit.engine import view as view_mod
from patchkit.patches.draft_lmhead_placeholder import QWEN3_5_MTP, DraftLmheadPlaceholder
from patchkit.patches.eagle3_capture_hook import METHOD, QWEN3_5, WRAPPERS, Eagle3CaptureHook
from testing.releases import pristine
from testing.rendered import VERSIONS, patched_states, render

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDED = json.loads((Path(__file__).parents[1] / "fixtures" / "rendered.json").read_text())


@pytest.mark.parametrize("version", VERSIONS)
def test_states_and_bytes_match_the_recorded_rendering(version):
    assert render(version) == RECORDED[version]


@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_parsing_only_the_scope_renders_what_parsing_everything_renders(version, monkeypatch):
    scoped = render(version)
    monkeypatch.setattr(view_mod.View, "_scope", lambda self, rel: None)  # every file parsed whole
    assert render(version) == scoped


@pytest.mark.parametrize("version", ["0.5.14", "0.5.17", "0.5.21"])
def test_probes_on_the_parsed_parts_judge_the_patched_release_as_on_whole_files(version, monkeypatch):
    # What `status` and a second `apply` see: every patch that applied is found applied, by
    # probes that see only the declared parts, and they say what they say on whole files.
    pending = {pid for pid, (state, _) in render(version)["statuses"].items() if state == patch_status.PENDING}
    states = patched_states(version)
    assert pending and {pid for pid, state in states.items() if state == patch_status.APPLIED} >= pending
    monkeypatch.setattr(view_mod.View, "_scope", lambda self, rel: None)
    assert patched_states(version) == states


def _defs(tree: cst.Module, cls_name: str) -> int:
    (cls,) = [n for n in tree.body if m.matches(n, m.ClassDef(name=m.Name(cls_name)))]
    return sum(1 for fn in cls.body.body if m.matches(fn, m.FunctionDef(name=m.Name(METHOD))))


def test_eagle3_never_adds_a_second_def_to_a_wrapper_that_has_one():
    # 0.5.21's qwen3_5.py with the override already on the MoE wrapper only (a hand-applied
    # fix, or a tree patched by a script): the old is_applied looked at the first wrapper
    # alone and appended a second def to the MoE wrapper.
    source = (pristine("0.5.21") / QWEN3_5).read_text()
    patched = Eagle3CaptureHook().transform(QWEN3_5, cst.parse_module(source))
    moe = [n for n in patched.body if m.matches(n, m.ClassDef(name=m.Name(WRAPPERS[1])))][0]
    half = cst.parse_module(source)
    half = half.with_changes(body=[moe if m.matches(n, m.ClassDef(name=m.Name(WRAPPERS[1]))) else n for n in half.body])
    assert (_defs(half, WRAPPERS[0]), _defs(half, WRAPPERS[1])) == (0, 1)

    again = Eagle3CaptureHook().transform(QWEN3_5, half)
    assert (_defs(again, WRAPPERS[0]), _defs(again, WRAPPERS[1])) == (1, 1)
    assert again.code == patched.code


def test_draft_lmhead_guards_every_embedding_load_branch():
    # 0.5.20's qwen3_5_mtp.py with its embedding-load branch split in two (one per checkpoint
    # name): the old identity splicing re-spliced a stale node and dropped the second guard.
    source = (pristine("0.5.20") / QWEN3_5_MTP).read_text()
    head = '''            if name in (
                "model.embed_tokens.weight",
                "model.language_model.embed_tokens.weight",
            ):'''
    start = source.index(head)
    end = source.index("                continue\n", start) + len("                continue\n")
    branch = source[start:end]
    split = (branch.replace(head, '            if name in ("model.embed_tokens.weight",):') + "\n"
             + branch.replace(head, '            if name in ("model.language_model.embed_tokens.weight", "model.embed_tokens.weight"):'))
    patched = DraftLmheadPlaceholder().transform(QWEN3_5_MTP, cst.parse_module(source[:start] + split + source[end:])).code
    assert patched.count("if self.model.embed_tokens.weight.numel() == 0:") == 2
