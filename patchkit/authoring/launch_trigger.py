"""What makes an SGLang launch depend on a patch: a patch's `LAUNCH` declaration, read by
`patchkit doctor` (patchkit/doctor/triggers.py) for every loaded patch, built-in or `--patches`.

All conditions given must hold. Each is a short string of a small vocabulary (docs/doctor.md):
- flags: "dest" (set and true), "!dest" (unset or false), "dest>N" (a number above N; for
  max_running_requests the figure SGLang resolves); `dest` is the ServerArgs field name;
- speculative: the algorithms (any of them; none given: whatever the launch runs);
- model: "hybrid-gdn" (Gated DeltaNet linear attention), "qwen3.5" (a Qwen3_5* architecture),
  "qwen3.5-mtp" (a Qwen3.5/3.8 target with an MTP head), "mtp-draft" (the draft SGLang loads is a
  Qwen3.5/3.8 checkpoint's MTP head), "mtp-depth-unread" (that draft declares its depth only as
  `mtp_num_hidden_layers`), "auto-round" (an AutoRound checkpoint);
- hardware: "tp>1", "pcie-or-wsl".
`why` says what happens to such a launch without the patch; it may name `{draft_layers}`,
`{full_attention_layers}` and `{kv_scale}` (the doctor's figures for the launch).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Trigger:
    level: str  # "error" (the launch fails or reads garbage) or "warning" (it runs, worse)
    why: str
    flags: tuple[str, ...] = ()
    speculative: tuple[str, ...] = ()
    model: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()
