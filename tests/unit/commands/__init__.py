"""Unit tests of patchkit/commands/: subcommands' own rules."""
