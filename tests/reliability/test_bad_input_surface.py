"""Wrong input across the public surface ends well: a specific exception whose message names the bad value
and the fix (exit code 2 for the CLIs), or a documented, well-defined result. Complements the bad-input tests
in test_bad_input_model.py, test_generation.py, test_tokenizer.py, test_data_loading.py, test_translate_cli.py,
test_hub.py and test_training_resume.py (docs/reliability.md counts them all)."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from conftest import random_batch, small_run, tiny_config, tiny_model, tiny_tokenizer
from helpers.shared import run_main
from transformers import AutoConfig, AutoTokenizer, pipeline

from vanilla_transformer.corpus import load_parallel_corpus, load_split
from vanilla_transformer.export import check_exported_folder, push_folder, resolve_token
from vanilla_transformer.inference import load_model_and_tokenizer, translate_lines
from vanilla_transformer.modeling import VanillaTransformerConfig
from vanilla_transformer.training import TrainConfig, train
from vanilla_transformer.training.checkpoint import CheckpointError, load_model_weights, write_manifest
from vanilla_transformer.training.cli import parse_dataclass

# ---------------------------------------------------------------------------------------------- model


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=60)


def test_attention_mask_of_wrong_dtype_or_type(model):
    src, mask = random_batch(97, 2, 5)
    with pytest.raises(
        ValueError, match=r"attention_mask must be bool, integer or float 0/1, got dtype torch.complex64"
    ):
        model(input_ids=src, attention_mask=mask.to(torch.complex64), decoder_input_ids=src)
    with pytest.raises(ValueError, match="attention_mask must be a torch tensor, got list"):
        model(input_ids=src, attention_mask=mask.tolist(), decoder_input_ids=src)
    with pytest.raises(
        ValueError,
        match=r"attention_mask has shape \(2, 1, 5\) but the tokens have shape \(2, 5\); "
        "pass the mask returned by the tokenizer",
    ):
        model(input_ids=src, attention_mask=mask[:, None], decoder_input_ids=src)


def test_ids_of_wrong_type_or_dtype(model):
    src, _ = random_batch(97, 2, 5)
    with pytest.raises(ValueError, match="input_ids must be a torch tensor of token ids, got list"):
        model(input_ids=src.tolist(), decoder_input_ids=src)
    with pytest.raises(ValueError, match=r"got dtype torch.bool; pass a torch.long tensor"):
        model(input_ids=src.bool(), decoder_input_ids=src)
    with pytest.raises(ValueError, match=r"got dtype torch.float32; pass a torch.long tensor"):
        model.generate(input_ids=src.float(), max_new_tokens=2)


def test_generate_on_an_empty_batch(model):
    with pytest.raises(
        ValueError, match=r"input_ids is an empty batch \(shape \(0, 5\)\); pass at least one"
    ):
        model.generate(input_ids=torch.zeros(0, 5, dtype=torch.long), max_new_tokens=2)


def test_all_padding_row_is_finite_and_leaves_other_rows_alone(model):
    """A row whose mask is all zeros (an empty line padded to the batch) gives finite logits and does not
    change the other rows: the masked scores use the dtype's minimum, not -inf."""
    src, mask = random_batch(97, 3, 6, seed=3)
    mask[1] = 0
    dec = src[:, :4]
    logits = model(input_ids=src, attention_mask=mask, decoder_input_ids=dec).logits
    assert torch.isfinite(logits).all()
    alone = model(input_ids=src[:1], attention_mask=mask[:1], decoder_input_ids=dec[:1]).logits
    torch.testing.assert_close(logits[:1], alone, atol=1e-5, rtol=1e-5)
    out = model.generate(input_ids=src, attention_mask=mask, max_new_tokens=3, num_beams=2)
    assert out.shape[0] == 3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(do_sample=True, top_p=0.0), r"top_p=0.0 must be in \(0, 1\]; use 1.0 to disable"),
        (
            dict(do_sample=True, temperature=float("nan")),
            "temperature=nan is invalid: expected a finite number",
        ),
        (
            dict(num_beams=1, num_return_sequences=2),
            "num_return_sequences=2 is larger than num_beams=1.*raise num_beams",
        ),
        (dict(max_new_token=2), r"not used by the model: \['max_new_token'\]"),  # a typo is not ignored
    ],
)
def test_more_conflicting_generation_arguments(model, kwargs, match):
    src, mask = random_batch(97, 2, 5)
    with pytest.raises(ValueError, match=match):
        model.generate(input_ids=src, attention_mask=mask, **{"max_new_tokens": 2, **kwargs})


