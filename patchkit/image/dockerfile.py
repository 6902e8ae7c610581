"""Manifest -> Dockerfile text for a patched SGLang image. Pure: no IO beyond reading patches.

Shape (the README says why): one stage. patchkit gets a virtual environment of its own under
/opt/patchkit, made from the image's Python with `--without-pip` and filled by the image's own pip
(`pip --python`), so neither patchkit nor its dependencies ever enter the serving Python, and a
PEP 668 ("externally managed") base needs no override. From there, `patchkit apply --python` and
`patchkit verify --python --strict` work on the SGLang that the serving interpreter imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchkit.authoring.patch import Patch

import json
import re
from dataclasses import dataclass

from patchkit import __version__
from patchkit.engine import identity, registry
from patchkit.image import reference as image_reference
from patchkit.releases import manifest
from patchkit.image.context import PATCHES_DIR as _SETS_DIR
from patchkit.base.constants import LABEL_PREFIX as LABEL_PREFIX  # verify --url reads the labels too
from patchkit.base.errors import UsageError

HOME = "/opt/patchkit"  # everything patchkit adds to the image lives here
VENV = f"{HOME}/venv"
WHEEL_DIR = f"{HOME}/dist"
PATCHES = f"{HOME}/patches"  # the patch sets beside the built-in one, as the build context holds them
CA_CERT = f"{HOME}/ca-certificates.crt"


@dataclass(frozen=True)
class ImageSpec:
    base: str  # e.g. lmsysorg/sglang:v0.5.17
    version: str  # the SGLang release inside the base image, a normal version (0.5.17)
    python: str = "python3"  # the interpreter in the image that serves SGLang
    wheel: str | None = None  # file name of patchkit's wheel in the build context (required to render)
    ca_cert: str | None = None  # file name, in the build context, of extra CA certificates for pip
    allow_skipped: bool = False  # a base without SGLang's dependencies: import checks cannot run
    # Context paths (image_context.PATCHES_DIR/N[/FILE]) of the patch sets beside the built-in one.
    patch_sets: tuple[str, ...] = ()
    # The release's manifest when it has no committed one (made by the probes on its wheel:
    # manifest_describe.for_release); None: the committed manifest of `version`.
    release: manifest.Manifest | None = None


# One word of a path: no whitespace, quote, `$`, backslash or other shell or Dockerfile syntax.
_WORD = r"[A-Za-z0-9_+][A-Za-z0-9_.+-]*"
# `python3`, `/opt/conda/bin/python` or `/work/.venv/bin/python` (a component may start with a dot, never be . or ..)
_INTERPRETER = re.compile(rf"{_WORD}|(?:/\.?{_WORD})+", re.ASCII)
_FILE_NAME = re.compile(_WORD, re.ASCII)
_CONTEXT_PATH = re.compile(rf"{_WORD}(?:/{_WORD})*", re.ASCII)
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!]*", re.ASCII)  # a normal version's alphabet
_LABEL_KEY = re.compile(r"[a-z0-9][a-z0-9.-]*", re.ASCII)
_LABEL_VALUE = re.compile(r"[A-Za-z0-9_.,:@/+=\[\] -]*", re.ASCII)  # nothing a LABEL would expand or end on


def check(spec: ImageSpec) -> None:
    """Refuse (exit 2) any value that could end a Dockerfile instruction or start another: a
    newline ends an instruction whatever the quoting, so each value must be of a known shape."""
    if not image_reference.is_reference(spec.base):
        raise UsageError(f"--base {spec.base!r}: not an image reference (name[:tag][@digest], e.g. "
                         "lmsysorg/sglang:v0.5.17)")
    if not _INTERPRETER.fullmatch(spec.python):
        raise UsageError(f"--python {spec.python!r}: not an interpreter path (a plain name such as python3 or an "
                         "absolute path, without whitespace, quotes or shell characters)")
    if not _VERSION.fullmatch(spec.version):
        raise UsageError(f"--target {spec.version!r}: not a version patchkit can write into a Dockerfile")
    for option, name in (("--wheel", spec.wheel), ("--ca-cert", spec.ca_cert)):
        if name is not None and not _FILE_NAME.fullmatch(name):
            raise UsageError(f"{option} {name!r}: the file name must be a plain name (letters, digits, . _ + -) "
                             "to be copied into the build context")
    for where in spec.patch_sets:
        if not (_CONTEXT_PATH.fullmatch(where) and where.split("/", 1)[0] == _SETS_DIR and ".." not in where):
            raise UsageError(f"patch set {where!r}: not a path patchkit writes into a build context")


def patch_digest(cls: "type[Patch]") -> str:
    """sha256 of a patch's source: what the image labels (and the state file) record."""
    return identity.digest(cls.ID)


