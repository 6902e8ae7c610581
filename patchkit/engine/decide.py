"""Decide each patch's state on a target: from hashes alone where the state file and the manifest
settle it (no libcst: `status` and a no-op `apply` stay cheap), else by the patch's own probes on
the parsed code; a failed patch's detail says its cause.
"""

from __future__ import annotations

from dataclasses import replace

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.releases import manifest as manifest_mod
from patchkit.engine import registry
from patchkit.engine import view as view_mod  # render_file through the module: the fault tests replace it
from patchkit.base.errors import PlanError
from patchkit.engine.patch_status import (
    APPLIED, DRIFTED, FAILED, NOT_APPLICABLE, OUTDATED, PENDING, UPSTREAM_FIXED, VERDICT_STATE, PatchCrashed, PatchStatus,
    guarded,
)
from patchkit.store.target import Target
from patchkit.engine.view import View, before_patchkit_sha, open_view

if TYPE_CHECKING:
    from patchkit.authoring.patch import Patch


def fast_status(view: View, pid: str) -> PatchStatus | None:
    """Decide from hashes only, or None when the code must be read."""
    state = view.state
    if state and pid in state.patches:
        files = state.files_of(pid)
        conditions = {rel: view.file_condition(rel) for rel in files}
        drifted = [rel for rel, cond in conditions.items() if cond == "drifted"]
        if drifted:
            return PatchStatus(pid, DRIFTED, tuple(files), f"{drifted[0]} was changed outside patchkit")
        if all(cond == "patched" for cond in conditions.values()):
            return _identity_status(view, pid, files)
        return None  # files back to pristine (reinstalled): judge them afresh
    entry = view.manifest.patches.get(pid)
    if entry is None or not manifest_mod.matches(view.manifest, view.target.version):
        return None
    if any(view.sha(rel) != view.manifest.files[rel] for rel in entry.files):
        return None
    recorded = view.manifest.patch_sha256.get(pid)
    if recorded is None or recorded != _digest(pid):
        return None  # the manifest judged another source of this patch (edited since): its probes decide
    if entry.reads and any(before_patchkit_sha(view, rel) != digest for rel, digest in entry.reads.items()):
        return None  # a file the patch reads is not the release's (or is there where the release has none)
    if state and any(rel in state.files for rel in entry.files):
        return None  # another patch changed a shared file: read the code
    return PatchStatus(pid, VERDICT_STATE[entry.verdict], entry.files, entry.detail)


def _digest(pid: str) -> str | None:
    from patchkit.engine import identity
    from patchkit.base.errors import PatchkitError

    try:
        return identity.digest(pid)
    except PatchkitError:
        return None


def _identity_status(view: View, pid: str, files: list[str]) -> PatchStatus:
    """APPLIED when every file was rendered by this very patch source and rendering code, else
    OUTDATED (the patch or patchkit's rendering code changed since, `identity.RENDERING`: `apply`
    re-renders the file from its pristine backup; `revert` restores the backup, digests aside)."""
    from patchkit.engine import identity

    current = identity.digest(pid)
    records = {rel: view.state.files[rel] for rel in files}  # type: ignore[union-attr]
    older = [rel for rel, record in records.items() if record.digests.get(pid, current) != current]
    unknown = [rel for rel, record in records.items() if pid not in record.digests]
    # A state written before patch digests were recorded (schema 1): render and compare.
    older += [rel for rel in unknown if _rendered_differs(view, rel, tuple(records[rel].patches))]
    if older:
        return PatchStatus(pid, OUTDATED, tuple(files),
                           f"{older[0]} was patched by another version of {pid} or of patchkit; "
                           f"`{view.target.naming.command('apply')}` updates it")
    return PatchStatus(pid, APPLIED, tuple(files))


def _rendered_differs(view: View, rel: str, ids: tuple[str, ...]) -> bool:
    from patchkit.base.errors import PatchkitError

    try:
        return view_mod.render_file(view, rel, ids) != view.read(rel)
    except PatchkitError:  # today's patches cannot reproduce the file: not what they would write
        return True


