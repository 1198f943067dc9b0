"""Training labels end with </s> whatever the tokenizer adds to targets: the decoder learns to stop only from them."""

from __future__ import annotations

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from vanilla_transformer.training.data import SOURCE, TARGET, encoder


def _word_tokenizer(post_processed: bool) -> PreTrainedTokenizerFast:
    """Whitespace words over a fixed vocabulary; with `post_processed`, `</s>` appended to every sequence."""
    from tokenizers import processors

    vocab = {"<blank>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "in": 4, "the": 5, "beginning": 6}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if post_processed:
        backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 3)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", pad_token="<blank>", bos_token="<s>", eos_token="</s>"
    )


def test_labels_get_an_eos_from_a_tokenizer_that_adds_none():
    encode = encoder(_word_tokenizer(post_processed=False))
    out = encode({SOURCE: ["in the beginning", "the"], TARGET: ["the beginning", ""]})
    # the source as the tokenizer makes it (an eole model reads its source without </s>)
    assert out["input_ids"] == [[4, 5, 6], [5]]
    assert out["labels"] == [[5, 6, 3], [3]]
    assert out["labels_length"] == [3, 1]


def test_labels_that_end_with_eos_are_kept():
    encode = encoder(_word_tokenizer(post_processed=True))
    out = encode({SOURCE: ["in"], TARGET: ["the beginning"]})
    assert out["input_ids"] == [[4, 3]] and out["labels"] == [[5, 6, 3]]
