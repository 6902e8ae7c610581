"""What the patches render on a release, decided by their probes alone (as `apply` on a pristine
tree would): each patch's state and, per file, the patches stacked on it and the sha256 of
the result. `python -m testing.rendered [V...]` prints it for the cached releases."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from patchkit.engine import decide, patch_status, registry
from patchkit.engine import view as view_mod
from testing.releases import pristine

VERSIONS = tuple(f"0.5.{minor}" for minor in range(10, 24))


class _Tree:
    def __init__(self, root: Path, version: str) -> None:
        self.root, self.version = root, version

    def read(self, rel: str) -> bytes | None:
        path = self.root / rel
        return path.read_bytes() if path.is_file() else None


class _Patched(_Tree):
    """A release tree with some files replaced by new bytes."""

    def __init__(self, root: Path, version: str, files: dict[str, bytes]) -> None:
        super().__init__(root, version)
        self.files = files

    def read(self, rel: str) -> bytes | None:
        return self.files[rel] if rel in self.files else super().read(rel)


def render(version: str) -> dict:
    return _render(version)[0]


def patched_states(version: str) -> dict[str, str]:
    """Each patch's state, judged by its probes, on the release with every patch applied."""
    files = _render(version)[1]
    view = view_mod.code_view(_Patched(pristine(version), version, files))
    return {pid: decide.evaluate(view, pid).state for pid in registry.patch_ids()}


def _render(version: str) -> tuple[dict, dict[str, bytes]]:
    source = _Tree(pristine(version), version)
    view = view_mod.code_view(source)
    classes = {cls.ID: cls for cls in registry.load_all()}
    statuses, per_file = {}, {}
    for pid in registry.patch_ids():
        status = decide.evaluate(view, pid)
        statuses[pid] = [status.state, list(status.files)]
        if status.state == patch_status.PENDING:
            for rel in status.files:
                per_file.setdefault(rel, []).append(pid)
    files, rendered = {}, {}
    for rel, ids in sorted(per_file.items()):
        ids = registry.stack(ids, classes)
        data = view.render(rel, source.read(rel), tuple(ids))  # type: ignore[arg-type]
        files[rel] = [ids, hashlib.sha256(data).hexdigest()]
        rendered[rel] = data
    return {"statuses": statuses, "files": files}, rendered


if __name__ == "__main__":
    print(json.dumps({v: render(v) for v in sys.argv[1:] or VERSIONS}, indent=1, sort_keys=True))