def test_generate_with_zero_beams(model):
    src, mask = random_batch(97, 2, 5)
    with pytest.raises(ValueError, match="num_beams=0 must be a positive integer"):
        model.generate(input_ids=src, attention_mask=mask, num_beams=0, max_new_tokens=2)


@pytest.mark.parametrize("bad", [2, -1])
def test_attention_mask_values_other_than_0_1(model, bad):
    src, mask = random_batch(97, 2, 5)
    with pytest.raises(ValueError, match=f"attention_mask.*{bad}"):
        model(input_ids=src, attention_mask=mask * bad, decoder_input_ids=src)


# ------------------------------------------------------------------------------------ tokenizer + model


@pytest.fixture(scope="module")
def bigger_tokenizer(loaded):
    tokenizer = tiny_tokenizer(num_lines=600, vocab_size=1200)
    assert len(tokenizer) > loaded[0].config.vocab_size
    return tokenizer


def test_long_input_errors_unless_truncation_is_asked_for(loaded):
    model, tokenizer = loaded
    limit = model.config.max_position_embeddings
    text = "神说：「要有光」，就有了光。" * 10
    full = tokenizer([text], return_tensors="pt")
    with pytest.raises(ValueError, match=rf"max_position_embeddings={limit}; truncate the input"):
        model.generate(**full, max_new_tokens=2)
    cut = tokenizer([text], return_tensors="pt", truncation=True, max_length=limit)
    assert cut["input_ids"].shape[1] == limit and model.generate(**cut, max_new_tokens=2).shape[0] == 1


def test_empty_string_and_empty_batch_translate_to_empty(loaded):
    model, tokenizer = loaded
    assert translate_lines(model, tokenizer, []) == []
    assert translate_lines(model, tokenizer, ["", "  "], num_beams=1) == ["", ""]
    ids = tokenizer([""], return_tensors="pt")  # just </s>: a valid one-token source
    assert model.generate(**ids, max_new_tokens=2).shape[0] == 1


def test_translate_with_a_larger_tokenizer(loaded, bigger_tokenizer):
    model, _ = loaded
    with pytest.raises(
        ValueError,
        match=rf"tokenizer has {len(bigger_tokenizer)} tokens but the model's vocab_size "
        rf"is {model.config.vocab_size}.*Use the tokenizer saved with this model",
    ):
        translate_lines(model, bigger_tokenizer, ["起初"])


def test_translate_with_other_special_token_ids(export):
    model, _ = load_model_and_tokenizer(str(export))
    tokenizer = AutoTokenizer.from_pretrained(export)
    tokenizer.pad_token = "</s>"
    with pytest.raises(
        ValueError, match=r"tokenizer's pad_token_id is 3 but the model's is 0.*tokenizer saved with"
    ):
        translate_lines(model, tokenizer, ["起初"])


