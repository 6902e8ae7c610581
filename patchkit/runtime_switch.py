"""The public path of `patchkit.authoring.runtime_switch` (patch sets import `patchkit.runtime_switch`): a re-export, see docs/modules.md."""

from patchkit.authoring.runtime_switch import *  # noqa: F401,F403
