"""The public path of `patchkit.authoring.launch_trigger` (patch sets import `patchkit.launch_trigger`): a re-export, see docs/modules.md."""

from patchkit.authoring.launch_trigger import *  # noqa: F401,F403