def test_model_folder_with_a_foreign_tokenizer(export, bigger_tokenizer, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "mixed"
    shutil.copytree(export, folder)
    bigger_tokenizer.save_pretrained(folder)
    with pytest.raises(ValueError, match="the tokenizer does not match the model: the tokenizer has"):
        load_model_and_tokenizer(str(folder))
    code, out, err = run_main(monkeypatch, capsys, "--model", str(folder), stdin="起初\n")
    assert code == 2 and out == "" and "Use the tokenizer saved with this model" in err


def test_pipeline_with_a_foreign_tokenizer(loaded, bigger_tokenizer):
    model, _ = loaded
    with pytest.raises(
        ValueError, match=rf"tokenizer has {len(bigger_tokenizer)} tokens.*tokenizer saved with"
    ):
        # transformers' pipeline() overloads list only its own tasks; "translation" is the one this package registers
        pipeline("translation", model=model, tokenizer=bigger_tokenizer)  # pyright: ignore[reportCallIssue, reportArgumentType]


def test_pipeline_bad_and_edge_inputs(loaded):
    model, tokenizer = loaded
    # transformers' pipeline() overloads list only its own tasks; "translation" is the one this package registers
    translator = pipeline("translation", model=model, tokenizer=tokenizer, max_new_tokens=3, num_beams=1)  # pyright: ignore[reportCallIssue, reportArgumentType]
    assert translator([]) == []
    assert len(translator("")) == 1
    long_text = "神说：「要有光」，就有了光。" * 10  # truncated to the model maximum (documented)
    assert len(translator(long_text)) == 1
    with pytest.raises(ValueError, match="takes a string or a list of strings, got int"):
        translator(5)
    with pytest.raises(ValueError, match=r"top_p=1.5 must be in \(0, 1\]"):
        translator("起初", do_sample=True, top_p=1.5)


def test_folder_with_only_pickled_weights_is_refused(export, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "bin-only"
    shutil.copytree(export, folder)
    (folder / "model.safetensors").unlink()
    torch.save({"x": torch.zeros(1)}, folder / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"has no safetensors weights.*never read from pickle files"):
        load_model_and_tokenizer(str(folder))
    code, _, err = run_main(monkeypatch, capsys, "--model", str(folder), stdin="起初\n")
    assert code == 2 and "model.safetensors" in err


# ---------------------------------------------------------------------------------------- config files


def _config_file(tmp_path: Path, **changes) -> Path:
    tiny_config().save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return tmp_path


@pytest.mark.parametrize(
    "changes, match",
    [
        (
            {"num_encoder_layers": 3},
            "unknown config field 'num_encoder_layers': did you mean 'encoder_layers'",
        ),
        ({"dropout": "0.1"}, r"dropout must be a probability in \[0, 1\), got '0.1'"),
        ({"encoder_attention_heads": 4.0}, "encoder_attention_heads must be a positive integer, got 4.0"),
        ({"scale_embedding": "no"}, "scale_embedding must be true or false, got 'no'"),
        ({"max_position_embeddings": 0}, "max_position_embeddings must be a positive integer, got 0"),
        ({"vocab_size": "97"}, "vocab_size must be a positive integer, got '97'"),
    ],
)
def test_config_file_with_misspelled_or_wrong_typed_fields(tmp_path, changes, match):
    with pytest.raises(ValueError, match=match):
        AutoConfig.from_pretrained(_config_file(tmp_path, **changes))


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"banana": 3}, "unknown config field 'banana'"),
        ({"tie_word_embeddings": "no"}, "tie_word_embeddings must be true or false"),
    ],
)
def test_config_file_with_unknown_or_string_fields(tmp_path, changes, match):
    with pytest.raises(ValueError, match=match):
        VanillaTransformerConfig.from_pretrained(_config_file(tmp_path, **changes))


def test_config_with_a_string_vocab_size():
    with pytest.raises(ValueError, match="vocab_size must be a positive integer, got '97'"):
        tiny_config(vocab_size="97")


# ---------------------------------------------------------------------------------------- data loading


def test_data_file_that_does_not_exist_through_train(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"'.*nope.tsv' does not exist.*Check --data"):
        # the thread count and allocator (mallopt) of this process are left as they are
        config = TrainConfig(
            data=str(tmp_path / "nope.tsv"),
            output_dir=str(tmp_path / "o"),
            max_steps=1,
            num_threads=torch.get_num_threads(),
            tune_cpu_allocator=False,
        )
        train(config)


def test_tsv_with_a_missing_column_in_a_compressed_file(tmp_path):
    import gzip

    path = tmp_path / "a.tsv.gz"
    path.write_bytes(gzip.compress(b"a\tA\nonly source\n"))
    with pytest.raises(ValueError, match=r"line 2: no tab.*--on_bad_line skip"):
        load_parallel_corpus(path, on_bad_line="error")
    _, report = load_parallel_corpus(path)  # default: skipped and counted, never silently dropped
    assert report.skipped_bad_lines == 1 and "line 2: no tab" in report.summary()


def test_invalid_utf8_inside_gzip_names_the_line(tmp_path):
    import gzip

    path = tmp_path / "a.tsv.gz"
    path.write_bytes(gzip.compress(b"a\tA\n\xff\xfe\tB\n"))
    with pytest.raises(ValueError, match=r"a.tsv.gz' line 2 is not valid UTF-8.*iconv"):
        load_parallel_corpus(path)


def test_crlf_lines_keep_no_carriage_return(tmp_path):
    path = tmp_path / "a.tsv"
    path.write_bytes(b"a\tA\r\nb\tB\r\n")
    ds, report = load_parallel_corpus(path)
    assert ds["target"] == ["A", "B"] and report.crlf_lines == 2


