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
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")


def docx() -> bytes:
    """A Word document: a heading, a paragraph with bold, italic and a hyperlink, a table, an image, a number."""
    import docx as python_docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn
    from docx.shared import Inches

    document = python_docx.Document()
    document.add_heading("w1 w2 w3", level=1)
    paragraph = document.add_paragraph("w1 w2 ")
    paragraph.add_run("w3 w4").bold = True
    paragraph.add_run(" w5 ")
    paragraph.add_run("w6").italic = True
    paragraph.add_run(" w7 ")
    rel = document.part.relate_to("https://example.com/", python_docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "w8"
    run.append(text)
    link.append(run)
    paragraph._p.append(link)
    paragraph.add_run(" w9")
    table = document.add_table(rows=2, cols=2)
    for i, cell in enumerate(c for row in table.rows for c in row.cells):
        cell.text = f"w{i} w{i + 1}"
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
    for text, style in (("w1 w2 ", None), ("w3 w4", "bold"), (" w5 ", None), ("w6", "italic"), (" w7 ", None), ("w8", "link"), (" w9", None)):
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
        cell.text = f"w{i} w{i + 1}"
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
    sheet["A2"] = CellRichText(["w1 w2 ", TextBlock(InlineFont(b=True), "w3 w4"), " w5 ", TextBlock(InlineFont(i=True), "w6")])
    sheet["B1"] = 42
    sheet["B2"] = "=B1*2"
    sheet["C1"] = "w7 w8"
    sheet.add_image(Image(io.BytesIO(png())), "D4")
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()
