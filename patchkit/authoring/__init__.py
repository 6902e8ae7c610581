"""What a patch module is written with: `Patch`, anchors, `@edit`, matchers, snippets, the runtime
switch and the launch triggers (public as `patchkit.patch`, `patchkit.anchor`, ...)."""
