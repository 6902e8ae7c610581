"""Diffs as the field makes them, built from real releases (never from committed third-party
files): an RL framework keeps one `docker/patch/<release>/` diff per SGLang release it pins, made in
a checkout (`a/python/sglang/...`), named after the release (`v0.5.15.post1-sglang.patch`), often
against a post release, holding upstream's later changes back-ported onto it, with more diffs
stacked on top of it.

- `field_diff(post)`: upstream's changes to `count` files re-based onto the post release `post` by
  a 3-way merge (`git merge-file`: the files where it merges cleanly): first the files the post
  release changed (their 0.5.X -> next change), then the next release's change to the next one
  (0.5.16 -> 0.5.17 for 0.5.15.post1). Its pre-image blobs are the post release's files, some of
  which differ from the final release's: the base is named only when the post release is fetched.
- `stacked_diff(field)`: a second diff against the first one's post-image (its pre-image blobs are
  the first one's post-image blobs): the release after that's change to a few of its files.
- `sibling_diff(field)`: a diff beside `stacked_diff` on the first one's post-image (siblings, not a
  chain: neither is made on the other): the post release's own next release's change to the first
  file of `stacked_diff` where it merges, so the two change one file each on their own.
- `cuh_diff()`: upstream's 0.5.17 -> 0.5.18 change of a `.cuh` kernel source at its 0.5.16 path
  (`sglang/jit_kernel/csrc/...`; the folder is `sglang/kernels/jit/csrc/` from 0.5.17).
- `moved_code_diff()`: a one-place change to code upstream moved to another unit of its file in
  later releases (issue 40 item 3): on 0.5.15.post1's memory_pool.py (151 kB; over 200 kB from 0.5.16: no size limit),
  the `with torch.cuda.use_mem_pool(...)` header of `DSATokenToKVPool.__init__`'s index-buffer
  allocation wrapped in a tuple adding `self.memory_saver_adapter.region(GPU_MEMORY_TYPE_KV_CACHE)`,
  as 0.5.15.post1's `MLATokenToKVPool` writes it; 0.5.16 moved the allocation to
  `_create_index_buffers`.

Built once per process (`functools.cache`); tests share them through module or session fixtures.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from testing.diffs import git_diff
from testing.releases import pristine

# The releases after each post release whose changes the field back-ports onto it.
NEXT = {"0.5.12.post1": ("0.5.12", "0.5.13", "0.5.14", "0.5.15"),
        "0.5.15.post1": ("0.5.15", "0.5.16", "0.5.17", "0.5.18")}
SIZE_LIMIT = 80_000  # bytes: the field's diffs touch ordinary modules, not the 300 kB server_args.py
CUH_OLD = "sglang/jit_kernel/csrc/dsa/fused_store_index_cache.cuh"  # 0.5.16's path
CUH_NEW = "sglang/kernels/jit/csrc/dsa/fused_store_index_cache.cuh"  # the same bytes in 0.5.17


@dataclass(frozen=True)
class FieldDiff:
    name: str  # the file name the field gives it
    base: str  # the release its pre-image is (or, for a stacked diff, the release under the stack)
    before: dict[str, bytes]  # its files' pre-images
    after: dict[str, bytes]  # its files' post-images
    text: bytes  # the diff (`git diff`, checkout paths)

    def write(self, folder: Path) -> Path:
        path = folder / self.name
        path.write_bytes(self.text)
        return path


def merge_file(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """`git merge-file -p`: `ours` with the change base -> theirs, None where it conflicts."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            (Path(tmp) / name).write_bytes(data)
            paths.append(str(Path(tmp) / name))
        done = subprocess.run(["git", "merge-file", "-p", *paths], capture_output=True, check=False)
        return done.stdout if done.returncode == 0 else None


def _read(version: str, rel: str, limit: int | None = SIZE_LIMIT) -> bytes | None:
    path = pristine(version) / rel
    return path.read_bytes() if path.is_file() and (limit is None or path.stat().st_size < limit) else None


def _back_ported(onto: dict[str, bytes], version: str, first: str, second: str, rels: list[str],
                 count: int, limit: int | None = SIZE_LIMIT) -> dict[str, bytes]:
    """{file: `onto`'s bytes with upstream's first -> second change merged in} for the first
    `count` files of `rels` where that merges cleanly and changes something."""
    found: dict[str, bytes] = {}
    for rel in rels:
        if len(found) == count:
            break
        ours = onto.get(rel) or _read(version, rel, limit)
        old, new = _read(first, rel, limit), _read(second, rel, limit)
        if ours is None or old is None or new is None or old == new:
            continue
        merged = merge_file(old, ours, new)
        if merged is not None and merged != ours:
            found[rel] = merged
    return found


def _python_files(version: str, under: str = "sglang/srt") -> list[str]:
    root = pristine(version)
    return sorted(p.relative_to(root).as_posix() for p in (root / under).rglob("*.py"))