def evaluate(view: View, pid: str, contents: dict[str, bytes | None] | None = None) -> PatchStatus:
    """Decide a patch by its probes on the code (current bytes, or `contents`)."""
    from patchkit.base.errors import AnchorError
    from patchkit.authoring.kind import CREATED  # here: the PatchKind protocol is no cost of a hash-only status
    from patchkit.authoring.patch import SkipPatch

    patch = view.patches[pid]
    # Files outside `contents` (another file a diff's moved unit went to): the release's bytes.
    read = (lambda rel: contents[rel] if rel in contents else view.pristine(rel)) if contents is not None else view.read
    bind_package(view, patch)
    targets = patch.targets_for(read)
    whole = {rel: kind for rel in targets if (kind := patch.file_change(rel))}  # created or deleted: absent is no gap
    present = [rel for rel in targets if read(rel) is not None]
    # (a file it creates is absent before, one it deletes is gone upstream: neither is required)
    required = [rel for rel in (patch.REQUIRES or targets) if rel not in whole]
    if required and not any(read(rel) is not None for rel in required):
        return PatchStatus(pid, NOT_APPLICABLE, (), "no target file: " + ", ".join(required))
    # A rule the release keeps in another file (CONSULTS) may say the patch is not needed at all.
    try:
        unneeded = guarded(patch, "precondition", ", ".join(patch.CONSULTS), lambda: patch.precondition(read))
    except PatchCrashed as exc:
        return PatchStatus(pid, FAILED, tuple(present), str(exc), crashed=True)
    except AnchorError as exc:
        return PatchStatus(pid, FAILED, tuple(present), str(exc))
    if unneeded:
        return PatchStatus(pid, NOT_APPLICABLE, tuple(present), unneeded)
    missing = [rel for rel in targets if rel not in present and rel not in whole]
    verdicts: dict[str, str] = {}
    details: list[str] = []
    if patch.all_targets_required() and missing:
        # Failed whatever the rest says; its other files are still judged, so that the detail
        # names each unit that does not apply there too (`file:Class.method` and why).
        details.append(f"one change over all its files, and {', '.join(missing)} "
                       f"{'is' if len(missing) == 1 else 'are'} not in this release")
    notes: list[str] = []
    for rel in (rel for rel in targets if rel in whole and rel not in present):
        # Absent: a file it creates is written (its folder must be there), one it deletes is gone already.
        why = patch.creatable(rel) if whole[rel] == CREATED else None
        verdicts[rel] = FAILED if why else PENDING if whole[rel] == CREATED else UPSTREAM_FIXED
        details += [why] if why else []
    for rel in present:
        tree = view.code(patch, rel, read(rel))  # type: ignore[arg-type]
        try:
            notes += guarded(patch, "notes", rel, lambda: patch.notes(rel, tree))
            if guarded(patch, "is_applied probe", rel, lambda: patch.is_applied(rel, tree)):
                verdicts[rel] = APPLIED
            elif guarded(patch, "is_fixed_upstream probe", rel, lambda: patch.is_fixed_upstream(rel, tree)):
                verdicts[rel] = UPSTREAM_FIXED
            else:
                try:
                    view.render(rel, read(rel), (pid,))  # type: ignore[arg-type]  # as apply renders it
                    verdicts[rel] = PENDING
                except SkipPatch as exc:
                    verdicts[rel] = NOT_APPLICABLE
                    details.append(str(exc))
                except PatchCrashed:
                    raise
                except (AnchorError, PlanError) as exc:
                    verdicts[rel] = FAILED
                    details.append(str(exc))
        except PatchCrashed as exc:
            # This patch's outcome is its own: it is `failed`, the others are still judged.
            return PatchStatus(pid, FAILED, tuple(present), str(exc), crashed=True)
    notes = list(dict.fromkeys(notes))  # a moved unit is named by both its files
    if patch.all_targets_required() and missing:
        failed = tuple(rel for rel, v in verdicts.items() if v == FAILED)
        return PatchStatus(pid, FAILED, failed or tuple(present), "; ".join(details))
    for state in (FAILED, PENDING):
        chosen = tuple(rel for rel, v in verdicts.items() if v == state)
        if chosen:
            return PatchStatus(pid, state, chosen, "; ".join(details if state == FAILED else notes))
    applied = tuple(rel for rel, v in verdicts.items() if v == APPLIED)
    fixed = tuple(rel for rel, v in verdicts.items() if v == UPSTREAM_FIXED and read(rel) is not None)
    if fixed or any(v == UPSTREAM_FIXED for v in verdicts.values()):
        # Upstream fixed the main file; a companion file that already has the same change
        # (upstream's own) does not make the patch "applied".
        return PatchStatus(pid, UPSTREAM_FIXED, fixed + applied, "; ".join(notes))
    if applied:
        return PatchStatus(pid, APPLIED, applied)
    return PatchStatus(pid, NOT_APPLICABLE, tuple(present), "; ".join(details))


def bind_package(view: View, patch: "Patch") -> None:
    """The package's other files, as the release has them, bound to `patch` (a diff patch looks
    there for a changed unit absent from its file), where the tree can list them (a Target can;
    the matrix's wheel sources bind their own)."""
    listing = getattr(view.target, "package_files", None)
    if listing is not None:
        patch.bind_package(listing, view.pristine)


