"""BLEU and chrF as `evaluate` modules shipped with the package (inference/metrics), checked against hand-computed
scores; loaded by path with every network connection refused; the one scoring function built on them; and
`evaluate.evaluator("translation")` running this project's translation pipeline on a `datasets.Dataset`."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest
import sacrebleu

from vanilla_transformer.inference.scoring import (
    bleu_tokenizer_for,
    length_stats,
    load_metric,
    metric_path,
    score_translations,
)

SACREBLEU_VERSION = sacrebleu.__version__


# ----------------------------------------------------------------------------------------------- BLEU


def test_bleu_module_equals_the_hand_computed_score():
    """Modified n-gram precisions 5/6, 3/5, 2/4, 1/3 ("the" is clipped to the reference's one), equal lengths."""
    bleu = load_metric("bleu").compute(
        predictions=["the cat sat on the mat"], references=["the cat sat on a mat"]
    )
    assert bleu["counts"] == [5, 3, 2, 1] and bleu["totals"] == [6, 5, 4, 3] and bleu["bp"] == 1.0
    assert bleu["score"] == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, abs=1e-9)
    assert bleu["signature"] == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{SACREBLEU_VERSION}"
    assert bleu["details"].startswith("BLEU = 53.73 83.3/60.0/50.0/33.3 (BP = 1.000 ratio = 1.000")


