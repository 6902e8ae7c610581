"""Unit tests of patchkit/cli/: usage errors, --json errors, exit code help, advice."""
