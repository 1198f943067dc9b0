"""The workloads of the speed benchmark, each a zero-argument callable that runs once (the timed unit), and the
FLOP and byte models that turn their times into MFU and distances to the memory-bandwidth floor.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import GenerationConfig

from .contenders import ct2_tokens


def source_batch(vocab: int, batch: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) ids ending with eos (0) and an all-ones mask; ids avoid eos, unk and pad."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab - 1, (batch, length), generator=g)
    ids[:, -1] = 0
    return ids, torch.ones_like(ids)


def train_step(
    model: torch.nn.Module,
    batch: int,
    length: int,
    vocab: int,
    seed: int = 0,
    bf16: bool = False,
    device: torch.device | str = "cpu",
) -> Callable[[], float]:
    """One training step (forward with labels, backward, Adam step) on a (batch, length) -> (batch, length)
    batch on `device` (where `model` is), the forward under bf16 autocast when `bf16` (as the trainer's mixed
    precision runs it); the callable returns the loss (reading it waits for the device)."""
    device = torch.device(device)
    src, mask = (t.to(device) for t in source_batch(vocab, batch, length, seed))
    labels = source_batch(vocab, batch, length, seed + 1)[0].to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)

    def step() -> float:
        model.train()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=src, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach().item()

    return step


def generate_call(
    model: torch.nn.Module, src: torch.Tensor, mask: torch.Tensor, config: GenerationConfig
) -> Callable[[], torch.Tensor]:
    def run() -> torch.Tensor:
        model.eval()
        with torch.inference_mode():
            # every contender is a GenerationMixin; nn.Module types its attributes as Tensor | Module
            return model.generate(  # pyright: ignore[reportCallIssue]
                input_ids=src, attention_mask=mask, generation_config=config
            )

    return run


def ct2_call(
    translator, src: torch.Tensor, vocab_size: int, num_beams: int, new_tokens: int
) -> Callable[[], list[list[int]]]:
    """Translate the (B, S) ids with CTranslate2; the callable returns the generated ids (eos kept)."""
    tokens = ct2_tokens(vocab_size)
    batch = [[tokens[i] for i in row] for row in src.tolist()]
    index = {t: i for i, t in enumerate(tokens)}

    def run() -> list[list[int]]:
        results = translator.translate_batch(
            batch,
            beam_size=num_beams,
            min_decoding_length=new_tokens,
            max_decoding_length=new_tokens,
            max_batch_size=0,
            num_hypotheses=1,
            return_end_token=True,
        )
        return [[index[t] for t in r.hypotheses[0]] for r in results]

    return run


def engine_call(engine, src: torch.Tensor, num_beams: int, new_tokens: int) -> Callable[[], list[list[int]]]:
    """Decode the (B, S) ids with an exported engine (`generate_ids`); the callable returns the best hypotheses."""
    sources = src.tolist()

    def run() -> list[list[int]]:
        return [
            hyps[0] for hyps in engine.generate_ids(sources, num_beams=num_beams, max_new_tokens=new_tokens)
        ]

    return run


def training_flops(hp: dict, batch: int, src_len: int, tgt_len: int) -> float:
    """Matmul FLOPs of one training step (3x the forward: forward, input grads, weight grads)."""
    c, f, v = hp["d_model"], hp["ffn"], hp["vocab"]
    s_tok, t_tok = batch * src_len, batch * tgt_len
    encoder = hp["encoder_layers"] * (2 * s_tok * (4 * c * c + 2 * c * f) + 4 * batch * src_len * src_len * c)
    decoder = hp["decoder_layers"] * (
        2 * t_tok * (6 * c * c + 2 * c * f)
        + 2 * s_tok * 2 * c * c
        + 4 * batch * tgt_len * tgt_len * c
        + 4 * batch * tgt_len * src_len * c
    )
    return 3.0 * (encoder + decoder + 2 * t_tok * c * v)


def decode_step_bytes(hp: dict, rows: int, src_len: int, mean_cached: float) -> float:
    """Bytes one cached decode step must read at least: decoder weights, output projection, and the self- and
    cross-attention caches of `rows` = batch x beams hypotheses (fp32)."""
    c, f, v, layers = hp["d_model"], hp["ffn"], hp["vocab"], hp["decoder_layers"]
    weights = layers * (8 * c * c + 2 * c * f) + c * v
    caches = layers * rows * 2 * c * (src_len + mean_cached)
    return 4.0 * (weights + caches)
