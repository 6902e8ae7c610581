"""Unit tests of the checkout's own promises: its layout, the module map, the docs tables, the README."""
