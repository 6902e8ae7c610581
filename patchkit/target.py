"""Finding the SGLang to patch: its folder, its version, and safe paths to its files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from patchkit.constants import PACKAGE
from patchkit.errors import TargetError


@dataclass(frozen=True)
class Target:
    """A folder holding `sglang/` and its dist-info (a site-packages or `--target` dir)."""

    site: Path
    version: str

    @property
    def package_dir(self) -> Path:
        return self.site / PACKAGE

    def path(self, rel: str) -> Path:
        """Absolute path of a target file, refusing any path that leaves the package.

        `rel` is relative to the site folder and must stay under `sglang/`, also after
        symlinks are resolved: a patch must never write outside the package it patches.
        """
        candidate = Path(rel)
        if candidate.is_absolute() or ".." in candidate.parts or not rel.startswith(PACKAGE + "/"):
            raise TargetError(f"path {rel!r} escapes the {PACKAGE} package folder")
        full = self.site / candidate
        package_root = self.package_dir.resolve()
        resolved = full.resolve()
        if resolved != package_root and package_root not in resolved.parents:
            raise TargetError(f"{rel} is a symlink that points out of {self.package_dir} (to {resolved})")
        return full

    def read(self, rel: str) -> bytes | None:
        try:
            return self.path(rel).read_bytes()
        except FileNotFoundError:
            return None

    @property
    def label(self) -> str:
        return self.version

    def python_files(self) -> list[str]:
        """Every .py file of the package, relative to the site folder (for finding moved code)."""
        return sorted(p.relative_to(self.site).as_posix() for p in self.package_dir.rglob("*.py"))


def _version_from_dist_info(site: Path) -> str:
    infos = sorted(site.glob(f"{PACKAGE}-*.dist-info"))
    if not infos:
        raise TargetError(f"no {PACKAGE}-*.dist-info in {site}: cannot tell the SGLang version")
    if len(infos) > 1:
        names = ", ".join(info.name for info in infos)
        raise TargetError(f"several SGLang dist-info folders in {site} ({names}); reinstall SGLang")
    from email.parser import HeaderParser  # imported on use: start-up time matters for `status`

    try:
        metadata = HeaderParser().parsestr((infos[0] / "METADATA").read_text(encoding="utf-8"))
    except OSError as exc:
        raise TargetError(f"cannot read {infos[0] / 'METADATA'}: {exc.strerror}") from exc
    version = metadata.get("Version")
    if not version:
        raise TargetError(f"{infos[0] / 'METADATA'} has no Version field")
    return version.strip()


def find_in(site: Path) -> Target:
    """The SGLang in a given folder (`--site-packages DIR`)."""
    site = Path(site)
    if not site.is_dir():
        raise TargetError(f"{site} is not a folder")
    if not (site / PACKAGE / "__init__.py").is_file():
        raise TargetError(f"no SGLang in {site}: it holds no {PACKAGE}/ package")
    return Target(site=Path(os.path.abspath(site)), version=_version_from_dist_info(site))


def find_installed() -> Target:
    """The SGLang that this interpreter imports, found through its distribution metadata."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise TargetError(
            "SGLang is not installed for this Python; pass --site-packages DIR or --fetch DIR"
        ) from None
    site = Path(str(dist.locate_file(""))).resolve()
    if not (site / PACKAGE / "__init__.py").is_file():
        raise TargetError(f"SGLang's metadata points to {site}, which holds no {PACKAGE}/ package")
    return Target(site=site, version=dist.version)


def check_version(target: Target, wanted: str | None) -> None:
    if wanted is not None and wanted != target.version:
        raise TargetError(
            f"--target {wanted} but SGLang {target.version} is installed in {target.site}; "
            f"run with --target {target.version} or install SGLang {wanted}"
        )
