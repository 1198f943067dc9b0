"""End to end: a tiny model learns to reverse sequences on CPU, then decodes them with greedy and beam search.
This exercises the label shift, the masks, the loss mask, the cache and generate() together."""

from __future__ import annotations

import torch
from conftest import tiny_config

from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

PAD, EOS, FIRST, VOCAB, MAX_LEN = 0, 3, 4, 16, 6


def reverse_batch(g: torch.Generator, batch: int, max_len: int = 7):
    lengths = torch.randint(2, max_len + 1, (batch,), generator=g)
    src = torch.full((batch, max_len + 1), PAD)
    labels = torch.full((batch, max_len + 1), -100)
    for i, n in enumerate(lengths.tolist()):
        seq = torch.randint(FIRST, VOCAB, (n,), generator=g)
        src[i, :n], src[i, n] = seq, EOS
        labels[i, :n], labels[i, n] = seq.flip(0), EOS
    return src, (src != PAD).long(), labels


def test_tiny_model_learns_to_reverse():
    torch.manual_seed(0)
    # tiny_config's width and encoder, with a decoder of the encoder's size
    config = tiny_config(
        vocab_size=VOCAB, decoder_layers=2, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64
    )
    model = VanillaTransformerForConditionalGeneration(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    g = torch.Generator().manual_seed(1)
    first_loss, recent = None, []
    for _ in range(1000):  # stops early once the last 10 losses are below 0.03
        src, mask, labels = reverse_batch(g, 32, MAX_LEN)
        loss = model(input_ids=src, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first_loss = first_loss if first_loss is not None else loss.item()
        recent = (recent + [loss.item()])[-10:]
        if len(recent) == 10 and max(recent) < 0.03:
            break
    assert first_loss is not None and max(recent) < 0.1 < first_loss

    model.eval()
    src, mask, labels = reverse_batch(torch.Generator().manual_seed(99), 32, MAX_LEN)
    expected = [[t for t in row.tolist() if t != -100] for row in labels]
    for kwargs in (dict(num_beams=1), dict(num_beams=4, length_penalty=0.6)):
        out = model.generate(input_ids=src, attention_mask=mask, do_sample=False, max_new_tokens=10, **kwargs)
        # cut at the first </s>: transformers' beam search fills finished rows with </s> when pad id is 0
        got = [row[1:].tolist() for row in out]
        got = [row[: row.index(EOS) + 1] if EOS in row else row for row in got]
        correct = sum(a == b for a, b in zip(got, expected))
        assert correct >= 28, (kwargs, correct)
