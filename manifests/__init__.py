"""Per-release manifests, one JSON file per SGLang release. Imported only as
`patchkit.manifests` (installed, or mounted from a checkout by `patchkit`)."""

if __name__ != "patchkit.manifests":
    raise ImportError(f"the manifests are imported as patchkit.manifests, not as {__name__}")
