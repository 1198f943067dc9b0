"""Shared fixtures: tiny configs and models that build in milliseconds on CPU."""

from __future__ import annotations

import lzma
import os
import sys
from pathlib import Path

# Tiny test models run fastest on one thread, and tests that start subprocesses (accelerate launch, CLIs)
# would otherwise oversubscribe the cores with OpenMP threads. Set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from modeling import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration  # noqa: E402


def tiny_config(**overrides) -> VanillaTransformerConfig:
    values = dict(
        vocab_size=97,
        d_model=32,
        encoder_layers=2,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=2,
        encoder_ffn_dim=48,
        decoder_ffn_dim=40,
        max_position_embeddings=64,
        dropout=0.0,
    )
    values.update(overrides)
    return VanillaTransformerConfig(**values)


def tiny_model(seed: int = 0, attn: str = "sdpa", **overrides) -> VanillaTransformerForConditionalGeneration:
    torch.manual_seed(seed)
    config = tiny_config(**overrides)
    config._attn_implementation = attn
    model = VanillaTransformerForConditionalGeneration(config).eval()
    with torch.no_grad():  # non-zero output bias and LayerNorm affine so that tests exercise them
        if model.final_logits_bias is not None:
            model.final_logits_bias.normal_(0, 0.5)
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.1)
                module.bias.normal_(0.0, 0.1)
    return model


def random_batch(vocab: int, batch: int, length: int, seed: int = 0, pad_id: int = 0, min_id: int = 4):
    """(ids, mask) with right padding of random lengths (every row keeps at least one token)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(min_id, vocab, (batch, length), generator=g)
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    lengths[0] = length
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    return ids.masked_fill(mask == 0, pad_id), mask


@pytest.fixture
def model():
    return tiny_model()


# ---- a tiny exported model folder (tokenizer included), shared by the CLI, bad-input and Hub tests ----------
MAX_POSITIONS = 24


def tiny_tokenizer(num_lines: int = 300, vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """Character BPE over both sides of the first `num_lines` Bible verses; <pad>=0 <unk>=1 <s>=2 </s>=3."""
    with lzma.open(ROOT / "data" / "bible.zh-en.tsv.xz", "rt", encoding="utf-8") as f:
        texts = [text for _, line in zip(range(num_lines), f) for text in line.rstrip("\n").split("\t")]
    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<unk>", "<s>", "</s>"], show_progress=False
    )
    backend.train_from_iterator(texts, trainer)
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 3)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_input_names=["input_ids", "attention_mask"],
    )


def export_tiny_model(folder: Path) -> Path:
    """A tiny random model + tokenizer written with save_with_remote_code (greedy by default, short outputs)."""
    from modeling import save_with_remote_code

    tokenizer = tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS)
    model.generation_config.max_new_tokens = 6
    return save_with_remote_code(model, folder, tokenizer)


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """A tiny exported model folder (see export_tiny_model), one per test module."""
    return export_tiny_model(tmp_path_factory.mktemp("export"))


@pytest.fixture(scope="module")
def loaded(export):
    """(model, tokenizer) loaded from the `export` folder the way translate.py loads them."""
    from inference import load_model_and_tokenizer

    return load_model_and_tokenizer(str(export))
