"""SGLang releases as data: version strings, pristine wheels from the package index, the
per-release manifests, a release's own RECORD of its files."""
