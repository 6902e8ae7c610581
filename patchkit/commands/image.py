from __future__ import annotations

import os
import shlex
import tempfile
from dataclasses import replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patchkit.image import builder as builders
from patchkit.image import dockerfile, context as image_context, reference as image_reference
from patchkit.commands import output
from patchkit.engine import manifest_describe
from patchkit.releases import manifest, versions
from patchkit.base.constants import EXIT_OK
from patchkit.base.errors import EnvironmentFailure, TargetError, UsageError

CA_NAME = "patchkit-ca-certificates.crt"  # the --ca-cert file's name in the build context


def normal_version(version: str) -> str:
    """`v0.5.19` (the image tag's spelling) -> `0.5.19`; what is not a version is a usage error."""
    try:
        if len(version) > versions.MAX_LENGTH:
            raise InvalidVersion(version)
        return str(Version(version))
    except (InvalidVersion, ValueError):
        raise UsageError(f"--target {version[:40]}: not a version (expected e.g. 0.5.17 or v0.5.17)") from None


def _file(option: str, value: str | None) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if path.exists() and not path.is_file():  # a FIFO, a device, a folder: it is there, but not a file
        raise EnvironmentFailure(f"{option} {value}: not a regular file; patchkit copies only a file into the "
                                 "build context")
    if not path.is_file():
        raise UsageError(f"{option} {value}: no such file")
    return path


def _spec(base: str, version: str, python: str, context: image_context.Context, ca_cert: Path | None,
          allow_skipped: bool) -> dockerfile.ImageSpec:
    spec = dockerfile.ImageSpec(base=base, version=normal_version(version), python=python, wheel=context.wheel,
                                ca_cert=CA_NAME if ca_cert else None, allow_skipped=allow_skipped,
                                patch_sets=context.patch_sets)
    dockerfile.check(spec)
    _same_release_as_the_tag(spec)
    release, committed = manifest_describe.for_release(spec.version, output.progress)
    if committed:
        return spec
    known = manifest.available()
    output.warn(f"SGLang {spec.version} was not verified by patchkit (it has manifests for {known[0]}..{known[-1]}): "
                "the image applies the patches their probes find on its wheel, as `apply` judges it")
    return replace(spec, release=release)


def _same_release_as_the_tag(spec: dockerfile.ImageSpec) -> None:
    """A base whose tag is a version (`v0.5.12.post1`) holds that release: another --target would
    write a build step that fails on it (exit 3 in the build), so it fails here."""
    tag = image_reference.tag(spec.base)
    try:
        tagged = str(Version(tag)) if tag else None
    except InvalidVersion:
        return  # a tag that is not a version (`latest`, `v0.5.17-cu129`) says nothing
    if tagged is not None and tagged != spec.version:
        raise TargetError(f"--target {spec.version} but the base {spec.base} is tagged for SGLang {tagged}; "
                          f"run with --target {tagged} (the build's apply would refuse {spec.version})")


def _write_context(context: image_context.Context, ca_path: Path | None, folder: Path, dockerfile_name: str,
                   text: str) -> None:
    """The context and the Dockerfile, written together, all or nothing (`image_context.write`)."""
    image_context.write(context, folder, {**({CA_NAME: ca_path} if ca_path else {}), dockerfile_name: text.encode()})


def _reference(option: str, value: str) -> None:
    """`-t` and `--push` reach the builder's command line: image references only."""
    if not image_reference.is_reference(value):
        raise UsageError(f"{option} {value!r}: not an image reference (name[:tag][@digest])")


