"""Build SGLang's real ModelConfig for the Qwen3.8-27B target (not a draft) and print it."""

import json
import sys

from sglang.srt.configs.model_config import ModelConfig

config = ModelConfig(sys.argv[1], is_draft_model=False)
print(json.dumps({
    "architecture": config.hf_config.architectures[0],
    "num_nextn_predict_layers": config.num_nextn_predict_layers,
}))
