"""`patchkit doctor`: the memory budget and the traps of one SGLang launch line."""

from __future__ import annotations

import math

from patchkit.commands import output
from patchkit.commands.locate import locate, naming, release_source
from patchkit.base.constants import EXIT_OK, EXIT_PLAN
from patchkit.doctor import diagnose
from patchkit.doctor.gpu import Overrides, parse_sm
from patchkit.base.errors import UsageError
from patchkit.doctor.report import lines

# What doctor suggests when it finds no SGLang: its own options.
DOCTOR_TARGET_OPTIONS = ("pass --site-packages DIR, --source DIR, --python PATH, or --version V (that release from "
                         "the package index)")


def check_overrides(overrides: Overrides) -> None:
    """The GPU facts given on the command line (doctor's, and bump's for --launch): exit 2 for nonsense."""
    if any(v is not None and not (math.isfinite(v) and v > 0)
           for v in (overrides.gpus, overrides.gpu_memory, overrides.gpu_free)):
        raise UsageError("--gpus, --gpu-memory and --gpu-free must be positive numbers")
    if overrides.gpu_free is not None and overrides.gpu_memory is not None and overrides.gpu_free > overrides.gpu_memory:
        raise UsageError(f"--gpu-free {overrides.gpu_free:g} is more than --gpu-memory {overrides.gpu_memory:g} "
                         f"(free memory per GPU cannot exceed its total)")
    if overrides.sm is not None and parse_sm(overrides.sm) is None:
        raise UsageError(f"--sm {overrides.sm}: expected MAJOR.MINOR, e.g. 8.9")


def doctor(version: str | None, site_packages: str | None, overrides: Overrides, launch_args: tuple[str, ...],
           as_json: bool, source: str | None = None, python: str | None = None) -> int:
    if version and (site_packages or source):
        raise UsageError(f"--version and {'--site-packages' if site_packages else '--source'} are mutually exclusive")
    check_overrides(overrides)
    # --version V: the release's cached wheel, read member by member (nothing unpacked on disk).
    # --python beside a folder or --version only builds the model classes: the tree is the one named.
    names_tree = python if not (site_packages or source) else None
    target = release_source(version) if version else locate(site_packages, source=source, python=names_tree,
                                                                options=DOCTOR_TARGET_OPTIONS)
    # A printed `patchkit apply` names the SGLang checked: its folder or interpreter, or --target V for --version V
    # (apply then refuses any other release), and this run's --patches.
    report = diagnose(target, list(launch_args), overrides, naming=naming(site_packages, source, names_tree, version),
                      python=python)
    if as_json:
        output.as_json(report.to_dict())
    else:
        for text in lines(report):
            output.line(text)
    return EXIT_PLAN if report.has_errors else EXIT_OK
