"""The public path of `patchkit.authoring.matchers` (patch sets import `patchkit.matchers`): a re-export, see docs/modules.md."""

from patchkit.authoring.matchers import *  # noqa: F401,F403
