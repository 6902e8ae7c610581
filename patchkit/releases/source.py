"""`Source`: one SGLang release's files as the engine reads them, whatever holds them: an installed
release (`store.target.Target`), a downloaded wheel (`releases.pristine.WheelSource`) or a git
revision (`engine.upstream.GitSource`). Declared here, below every module that takes one
(`engine.upstream` judges on it, `engine.verdicts` keys its cache on it)."""

from __future__ import annotations

from typing import Protocol


class Source(Protocol):
    @property
    def version(self) -> str: ...

    @property
    def label(self) -> str: ...

    def read(self, rel: str) -> bytes | None: ...

    def python_files(self) -> list[str]: ...

    def package_files(self) -> list[str]: ...
