from __future__ import annotations

from pathlib import Path

from patchkit.engine import manifest_describe
from patchkit.commands import output
from patchkit.releases import versions as versions_mod
from patchkit.releases import manifest as manifest_mod
from patchkit.base.constants import EXIT_OK, EXIT_PLAN
from patchkit.commands.locate import release_source
from patchkit.base.errors import UsageError
from patchkit.base.util import atomic_write


def _describe(version: str) -> manifest_mod.Manifest:
    return manifest_describe.describe(release_source(version))


def update(versions: tuple[str, ...], out: str | None = None, as_json: bool = False) -> int:
    """Regenerate <folder>/<version>.json from the real release files: `out`, or the checkout's
    manifests/ (never the copy inside an installed patchkit)."""
    folder = Path(out) if out else manifest_mod.checkout_folder()
    if folder is None:
        raise UsageError("patchkit is not running from a checkout: pass --out DIR (an installed copy's manifests are never rewritten)")
    if not folder.is_dir():
        raise UsageError(f"--out {folder}: not a folder")
    wanted = [versions_mod.normalise(v) for v in versions]  # bad input: exit 2 before anything is written
    written = []
    for version in wanted:
        fresh = _describe(version)
        path = folder / f"{fresh.version}.json"  # the release's own spelling: v0.5.17 and 0.5.17.0 write 0.5.17.json
        atomic_write(path, fresh.to_json().encode(), 0o644)  # as the checkout has it (mkstemp's 0600 hides it from other users)
        verdicts = {pid: e.verdict for pid, e in sorted(fresh.patches.items())}
        written.append({"version": fresh.version, "path": str(path), "verdicts": verdicts})
        if not as_json:  # one line as each is written (a long run shows its progress)
            output.line(f"{path}: " + ", ".join(f"{pid}={verdict}" for pid, verdict in verdicts.items()))
    if as_json:
        output.as_json({"manifests": written})
    return EXIT_OK


def check(versions: tuple[str, ...], as_json: bool = False) -> int:
    """Fail when a committed manifest disagrees with the release it describes."""
    rows = []
    for version in [versions_mod.normalise(v) for v in versions] or manifest_mod.available():  # bad input: exit 2
        committed = manifest_mod.load(version)
        version = committed.version  # its file's name (0.5.17.0 is manifests/0.5.17.json)
        fresh = _describe(version)
        changed = committed.changed_patches(fresh)
        ok = committed == fresh and (bool(changed) or not committed.reads_differ(fresh))
        rows.append({"version": version, "ok": ok, "changed_patches": changed})
        if as_json:
            continue
        if ok:
            output.line(f"ok        manifests/{version}.json")
            if changed:  # the verdicts still hold; `matrix` parses where it could have hashed
                output.note(f"manifests/{version}.json was made with another source of {', '.join(changed)}: "
                            f"`matrix` judges this release by parsing until `patchkit manifest update {version}`")
        else:
            output.line(f"MISMATCH  manifests/{version}.json (run `patchkit manifest update {version}`)")
    if as_json:
        output.as_json({"manifests": rows})
    return EXIT_OK if all(row["ok"] for row in rows) else EXIT_PLAN
