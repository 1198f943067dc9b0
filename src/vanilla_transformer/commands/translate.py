"""Translate stdin to stdout, one output line per input line, in the same order.

    vanilla-transformer translate --model runs/base/export < test.zh > test.hyp.en
    vanilla-transformer translate --model alice/zh-en-base --trust_remote_code --num_beams 1 < test.zh
    vanilla-transformer translate --engine ct2 --model outputs/default-ct2 < test.zh   # vanilla-transformer export --engine ct2
    vanilla-transformer translate --model M --output_format jsonl --num_return_sequences 4 < test.zh > nbest.jsonl

Empty input lines give empty output lines. Lines are batched by length internally. Sources longer than the
model maximum are truncated (the count is reported on stderr). With --num_return_sequences N > 1 each
output line holds N tab-separated hypotheses, best first. With --alignments each hypothesis is followed by
" ||| " and its Pharaoh word alignment ("0-0 1-2 ..."). Decoding defaults come from the model's
generation_config.json (the paper's beam 4, length penalty 1.0 unless trained with another --length_penalty);
--do_sample without --num_beams samples with one beam. --engine ct2 / onnx translates with a folder exported by vanilla-transformer export --engine ct2 /
vanilla-transformer export --engine onnx, through the same batching (beams, length penalty, max_new_tokens and n-best; sampling
needs --engine torch). Exit code 2 for bad options or a model that cannot be found.

Scores (--output_format jsonl or tsv; text, the default, writes translations only): --output_format jsonl writes
one JSON object per input line with the best hypothesis' `translation`, `score`, `log_prob`, `length`, `tokens`
and `token_log_probs`, and with --num_return_sequences N > 1 `nbest`: the N hypotheses' records, best first
(sorted by score; with --do_sample, the samples in the order drawn). --output_format tsv writes
`translation<TAB>score<TAB>log_prob` per hypothesis, the N hypotheses side by side. An empty line gives an empty
translation with null scores.
  score            the number decoding ranked the hypotheses by (translate-corpus's `score`): with beams,
                   log_prob / length ** length_penalty; greedy, log_prob itself (no length normalisation);
                   sampling, the sum under the sampling distribution (temperature, top-k, top-p applied),
                   which differs from log_prob. Decoding renormalises over the tokens the generation config
                   does not suppress, so where it suppresses some (this project's: <pad> and <s>) score is
                   above log_prob / length ** length_penalty by the suppressed probability (~0 for a trained
                   model).
  tokens, token_log_probs, log_prob, length
                   the output's tokens as decoded (its </s> included, none for an output cut at the length
                   limit) and the log-probability of each by forced decoding of that output from the raw logits
                   (the numbers `vanilla-transformer score` gives the pair: PyTorch's forward pass, CTranslate2's
                   score_batch, the ONNX decoder step by step, for --engine torch / ct2 / onnx); log_prob is
                   their sum, length their count. Costs one scoring pass per batch.

--glossary FILE puts terminology into the output: FILE is UTF-8 TSV, one "source term<TAB>target term" per line
(an empty target, or the source term itself, keeps the term as written: do-not-translate; blank lines and lines
starting with # are skipped). A line whose source holds a source term is translated by lexically constrained beam
search (dynamic beam allocation), so that each such target term appears in its translation, its tokens contiguous;
lines without one translate as without --glossary. Matching is case-sensitive; Latin-script terms match whole
words, Chinese and Japanese terms anywhere; of two overlapping terms the longer wins. It needs beam search and
--engine torch (ct2 and onnx cannot constrain their search and refuse it).

    vanilla-transformer translate --model runs/base/export --glossary terms.tsv < test.zh

--format html reads stdin as one HTML (or XML) document and writes it translated, its markup kept: the text
between block elements (paragraphs, list items, cells, headings, <br>) is translated as one sentence, and the
inline elements in it (links, emphasis, spans) go around the target words the word alignments link to their
words (docs/control.md, "Markup"); <script>, <style>, <pre>, <code> and elements marked translate="no" or
class="notranslate" are kept as written. It writes the best hypothesis (no --num_return_sequences > 1), text only
(no --output_format jsonl/tsv or --alignments); --engine onnx, which returns no attention, places the tags by
relative position.

    vanilla-transformer translate --model runs/base/export --format html < page.zh.html > page.en.html

URLs, e-mail addresses, @mentions, #hashtags, inline code (backticks; <code> with --format html), numbers with
units, placeholders ({name}, {0}, %s, %(name)s, {{var}}) and translate="no" content come out exactly as written,
once, placed by the word alignment of the sentence that holds them (docs/control.md, "Protected spans"); text
output without --alignments, and --format html. --no_protect gives the model's raw translation.

--input FILE --output FILE translates a document file with its formatting kept: .txt, .html, .md, .srt, .vtt,
.docx, .pptx, .xlsx, .odt, .odp, .epub (the format from FILE's extension, or --file_format), and a .pdf's text into a
.docx or .txt (as --output's extension says; the layout is not kept), paragraph by
paragraph and sentence by sentence (the rules of --split_sentences LANG, else the model card's source language),
inline formatting (bold, italic, links, styles) placed by the word alignments as with --format html, everything not
translated (images, tables' layout, fields, numbers, code, timings) written back as it was (docs/documents.md). A progress
bar over the paragraphs goes to stderr. Exit code 2 for a file that cannot be read (the reason on stderr).

    vanilla-transformer translate --model runs/base/export --input report.zh.docx --output report.en.docx

--shortlist decodes each batch over the model's vocabulary shortlist: the target tokens that the batch's source
tokens translate to in the training corpus and the most frequent ones (`vanilla-transformer shortlist --model M`
builds it into the model folder; an export made after that carries it, with CTranslate2's vocabulary map). The
output layer then computes a few thousand rows instead of the whole vocabulary; outputs may differ where the
model would have chosen a token outside the shortlist (docs/deploy.md, "Vocabulary shortlist"). --engine torch
or ct2, without --glossary.

    vanilla-transformer translate --model runs/base/export --shortlist < test.zh

--split_sentences [LANG] translates each line (each segment, with --format html) sentence by sentence and joins
the translations: a model trained on sentences translates a paragraph of many of them far better this way
(docs/control.md, "Long texts"). The sentences are cut by the rules of pySBD for LANG (an ISO 639-1 code: en, de,
zh, ja, fr, ...; without LANG, the source language of the model card's `language: [SOURCE, TARGET]`, and for a
model whose card names none, Chinese rules for a line mostly in Chinese or Japanese characters, English rules
otherwise); the n-best hypothesis k joins hypothesis k of each sentence. With --alignments, each sentence is
aligned with its translation and the links are numbered over the whole line. Text output only (no --output_format
jsonl/tsv: the model gave no score to a joined translation).

    vanilla-transformer translate --model runs/base/export --split_sentences zh < paragraphs.zh
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
import sys
from typing import Any, cast

from vanilla_transformer.commands.arguments import (
    DEFAULT_DECODING_OPTIONS,
    TORCH_DTYPE_HELP,
    add_decoding_arguments,
    add_language_arguments,
    add_model_arguments,
    command_parser,
    load_model_from_args,
    path_argument,
)
from vanilla_transformer.commands.extras import require_extras
from vanilla_transformer.inference.engines import ENGINE_NAMES
from vanilla_transformer.inference.markup_parse import MAX_DEPTH

# the decoding options beyond the defaults that translate (and the server) take: n-best and sampling
SAMPLING_OPTIONS = ("num_return_sequences", "do_sample", "temperature", "top_k", "top_p", "seed")
OUTPUT_FORMATS = ("text", "jsonl", "tsv")
INPUT_FORMATS = ("text", "html")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = command_parser("translate", __doc__)
    add_translation_arguments(parser)
    parser.add_argument("--batch_size", type=int, default=32, help="sentences per batch")
    parser.add_argument(
        "--output_format",
        choices=OUTPUT_FORMATS,
        default="text",
        help="text (translations, default), jsonl (scores and per-token log-probabilities) or tsv (translation, "
        "score, log_prob): see Scores above",
    )
    add_glossary_argument(parser)
    parser.add_argument(
        "--shortlist",
        action="store_true",
        help="decode each batch over the model's vocabulary shortlist (its shortlist.safetensors, from "
        "vanilla-transformer shortlist; --engine ct2: the export's vocabulary map): faster, outputs may differ",
    )
    parser.add_argument(
        "--alignments",
        action="store_true",
        help="follow each translation with ' ||| ' and its word alignment with the source in Pharaoh format "
        "('i-j': source word i, target word j, from 0; words are space-separated, each Chinese character one "
        "word), from the cross-attention of the model's alignment_layer / alignment_heads (docs/control.md); "
        "--engine torch or ct2",
    )
    parser.add_argument(
        "--format",
        choices=INPUT_FORMATS,
        default="text",
        help="text (one line in, one line out; default) or html (stdin is one HTML document, translated with its "
        "markup kept: inline tags placed by word alignments; see above)",
    )
    parser.add_argument(
        "--max_markup_depth",
        type=int,
        default=MAX_DEPTH,
        metavar="N",
        help=f"--format html: most elements open at once in the document (default {MAX_DEPTH}, as deep as a "
        "browser builds a page); a deeper document is refused with exit status 2",
    )
    parser.add_argument(
        "--split_sentences",
        nargs="?",
        const="auto",
        default=None,
        metavar="LANG",
        help="translate each line sentence by sentence, cut by the sentence rules of LANG (ISO 639-1; default: the "
        "model card's source language, else by script), and join the translations (see above)",
    )
    parser.add_argument(
        "--no_protect",
        action="store_true",
        help="translate URLs, e-mail addresses, @mentions, #hashtags, inline code, numbers with units, placeholders "
        '({name}, %%s, {{var}}) and translate="no" content with the rest; by default they come out as written, '
        "placed by the word alignment (docs/control.md, Protected spans; text output without --alignments, and "
        "--format html)",
    )
    parser.add_argument(
        "--input", default=None, metavar="FILE", help="a document file to translate (see above)"
    )
    parser.add_argument(
        "--output", default=None, metavar="FILE", help="where --input's translation is written"
    )
    parser.add_argument(
        "--file_format",
        default=None,
        help=(
            "the format of --input when its extension does not say it (txt, html, md, srt, vtt, docx, pptx, xlsx, "
            "odt, odp, epub, pdf)"
        ),
    )
    return parser.parse_args(argv)


def add_translation_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, engine and decoding options of translate (and translate-corpus)."""
    add_model_arguments(
        parser,
        "exported model folder or Hub repo id",
        dtype_help=f"{TORCH_DTYPE_HELP}; int8 = int8 linear layers on the CPU (--engine torch) or the int8 graphs "
        "(--engine onnx)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="torch",
        help="torch (the model folder), ct2 or onnx (a folder from vanilla-transformer export --engine ct2 / onnx)",
    )
    add_decoding_arguments(parser, *DEFAULT_DECODING_OPTIONS, *SAMPLING_OPTIONS)
    add_language_arguments(parser)


