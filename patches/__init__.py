"""One module per patch. Each defines exactly one `Patch` subclass; the module name is its id
with dashes as underscores (`mtp_layer_detection.py` -> `mtp-layer-detection`).

Imported only as `patchkit.patches` (installed, or mounted from a checkout by `patchkit`), so
that each patch module has exactly one module name."""

if __name__ != "patchkit.patches":
    raise ImportError(f"the built-in patches are imported as patchkit.patches, not as {__name__}")
