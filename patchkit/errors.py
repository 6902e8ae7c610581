"""The public path of `patchkit.base.errors` (patch sets import `patchkit.errors`): a re-export, see docs/modules.md."""

from patchkit.base.errors import *  # noqa: F401,F403
