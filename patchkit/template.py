"""The public path of `patchkit.authoring.template` (patch sets import `patchkit.template`): a re-export, see docs/modules.md."""

from patchkit.authoring.template import *  # noqa: F401,F403