def _refuse_output(out: str, entries: set[str]) -> None:
    """`-o` names the Dockerfile, its folder the build context: a folder given there (the context
    folder itself) was replaced by the Dockerfile, the context written into its parent; a name the
    context's own entries take (the wheel, `patchkit-patches`, the CA file) is taken by one of them."""
    path = Path(out)
    if path.is_dir() or out.endswith(("/", os.sep)):
        instead = shlex.quote(str(path / "Dockerfile"))
        raise UsageError(f"-o {out}: a folder; -o names the Dockerfile, whose folder becomes the build context "
                         f"(`-o {instead}`)")
    if path.name in entries:
        instead = shlex.quote(str(path.parent / "Dockerfile"))
        raise UsageError(f"-o {out}: the build context's own {path.name} goes there; name the Dockerfile "
                         f"otherwise (`-o {instead}`)")


def write_dockerfile(base: str, version: str, wheel: str | None, out: str | None,
                     python: str = "python3", ca_cert: str | None = None, allow_skipped: bool = False,
                     as_json: bool = False) -> int:
    """With `-o FILE`, FILE's folder becomes the build context: patchkit's wheel and the patch sets
    are written beside the Dockerfile (which is written last). On stdout, the text alone, and
    what its context must hold."""
    wheel_path, ca_path = _file("--wheel", wheel), _file("--ca-cert", ca_cert)
    context = image_context.plan(wheel_path)
    if out:
        _refuse_output(out, {context.wheel, image_context.PATCHES_DIR, *([CA_NAME] if ca_path else [])})
    spec = _spec(base, version, python, context, ca_path, allow_skipped)
    text = dockerfile.render(spec)
    # The given path as the user spelled it, made one inert line (a newline in it split the line).
    needs = [*context.names(), *([f"{output.one_line(str(ca_path))} as {CA_NAME}"] if ca_path else [])]
    if out:
        folder = Path(out).resolve().parent
        if not folder.is_dir():
            raise UsageError(f"-o {out}: no folder {folder}")
        _write_context(context, ca_path, folder, Path(out).name, text)
    if as_json:
        output.as_json({"sglang": spec.version, "path": out, "dockerfile": text, "labels": dockerfile.labels(spec),
                        "context_needs": needs, "context_written": bool(out)})
    elif out:
        output.line(f"wrote {out} and its build context beside it: {', '.join(needs)}")
    else:
        output.text(text)
        output.progress(f"the build context must hold {' and '.join(needs)} (`-o FILE` writes them beside FILE)")
    return EXIT_OK


def build(base: str, version: str, wheel: str | None, tag: str, builder: str | None,
          python: str = "python3", ca_cert: str | None = None, push: str | None = None,
          allow_skipped: bool = False, as_json: bool = False) -> int:
    _reference("--tag", tag)
    if push:
        _reference("--push", push)
    wheel_path, ca_path = _file("--wheel", wheel), _file("--ca-cert", ca_cert)
    context = image_context.plan(wheel_path)
    spec = _spec(base, version, python, context, ca_path, allow_skipped)
    text = dockerfile.render(spec)  # before looking for a builder: an unknown release fails fast
    patches = dockerfile.patch_labels(spec.version, spec.release)
    chosen, tried = builders.choose(builder or builders.AUTO)
    skipped = "; ".join(f"{p.name}: {p.detail}" for p in tried if not p.answers)
    say = output.progress if as_json else output.line  # with --json, stdout is the result alone
    say(f"building {tag} with {chosen}" + (f" (skipped {skipped})" if skipped else ""))
    with tempfile.TemporaryDirectory(prefix="patchkit-image-") as folder:
        _write_context(context, ca_path, Path(folder), "Dockerfile", text)
        builders.build(chosen, Path(folder), tag, output.progress)
    say(f"built {tag} with {chosen}: SGLang {spec.version}, {len(patches)} patches applied and verified")
    digest = builders.push(chosen, tag, push, output.progress) if push else None
    if push:
        say(f"pushed {push}@{digest}")
    if as_json:
        output.as_json({"tag": tag, "builder": chosen, "sglang": spec.version, "patches": patches,
                        "pushed": {"ref": push, "digest": digest} if push else None})
    return EXIT_OK
