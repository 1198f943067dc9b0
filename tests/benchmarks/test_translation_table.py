"""The translation table (`benchmarks.translation`, `bench speed --model` / `--table`) runs end to end on a tiny
model and a few sentences, with every row and column. No timings are checked: benchmarks print ratios."""

from __future__ import annotations

import importlib
import importlib.util

import torch

from vanilla_transformer.benchmarks.translation import (
    GENERATE,
    MARIAN,
    System,
    TableSettings,
    format_table,
    peak_memory_mib,
    prepare_systems,
    random_model_folder,
    run_table,
)

QUICK = TableSettings(threads=(1,), batches=(1, 2), rounds=1, memory=False)


def test_table_of_a_random_model_has_every_row_and_column(tmp_path):
    folder, sources = random_model_folder("tiny", tmp_path, sentences=3, new_tokens=4)
    systems, notes = prepare_systems(folder, tmp_path, bf16=True)
    names = [system.name for system in systems]
    assert names[:6] == [
        MARIAN,
        GENERATE,
        "ours fp32",
        "ours fp32 + shortlist",
        "ours bf16",
        "ours bf16 + shortlist",
    ]
    if importlib.util.find_spec("ctranslate2"):
        assert {
            "CTranslate2 fp32",
            "CTranslate2 fp32 + vmap",
            "CTranslate2 int8",
            "CTranslate2 int8 + vmap",
        } <= set(names)
    if importlib.util.find_spec("onnxruntime"):
        assert {"ONNX Runtime fp32", "ONNX Runtime int8"} <= set(names)
    threads = torch.get_num_threads()
    blocks = run_table(systems, sources, [s.upper() for s in sources], QUICK)
    assert torch.get_num_threads() == threads
    assert [(b.threads, b.batch) for b in blocks] == [(1, 1), (1, 2)]
    for block in blocks:
        rows = {row.system.name: row for row in block.rows}
        assert list(rows) == names
        assert rows[MARIAN].ratio is None and rows[GENERATE].ratio is not None
        # same weights, same decoding: Marian, generate() and our engine in fp32 agree on every sentence
        assert rows[MARIAN].agree == rows["ours fp32"].agree == len(sources)
        assert all(
            row.throughput.median > 0 and row.bleu is not None and row.chrf is not None for row in block.rows
        )
    table = "\n".join(format_table(blocks, QUICK))
    for column in ("target tok/s", f"vs {MARIAN}", "= generate()", "BLEU", "chrF", "peak MiB"):
        assert column in table
    assert "threads 1, batch 2: 3 sentences" in table


def test_marian_row_is_left_out_with_a_note_for_a_model_marian_cannot_compute(tmp_path):
    from conftest import tiny_model, tiny_tokenizer

    from vanilla_transformer.modeling import save_with_remote_code

    tokenizer = tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer), normalize_before=True)
    folder = save_with_remote_code(model, tmp_path / "preln", tokenizer)
    systems, notes = prepare_systems(folder, tmp_path, bf16=False, engines=False)
    assert [s.name for s in systems] == [GENERATE, "ours fp32"]
    assert any("no Marian row" in note and "normalize_before=True" in note for note in notes)
    assert any("no shortlist rows" in note for note in notes)
    assert any("no bf16 rows" in note for note in notes)


def test_peak_memory_is_measured_in_a_fresh_process(tmp_path):
    """The child's own peak, not the parent's: Linux carries ru_maxrss over fork and exec, so a parent that once
    held 600 MB more than the child needs must not show in the figure."""
    folder, sources = random_model_folder("tiny", tmp_path, sentences=2, new_tokens=3)
    system = System(GENERATE, "generate", folder, "float32")
    alone = peak_memory_mib(system, 1, 2, sources, {})
    assert alone > 50  # torch alone takes more
    ballast = bytearray(b"\x01") * (600 * 2**20)  # written, so resident in this process
    try:
        assert peak_memory_mib(system, 1, 2, sources, {}) < alone + 300
    finally:
        del ballast


def test_a_saved_marian_peer_keeps_our_position_table(tmp_path):
    """Marian leaves its sinusoidal tables out of its checkpoint and rebuilds them (sines, then cosines) on load;
    the peer of a model with the paper's interleaved table computes our logits after a save and a load."""
    from conftest import random_batch, tiny_model

    from vanilla_transformer.benchmarks.marian import load_marian_peer, marian_peer, save_marian_peer

    model = tiny_model(sinusoidal_layout="interleaved")
    save_marian_peer(marian_peer(model), tmp_path / "marian")
    loaded = load_marian_peer(tmp_path / "marian")
    ids, mask = random_batch(model.config.vocab_size, 3, 7, seed=1)
    target = ids[:, :5]
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
        theirs = loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
    torch.testing.assert_close(theirs, ours, rtol=1e-4, atol=1e-4)


def test_bench_speed_table_cli(capsys):
    bench = importlib.import_module("vanilla_transformer.commands.bench_speed")
    threads = torch.get_num_threads()
    try:
        code = bench.main(
            ["--table", "--preset", "tiny", "--limit", "2", "--new_tokens", "3", "--rounds", "1"]
            + ["--table_threads", "1", "--table_batches", "2", "--no_memory", "--no_engines"]
        )
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert code == 0
    assert "threads 1, batch 2: 2 sentences" in out and "ours fp32 + shortlist" in out


def test_bench_speed_table_needs_a_corpus(tmp_path, capsys):
    from conftest import export_tiny_model

    bench = importlib.import_module("vanilla_transformer.commands.bench_speed")
    folder = export_tiny_model(tmp_path / "model")
    assert bench.main(["--model", str(folder)]) == 2
    assert "pass --data FILE" in capsys.readouterr().err
