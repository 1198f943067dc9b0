"""Test documents built in memory, one per format, each with a heading, bold, italic and link runs, a table, an
image and (where the format has them) notes, cues or formulas; their words are the copy model's (w0 ... w9,
tests/helpers/copy_task.py), so that a translation by it is the text itself and formatting can be checked word by
word."""

from __future__ import annotations

import io
import struct
import zlib


def png() -> bytes:
    """A 1x1 PNG image."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def docx() -> bytes:
    """A Word document: a heading, a paragraph with bold, italic and a hyperlink, a table, an image, a number."""
    import docx as python_docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn
    from docx.shared import Inches

    document = python_docx.Document()
    document.add_heading("w1 w2 w3", level=1)
    paragraph = document.add_paragraph("w1 ")
    paragraph.add_run("w2").bold = True
    paragraph.add_run(" ")
    paragraph.add_run("w3").italic = True
    paragraph.add_run(" ")
    rel = document.part.relate_to(
        "https://example.com/",
        python_docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK,  # pyright: ignore[reportAttributeAccessIssue]
        is_external=True,
    )
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "w4"
    run.append(text)
    link.append(run)
    paragraph._p.append(link)
    paragraph.add_run(" w5")
    table = document.add_table(rows=2, cols=2)
    for i, cell in enumerate(c for row in table.rows for c in row.cells):
        cell.text = f"w{i} w{i + 1} w{i + 2}"
    table.cell(1, 1).text = "42.5"
    document.add_paragraph().add_run().add_picture(io.BytesIO(png()), width=Inches(0.5))
    document.add_paragraph("w2 w3 w4 w5")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx() -> bytes:
    """A presentation: a title, a text box with bold, italic and a link, a table, an image, notes."""
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "w1 w2 w3"
    box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame
    paragraph = box.paragraphs[0]
    runs = (
        ("w1 ", None),
        ("w2", "bold"),
        (" ", None),
        ("w3", "italic"),
        (" ", None),
        ("w4", "link"),
        (" w5", None),
    )
    for text, style in runs:
        run = paragraph.add_run()
        run.text = text
        if style == "bold":
            run.font.bold = True
        elif style == "italic":
            run.font.italic = True
        elif style == "link":
            run.hyperlink.address = "https://example.com/"
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(4), Inches(1)).table
    for i, cell in enumerate(c for row in table.rows for c in row.cells):
        cell.text = f"w{i} w{i + 1} w{i + 2}"
    slide.shapes.add_picture(io.BytesIO(png()), Inches(5), Inches(5))
    slide.notes_slide.notes_text_frame.text = "w4 w5 w6"
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def xlsx() -> bytes:
    """A workbook: text cells (one with bold and italic runs), numbers, a formula, an image."""
    from openpyxl import Workbook
    from openpyxl.cell.rich_text import CellRichText, TextBlock
    from openpyxl.cell.text import InlineFont
    from openpyxl.drawing.image import Image

    workbook = Workbook()
    sheet = workbook.active
    sheet["A1"] = "w1 w2 w3"
    sheet["A2"] = CellRichText(
        ["w1 ", TextBlock(InlineFont(b=True), "w2"), " w3 ", TextBlock(InlineFont(i=True), "w4")]
    )
    sheet["B1"] = 42
    sheet["B2"] = "=B1*2"
    sheet["C1"] = "w7 w8 w9"
    sheet.add_image(Image(io.BytesIO(png())), "D4")
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


HTML = (
    "<!doctype html><html><head><title>w1 w2 w3</title><style>p { color: red }</style></head><body>"
    '<h1>w1 w2 w3</h1><p>w1 <b>w2</b> <i>w3</i> <a href="https://example.com/">w4</a> w5</p>'
    "<table><tr><td>w1 w2 w3</td><td>42.5</td></tr></table>"
    '<p><img src="data:image/png;base64,AAAA" alt="x"> w6 w7 w8</p><pre>w9 code</pre></body></html>'
)
MD = (
    '---\ntitle: w1 w2\n---\n# w1 *w2* w3 #\n\n- w1 **w2** w3 [w4](https://example.com/a_b "w5") `w6 w0`\n'
    "- w7 ~~w8~~ w9\n\n> w5 w6\\\n> w7 ![w8](i.png)\n\n"
    "```python\nw1 = w2  # w3\n```\n\n    w9 indented\n\n| w1 w2 w3 | 42 |\n|---|---|\n| w3 **w4** w5 | 7 |\n\n"
    "<div>\nw5 w6\n</div>\n\n1. w1 <b>w2</b> w3\r\n"
)
TXT = "w1 w2 w3\n\n  w4 w5 w6\r\n42.5\nw7 w8 w9\n"
SRT = (
    "1\n00:00:01,000 --> 00:00:02,500\nw1 <i>w2</i> w3\nw4 w5\n\n"
    "2\n00:00:03,000 --> 00:00:04,000\n<b>w5</b> w6 w7\n\n3\n00:00:05,000 --> 00:00:06,000\n42\n"
)
VTT = (
    "WEBVTT\n\nNOTE w9 kept\n\ncue-1\n00:00:01.000 --> 00:00:02.500 align:start\nw1 <i>w2</i> w3\nw4 w5\n\n"
    "00:00:03.000 --> 00:00:04.000\n<v Bob>w5 w6 w7</v>\n"
)


def words_of(runs) -> list[tuple[str, tuple]]:
    """(word, formatting) of each word of ``runs``, a list of (text, formatting)."""
    return [(word, style) for text, style in runs for word in text.split()]


def docx_signature(data: bytes) -> dict:
    """What a Word document's structure and formatting are, read by python-docx: each paragraph's style and its
    words with their bold, italic and link; tables' cells; images' bytes."""
    import docx as python_docx

    document = python_docx.Document(io.BytesIO(data))
    paragraphs = []
    for paragraph in document.paragraphs:
        runs = []
        for item in paragraph.iter_inner_content():
            if hasattr(item, "address"):
                runs += [(run.text, (run.bold, run.italic, item.address)) for run in item.runs]  # pyright: ignore[reportAttributeAccessIssue]
            else:
                runs.append((item.text, (item.bold, item.italic, None)))  # pyright: ignore[reportAttributeAccessIssue]
        paragraphs.append((paragraph.style.name, words_of(runs)))
    return {
        "paragraphs": paragraphs,
        "tables": [[cell.text for row in table.rows for cell in row.cells] for table in document.tables],
        "images": [rel.target_part.blob for rel in document.part.rels.values() if "image" in rel.reltype],
    }


def pptx_signature(data: bytes) -> dict:
    """A presentation's shapes, their paragraphs' words with bold, italic and link, tables' cells, pictures' bytes
    and notes, read by python-pptx."""
    from pptx import Presentation

    presentation = Presentation(io.BytesIO(data))
    slides = []
    for slide in presentation.slides:
        shapes = []
        for shape in slide.shapes:
            if shape.has_text_frame:
                shapes.append(
                    [
                        words_of(
                            [(r.text, (r.font.bold, r.font.italic, r.hyperlink.address)) for r in p.runs]
                        )
                        for p in shape.text_frame.paragraphs  # pyright: ignore[reportAttributeAccessIssue]
                    ]
                )
            elif shape.has_table:
                shapes.append([cell.text for row in shape.table.rows for cell in row.cells])  # pyright: ignore[reportAttributeAccessIssue]
            elif shape.shape_type == 13:
                shapes.append(shape.image.blob)  # pyright: ignore[reportAttributeAccessIssue]
        slides.append((shapes, slide.notes_slide.notes_text_frame.text))
    return {"slides": slides}


def xlsx_signature(data: bytes) -> dict:
    """A workbook's cells (rich text as words with bold and italic, formulas as written) and images' count,
    read by openpyxl."""
    from openpyxl import load_workbook
    from openpyxl.cell.rich_text import CellRichText

    workbook = load_workbook(io.BytesIO(data), rich_text=True)
    cells = {}
    for sheet in workbook.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                value = cell.value
                if isinstance(value, CellRichText):
                    value = words_of(
                        [(b, None) if isinstance(b, str) else (b.text, (b.font.b, b.font.i)) for b in value]
                    )
                cells[f"{sheet.title}!{cell.coordinate}"] = value
    return {"cells": cells, "images": [len(sheet._images) for sheet in workbook.worksheets]}  # pyright: ignore[reportAttributeAccessIssue]


SIGNATURES = {"docx": docx_signature, "pptx": pptx_signature, "xlsx": xlsx_signature}
BUILDERS = {"docx": docx, "pptx": pptx, "xlsx": xlsx}


def _odf_styles(document) -> None:
    from odf.style import Style, TextProperties

    for name, properties in (("Bold", {"fontweight": "bold"}), ("Italic", {"fontstyle": "italic"})):
        style = Style(name=name, family="text")
        style.addElement(TextProperties(**properties))
        document.automaticstyles.addElement(style)


def _odf_paragraph(paragraph):
    """``paragraph`` (odfpy) filled with w1, bold w2, italic w3, a link w4, w5 and a run of spaces."""
    from odf.text import A, S, Span

    paragraph.addText("w1 ")
    paragraph.addElement(Span(stylename="Bold", text="w2"))
    paragraph.addText(" ")
    paragraph.addElement(Span(stylename="Italic", text="w3"))
    paragraph.addText(" ")
    paragraph.addElement(A(href="https://example.com/", text="w4"))
    paragraph.addText(" w5")
    paragraph.addElement(S(c=2))
    return paragraph


def odt() -> bytes:
    """An OpenDocument text: a heading, a paragraph with bold, italic and a link, a table, an image, a footer."""
    from odf.draw import Frame, Image
    from odf.opendocument import OpenDocumentText
    from odf.style import Footer, MasterPage, PageLayout
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import H, P

    document = OpenDocumentText()
    _odf_styles(document)
    layout = PageLayout(name="Page")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    footer = Footer()
    footer.addElement(P(text="w7 w8 w9"))
    master.addElement(footer)
    document.masterstyles.addElement(master)
    # odfpy sets the body's elements as attributes at run time: no type for the checker
    body = document.text  # pyright: ignore[reportAttributeAccessIssue]
    body.addElement(H(outlinelevel=1, text="w1 w2 w3"))
    body.addElement(_odf_paragraph(P()))
    table = Table(name="T")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    row = TableRow()
    for text in ("w4 w5 w6", "42.5"):
        cell = TableCell()
        cell.addElement(P(text=text))
        row.addElement(cell)
    table.addElement(row)
    body.addElement(table)
    picture = document.addPicture("Pictures/dot.png", "image/png", png())
    with_image = P(text="w6 w7 w8 ")
    frame = Frame(width="1cm", height="1cm", anchortype="as-char")
    frame.addElement(Image(href=picture))
    with_image.addElement(frame)
    body.addElement(with_image)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def odp() -> bytes:
    """An OpenDocument presentation: a slide with a title box, a text box with bold, italic and a link, an image,
    notes."""
    from odf.draw import Frame, Image, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    document = OpenDocumentPresentation()
    _odf_styles(document)
    layout = PageLayout(name="Slide")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    page = Page(masterpagename=master)
    for paragraph in (P(text="w1 w2 w3"), _odf_paragraph(P())):
        frame = Frame(width="10cm", height="2cm", x="1cm", y="1cm")
        box = TextBox()
        box.addElement(paragraph)
        frame.addElement(box)
        page.addElement(frame)
    image = Frame(width="1cm", height="1cm", x="5cm", y="5cm")
    image.addElement(Image(href=document.addPicture("Pictures/dot.png", "image/png", png())))
    page.addElement(image)
    notes = Notes()
    frame = Frame(width="10cm", height="2cm", x="1cm", y="1cm")
    box = TextBox()
    box.addElement(P(text="w4 w5 w6"))
    frame.addElement(box)
    notes.addElement(frame)
    page.addElement(notes)
    document.presentation.addElement(page)  # pyright: ignore[reportAttributeAccessIssue]
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def odf_signature(data: bytes) -> dict:
    """What an OpenDocument file's structure and formatting are, read by odfpy: every element's tag in document
    order (spans and spaces aside), each paragraph's words with the span styles and link targets around them."""
    from odf.element import Element, Text
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    tags: list[str] = []
    paragraphs: list[list[tuple[str, tuple]]] = []

    def words(node, around: tuple, runs: list) -> None:
        for child in node.childNodes:
            if isinstance(child, Text):
                runs.append((str(child), around))
            elif isinstance(child, Element) and child.qname[1] in ("span", "a"):
                style = (
                    child.getAttribute("stylename")
                    if child.qname[1] == "span"
                    else child.getAttribute("href")
                )
                words(child, (*around, style), runs)
            elif isinstance(child, Element) and child.qname[1] == "s":
                runs.append((" ", around))

    def walk(node) -> None:
        for child in node.childNodes:
            if isinstance(child, Element):
                if child.qname[1] not in ("span", "a", "s"):
                    tags.append(child.qname[1])
                if child.qname[1] in ("p", "h"):
                    runs: list = []
                    words(child, (), runs)
                    paragraphs.append(words_of(runs))
                walk(child)

    walk(document.topnode)
    return {"tags": tags, "paragraphs": paragraphs}


