"""The public path of `patchkit.base.constants` (patch sets import `patchkit.constants`): a re-export, see docs/modules.md."""

from patchkit.base.constants import *  # noqa: F401,F403
