"""Resolve the EAGLE draft's KV layer count the way SGLang's target worker does
(resolve_spec_aux_hidden_state_config, the real function) for the Qwen3.8-27B target config in
argv[1], with built-in MTP: EAGLE (what NEXTN becomes), no --speculative-draft-model-path.

Stood in: server_args and, from 0.5.20, the `get_spec()` accessor of the module (the runtime
context's speculative settings), which carry only the draft path and revision (None): without a
draft path the resolver of 0.5.16-0.5.21 reads nothing else from them. Run inside the behaviour
venv with PYTHONPATH pointing at an SGLang tree.
"""

import json
import sys
import types

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.model_runner_components import spec_aux_hidden_state
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

target = ModelConfig(sys.argv[1])
server_args = types.SimpleNamespace(speculative_draft_model_path=None, speculative_draft_model_revision=None)
if hasattr(spec_aux_hidden_state, "get_spec"):
    spec_aux_hidden_state.get_spec = lambda: server_args


def resolve(algorithm: str, is_draft_worker: bool):
    config = spec_aux_hidden_state.resolve_spec_aux_hidden_state_config(
        server_args=server_args, model_config=target,
        spec_algorithm=SpeculativeAlgorithm.from_string(algorithm), is_draft_worker=is_draft_worker,
    )
    return config.eagle_draft_num_layers


print(json.dumps({
    "sglang_file": spec_aux_hidden_state.__file__,
    "architecture": target.hf_config.architectures[0],
    "target_num_nextn_predict_layers": target.num_nextn_predict_layers,
    "eagle_target": resolve("EAGLE", False),
    "eagle_draft_worker": resolve("EAGLE", True),
    "no_speculation": resolve(None, False),
}))