SIGNATURES["odt"] = SIGNATURES["odp"] = odf_signature
BUILDERS["odt"], BUILDERS["odp"] = odt, odp


EPUB_CHAPTER = (
    '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" '
    'xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="en"><head><title>w1 w2 w3</title>'
    '<link rel="stylesheet" type="text/css" href="style.css"/></head><body><h1>w1 w2 w3</h1>'
    '<p>w1 <b>w2</b> <i>w3</i> <a href="nav.xhtml">w4</a> w5</p><p>w6 w7 w8<br/><img src="dot.png" alt=""/></p>'
    "</body></html>\n"
)


def epub() -> bytes:
    """An EPUB 3 book built entry by entry: a chapter with bold, italic, a link and an image, a navigation
    document, an EPUB 2 table of contents, a style sheet."""
    import zipfile

    nav = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
        'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>w4 w5 w6</title></head><body>'
        '<nav epub:type="toc"><ol><li><a href="chapter.xhtml">w7 w8 w9</a></li></ol></nav></body></html>\n'
    )
    ncx = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
        '<head/><docTitle><text>w1 w2 w3</text></docTitle><navMap><navPoint id="p1" playOrder="1">'
        '<navLabel><text>w7 w8 w9</text></navLabel><content src="chapter.xhtml"/></navPoint></navMap></ncx>\n'
    )
    opf = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">'
        "urn:uuid:0</dc:identifier><dc:title>w1 w2 w3</dc:title><dc:language>en</dc:language></metadata><manifest>"
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        '<item id="c1" href="chapter.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
        '<item id="css" href="style.css" media-type="text/css"/>'
        '<item id="img" href="dot.png" media-type="image/png"/></manifest>'
        '<spine toc="ncx"><itemref idref="c1"/></spine></package>\n'
    )
    container = (
        '<?xml version="1.0"?>\n<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>\n"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        archive.writestr("META-INF/container.xml", container)
        archive.writestr("OEBPS/content.opf", opf)
        archive.writestr("OEBPS/nav.xhtml", nav)
        archive.writestr("OEBPS/chapter.xhtml", EPUB_CHAPTER)
        archive.writestr("OEBPS/toc.ncx", ncx)
        archive.writestr("OEBPS/style.css", "p { color: red }\n")
        archive.writestr("OEBPS/dot.png", png())
    return out.getvalue()


def epub_signature(data: bytes) -> dict:
    """Each XML entry of an EPUB parsed by lxml (so well-formed): its elements' tags and attributes in order and
    the words of each element's text with the element's tag."""
    import zipfile

    from lxml import etree  # pyright: ignore[reportAttributeAccessIssue]

    archive = zipfile.ZipFile(io.BytesIO(data))
    parts = {}
    for name in archive.namelist():
        if name.endswith((".xhtml", ".ncx", ".opf", ".xml")):
            root = etree.fromstring(archive.read(name))
            parts[name] = [
                (
                    element.tag,
                    dict(element.attrib),
                    (element.text or "").split(),
                    (element.tail or "").split(),
                )
                for element in root.iter()
            ]
    return parts


SIGNATURES["epub"] = epub_signature
BUILDERS["epub"] = epub


def pdf() -> bytes:
    """A two-page PDF (fpdf2): a paragraph over two lines, a number, a second page."""
    from fpdf import FPDF

    document = FPDF()
    document.set_font("helvetica", size=12)
    for page in (("w1 w2 w3 w4", "w5 w6", "42.5"), ("w7 w8 w9",)):
        document.add_page()
        for line in page:
            document.cell(text=line, new_x="LMARGIN", new_y="NEXT")
    return bytes(document.output())


BUILDERS["pdf"] = pdf
