"""patchkit: versioned, idempotent, transactional AST patches for an installed SGLang."""

__version__ = "0.1.0"
