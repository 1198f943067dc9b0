"""The source tree keeps the promises of its layout: formatted and linted by ruff, no file edits the import path,
imports come first, comments stand above the statement they explain rather than breaking it over lines, and
docstrings say what code does, not what it scored."""

from __future__ import annotations

import ast
import io
import keyword
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import pytest
from helpers.layout import package_dirs, tomllib

ROOT = Path(__file__).resolve().parents[2]
# the top-level folders that install as vanilla_transformer (the links under src/vanilla_transformer)
PACKAGE = tuple(sorted({folder.relative_to(ROOT).parts[0] for folder in package_dirs().values()}))
RUFF = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]
OPENING, CLOSING = ("(", "[", "{"), (")", "]", "}")
# a figure quoted as a result: "BLEU 24.5", "24.55 BLEU", "chrF 45.7", "perplexity 13.6", "ppl 90.9"
SCORE = re.compile(r"\b(BLEU|chrF|perplexity|ppl)\b\s*(of\s*)?[=:]?\s*\d+\.\d|\d+\.\d+\s*(BLEU|chrF)\b")


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is in the dev extras")
@pytest.mark.parametrize("command", [["ruff", "format", "--check", "."], ["ruff", "check", "."]])
def test_ruff_passes(command):
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_no_file_edits_the_import_path_and_imports_come_first():
    files = sources(*PACKAGE, "scripts", "studies")
    assert len(files) > 50
    edits = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"sys\.path\s*(\[|\.insert|\.append|=|\+=)", line)
    ]
    assert not edits, edits
    late = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "noqa: E402" in line
    ]
    assert not late, late


def is_op(token: tokenize.TokenInfo, strings: tuple[str, ...]) -> bool:
    return token.type == tokenize.OP and token.string in strings


def flat_width(tokens: list[tokenize.TokenInfo]) -> int:
    """The width of a statement's code on one line from its first column, never less than the formatter would
    write: one space between tokens except after an opening bracket or a dot, before a closing bracket, a comma
    or a dot, and before a call's or subscript's bracket; a trailing comma before a closing bracket left out."""
    text, previous = tokens[0].string, tokens[0]
    for k, token in enumerate(tokens[1:], 1):
        if is_op(token, (",",)) and k + 1 < len(tokens) and is_op(tokens[k + 1], CLOSING):
            continue
        # a call or a subscript: no space before its bracket
        called = is_op(token, ("(", "[")) and (
            is_op(previous, CLOSING)
            or (previous.type == tokenize.NAME and not keyword.iskeyword(previous.string))
        )
        glued = called or is_op(previous, (*OPENING, ".")) or is_op(token, (*CLOSING, ",", "."))
        text += token.string if glued else " " + token.string
        previous = token
    return tokens[0].start[1] + len(text)


def broken_by_a_trailing_comment(path: Path) -> list[int]:
    """The first lines of the statements in ``path`` that the formatter broke over lines to make room for a
    comment after them, although their code fits on one line: a statement with one comment, at the end of its
    last line (``f(\n    a, b\n)  # comment``) or of the one line inside the brackets that the formatter added
    (``x = (\n    a  # comment\n)``)."""
    found, statement = [], []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
            statement.append(token)
            continue
        skipped = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
        code = [t for t in statement if t.type not in skipped]
        comments = [t for t in statement if t.type == tokenize.COMMENT]
        statement = []
        if not code or len(comments) != 1 or "fmt:" in comments[0].string:
            continue
        first, last, at = code[0].start[0], code[-1].end[0], comments[0].start[0]
        # a string over several lines keeps the statement on several lines
        if any(t.start[0] != t.end[0] for t in code):
            continue
        opened = [t for t in code if t.start[0] == first][-1]
        closing = [t for t in code if t.start[0] == last]
        wrapped = (
            last == first + 2
            and at == first + 1
            and is_op(opened, OPENING)
            and all(is_op(t, CLOSING) for t in closing)
        )
        if first < last and (at == last or wrapped) and flat_width(code) <= RUFF["line-length"]:
            found.append(first)
    return found


@pytest.mark.parametrize("folder", [*PACKAGE, "scripts", "tests"])
def test_no_trailing_comment_breaks_a_statement_over_lines(folder):
    # transformers' own test mixins, copied unchanged (ruff leaves them alone too)
    copied = [ROOT / pattern for pattern in RUFF.get("extend-exclude", [])]
    broken = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sources(folder)
        if not any(path.match(str(pattern)) for pattern in copied)
        for line in broken_by_a_trailing_comment(path)
    ]
    assert not broken, f"move the comment above its statement, then run ruff format: {broken}"


def test_the_trailing_comment_check_flags_only_what_fits_on_one_line(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(
        "value = compute(\n    a, b\n)  # the formatter broke this line for the comment\n"
        "# a comment above\nother = compute(a, b)\n"
        f"names = [\n    {', '.join(['a_rather_long_name'] * 6)},\n]  # too long for one line anyway\n"
        'text = """\n"""  # a string over two lines\n'
        "wrapped = (\n    None  # the formatter wrapped this value for the comment\n)\n"
        "pairs = [\n    (1, 2),  # one pair\n    (3, 4),\n]\n"
    )
    assert broken_by_a_trailing_comment(path) == [1, 11]


def test_no_docstring_quotes_a_score():
    quoted = []
    for path in sources(*PACKAGE, "scripts", "studies", "tests"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node) or ""
                quoted += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in SCORE.finditer(doc)]
    assert not quoted, quoted
