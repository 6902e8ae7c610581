"""The runtime report's files: an SGLang plugin that makes every process which loads plugins say
which patches it really runs (a log line, a `patchkit` field in /server_info, a gauge).

`apply` writes them in the same transaction as the patched files and records them in the state
(`runtime`); `revert` removes them byte-exactly. They live in the target's `runtime_dir`, the
folder on the serving `sys.path` beside the imported `sglang/` (an editable install: beside its
metadata, since its checkout is not on `sys.path`):

  sglang_patchkit_runtime/__init__.py          the plugin (patchkit/templates/runtime_plugin.py.txt)
  sglang_patchkit_runtime-1.dist-info/         METADATA, entry_points.txt (the `sglang.srt.plugins`
                                               entry point `patchkit`), RECORD

A release without SGLang's plugin system (0.5.10: no `sglang/srt/plugins/`) gets none of them.
"""

from __future__ import annotations

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base.constants import (
    ENV_DISABLE, RUNTIME_DIST_INFO, RUNTIME_GROUP, RUNTIME_MODULE, RUNTIME_PLUGIN_NAME,
)
from patchkit.store.target import Target

if TYPE_CHECKING:
    from typing import Collection, Mapping

FIELD = "patchkit"  # the key the plugin adds to each DP rank's entry of /server_info's internal_states
PLUGINS_MODULE = "sglang/srt/plugins/__init__.py"  # SGLang's plugin system (0.5.11 on)
MODULE_FILE = f"{RUNTIME_MODULE}/__init__.py"


def has_plugin_system(target: Target) -> bool:
    return target.read(PLUGINS_MODULE) is not None


def _record_line(rel: str, data: bytes) -> str:
    import base64  # here, as importlib.resources in render: a no-op apply renders nothing
    import hashlib

    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}\n"


def render(switchable: list[str]) -> dict[str, bytes]:
    """{rel: bytes} of the plugin and its dist-info; `switchable`: the ids that honour
    SGLANG_PATCHKIT_DISABLE (the plugin reports the others as not switchable)."""
    from importlib import resources  # here: it imports tempfile and shutil, which a no-op apply never needs

    template = (resources.files("patchkit") / "templates" / "runtime_plugin.py.txt").read_text(encoding="utf-8")
    module = template.replace("$SWITCHABLE", repr(sorted(switchable))).encode()
    metadata = ("Metadata-Version: 2.1\nName: sglang-patchkit-runtime\nVersion: 1\n"
                "Summary: patchkit's runtime report for SGLang (written by `patchkit apply`, removed by "
                "`patchkit revert`)\n").encode()
    entry_points = f"[{RUNTIME_GROUP}]\n{RUNTIME_PLUGIN_NAME} = {RUNTIME_MODULE}:register\n".encode()
    files = {MODULE_FILE: module, f"{RUNTIME_DIST_INFO}/METADATA": metadata,
             f"{RUNTIME_DIST_INFO}/entry_points.txt": entry_points}
    record = "".join(_record_line(rel, data) for rel, data in files.items()) + f"{RUNTIME_DIST_INFO}/RECORD,,\n"
    files[f"{RUNTIME_DIST_INFO}/RECORD"] = record.encode()
    return files


def plugins_note(environ: Mapping[str, str]) -> str | None:
    """A note when SGLANG_PLUGINS (a whitelist) is set without patchkit's plugin in it: SGLang
    then never loads the report."""
    value = environ.get("SGLANG_PLUGINS", "")
    if not value:
        return None
    names = [item.strip() for item in value.split(",") if item.strip()]
    if RUNTIME_PLUGIN_NAME in names:
        return None
    return (f"SGLANG_PLUGINS={value} does not list {RUNTIME_PLUGIN_NAME}: SGLang will not load the runtime report "
            f"(no log line, no /server_info field, no gauge); serve with "
            f"SGLANG_PLUGINS={','.join([*names, RUNTIME_PLUGIN_NAME])}")


def disable_note(environ: Mapping[str, str], switchable: Collection[str]) -> str | None:
    value = environ.get(ENV_DISABLE, "")
    off = [item.strip() for item in value.split(",") if item.strip()]
    stuck = [pid for pid in off if pid not in switchable]
    if not stuck:
        return None
    return (f"{ENV_DISABLE} lists {', '.join(stuck)}, which cannot take the pristine path at runtime (see "
            f"`patchkit list`); only revert removes them")