def patch_labels(version: str, release: manifest.Manifest | None = None) -> dict[str, str]:
    """{patch id: sha256 of the patch's source} for the patches the image applies (the other sets
    travel in the build context, byte for byte): `identity.for_release`."""
    return identity.for_release(version, release)


def labels(spec: ImageSpec) -> dict[str, str]:
    """Every label of the image; a function of the inputs only (no dates, no host names)."""
    digests = patch_labels(spec.version, spec.release)
    return {
        "org.opencontainers.image.base.name": spec.base,
        "org.opencontainers.image.description": f"SGLang {spec.version} patched by patchkit",
        f"{LABEL_PREFIX}.version": __version__,
        f"{LABEL_PREFIX}.sglang": spec.version,
        f"{LABEL_PREFIX}.patches": ",".join(f"{pid}@sha256:{digest}" for pid, digest in sorted(digests.items())),
        **{f"{LABEL_PREFIX}.patch.{pid}": f"sha256:{digest}" for pid, digest in sorted(digests.items())},
    }


def render(spec: ImageSpec) -> str:
    check(spec)
    python = spec.python
    patchkit = f"{VENV}/bin/patchkit"
    copies, pip_options = [], ["--no-cache-dir", "--disable-pip-version-check"]
    if not spec.wheel:
        raise UsageError("an image installs the running patchkit from its wheel in the build context: no wheel given")
    copies.append(f"COPY {spec.wheel} {WHEEL_DIR}/{spec.wheel}")
    requirement = f"{WHEEL_DIR}/{spec.wheel}"
    if spec.patch_sets:
        # Every patch set of this run, as loaded here: `patchkit` in the image (the build's apply and
        # verify, and any later status) loads the same ones through $PATCHKIT_PATCHES.
        copies.append(f"COPY {_SETS_DIR} {PATCHES}")
        in_image = [f"{PATCHES}/{where.split('/', 1)[1]}" for where in spec.patch_sets]
        copies.append(f"ENV {registry.ENV_PATCHES}={':'.join(in_image)}")
    if spec.ca_cert:
        copies.append(f"COPY {spec.ca_cert} {CA_CERT}")
        pip_options.append(f"--cert {CA_CERT}")
    lines = [
        f"# Generated by patchkit {__version__}: SGLang {spec.version} in {spec.base}, patched and verified.",
        "# patchkit runs from its own virtual environment in " + HOME + "; the serving Python",
        f"# ({spec.python}) gets only the patched SGLang files, never patchkit or its dependencies.",
        f"FROM {spec.base}",
        *copies,
        f"RUN {python} -m venv --without-pip {VENV} \\",
        f" && {python} -m pip --python {VENV}/bin/python install {' '.join(pip_options)} {requirement}",
        "# Fails the build on any problem: another SGLang version (exit 3), a patch that cannot be",
        "# applied (1), a needed patch missing or a failed check (verify --strict, run with the",
        "# image's own Python: the patched modules must import" + (
            "; checks that cannot run for lack of a module\n# SGLang imports are listed as skipped)."
            if spec.allow_skipped else ", a check that cannot run fails too)."),
        f"RUN {patchkit} apply --python {python} --target {spec.version} \\",
        f" && {patchkit} verify --python {python} --strict" + (" --allow-skipped" if spec.allow_skipped else ""),
        "LABEL " + " \\\n      ".join(f"{key}={_label_value(key, value)}" for key, value in labels(spec).items()),
    ]
    return "\n".join(lines) + "\n"


def _label_value(key: str, value: str) -> str:
    # A LABEL expands `$` and reads escapes: only plain values go in (ids, digests, references).
    if not (_LABEL_KEY.fullmatch(key) and _LABEL_VALUE.fullmatch(value)):
        raise UsageError(f"label {key} would hold {value!r}, which a Dockerfile cannot carry as it is")
    return json.dumps(value)
