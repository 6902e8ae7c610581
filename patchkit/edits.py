"""The public path of `patchkit.authoring.edits` (patch sets import `patchkit.edits`): a re-export, see docs/modules.md."""

from patchkit.authoring.edits import *  # noqa: F401,F403
