"""One module per patch. Each defines exactly one `Patch` subclass; the module name is its id
with dashes as underscores (`mtp_layer_detection.py` -> `mtp-layer-detection`)."""
