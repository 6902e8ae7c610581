from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patchkit import builder as builders
from patchkit import dockerfile, output
from patchkit.constants import EXIT_OK
from patchkit.errors import UsageError
from patchkit.util import atomic_write

CA_NAME = "patchkit-ca-certificates.crt"  # the --ca-cert file's name in the build context


def normal_version(version: str) -> str:
    """`v0.5.19` (the image tag's spelling) -> `0.5.19`; what is not a version is a usage error."""
    try:
        return str(Version(version))
    except InvalidVersion:
        raise UsageError(f"--target {version}: not a version (expected e.g. 0.5.17 or v0.5.17)") from None


def _file(option: str, value: str | None) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if not path.is_file():
        raise UsageError(f"{option} {value}: no such file")
    return path


def _spec(base: str, version: str, python: str, wheel: Path | None, ca_cert: Path | None,
          allow_skipped: bool) -> dockerfile.ImageSpec:
    return dockerfile.ImageSpec(base=base, version=normal_version(version), python=python,
                                wheel=wheel.name if wheel else None, ca_cert=CA_NAME if ca_cert else None,
                                allow_skipped=allow_skipped)


def write_dockerfile(base: str, version: str, wheel: str | None, out: str | None,
                     python: str = "python3", ca_cert: str | None = None, allow_skipped: bool = False) -> int:
    wheel_path, ca_path = _file("--wheel", wheel), _file("--ca-cert", ca_cert)
    text = dockerfile.render(_spec(base, version, python, wheel_path, ca_path, allow_skipped))
    if out:
        atomic_write(Path(out), text.encode(), 0o644)
        output.line(f"wrote {out}")
        if wheel_path or ca_path:
            needs = [p.name if p is wheel_path else f"{p} as {CA_NAME}" for p in (wheel_path, ca_path) if p]
            output.line(f"the build context must hold {' and '.join(needs)}")
    else:
        output.text(text)
    return EXIT_OK


def build(base: str, version: str, wheel: str | None, tag: str, builder: str | None,
          python: str = "python3", ca_cert: str | None = None, push: str | None = None,
          allow_skipped: bool = False) -> int:
    wheel_path, ca_path = _file("--wheel", wheel), _file("--ca-cert", ca_cert)
    spec = _spec(base, version, python, wheel_path, ca_path, allow_skipped)
    text = dockerfile.render(spec)  # before looking for a builder: an unknown release fails fast
    chosen, tried = builders.choose(builder or builders.AUTO)
    skipped = "; ".join(f"{p.name}: {p.detail}" for p in tried if not p.answers)
    output.line(f"building {tag} with {chosen}" + (f" (skipped {skipped})" if skipped else ""))
    with tempfile.TemporaryDirectory(prefix="patchkit-image-") as context:
        Path(context, "Dockerfile").write_text(text)
        if wheel_path:
            shutil.copyfile(wheel_path, Path(context, wheel_path.name))
        if ca_path:
            shutil.copyfile(ca_path, Path(context, CA_NAME))
        builders.build(chosen, Path(context), tag, output.progress)
    output.line(f"built {tag} with {chosen}: SGLang {spec.version}, "
                f"{len(dockerfile.patch_labels(spec.version))} patches applied and verified")
    if push:
        digest = builders.push(chosen, tag, push, output.progress)
        output.line(f"pushed {push}@{digest}")
    return EXIT_OK
