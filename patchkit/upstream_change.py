"""The public path of `patchkit.authoring.upstream_change` (patch sets import `patchkit.upstream_change`): a re-export, see docs/modules.md."""

from patchkit.authoring.upstream_change import *  # noqa: F401,F403
