"""A tiny model made here, for a real SGLang server on the CPU (tests/server, bench/server.py):
a random-weight `LlamaForCausalLM` (hidden size 64, 2 layers, fp32) and a byte-level BPE
tokenizer trained on a few sentences with `tokenizers`, saved with `save_pretrained` (about
0.5 MB, a few seconds). Llama, since SGLang's model registry skips the models whose modules need
a CPU kernel this machine lacks (tests/server's stand-in `sgl_kernel` has none).

Run by the server's Python (it needs torch, transformers and tokenizers):
`python testing/tiny_model.py DEST`.
"""

import sys

TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "patchkit patches SGLang; the patched server says which patches it runs.",
    "Hello, world! 0123456789 The answer is short.",
]


def make(dest: str) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(TEXT * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>")
    # /v1/chat/completions renders the messages with the model's own template.
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, torch_dtype="float32")
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(dest)
    fast.save_pretrained(dest)


if __name__ == "__main__":
    make(sys.argv[1])
