"""Unit tests of patchkit/engine/: states, the registry, identity, skeleton parsing, failure causes."""
