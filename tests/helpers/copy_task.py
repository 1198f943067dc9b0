"""A tiny model trained in seconds to copy sentences of ``w`` words, with a one-token-per-word tokenizer that also
holds ``x`` words no training target has (so that an ``x`` word comes out only when something asks for it): the
model of the terminology-constraint tests."""

from __future__ import annotations

import random

import torch
from conftest import tiny_config
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

WORDS = [f"w{i}" for i in range(10)]
UNSEEN = [f"x{i}" for i in range(4)]


def copy_tokenizer() -> PreTrainedTokenizerFast:
    """One token per word: <pad>=0 <unk>=1 <s>=2 </s>=3, the w words, the x words."""
    vocab = {token: i for i, token in enumerate(["<pad>", "<unk>", "<s>", "</s>", *WORDS, *UNSEEN])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 3)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_input_names=["input_ids", "attention_mask"],
    )


def train_copy_model() -> tuple[VanillaTransformerForConditionalGeneration, PreTrainedTokenizerFast]:
    """A tiny model trained for 300 updates to copy 3 to 6 w words (a few seconds), and its tokenizer."""
    tokenizer = copy_tokenizer()
    rng = random.Random(0)
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(
        tiny_config(vocab_size=len(tokenizer), max_position_embeddings=16)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(300):
        texts = [" ".join(rng.choices(WORDS, k=rng.randint(3, 6))) for _ in range(32)]
        batch = tokenizer(texts, text_target=texts, padding=True, return_tensors="pt")
        labels = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    model.generation_config.max_new_tokens = 12
    return model, tokenizer
