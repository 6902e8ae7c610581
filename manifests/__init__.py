"""Per-release manifests, one JSON file per SGLang release."""