def test_bleu_brevity_penalty_and_direction():
    """A 4-token prefix of a 6-token reference: every precision is 1 and BP = exp(1 - 6/4); swapping hypothesis and
    reference gives precisions 4/6 .. 1/3 and no penalty."""
    short, full = "the cat sat on", "the cat sat on the mat"
    bleu = load_metric("bleu")
    assert bleu.compute(predictions=[short], references=[full])["score"] == pytest.approx(
        100 * math.exp(-0.5)
    )
    swapped = bleu.compute(predictions=[full], references=[short])
    assert swapped["score"] == pytest.approx(100 * (4 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    assert (swapped["sys_len"], swapped["ref_len"]) == (6, 4)


def test_bleu_is_corpus_level_and_takes_lists_of_references():
    """Counts are summed over sentences before the precisions are taken (not an average of sentence BLEU); a list
    of references per prediction is the same as one reference string each."""
    bleu = load_metric("bleu")
    preds, refs = (
        ["the cat sat on the mat", "the cat sat on"],
        ["the cat sat on a mat", "the cat sat on the mat"],
    )
    result = bleu.compute(predictions=preds, references=refs)
    assert result["counts"] == [9, 6, 4, 2] and result["totals"] == [10, 8, 6, 4]
    bp = math.exp(1 - 12 / 10)
    assert result["score"] == pytest.approx(100 * bp * (9 / 10 * 6 / 8 * 4 / 6 * 2 / 4) ** 0.25)
    assert bleu.compute(predictions=preds, references=[[r] for r in refs])["score"] == result["score"]
    # two references: the second one supplies the matches the first lacks
    two = bleu.compute(
        predictions=["the cat sat on the mat"], references=[["a dog", "the cat sat on the mat"]]
    )
    assert two["score"] == pytest.approx(100.0) and two["signature"].startswith("nrefs:2|")
    with pytest.raises(ValueError, match="same number of references"):
        bleu.compute(predictions=["a", "b"], references=[["a"], ["b", "c"]])


def test_bleu_tokeniser_for_chinese_targets():
    """13a keeps "我爱你" as one token (no match with "我爱他"); zh splits CJK characters: 2/3 unigrams, 1/2 bigrams."""
    bleu = load_metric("bleu")
    assert bleu.compute(predictions=["我爱你"], references=["我爱他"])["counts"] == [0, 0, 0, 0]
    zh = bleu.compute(predictions=["我爱你"], references=["我爱他"], tokenize="zh")
    assert zh["counts"] == [2, 1, 0, 0] and zh["totals"] == [3, 2, 1, 0] and "|tok:zh|" in zh["signature"]
    assert (bleu_tokenizer_for("zh"), bleu_tokenizer_for("en"), bleu_tokenizer_for(None)) == (
        "zh",
        "13a",
        "13a",
    )
    assert bleu_tokenizer_for("zh", "intl") == "intl"
    with pytest.raises(ValueError, match="sacreBLEU tokeniser 'bogus' does not exist; choose one of .*13a"):
        bleu_tokenizer_for("en", "bogus")


# ----------------------------------------------------------------------------------------------- chrF


def test_chrf_module_equals_the_hand_computed_score():
    """Characters of "ab" against "abc": 1-grams P=1 R=2/3, 2-grams P=1 R=1/2, no 3-gram in the hypothesis (not
    counted); F2 of the averages (P=1, R=7/12) is 5PR/(4P+R) = 7/11. Reversed: P=7/12, R=1, F2 = 7/8."""
    chrf = load_metric("chrf")
    result = chrf.compute(predictions=["ab"], references=["abc"])
    assert result["score"] == pytest.approx(100 * 7 / 11)
    assert result["signature"] == f"nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{SACREBLEU_VERSION}"
    assert chrf.compute(predictions=["abc"], references=["ab"])["score"] == pytest.approx(100 * 7 / 8)
    # spaces dropped
    assert chrf.compute(predictions=["a b c"], references=["abc"])["score"] == pytest.approx(100.0)
    assert chrf.compute(predictions=["xyz"], references=["abc"])["score"] == 0.0
    plus = chrf.compute(predictions=["ab"], references=["abc"], word_order=2)
    assert "|nw:2|" in plus["signature"] and plus["score"] != result["score"]


# ------------------------------------------------------------------------------------- one scoring home


def test_score_translations_reports_the_modules_scores_rounded_with_signatures():
    hyps, refs = ["the cat sat on the mat", "ab"], ["the cat sat on a mat", "abc"]
    scores = score_translations(hyps, refs)
    bleu = load_metric("bleu").compute(predictions=hyps, references=refs)
    chrf = load_metric("chrf").compute(predictions=hyps, references=refs)
    assert scores == {
        "bleu": round(bleu["score"], 2),
        "chrf": round(chrf["score"], 2),
        "bleu_signature": bleu["signature"],
        "chrf_signature": chrf["signature"],
        "bleu_details": bleu["details"],
        "num_sentences": 2,
    }
    assert score_translations(["我爱你"], ["我爱他"], tokenize="zh")["bleu_signature"].count("tok:zh") == 1
    assert length_stats(["the cat sat on"], ["the cat sat on the mat"], "13a") == (4 / 6, 4, 6)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        score_translations(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="No sentences to score"):
        score_translations([], [])
    with pytest.raises(ValueError, match="metric 'rouge' is not shipped"):
        metric_path("rouge")


def test_metric_modules_load_by_path_with_every_connection_refused(tmp_path):
    """A fresh process whose sockets cannot connect (and without HF_HUB_OFFLINE) loads both shipped modules with
    `evaluate.load(path)` and scores; the Hub's own "sacrebleu" module, in the same process, cannot be loaded:
    the reason the modules ship with the package."""
    code = textwrap.dedent(
        f"""
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network access is blocked in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import evaluate
        bleu = evaluate.load({str(metric_path("bleu"))!r})
        chrf = evaluate.load({str(metric_path("chrf"))!r})
        print("bleu", bleu.compute(predictions=["the cat sat on"], references=["the cat sat on the mat"])["score"])
        print("chrf", chrf.compute(predictions=["ab"], references=["abc"])["score"])
        try:
            evaluate.load("sacrebleu")
            print("hub module loaded")
        except Exception as err:
            print("hub module refused:", type(err).__name__)
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_EVALUATE_OFFLINE")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT="http://127.0.0.1:9")  # an empty cache, no Hub
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert float(lines["bleu"]) == pytest.approx(100 * math.exp(-0.5))
    assert float(lines["chrf"]) == pytest.approx(100 * 7 / 11)
    assert lines["hub"].startswith("module refused:"), done.stdout


# ------------------------------------------------------------------------------------- evaluate.evaluator


def test_translation_evaluator_runs_our_pipeline_on_a_dataset(loaded):
    """`evaluate.evaluator("translation")` given the model and tokenizer builds this project's "translation"
    pipeline, runs it on a `datasets.Dataset` and scores it with the shipped BLEU module: sacreBLEU's corpus BLEU
    of the pipeline's own translations. (A `Pipeline` object cannot be passed with transformers 5: evaluate 0.4.6
    then reads `transformers.TFPreTrainedModel`, which no longer exists; docs/quality.md.)"""
    import datasets
    import evaluate
    from transformers import pipeline

    model, tokenizer = loaded
    sources = ["起初，神创造天地。", "地是空虚混沌", "神说：「要有光」，就有了光。"]
    references = [
        "In the beginning God created the heavens and the earth.",
        "The earth was formless and empty.",
        "God said, Let there be light, and there was light.",
    ]
    data = datasets.Dataset.from_dict({"source": sources, "target": references})
    result = evaluate.evaluator("translation").compute(
        model_or_pipeline=model,
        tokenizer=tokenizer,
        data=data,
        input_column="source",
        label_column="target",
        metric=load_metric("bleu"),
    )
    # transformers' pipeline() overloads list only its own tasks; "translation" is the one this package registers
    translator = pipeline("translation", model=model, tokenizer=tokenizer)  # pyright: ignore[reportCallIssue, reportArgumentType]
    hypotheses = [translator(s)[0]["translation_text"] for s in sources]
    assert all(hypotheses)
    expected = sacrebleu.corpus_bleu(hypotheses, [references])
    assert result["score"] == pytest.approx(expected.score) and result["sys_len"] == expected.sys_len
    # evaluate types an evaluator's result as numbers only; the metric's signature is a string
    assert result["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|")  # pyright: ignore[reportAttributeAccessIssue]
    assert result["total_time_in_seconds"] > 0
