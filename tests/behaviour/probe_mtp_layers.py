"""Build SGLang's real ModelConfig for the Qwen3.8-27B draft and print what it derives.

Run inside the behaviour venv with PYTHONPATH pointing at an SGLang tree (patched or not).
"""

import json
import sys

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.model_runner_components.layer_setup import _compute_model_num_layers

config = ModelConfig(sys.argv[1], is_draft_model=True)
print(json.dumps({
    "sglang_file": sys.modules["sglang.srt.configs.model_config"].__file__,
    "architecture": config.hf_config.architectures[0],
    "num_nextn_predict_layers": config.num_nextn_predict_layers,
    "draft_num_layers": _compute_model_num_layers(model=object(), model_config=config, is_draft_worker=True),
}))
