"""Why a patch is `failed` (an anchor gone, an edit that fired the wrong number of times, a diff
unit in conflict): a local edit or an upstream change, told by comparing its files with the
release's own bytes (the dist-info RECORD's sha256, else the manifest made from the real
release), and the command to run next (as patch-package says)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchkit.releases import manifest as manifest_mod
from patchkit.releases import versions
from patchkit.store import stale
from patchkit.store.naming import Naming

if TYPE_CHECKING:
    from patchkit.authoring.kind import PatchKind
    from patchkit.engine.view import View

UPSTREAM, LOCAL_EDIT = "upstream", "local-edit"


def release_sha(view: "View", rel: str) -> str | None:
    """The sha256 SGLang's release has for `rel`, or None when nothing here says."""
    from patchkit.releases import dist_record

    record = dist_record.release_hashes(view.target.site, view.target.version)  # read only for a failed patch
    if record is not None and rel in record:
        return record[rel][0]
    if manifest_mod.matches(view.manifest, view.target.version):
        return view.manifest.files.get(rel)
    return None


def cause(view: "View", files: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """(UPSTREAM, []) when every file has the release's bytes; (LOCAL_EDIT, the edited files) when
    one differs; (None, []) when the release's bytes are known for none of them."""
    from patchkit.engine.view import before_patchkit_sha

    known = {rel: release_sha(view, rel) for rel in files}
    compared = {rel: sha for rel, sha in known.items() if sha is not None}
    if not compared:
        return None, []
    edited = [rel for rel, sha in compared.items() if before_patchkit_sha(view, rel) != sha]
    return (LOCAL_EDIT, edited) if edited else (UPSTREAM, [])


def _last_release_it_applies_to(pid: str, version: str) -> str | None:
    """The newest release before `version` whose manifest says the patch applies there."""
    older = [v for v in manifest_mod.available() if versions.parse(v) < versions.parse(version)]
    for candidate in sorted(older, key=versions.parse, reverse=True):
        found = manifest_mod.find(candidate)
        entry = found.patches.get(pid) if found else None
        if entry is not None and entry.verdict == "applies":
            return candidate
    return None


def explain(view: "View", pid: str, files: tuple[str, ...]) -> str:
    """One sentence: the cause and the next command; "" when the release's bytes are unknown."""
    found, edited = cause(view, files)
    version = view.target.version
    skip = f"`--skip {pid}`"
    if found == LOCAL_EDIT:
        shown = ", ".join(edited)
        if view.target.checkout is not None:
            restore = (f"`{stale.git_command(view.target, 'diff', edited)}` shows it, "
                       f"`{stale.git_command(view.target, 'checkout', edited)}` restores it")
        else:
            reinstall = stale.reinstall_command(view.target)
            restore = (f"`{reinstall}` restores it" if reinstall else
                       f"SGLang {version}'s source (its sdist, or the tree checked out again) restores it")
            if view.state is not None and any(rel in view.state.files for rel in edited):
                naming = view.target.naming
                restore = f"`{naming.command('diff')}` shows it, `{naming.command('revert')}` then {restore}"
        return f"cause: a local edit ({shown} is not SGLang {version}'s release file); {restore}, or {skip}"
    if found == UPSTREAM:
        following = upstream_next(view.patches[pid], pid, version, view.target.naming)
        return (f"cause: an upstream change ({', '.join(files)} has SGLang {version}'s release bytes); "
                f"{following}, or {skip}")
    return ""


def upstream_next(patch: "PatchKind", pid: str, version: str, naming: Naming) -> str:
    """What to run for a patch that SGLang `version`'s own code fails: the command that re-makes
    it (a diff: `rebase`), else the `track` that shows what changed since the newest release it
    applies to, written with the run's naming (its --patches)."""
    following = patch.upstream_remedy(version)
    if following is not None:
        return following
    last = _last_release_it_applies_to(pid, version)
    if last is None:
        return f"`{naming.command('track', '--from', 'A', '--to', version)}` (A: a release it applies to) shows what changed"
    return f"`{naming.command('track', '--from', last, '--to', version)}` shows what changed"