@functools.cache
def field_diff(post: str = "0.5.15.post1", count: int = 30, own: int = 6, limit: int | None = SIZE_LIMIT) -> FieldDiff:
    """`limit`: None takes files of any size (the 300 kB server_args.py, http_server.py), as a field
    diff of the whole package does."""
    final, first, second, _ = NEXT[post]
    changed_by_post = [rel for rel in _python_files(post) if _read(final, rel, limit) not in (None, _read(post, rel, limit))]
    after = _back_ported({}, post, final, first, changed_by_post, own, limit)
    rest = [rel for rel in _python_files(post) if rel not in after]
    after.update(_back_ported({}, post, first, second, rest, count - len(after), limit))
    before = {rel: _read(post, rel, limit) or b"" for rel in after}
    text = git_diff(before, after, prefix="python/")
    return FieldDiff(f"v{post}-sglang.patch", post, before, after, text)


@functools.cache
def stacked_diff(post: str = "0.5.15.post1", count: int = 4) -> FieldDiff:
    """A diff made on the tree with `field_diff(post)` applied: its pre-image is that diff's post-image."""
    field = field_diff(post)
    _, _, second, third = NEXT[post]
    after = _back_ported(field.after, post, second, third, sorted(field.after), count)
    before = {rel: field.after[rel] for rel in after}
    text = git_diff(before, after, prefix="python/")
    return FieldDiff(f"v{post}-sglang-extra.patch", post, before, after, text)


@functools.cache
def sibling_diff(post: str = "0.5.15.post1") -> FieldDiff:
    """A diff made, like `stacked_diff(post)`, on `field_diff(post)`'s post-image (not on the stacked
    one's): the post release -> its next release change of one file the stacked diff changes too."""
    field, extra = field_diff(post), stacked_diff(post)
    _, first, _, _ = NEXT[post]
    after = _back_ported(field.after, post, post, first, sorted(extra.after), 1)
    before = {rel: field.after[rel] for rel in after}
    text = git_diff(before, after, prefix="python/")
    return FieldDiff(f"v{post}-sglang-sibling.patch", post, before, after, text)


@functools.cache
def disjoint_diffs(post: str = "0.5.15.post1", parts: int = 4, count: int = 30) -> tuple[FieldDiff, ...]:
    """`parts` diffs of up to `count` files each, no file in two, as `field_diff` makes one (the next
    release's change merged onto the post release): a patch set of several 20-40-file diffs."""
    _, first, second, _ = NEXT[post]
    rels = _python_files(post)
    found: list[FieldDiff] = []
    taken: set[str] = set()
    for part in range(1, parts + 1):
        after = _back_ported({}, post, first, second, [rel for rel in rels if rel not in taken], count)
        taken.update(after)
        before = {rel: _read(post, rel) or b"" for rel in after}
        found.append(FieldDiff(f"v{post}-part{part}.patch", post, before, after,
                               git_diff(before, after, prefix="python/")))
    return tuple(found)


@functools.cache
def cuh_diff() -> FieldDiff:
    before = {CUH_OLD: _read("0.5.16", CUH_OLD) or b""}
    after = {CUH_OLD: _read("0.5.18", CUH_NEW) or b""}
    assert before[CUH_OLD] == _read("0.5.17", CUH_NEW) != after[CUH_OLD]  # moved as it was, changed after
    return FieldDiff("jit-kernel-fused-store-index-cache.patch", "0.5.16", before, after,
                     git_diff(before, after, prefix="python/"))


MEMORY_POOL = "sglang/srt/mem_cache/memory_pool.py"
_POOL_HEADER = b"""        with (
            torch.cuda.use_mem_pool(self.custom_mem_pool)
            if self.custom_mem_pool
            else nullcontext()
        ):
            self.index_k_with_scale_buffer = [
"""
_POOL_HEADER_IN_REGION = b"""        with (
            self.memory_saver_adapter.region(GPU_MEMORY_TYPE_KV_CACHE),
            (
                torch.cuda.use_mem_pool(self.custom_mem_pool)
                if self.custom_mem_pool
                else nullcontext()
            ),
        ):
            self.index_k_with_scale_buffer = [
"""


@functools.cache
def moved_code_diff() -> FieldDiff:
    before = (pristine("0.5.15.post1") / MEMORY_POOL).read_bytes()
    assert before.count(_POOL_HEADER) == 1 and len(before) > SIZE_LIMIT
    after = {MEMORY_POOL: before.replace(_POOL_HEADER, _POOL_HEADER_IN_REGION)}
    return FieldDiff("dsa-index-buffers-in-region.patch", "0.5.15.post1", {MEMORY_POOL: before}, after,
                     git_diff({MEMORY_POOL: before}, after, prefix="python/"))