def add_glossary_argument(parser: argparse.ArgumentParser) -> None:
    """--glossary FILE (translate and translate-corpus)."""
    parser.add_argument(
        "--glossary",
        default=None,
        type=path_argument("file", text=True),
        metavar="FILE",
        help="TSV of source term<TAB>target term (empty target: do-not-translate); each term that occurs in a "
        "line comes out in its translation (constrained beam search, --engine torch)",
    )


def decoding_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``generate()`` options of the parsed decoding arguments (None: the model's generation config);
    --do_sample without --num_beams samples with one beam."""
    return {
        "num_beams": 1 if args.do_sample and args.num_beams is None else args.num_beams,
        "length_penalty": args.length_penalty,
        "max_new_tokens": args.max_new_tokens,
        "num_return_sequences": args.num_return_sequences,
        "do_sample": True if args.do_sample else None,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "src_lang": getattr(args, "src_lang", None),
        "tgt_lang": getattr(args, "tgt_lang", None),
    }


def check_decoding(args: argparse.Namespace, generate_kwargs: dict[str, Any]) -> None:
    """`ValueError` for decoding options that do not go together or that the engine does not take, before a
    model is loaded (bad values fail at once)."""
    from vanilla_transformer.inference.constraints import check_glossary_decoding
    from vanilla_transformer.inference.engines import check_engine_options
    from vanilla_transformer.inference.languages import LANGUAGE_OPTIONS
    from vanilla_transformer.modeling import check_generation_arguments

    check_generation_arguments(generate_kwargs)
    # every engine takes the languages (inference.translate puts them into the source and the decoding options)
    generate_kwargs = {k: v for k, v in generate_kwargs.items() if k not in LANGUAGE_OPTIONS}
    glossary = getattr(args, "glossary", None)
    if glossary is not None:
        check_glossary_decoding(args.do_sample)
    if args.engine != "torch":
        check_engine_options(args.engine, {**generate_kwargs, "seed": args.seed, "glossary": glossary})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )

    from vanilla_transformer.inference.glossary import check_terms, read_glossary
    from vanilla_transformer.inference.languages import check_languages
    from vanilla_transformer.modeling import check_generation_arguments, position_limit

    generate_kwargs = decoding_kwargs(args)
    try:
        if args.batch_size < 1:
            raise ValueError(f"batch_size={args.batch_size} is invalid: expected an integer >= 1; e.g. 32")
        check_decoding(args, generate_kwargs)
        if args.alignments and args.output_format != "text":
            raise ValueError(
                f"--alignments appends ' ||| i-j ...' to text output; --output_format {args.output_format} has no "
                "place for it: drop one of them"
            )
        if args.format == "html" or args.input is not None:
            check_html_options(args)
        if (args.input is None) != (args.output is None):
            raise ValueError("--input and --output go together: give both (or neither, to read stdin)")
        if args.input is not None:
            require_extras("vanilla-transformer translate --input", "documents")
        if args.split_sentences is not None:
            require_extras("vanilla-transformer translate --split_sentences", "sentences")
            check_split_options(args)
        glossary = read_glossary(args.glossary) if args.glossary is not None else None
        shortlist = None
        if args.shortlist:
            from vanilla_transformer.inference.shortlist import load_shortlist

            shortlist = load_shortlist(args.model)
        model, tokenizer = load_model_from_args(args)
        check_generation_arguments(generate_kwargs, model.generation_config)
        check_languages(tokenizer, model.generation_config, args.src_lang, args.tgt_lang)
        if glossary is not None:
            check_terms(tokenizer, glossary, position_limit(model.config))
        if args.alignments:
            from vanilla_transformer.inference.alignment import check_alignable

            check_alignable(model)
    except (ValueError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    if args.seed is not None:
        from transformers import set_seed

        set_seed(args.seed)
    # the console streams are TextIOWrappers (typeshed types them TextIO)
    if args.input is not None:
        return translate_input_file(
            model, tokenizer, args, {**generate_kwargs, "glossary": glossary, "shortlist": shortlist}
        )
    cast(io.TextIOWrapper, sys.stdin).reconfigure(encoding="utf-8", errors="replace")
    # the plan options of a document (--format html) and of protected text lines
    planned: dict[str, Any] = {
        "split_sentences": args.split_sentences is not None,
        "language": split_language(args) if args.split_sentences is not None else None,
        "protect": not args.no_protect,
        **generate_kwargs,
        "glossary": glossary,
        "shortlist": shortlist,
    }
    if args.format == "html":
        from vanilla_transformer.inference.documents import translate_document
        from vanilla_transformer.inference.markup import MarkupTooDeep

        try:
            translated = translate_document(
                model,
                tokenizer,
                sys.stdin.read(),
                args.batch_size,
                max_depth=args.max_markup_depth,
                **planned,
            )
        except MarkupTooDeep as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        cast(io.TextIOWrapper, sys.stdout).reconfigure(encoding="utf-8", newline="\n")
        sys.stdout.write(translated)
        sys.stdout.flush()
        return 0
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    if not args.no_protect and args.output_format == "text" and not args.alignments:
        from vanilla_transformer.inference.documents import translate_texts

        outputs = [
            "\t".join(hyps) for hyps in translate_texts(model, tokenizer, lines, args.batch_size, **planned)
        ]
    elif args.split_sentences is not None:
        outputs = split_output_lines(
            model, tokenizer, lines, args, {**generate_kwargs, "glossary": glossary, "shortlist": shortlist}
        )
    else:
        outputs = output_lines(
            model,
            tokenizer,
            lines,
            args.output_format,
            args.batch_size,
            {**generate_kwargs, "glossary": glossary, "shortlist": shortlist},
        )
        if args.alignments:
            from vanilla_transformer.inference.alignment import with_alignments

            outputs = with_alignments(
                model,
                tokenizer,
                lines,
                outputs,
                args.batch_size,
                src_lang=getattr(args, "src_lang", None),
                tgt_lang=getattr(args, "tgt_lang", None),
            )
    cast(io.TextIOWrapper, sys.stdout).reconfigure(encoding="utf-8", newline="\n")
    sys.stdout.writelines(f"{text}\n" for text in outputs)
    sys.stdout.flush()
    return 0


def translate_input_file(
    model: Any, tokenizer: Any, args: argparse.Namespace, generate_kwargs: dict[str, Any]
) -> int:
    """--input translated into --output (`inference.formats.translate_file`) with a progress bar over its
    paragraphs; 2 for a file that cannot be read or written."""
    from pathlib import Path

    from tqdm import tqdm

    from vanilla_transformer.inference.formats import (
        OUTPUT_FORMATS,
        DocumentError,
        file_format,
        translate_file,
    )

    try:
        fmt = file_format(args.input, args.file_format)
        # a format written as another (a pdf's text as .docx or .txt): the one --output's extension names
        written = Path(args.output or "").suffix.lstrip(".").lower()
        data = Path(args.input).read_bytes()
    except (DocumentError, OSError) as err:
        print(f"error: {args.input}: {err}", file=sys.stderr)
        return 2
    language = split_language(args) if args.split_sentences is not None else None
    if args.split_sentences is None:
        from vanilla_transformer.inference.cards import card_languages

        languages = card_languages(args.model)
        language = languages[0] if len(languages) == 2 else None
    with tqdm(desc="paragraphs", unit="paragraph", file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        try:
            translated = translate_file(
                model,
                tokenizer,
                data,
                fmt,
                output_format=written if written in OUTPUT_FORMATS[fmt] else None,
                batch_size=args.batch_size,
                language=language,
                progress=progress,
                **generate_kwargs,
            )
        except DocumentError as err:
            print(f"error: {args.input}: {err}", file=sys.stderr)
            return 2
    try:
        Path(args.output).write_bytes(translated)
    except OSError as err:
        print(f"error: {args.output}: {err}", file=sys.stderr)
        return 2
    return 0


def split_output_lines(
    model: Any, tokenizer: Any, lines: list[str], args: argparse.Namespace, generate_kwargs: dict[str, Any]
) -> list[str]:
    """--split_sentences' output line of each input line: its n-best list joined by tabs, each hypothesis followed
    by ' ||| ' and its alignment with --alignments."""
    from vanilla_transformer.inference.sentences import split_alignments, translate_sentences

    translated = translate_sentences(
        model, tokenizer, lines, split_language(args), batch_size=args.batch_size, **generate_kwargs
    )
    nbest = [split.join_nbest(hyps) for split, hyps in translated]
    if args.alignments:
        aligned = split_alignments(model, tokenizer, lines, translated, args.batch_size)
        nbest = [[f"{h} ||| {a}" for h, a in zip(hyps, links)] for hyps, links in zip(nbest, aligned)]
    return ["\t".join(hyps) for hyps in nbest]


def check_html_options(args: argparse.Namespace) -> None:
    """`ValueError` for the options --format html (and --input) has no place for (an n-best list, scores,
    alignments) and for a --max_markup_depth below 1."""
    if args.max_markup_depth < 1:
        raise ValueError(f"--max_markup_depth {args.max_markup_depth} is invalid: expected an integer >= 1")
    for wanted, name in (
        ((args.num_return_sequences or 1) > 1, f"--num_return_sequences {args.num_return_sequences}"),
        (args.output_format != "text", f"--output_format {args.output_format}"),
        (args.alignments, "--alignments"),
    ):
        if wanted:
            raise ValueError(
                f"--format html writes one translated document; {name} has no place in it: drop one of them"
            )


def check_split_options(args: argparse.Namespace) -> None:
    """`ValueError` for what --split_sentences has no place for (scores) and a bad LANG."""
    if args.output_format != "text":
        raise ValueError(
            f"--split_sentences joins the translations of sentences; --output_format {args.output_format} (the "
            "model's scores of the whole) has no meaning there: drop one of them"
        )
    if args.split_sentences != "auto" and not re.fullmatch(
        r"[A-Za-z]{2,3}([-_][A-Za-z0-9]+)*", args.split_sentences
    ):
        raise ValueError(
            f"--split_sentences {args.split_sentences!r} is not a language code: give an ISO 639-1 code such as en, "
            "de or zh, or no value (sentence rules by script)"
        )


def split_language(args: argparse.Namespace) -> str | None:
    """The language whose sentence rules --split_sentences uses: LANG, else the source language of the model's
    card (the first of its two languages), else None (by script)."""
    if args.split_sentences != "auto":
        return args.split_sentences
    from vanilla_transformer.inference.cards import card_languages

    languages = card_languages(args.model)
    return languages[0] if len(languages) == 2 else None


def output_lines(
    model: Any,
    tokenizer: Any,
    lines: list[str],
    output_format: str,
    batch_size: int,
    generate_kwargs: dict[str, Any],
) -> list[str]:
    """One output line per input line in ``output_format`` (`OUTPUT_FORMATS`; the module docstring): text
    through `inference.translate_lines`, jsonl and tsv through `inference.translate.translate_hypotheses` with
    token scores."""
    from vanilla_transformer.inference import translate_lines
    from vanilla_transformer.inference.translate import (
        hypothesis_record,
        translate_hypotheses,
        translation_record,
    )

    if output_format == "text":
        return translate_lines(model, tokenizer, lines, batch_size=batch_size, **generate_kwargs)
    nbest = translate_hypotheses(model, tokenizer, lines, batch_size, token_scores=True, **generate_kwargs)
    if output_format == "jsonl":
        return [json.dumps(translation_record(hyps, tokenizer), ensure_ascii=False) for hyps in nbest]
    rows = []
    for hyps in nbest:
        records = [hypothesis_record(hyp, tokenizer) for hyp in hyps]
        rows.append(
            "\t".join(f"{r['translation']}\t{_number(r['score'])}\t{_number(r['log_prob'])}" for r in records)
        )
    return rows


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


if __name__ == "__main__":
    sys.exit(main())
