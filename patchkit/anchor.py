"""The public path of `patchkit.authoring.anchor` (patch sets import `patchkit.anchor`): a re-export, see docs/modules.md."""

from patchkit.authoring.anchor import *  # noqa: F401,F403
