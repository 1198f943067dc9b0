"""Seconds per page of a Word document translated with its formatting kept (docs/documents.md).

A 20-page .docx (``--pages``) is built from the first lines of a source file: each page a heading and 12 paragraphs of two
lines each, the second word run of each paragraph in bold and one in italic, a page break after each page. It
is translated through `inference.formats.translate_file` (the command line's `translate --input`) by each
engine in the same process, one after the other: the seconds per page of each and their ratio to the first.

    OMP_NUM_THREADS=2 python -m studies.document_pages --model runs/base/export --ct2 runs/base/export-ct2 \\
        --source data/test.zh
"""

from __future__ import annotations

import io
import time

from studies import study_parser

PAGES = 20
PARAGRAPHS = 12


def build(lines: list[str], pages: int = PAGES) -> bytes:
    """The test document (module docstring) of ``lines``, used in turn."""
    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    found = iter(lines * (pages * PARAGRAPHS * 2 // max(len(lines), 1) + 1))
    for page in range(pages):
        document.add_heading(f"{page + 1}. {next(found)[:12]}", level=1)
        for _ in range(PARAGRAPHS):
            first, second = next(found), next(found)
            paragraph = document.add_paragraph(first[: len(first) // 2])
            paragraph.add_run(first[len(first) // 2 :]).bold = True
            paragraph.add_run(second[: len(second) // 3]).italic = True
            paragraph.add_run(second[len(second) // 3 :])
        document.paragraphs[-1].add_run().add_break(WD_BREAK.PAGE)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    from vanilla_transformer.inference.engines import load_engine
    from vanilla_transformer.inference.formats import translate_file

    parser = study_parser("studies.document_pages", __doc__)
    parser.add_argument("--model", default=None, help="the model folder (engine torch; required)")
    parser.add_argument(
        "--ct2", default=None, help="its CTranslate2 export (vanilla-transformer export --engine ct2)"
    )
    parser.add_argument("--source", default=None, help="a text file, one sentence a line (required)")
    parser.add_argument("--language", default=None, help="the source language's sentence rules (e.g. zh)")
    parser.add_argument("--pages", type=int, default=PAGES, help=f"pages of the document (default {PAGES})")
    args = parser.parse_args(argv)
    if args.model is None or args.source is None:
        parser.error("--model and --source are required")
    lines = [line.strip() for line in open(args.source, encoding="utf-8") if line.strip()]
    data = build(lines, args.pages)
    engines = [("torch", args.model)] + ([("ct2", args.ct2)] if args.ct2 else [])
    first = None
    for engine, folder in engines:
        model, tokenizer = load_engine(engine, folder)
        start = time.perf_counter()
        translate_file(model, tokenizer, data, "docx", language=args.language)
        seconds = (time.perf_counter() - start) / args.pages
        first = first or seconds
        print(
            f"{engine}: {seconds:.2f} s per page ({args.pages} pages), {seconds / first:.2f} x {engines[0][0]}"
        )


if __name__ == "__main__":
    main()