@pytest.mark.parametrize(
    "name, content, kwargs, error, match",
    [
        (
            "a.csv",
            "source,target\na,A\nb\n",
            {"on_bad_line": "error"},
            ValueError,
            r"line 3: 1 comma-separated columns, expected 2.*--on_bad_line skip",
        ),
        (
            "a.jsonl",
            '{"source": "a", "target": "A"}\nnot json\n',
            {"on_bad_line": "error"},
            ValueError,
            r"line 2: invalid JSON",
        ),
        ("a.tsv.gz", "not gzip", {}, ValueError, r"Could not decompress.*remove the '.gz' suffix"),
        (
            "a.tsv",
            "a\tA\n",
            {"on_bad_line": "ignore"},
            ValueError,
            "on_bad_line='ignore' must be 'error' or 'skip'",
        ),
        (
            "a.tsv",
            "a\tA\n",
            {"source_column": -1},
            ValueError,
            r"source_column=-1 does not exist.*indices 0..1",
        ),
        ("a.parquet", "x", {}, ValueError, r"as Parquet.*check that it is a Parquet file"),
        ("a.xyz", "x", {}, ValueError, r"no tab on its first non-empty line.*for CSV use a .csv name"),
    ],
)
def test_bad_data_files(tmp_path, name, content, kwargs, error, match):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(error, match=match):
        load_parallel_corpus(path, **kwargs)


def test_bad_split_name_and_directory(tmp_path):
    (tmp_path / "a.tsv").write_text("a\tA\n", encoding="utf-8")
    with pytest.raises(ValueError, match="split='dev' must be one of 'train', 'validation', 'test', 'all'"):
        # a split name outside the declared ones, on purpose: the check lists them
        load_split(tmp_path / "a.tsv", split="dev")  # pyright: ignore[reportArgumentType]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"holds no data files; pass a folder or glob with .tsv/.txt/.csv"):
        load_parallel_corpus(tmp_path / "empty")


