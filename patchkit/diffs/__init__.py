"""A unified diff as one more kind of patch: parsed, cut into units of code, merged unit by unit,
matched to its release by blob hashes, re-made for another release, written back out."""
