"""A release's manifest, made by the patches' own probes on its pristine files (what `patchkit
manifest update` writes to manifests/<version>.json, and `manifest check` compares; for a release
with no committed manifest, a post release such as 0.5.12.post1, what an image of it applies)."""

from __future__ import annotations

from typing import Any, Callable

from patchkit.engine import decide, failure_cause, identity, registry
from patchkit.releases import manifest as manifest_mod
from patchkit.base.errors import PatchkitError, PlanError, TargetError
from patchkit.engine.patch_status import FAILED, NOT_APPLICABLE, PENDING, STATE_VERDICT, UPSTREAM_FIXED
from patchkit.engine.view import code_view
from patchkit.store.naming import Naming


def describe(target: Any) -> manifest_mod.Manifest:
    """The manifest of a pristine release tree, decided by the patches' probes alone."""
    view = code_view(target)
    entries: dict[str, manifest_mod.PatchEntry] = {}
    files: dict[str, str] = {}
    for pid in registry.patch_ids():
        s = decide.evaluate(view, pid)
        if s.state == FAILED:  # on a release's own files: its code, not a local edit
            following = failure_cause.upstream_next(view.patches[pid], pid, target.version,
                                                    Naming(patches=registry.given_folders()))
            raise PlanError(f"patch {pid} is failed on SGLang {target.version}: {s.detail}; next: {following}")
        if s.state not in STATE_VERDICT:
            raise PlanError(f"patch {pid} is {s.state} on SGLang {target.version}: {s.detail or 'not a pristine release'}")
        patch = view.patches[pid]
        present = tuple(rel for rel in patch.TARGETS if view.read(rel) is not None)
        # Not applicable by a rule the release keeps in another file (CONSULTS): its targets' bytes
        # do not decide it, so none are recorded, and the fast path still holds once another patch
        # has changed a target they share (the reads below keep their pristine hashes).
        by_rule = s.state == NOT_APPLICABLE and bool(s.files) and bool(patch.CONSULTS) and _by_rule(patch, view.read)
        # `applies`: only the files the patch edits there, the ones the fast path plans (a present
        # target it skips on this release, such as an older home of the code, is left out).
        recorded = () if by_rule else s.files if s.state == PENDING else present
        # What the verdict was decided from (with the patch set's sources, below): every file the
        # patch reads. None for "no target file", which `matrix` turns into a search of the package.
        reads = {} if s.state == NOT_APPLICABLE and not s.files else {
            rel: view.sha(rel) for rel in dict.fromkeys((*patch.TARGETS, *patch.REQUIRES, *patch.CONSULTS))}
        # An upstream-fixed verdict's detail (upstream's fix narrower than the patch) and the rule
        # that makes a patch not applicable are kept: the fast path shows them without parsing.
        detail = s.detail if s.state == UPSTREAM_FIXED or by_rule else ""
        entries[pid] = manifest_mod.PatchEntry(verdict=STATE_VERDICT[s.state], files=recorded, reads=reads, detail=detail)
        files.update({rel: view.sha(rel) for rel in recorded})  # type: ignore[misc]
    return manifest_mod.Manifest(version=target.version, patches=entries, files=files,
                                 patch_sha256=identity.digests(registry.patch_ids()))


def for_release(version: str, progress: Callable[[str], None]) -> tuple[manifest_mod.Manifest, bool]:
    """(the manifest of release `version`, whether it is committed): the committed one, else the one
    the patches' probes make on the release's wheel (downloaded once, cached), as `apply --target V
    --fetch DIR` judges that release. TargetError (exit 3) before any download for a release
    patchkit knows nothing about; FetchError (exit 3) for one the index does not have."""
    from patchkit.releases import pristine, versions

    committed = manifest_mod.find(version)
    if committed is not None:
        return committed, True
    if not registry.knows(version):
        raise TargetError(f"no patch set for SGLang {version}: no manifest (patchkit has manifests for "
                          f"{', '.join(manifest_mod.available()) or 'none'}) and no patch declares a range holding it")
    return describe(pristine.WheelSource(versions.normalise(version), progress)), False


def _by_rule(patch: Any, read: Callable[[str], bytes | None]) -> bool:
    """Whether the release's rule in another file (the patch's precondition) is what makes it not
    applicable; False where that rule is not there at all (the release lacks the code the patch
    is for: its own probes said so)."""
    try:
        return bool(patch.precondition(read))
    except PatchkitError:
        return False
