"""`patchkit capture ID [--out DIR]`: hand edits of an installed SGLang as a diff patch file."""

from __future__ import annotations

from patchkit.commands import output
from patchkit.releases import pristine as releases, versions
from patchkit.commands.destination import output_folder
from patchkit.commands.locate import locate
from patchkit.base.constants import EXIT_OK
from patchkit.base.errors import UsageError
from patchkit.base.util import atomic_write

DEFAULT_FOLDER = "sglang-patches"


def capture(pid: str, out: str | None, site_packages: str | None, source: str | None, python: str | None,
            as_json: bool) -> int:
    from patchkit.engine import capture as capturing

    capturing.check_id(pid)
    folder = output_folder("--out", out or DEFAULT_FOLDER)
    path = folder / f"{pid}{capturing.DIFF_SUFFIX}"
    if path.exists() or path.is_symlink():
        raise UsageError(f"{path} exists already; nothing written (remove it, or capture under another id)")
    target = locate(site_packages, None, None, source=source, python=python)
    release = str(versions.public(versions.parse(target.version, "the installed SGLang version")))
    made = capturing.capture(target, pid, lambda: releases.WheelSource(release, output.progress))
    folder.mkdir(exist_ok=True)
    atomic_write(path, made.data, 0o644)
    with_it = (str(folder),)
    follow = (f"`{target.naming.command('revert', patches=with_it)}` takes the tree back to the release's bytes, "
              f"`{target.naming.command('apply', '--only', made.id, patches=with_it)}` applies it again")
    if as_json:
        output.as_json({"id": made.id, "sglang": {"version": target.version, "path": str(target.site)},
                        "path": str(path), "files": list(made.files), "notes": list(made.notes), "next": follow})
        return EXIT_OK
    for note in made.notes:
        output.note(note)
    output.line(f"captured {len(made.files)} hand-edited file(s) of SGLang {target.version} as patch {made.id}: {path}")
    for item in made.files:
        what = "new file" if item["new"] else f"+{item['added']} -{item['removed']}"
        output.line(f"  {item['file']} ({what})")
    output.line(f"next: {follow}")
    return EXIT_OK