def releases_after(post: str) -> list[str]:
    """The releases 0.5.10-0.5.23 a field diff is rebased onto, with the post releases the tests fetch."""
    finals = [f"0.5.{minor}" for minor in range(10, 24)]
    return sorted([*finals, *NEXT], key=Version)


def take_the_patch_side(text: bytes) -> bytes:
    """A user's resolution of every block (docs/diffs.md's tree route): git's block (a unit both sides
    changed in the same few lines) takes the patch's side; a block carrying the diff's hunk is made
    on the code right below it where that is the hunk's (whitespace aside: `blocks` sets it there),
    else it goes, that change dropped."""
    import re

    from testing.blocks import blocks, made_below, without

    for found in reversed([b for b in blocks(text) if b.where]):
        text = made_below(text, found) or without(text, found)
    return re.sub(rb"<<<<<<< release\n.*?=======\n(.*?)>>>>>>> patch[^\n]*\n", rb"\1", text, flags=re.S)


# Issue 40 item 6's three shapes of a conflict block, each a diff on a real release's file whose
# unit the next release moved, rewrote or merged (`blocks`): (the diff, the release to bump it to).
SERVER_ARGS = "sglang/srt/server_args.py"
_WORKERS = b'    tokenizer_worker_num: A[\n        int, "The worker num of the tokenizer manager.", NS("serving")\n    ] = 1\n'
FP4 = "sglang/srt/layers/quantization/modelopt_quant.py"
_PADDED = b"        x_fp4 = pad_nvfp4_activation_for_cutlass(x_fp4, weights_padding_cols)\n"
FP4_LOG = b'        logger.debug("fp4 gemm: %d x %d, padding %d", x_m, output_size, weights_padding_cols)\n'
HTTP_SERVER = "sglang/srt/entrypoints/http_server.py"
_HEALTH_RID = b'    rid = f"{HEALTH_CHECK_RID_PREFIX}_{time.time()}"\n'


@functools.cache
def moved_field_diff() -> tuple[FieldDiff, str]:
    """A one-line change to a `ServerArgs` field on 0.5.17 (`tokenizer_worker_num`'s default 1 -> 2),
    in a class header of about 3,000 lines; 0.5.23 keeps the field in arg_groups/fields/serving.py."""
    before = (pristine("0.5.17") / SERVER_ARGS).read_bytes()
    assert before.count(_WORKERS) == 1
    after = {SERVER_ARGS: before.replace(_WORKERS, _WORKERS.replace(b"] = 1", b"] = 2"))}
    return FieldDiff("server-args-workers.patch", "0.5.17", {SERVER_ARGS: before}, after,
                     git_diff({SERVER_ARGS: before}, after, prefix="python/")), "0.5.23"


@functools.cache
def log_line_diff() -> tuple[FieldDiff, str]:
    """A log line added to 0.5.17's 67-line `ModelOptFp4LinearMethod.apply`, which 0.5.23 nests one
    level deeper (under `if self.quant_mode == "w4a4":`)."""
    before = (pristine("0.5.17") / FP4).read_bytes()
    assert before.count(_PADDED) == 1
    after = {FP4: before.replace(_PADDED, _PADDED + FP4_LOG)}
    return FieldDiff("fp4-gemm-log.patch", "0.5.17", {FP4: before}, after,
                     git_diff({FP4: before}, after, prefix="python/")), "0.5.23"


@functools.cache
def import_section_diff() -> tuple[FieldDiff, str]:
    """Upstream's 0.5.16 -> 0.5.17 change to http_server.py's imports (`import orjson`, `from
    fastapi.routing import APIRoute`; the import of a module 0.5.14 lacks left out) back-ported onto
    0.5.13's second import section (`<imports>#2`, 140 lines), and a change to `health_generate`'s
    rid in lines 0.5.14 changed too (so the whole-file merge conflicts). 0.5.14 joined the two import
    sections into one (its `<imports>#2` is a 2-line section further down)."""
    from patchkit.diffs import units

    def section(version: str) -> bytes:
        return units.texts((pristine(version) / HTTP_SERVER).read_bytes())["<imports>"]

    before = (pristine("0.5.13") / HTTP_SERVER).read_bytes()
    mine = units.texts(before)["<imports>#2"]
    merged = merge_file(section("0.5.16"), mine, section("0.5.17"))
    assert merged is not None and merged != mine
    merged = b"".join(line for line in units.split_lines(merged) if b"embedding_model_spec" not in line)
    assert before.count(_HEALTH_RID) == 1
    after = {HTTP_SERVER: before.replace(mine, merged, 1).replace(_HEALTH_RID, _HEALTH_RID.replace(b"time()", b"time_ns()"))}
    return FieldDiff("http-server-imports.patch", "0.5.13", {HTTP_SERVER: before}, after,
                     git_diff({HTTP_SERVER: before}, after, prefix="python/")), "0.5.14"
