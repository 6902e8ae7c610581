from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from patchkit import dockerfile, output
from patchkit.constants import EXIT_OK
from patchkit.errors import PatchkitError, UsageError
from patchkit.util import atomic_write

BUILDERS = ("docker", "podman", "buildah")


def _spec(base: str, version: str, wheel: str | None) -> tuple[dockerfile.ImageSpec, Path | None]:
    wheel_path = Path(wheel) if wheel else None
    if wheel_path and not wheel_path.is_file():
        raise UsageError(f"--wheel {wheel}: no such file")
    return dockerfile.ImageSpec(base=base, version=version, wheel=wheel_path.name if wheel_path else None), wheel_path


def write_dockerfile(base: str, version: str, wheel: str | None, out: str | None) -> int:
    spec, _ = _spec(base, version, wheel)
    text = dockerfile.render(spec)
    if out:
        atomic_write(Path(out), text.encode(), 0o644)
        output.line(f"wrote {out}")
    else:
        output.text(text)
    return EXIT_OK


def build(base: str, version: str, wheel: str | None, tag: str, builder: str | None) -> int:
    spec, wheel_path = _spec(base, version, wheel)
    chosen = builder or next((name for name in BUILDERS if shutil.which(name)), None)
    if chosen is None or not shutil.which(chosen):
        raise PatchkitError(f"no container builder found: install one of {', '.join(BUILDERS)} "
                            "(or use `patchkit image dockerfile` and build elsewhere)")
    with tempfile.TemporaryDirectory(prefix="patchkit-image-") as context:
        Path(context, "Dockerfile").write_text(dockerfile.render(spec))
        if wheel_path:
            shutil.copy2(wheel_path, Path(context, wheel_path.name))
        argv = ([chosen, "bud"] if chosen == "buildah" else [chosen, "build"]) + ["-t", tag, context]
        if subprocess.run(argv, check=False).returncode != 0:
            raise PatchkitError(f"`{' '.join(argv[:2])}` failed building {tag} (its output is above)")
    output.line(f"built {tag} with {chosen}")
    return EXIT_OK