def judge(view: View, pid: str) -> PatchStatus:
    found = fast_status(view, pid) or evaluate(view, pid)
    if found.state == FAILED and not found.crashed:
        found = on_its_stack(view, pid) or found
    # A stack applied by hand: the lower diff's files hold the upper's change too (failed), the
    # upper's undo to the lower's post-image (upstream-fixed); both are undone to the RECORD's bytes.
    if found.state in (UPSTREAM_FIXED, FAILED) and not found.crashed and (by_hand := hand_applied_files(view, pid)):
        from patchkit.engine import hand_applied

        return PatchStatus(pid, APPLIED, found.files if found.state == UPSTREAM_FIXED else tuple(by_hand),
                           hand_applied.detail(view.target))
    if found.state == FAILED and not found.crashed:
        found = _with_cause(view, found)
    return found


def _with_cause(view: View, found: PatchStatus) -> PatchStatus:
    """A failed patch's detail also says whether a local edit or an upstream change is the cause."""
    from patchkit.engine import failure_cause

    said = failure_cause.explain(view, found.id, found.files)
    return replace(found, detail="; ".join(part for part in (found.detail, said) if part)) if said else found


def on_its_stack(view: View, pid: str) -> PatchStatus | None:
    """A patch failing alone that stacks after patches not applied here yet (a diff made on top of
    the ones it names in `Patchkit-After`; any patch's STACK_AFTER): judged on its files as those
    patches leave them, as `apply` renders the stack; None when that does not make it pending."""
    patch = view.patches[pid]
    before = [p for p in patch.STACK_AFTER if p in view.patches and not (view.state and p in view.state.patches)]
    if not before:
        return None
    classes = {p: type(view.patches[p]) for p in before}
    contents: dict[str, bytes | None] = {}
    try:
        for rel in patch.TARGETS:
            data = view.read(rel)
            under = tuple(registry.stack([p for p in before if rel in view.patches[p].TARGETS], classes))
            contents[rel] = view.render(rel, data, under) if data is not None and under else data
    except PlanError:
        return None
    found = evaluate(view, pid, contents)
    if found.state != PENDING:
        return None
    return replace(found, detail=f"on top of {', '.join(before)} (Patchkit-After / STACK_AFTER), as apply stacks them")


def hand_applied_files(view: View, pid: str) -> dict[str, bytes] | None:
    """The release's bytes of a diff patch's files when it was applied by hand (`hand_applied`)."""
    if not registry.is_diff(pid):
        return None  # asked before any patch is loaded (a plain status imports no libcst)
    from patchkit.engine import hand_applied  # (nor this: its RECORD reading is for diffs)

    diffs = {other: patch for other, patch in view.patches.items() if registry.is_diff(other)}
    classes = {other: type(patch) for other, patch in diffs.items()}
    stack = hand_applied.stacked_with(view.patches[pid], diffs, lambda ids: registry.stack(ids, classes))
    return hand_applied.release_bytes(view.target, view.patches[pid], view.read, view.state, stack)


def status(target: Target) -> tuple[list[PatchStatus], list[str]]:
    view = open_view(target)
    statuses = with_clashes(view, [judge(view, pid) for pid in registry.patch_ids()])
    return statuses, view.warnings


def with_clashes(view: View, statuses: list[PatchStatus]) -> list[PatchStatus]:
    """`statuses` with each pending patch that would not apply on top of another patch sharing
    its file (stacked as `apply` stacks them: `stack_clash`) `failed`, naming the other."""
    if not any(registry.is_diff(s.id) for s in statuses):
        return statuses  # only stacks holding a diff are rendered; the rest stays hashes (no libcst)
    from patchkit.engine import stack_clash

    recorded = {rel: tuple(record.patches) for rel, record in view.state.files.items()} if view.state else {}
    # A diff failing on a file another patch already changed here: judged on the release's bytes,
    # stacked as `apply` renders it (from those bytes, in the declared order).
    alone = {s.id: s for s in statuses if s.state == FAILED and not s.crashed
             and any(set(recorded.get(rel, ())) - {s.id} for rel in view.patches[s.id].TARGETS)}
    for pid in alone:
        on_release = evaluate(view, pid, {rel: view.pristine(rel) for rel in view.patches[pid].TARGETS})
        alone[pid] = on_release if on_release.state == PENDING else alone[pid]
    statuses = [alone.get(s.id, s) for s in statuses]
    pending = {s.id: s.files for s in statuses if s.state in (PENDING, OUTDATED)}
    if not pending:
        return statuses
    found = stack_clash.clashes(view, pending, recorded)
    return [replace(s, state=FAILED, detail=found[s.id].detail) if s.id in found else s for s in statuses]
