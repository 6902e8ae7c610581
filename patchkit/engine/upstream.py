"""Track patches across SGLang releases and git revisions: needed, upstream-fixed, moved, broken.

A source (`releases.source.Source`) is anything with `read(rel)`, `version`, `label`,
`python_files()` and `package_files()`: an installed release (`target.Target`), a wheel or a git
revision (`GitSource`, read straight from the object database, no work tree). Each patch is judged
by its own probes on the code; only its target files are parsed, except when they are gone, when
the patch's anchor symbols are looked for elsewhere (a cheap byte filter, then a parse of the few
candidates).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Iterable

from packaging.version import InvalidVersion, Version

from patchkit.engine import decide, patch_status, registry
from patchkit.releases import manifest
from patchkit.releases.source import Source as Source
from patchkit.engine import view as view_mod
from patchkit.base.constants import PACKAGE
from patchkit.base.errors import TargetError

if TYPE_CHECKING:
    from patchkit.authoring.patch import Patch
    from patchkit.engine.verdicts import VerdictCache

APPLIES, UPSTREAM_FIXED, MOVED, BROKEN, NOT_APPLICABLE = "applies", "upstream-fixed", "moved", "broken", "not-applicable"
FAILED = "failed"  # the patch's own code raised on that source (a bug in the patch, not a change upstream)
_FROM_ENGINE = {
    patch_status.PENDING: APPLIES,
    patch_status.UPSTREAM_FIXED: UPSTREAM_FIXED,
    patch_status.FAILED: BROKEN,
    patch_status.NOT_APPLICABLE: NOT_APPLICABLE,
    patch_status.APPLIED: "applied",
}


class GitSource:
    """One revision of a local SGLang clone (package under python/sglang), read without checkout."""

    PREFIX = "python/"

    def __init__(self, repo_path: str, rev: str) -> None:
        import git

        try:
            self._repo = git.Repo(repo_path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise TargetError(f"{repo_path} is not a git repository") from None
        try:
            self._commit = self._repo.commit(rev)
        except (git.BadName, ValueError):
            raise TargetError(f"{repo_path} has no revision {rev!r}") from None
        self.rev = rev
        self.version = rev
        try:
            self._package = self._commit.tree / (self.PREFIX + PACKAGE)
        except KeyError:
            raise TargetError(f"revision {rev} of {repo_path} has no {self.PREFIX}{PACKAGE}/") from None

    @property
    def label(self) -> str:
        return f"{self.rev} ({self._commit.hexsha[:10]})"

    def read(self, rel: str) -> bytes | None:
        try:
            blob = self._commit.tree / (self.PREFIX + rel)
        except KeyError:
            return None
        return blob.data_stream.read() if blob.type == "blob" else None

    def python_files(self) -> list[str]:
        return [rel for rel in self.package_files() if rel.endswith(".py")]

    def package_files(self) -> list[str]:
        paths = [str(getattr(item, "path", "")) for item in self._package.traverse() if getattr(item, "type", None) == "blob"]
        return sorted(path[len(self.PREFIX):] for path in paths)


@dataclass(frozen=True)
class Verdict:
    state: str
    file: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "file": self.file, "detail": self.detail}


def judge(source: Source, view: view_mod.View | None = None, cache: VerdictCache | None = None,
          settled: dict[str, tuple[str, str]] | None = None, ids: Collection[str] | None = None) -> dict[str, Verdict]:
    """Each patch's verdict on a source (from `settled`, {id: (state, detail)} already known
    without parsing, or from `cache`, a VerdictCache, when it has it); only the patches `ids` when given."""
    verdicts = {}
    for patch in registry.load_all():
        if ids is not None and patch.ID not in ids:
            continue
        if settled and patch.ID in settled:
            verdicts[patch.ID] = Verdict(settled[patch.ID][0], None, settled[patch.ID][1])
            continue
        key = cache.key(patch, source) if cache is not None and hasattr(source, "listing_fingerprint") else None
        hit = cache.get(key) if cache is not None and key else None
        if hit is not None:
            verdicts[patch.ID] = Verdict(hit["state"], hit["file"], hit["detail"])
            continue
        view = view or view_mod.code_view(source)  # type: ignore[arg-type]
        verdicts[patch.ID] = _judge(source, view, patch.ID)
        if cache is not None and key and verdicts[patch.ID].state != FAILED:  # a crash is never remembered as a verdict
            cache.put(key, verdicts[patch.ID].to_dict())
    for pid, verdict in verdicts.items():
        if verdict.state == BROKEN and registry.is_diff(pid):
            view = view or view_mod.code_view(source)  # type: ignore[arg-type]
            verdicts[pid] = _on_its_stack(view, pid) or verdict
    return verdicts


def judge_class(source: Source, view: view_mod.View, pid: str) -> Verdict:
    """One patch's verdict on a source, in a view that holds it (`view.code_view(source, patch)`:
    a module read from a file outside the registry, as `bump --continue` takes one back)."""
    return _judge(source, view, pid)


def _on_its_stack(view: view_mod.View, pid: str) -> Verdict | None:
    """A diff made on top of the diffs it stacks on (`Patchkit-After`), broken alone (their code is
    not there): applies where it does on their files, as `status` and `apply` render the stack. Not
    cached: the verdict depends on the diffs under it too."""
    stacked = decide.on_its_stack(view, pid)
    return None if stacked is None else Verdict(APPLIES, stacked.files[0] if stacked.files else None, stacked.detail)


def _judge(source: Source, view: view_mod.View, pid: str) -> Verdict:
    status = decide.evaluate(view, pid)
    state = FAILED if status.crashed else _FROM_ENGINE[status.state]
    file = status.files[0] if status.files else None
    detail = status.detail
    if state == NOT_APPLICABLE and not status.files:
        moved_to = _find_moved(source, view.patches[pid])
        if moved_to:
            state, file, detail = MOVED, moved_to[0], f"{moved_to[1]} is now in {moved_to[0]}; declare it in TARGETS"
    return Verdict(state, file, detail)


def _find_moved(source: Source, patch: Patch) -> tuple[str, str] | None:
    """(file, symbol) when code the patch needs lives in a file it does not declare.

    Candidates hold a class the patch names; the nearest to the declared location (sharing
    the longest path prefix) that the patch's own probes or transform accept is the answer.
    """
    import os

    import libcst as cst

    from patchkit.authoring.matchers import classes

    symbols = tuple(patch.ANCHOR_SYMBOLS)
    if not symbols:
        return None
    needles = [f"class {symbol}".encode() for symbol in symbols]
    candidates = []
    for rel in source.python_files():
        data = None if rel in patch.TARGETS else source.read(rel)
        if data and any(needle in data for needle in needles):  # byte pre-filter; the parse decides
            candidates.append((rel, data))
    nearest = sorted(candidates, key=lambda item: -len(os.path.commonprefix([item[0], patch.TARGETS[0]])))
    probe = type(patch)()  # a fresh instance: its warnings stay out of the report
    for rel, data in nearest:
        try:
            tree = cst.parse_module(data)
        except cst.ParserSyntaxError:
            continue
        symbol = next((s for s in symbols if classes(tree, s)), None)
        if symbol is None:
            continue
        try:
            if probe.is_applied(rel, tree) or probe.is_fixed_upstream(rel, tree):
                return rel, symbol
            probe.transform(rel, tree)
            return rel, symbol
        except Exception:  # patchkit's errors, or the patch's own code failing on a file it was not written for
            continue
    return None


def watched_source(view: view_mod.View, patch: type[Patch], files: list[str]) -> dict[str, str]:
    """{qualified name: source text} of the functions a patch works on, from `files`."""
    import libcst as cst
    import libcst.matchers as m

    from patchkit.authoring.matchers import classes, functions

    found: dict[str, str] = {}
    for rel in files:
        data = view.read(rel)
        if data is None:
            continue
        tree = view.parse(rel, data)  # parsed once, shared with the probes
        for name in patch.WATCH:
            owner, _, method = name.rpartition(".")
            nodes: list[cst.CSTNode]
            if owner:
                nodes = [fn for cls in classes(tree, owner) for fn in functions(cls) if fn.name.value == method]
            else:
                nodes = [node for node in tree.body if m.matches(node, m.FunctionDef(name=m.Name(name)))]
            for node in nodes:
                found[name] = tree.code_for_node(node)
    return found


def _files_for(source: Source, patch: type[Patch], verdict: Verdict) -> list[str]:
    present = [rel for rel in patch.TARGETS if source.read(rel) is not None]
    if verdict.state == MOVED and verdict.file:
        present.append(verdict.file)
    return present


@dataclass(frozen=True)
class Track:
    source_from: Source
    source_to: Source
    patches: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source_from.version, "to": self.source_to.version, "patches": self.patches}


def track(source_from: Source, source_to: Source) -> Track:
    """Each patch on both sources, with the diff of its watched functions between them."""
    patches = {cls.ID: cls for cls in registry.load_all()}
    view_from, view_to = view_mod.code_view(source_from), view_mod.code_view(source_to)  # type: ignore[arg-type]
    before, after = judge(source_from, view_from), judge(source_to, view_to)
    rows = []
    for pid, patch in patches.items():
        old = watched_source(view_from, patch, _files_for(source_from, patch, before[pid]))
        new = watched_source(view_to, patch, _files_for(source_to, patch, after[pid]))
        diff = "".join(
            "".join(difflib.unified_diff(
                old.get(name, "").splitlines(keepends=True), new.get(name, "").splitlines(keepends=True),
                f"{source_from.version}:{name}", f"{source_to.version}:{name}",
            ))
            for name in patch.WATCH
        )
        rows.append({
            "id": pid,
            "upstream": list(patch.UPSTREAM),
            "drop_when": patch.DROP_WHEN,
            # Each change the drop condition waits on, and whether either release holds it.
            "waits_on": [{**change.to_dict(), "in_from": change.found(source_from.read), "in_to": change.found(source_to.read)}
                         for change in patch.DROP_WAITS_ON],
            "from": before[pid].to_dict(),
            "to": after[pid].to_dict(),
            "diff": diff,
        })
    return Track(source_from, source_to, rows)


def versions_between(first: str | None, last: str | None) -> list[str]:
    """Releases patchkit has manifests for, from `first` to `last` (inclusive; both added if unknown)."""
    def key(version: str) -> Version:
        try:
            return Version(version)
        except InvalidVersion:
            raise TargetError(f"{version!r} is not a valid SGLang version") from None

    chosen = {v for v in manifest.available() if (not first or key(v) >= key(first)) and (not last or key(v) <= key(last))}
    chosen.update(v for v in (first, last) if v)
    return sorted(chosen, key=key)


def _clashes(source: Source, verdicts: dict[str, Verdict], clashes: list[dict[str, Any]]) -> dict[str, Verdict]:
    """The patches that apply alone on a release but not stacked on a file they share with a
    diff patch, as `apply` stacks them (`stack_clash`): broken there, each added to `clashes`."""
    from patchkit.engine import stack_clash

    view = view_mod.code_view(source)  # type: ignore[arg-type]
    pending = {pid: tuple(rel for rel in view.patches[pid].TARGETS if source.read(rel) is not None)
               for pid, verdict in verdicts.items() if verdict.state == APPLIES}
    found = stack_clash.clashes(view, pending)
    clashes.extend({"id": pid, "version": source.version, **clash.to_dict()} for pid, clash in found.items())
    return {pid: Verdict(BROKEN, clash.file, clash.detail) for pid, clash in found.items()}


def detail_notes(rows: list[dict[str, Any]], versions: list[str]) -> list[str]:
    """One line per patch and detail of a matrix's `details` ({version: detail} per row): the
    releases it holds on, then the detail (an upstream fix narrower than the patch)."""
    from patchkit.releases.versions import runs

    lines = []
    for row in rows:
        by_detail: dict[str, set[str]] = {}
        for version, detail in row.get("details", {}).items():
            by_detail.setdefault(detail, set()).add(version)
        lines += [f"{row['id']} ({runs(versions, where)}): {detail}" for detail, where in by_detail.items()]
    return lines


def matrix(sources: Iterable[Source], cache: VerdictCache | None = None) -> dict[str, Any]:
    """{"versions": [...], "patches": [{"id", "states": {version: state}, "details": {version: detail},
    "upstream", "drop_when"}],
    "failed": [...], "clashes": [{"id", "version", "file", "under", "detail"}]}

    `sources` may be an iterator that downloads the next release while this one is judged. The
    patches are loaded first (importing them and libcst overlaps the first download); a release
    patchkit has a manifest for is judged by hashes where the manifest provably says the same
    (`verdicts.from_manifest`), the rest by the probes (or `cache`)."""
    from patchkit.engine import verdicts as verdict_sources

    patches = registry.load_all()
    verdicts = {}
    judged: list[Source] = []
    clashes: list[dict[str, Any]] = []  # a patch broken on a release only stacked beside a diff sharing its file
    # A patch whose verdict reads beyond its own files (a diff: off the release it was made for,
    # it needs that release's files, its pre-image found by hash among the cached wheels, which may
    # come later in the range) is judged once every release is there.
    diffs = {patch.ID for patch in patches if patch.reads_package()}
    others = {patch.ID for patch in patches} - diffs
    for source in sources:
        settled = verdict_sources.from_manifest(source)
        verdicts[source.version] = judge(source, cache=cache, settled=settled, ids=others)
        judged.append(source)
    for source in judged if diffs else ():
        verdicts[source.version].update(judge(source, cache=cache, ids=diffs))
        verdicts[source.version].update(_clashes(source, verdicts[source.version], clashes))
    if cache is not None:
        cache.save()
    rows = []
    for patch in patches:
        row = {
            "id": patch.ID,
            "states": {source.version: verdicts[source.version][patch.ID].state for source in judged},
            # What an upstream-fixed verdict says beyond itself (upstream's fix narrower than the patch).
            "details": {source.version: verdict.detail for source in judged
                        if (verdict := verdicts[source.version][patch.ID]).state == UPSTREAM_FIXED and verdict.detail},
            "upstream": list(patch.UPSTREAM),
            "drop_when": patch.DROP_WHEN,
        }
        made_for = patch.made_for()  # a diff patch: the release(s) its index hashes name
        if made_for is not None:
            row["made_for"] = [match.to_dict() for match in made_for]
            # A diff made on another's post-image (or naming it in Patchkit-After), judged on top of it.
            row["stacked_on"] = list(patch.STACK_AFTER)
        rows.append(row)
    failed = [{"id": patch.ID, "version": source.version, "detail": verdicts[source.version][patch.ID].detail}
              for patch in patches for source in judged if verdicts[source.version][patch.ID].state == FAILED]
    return {"versions": [source.version for source in judged], "patches": rows, "failed": failed, "clashes": clashes}
