"""The public path of `patchkit.authoring.patch` (patch sets import `patchkit.patch`): a re-export, see docs/modules.md."""

from patchkit.authoring.patch import *  # noqa: F401,F403
