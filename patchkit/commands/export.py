"""`patchkit export ID --release V [-o FILE]`: a patch as a `git format-patch` file for a checkout."""

from __future__ import annotations

from patchkit.commands import output
from patchkit.commands.destination import output_file
from patchkit.base.constants import EXIT_OK
from patchkit.base.util import atomic_write


def export(pid: str, version: str, out: str | None, author: str | None, as_json: bool) -> int:
    from patchkit.engine import export as exporting

    path = output_file("-o", out) if out else None
    made = exporting.export(pid, version, author, output.progress)
    if path is not None:
        atomic_write(path, made.data, 0o644)
    if as_json:
        output.as_json({"id": made.id, "release": made.version, "path": None if path is None else str(path),
                        "files": list(made.files),
                        "patch": None if path is not None else made.data.decode("utf-8", "replace")})
    elif path is not None:
        output.line(f"wrote {path}: patch {made.id} against SGLang {made.version}, {len(made.files)} file(s) "
                    f"(`git am {path}` or `git apply {path}` in an SGLang checkout at v{made.version})")
    else:
        output.data(made.data)
    return EXIT_OK