# ---------------------------------------------------------------------------------------- training CLI


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--max_steps", "abc"], "argument --max_steps: invalid int or none value: 'abc'"),
        (["--preset", "huge"], "argument --preset: invalid choice: 'huge'"),
        (["--on_bad_line", "drop"], "argument --on_bad_line: invalid choice: 'drop'"),
    ],
)
def test_train_cli_rejects_bad_option_values(argv, match, capsys):
    with pytest.raises(SystemExit) as done:
        parse_dataclass(TrainConfig, argv)
    assert done.value.code == 2 and match in capsys.readouterr().err


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(resume=True, overwrite=True), "--resume and --overwrite contradict each other; pass one"),
        (
            dict(max_steps=None, max_minutes=None),
            "no stopping rule: pass --max_steps, --max_epochs or --max_minutes",
        ),
        (dict(grad_accum=0), "--grad_accum must be >= 1, got 0"),
        (dict(max_length=1), "--max_length must be >= 2, got 1"),
        (dict(lr_scale=-1.0), r"--lr_scale must be a number > 0, got -1.0"),
        (dict(lr_scale=math.nan), r"--lr_scale must be a number > 0, got nan"),
        (dict(warmup_steps=0), "--warmup_steps must be >= 1, got 0"),
        (dict(max_tokens=-5), "--max_tokens must be >= 1, got -5"),
        (dict(clip_norm=-1.0), r"--clip_norm must be a number >= 0, got -1.0"),
        (dict(weight_decay=math.inf), r"--weight_decay must be a number >= 0, got inf"),
        (dict(dropout=1.5), r"--dropout must be in \[0, 1\), got 1.5"),
        (dict(label_smoothing=1.0), r"--label_smoothing must be in \[0, 1\), got 1.0"),
        (
            dict(tokenizer="outputs/no-such-run/tokenizer"),
            "--tokenizer 'outputs/no-such-run/tokenizer' is neither a folder nor a Hub name",
        ),
    ],
)
def test_contradictory_training_options(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        train(TrainConfig(**{"output_dir": str(tmp_path), "max_steps": 1, **overrides}))


def test_train_script_reports_user_errors_without_traceback(tmp_path, capsys):
    script = importlib.import_module("vanilla_transformer.commands.train")
    threads = ["--num_threads", str(torch.get_num_threads()), "--no_tune_cpu_allocator"]  # process left alone
    code = script.main(["--data", str(tmp_path / "nope.tsv"), "--output_dir", str(tmp_path / "o"), *threads])
    assert code == 2 and "does not exist" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ resume / checkpoints


def resume_run(out: Path, tokenizer: str, cache: Path, **overrides) -> TrainConfig:
    """The shared short run of 2 updates with `tokenizer` and the tokenisation cache in `cache`."""
    return small_run(out, **{"max_steps": 2, "tokenizer": tokenizer, "cache_dir": str(cache), **overrides})


@pytest.fixture(scope="module")
def finished_run(tokenizer_dir, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("run")
    train(resume_run(root / "out", tokenizer_dir, root / "cache"))
    return root / "out", root / "cache"


def _copy_run(finished_run, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(finished_run[0], out)
    return out


def test_resume_with_an_empty_checkpoint_folder(tokenizer_dir, tmp_path):
    (tmp_path / "out" / "checkpoints").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"--resume: no checkpoint in '.*checkpoints'. Run without --resume"):
        train(resume_run(tmp_path / "out", tokenizer_dir, tmp_path / "cache", resume=True))


def test_resume_when_latest_names_an_empty_directory(finished_run, tokenizer_dir, tmp_path):
    out = _copy_run(finished_run, tmp_path)
    (out / "checkpoints" / "checkpoint-9").mkdir()
    (out / "checkpoints" / "latest").write_text("checkpoint-9\n")
    with pytest.raises(
        CheckpointError, match=r"checkpoint-9' is incomplete: it has no manifest.json. Delete it"
    ):
        train(resume_run(out, tokenizer_dir, finished_run[1], resume=True, max_steps=3))


def test_resume_from_a_truncated_weights_file(finished_run, tokenizer_dir, tmp_path):
    out = _copy_run(finished_run, tmp_path)
    weights = out / "checkpoints" / "checkpoint-2" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="truncated or corrupted: model.safetensors has 1000 bytes"):
        train(resume_run(out, tokenizer_dir, finished_run[1], resume=True, max_steps=3))
    with pytest.raises(CheckpointError, match="model.safetensors has 1000 bytes.*Delete it"):
        load_model_weights(out / "checkpoints" / "checkpoint-2")  # the averaging path


def test_resume_with_another_vocabulary_is_a_clear_error(finished_run, bpe_tokenizer_dir, tmp_path):
    out = _copy_run(finished_run, tmp_path)
    match = (
        r"written for a different architecture or vocabulary: \S+ has shape \[1200\S*\] there but \[900\S*\] in "
        r"this model \(checkpoint config: .*vocab_size=1200\). Resume with the --preset and --tokenizer"
    )
    with pytest.raises(CheckpointError, match=match):
        train(resume_run(out, bpe_tokenizer_dir(900), finished_run[1], resume=True, max_steps=3))


def test_checkpoint_without_safetensors_weights_is_refused(finished_run, tokenizer_dir, tmp_path):
    out = _copy_run(finished_run, tmp_path)
    folder = out / "checkpoints" / "checkpoint-2"
    (folder / "model.safetensors").unlink()
    write_manifest(folder)  # a consistent manifest: only the missing safetensors file is wrong
    with pytest.raises(
        CheckpointError, match="has no model.safetensors; model weights are only read from safetensors"
    ):
        train(resume_run(out, tokenizer_dir, finished_run[1], resume=True, max_steps=3))


def test_latest_pointer_with_a_bad_name(finished_run, tokenizer_dir, tmp_path):
    out = _copy_run(finished_run, tmp_path)
    (out / "checkpoints" / "latest").write_text("../../etc\n")
    with pytest.raises(CheckpointError, match=r"names '../../etc', which is not a checkpoint directory name"):
        train(resume_run(out, tokenizer_dir, finished_run[1], resume=True, max_steps=3))


# ------------------------------------------------------------------------------------------- converter


def test_converter_with_a_non_marian_folder(tmp_path):
    from vanilla_transformer.convert.marian import convert_marian_checkpoint

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="holds a 'bert' model, not a Marian model"):
        convert_marian_checkpoint(tmp_path, tmp_path / "out")
    with pytest.raises(
        FileNotFoundError, match="has no config.json: pass the folder of a saved MarianMTModel"
    ):
        convert_marian_checkpoint(tmp_path / "missing", tmp_path / "out")


def test_converter_with_an_already_converted_folder(export, tmp_path):
    from vanilla_transformer.convert.marian import convert_marian_checkpoint

    with pytest.raises(ValueError, match="holds a 'vanilla_transformer' model, not a Marian model"):
        convert_marian_checkpoint(export, tmp_path / "out")


# --------------------------------------------------------------------------------------------- Hub push


def test_push_folder_with_invalid_config_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"config.json is not valid JSON.*re-export the model"):
        check_exported_folder(tmp_path)


def test_push_with_a_bad_repo_id(export):
    with pytest.raises(ValueError, match=r"repo_id 'alice/has space' is not of the form USER/NAME"):
        push_folder(export, "alice/has space", token="hf_x", endpoint="http://127.0.0.1:9")


def test_push_without_any_token(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "token"))
    with pytest.raises(ValueError, match="no Hugging Face token found.*HF_TOKEN"):
        resolve_token(None)
