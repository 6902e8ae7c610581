"""How a run named the SGLang it works on, and the one way a message writes a patchkit command
for the user to run next: with that same naming (issue 37.1). Pasted as printed, a bare
`patchkit revert` acts on whatever SGLang that shell's patchkit finds, not on the tree the
message was about."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

# The commands that work on one SGLang, and those of them that also take `--target`; kept in step
# with the click commands by tests/unit/test_next_commands.py.
NAMES_A_TREE = frozenset({"apply", "status", "revert", "diff", "clean", "verify", "capture", "doctor", "bump"})
TAKES_TARGET = frozenset({"apply", "status", "revert", "diff"})


@dataclass(frozen=True)
class Naming:
    """The targeting options of a run: `option` is --site-packages, --source or --python (None:
    the SGLang patchkit's own Python imports), `version` the --target it was given, `patches` the
    --patches given on the command line ($PATCHKIT_PATCHES reaches the next command by itself)."""

    option: str | None = None
    value: str | None = None
    version: str | None = None
    patches: tuple[str, ...] = ()

    def argv(self, verb: str, *args: str, patches: tuple[str, ...] = ()) -> list[str]:
        """`patchkit [--patches P]... VERB ARGS [OPTION VALUE] [--target V]` as words (`doctor --json` gives a fix
        command so); the options only where VERB has them. `patches`: more sets after the run's."""
        words = ["patchkit"]
        for folder in (*self.patches, *patches):
            words += ["--patches", folder]
        words += [verb, *args]
        if verb in NAMES_A_TREE and self.option is not None and self.value is not None:
            words += [self.option, self.value]
        if verb in TAKES_TARGET and self.version is not None:
            words += ["--target", self.version]
        return words

    def command(self, verb: str, *args: str, patches: tuple[str, ...] = ()) -> str:
        """`argv`, every word quoted for a POSIX shell."""
        return " ".join(shlex.quote(word) for word in self.argv(verb, *args, patches=patches))
