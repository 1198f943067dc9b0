"""EPUB (.epub): each XHTML content document of the publication (its chapters and its navigation document)
through the markup transfer like an HTML file (`inference.formats.html`), and the titles of an EPUB 2 table of
contents (toc.ncx) as plain text; every other entry (the package document, style sheets, images, fonts, the
``mimetype`` and container) written back byte-identical (`inference.formats.packages`).

The content documents are those the package document (META-INF/container.xml's root file) lists with the media
type ``application/xhtml+xml``, in its manifest's order.
"""

from __future__ import annotations

import posixpath

from . import MIMETYPES, DocumentError, FileDocument, FileLimits, decode_text
from .inline import Run, encode, plain, translatable
from .packages import Package, parse_xml, write_xml

CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
OPF = "http://www.idpf.org/2007/opf"
NCX = "http://www.daisy.org/z3986/2005/ncx/"


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    package = Package.open(data, limits, fmt)
    if package.entries.get("mimetype", b"").strip() != MIMETYPES["epub"]:
        raise DocumentError("this is not an epub file: the package has no application/epub+zip mimetype")
    if "META-INF/container.xml" not in package.entries:
        raise DocumentError("the epub has no META-INF/container.xml")
    container = parse_xml(package.entries["META-INF/container.xml"], "META-INF/container.xml")
    rootfile = container.find(f".//{{{CONTAINER}}}rootfile")
    opf_name = rootfile.get("full-path", "") if rootfile is not None else ""
    if opf_name not in package.entries:
        raise DocumentError(f"the epub's package document {opf_name or '(none named)'} is missing")
    opf = parse_xml(package.entries[opf_name], opf_name)
    folder = posixpath.dirname(opf_name)
    documents: list[str] = []
    ncx: list[str] = []
    for item in opf.iter(f"{{{OPF}}}item"):
        href = item.get("href", "")
        name = posixpath.normpath(posixpath.join(folder, href)) if href else ""
        if name not in package.entries:
            continue
        kind = item.get("media-type", "")
        if kind == "application/xhtml+xml":
            documents.append(name)
        elif kind == "application/x-dtbncx+xml":
            ncx.append(name)
    texts = [decode_text(package.entries[name], name) for name in documents]
    roots = {name: parse_xml(package.entries[name], name) for name in ncx}
    titles = [
        (name, element)
        for name in ncx
        for element in roots[name].iter(f"{{{NCX}}}text")
        if translatable([Run(element.text or "", 0)])
    ]
    texts += [encode([Run(element.text or "", 0)]).html for _, element in titles]

    def write(translations: list[str]) -> bytes:
        changed = {name: translated.encode("utf-8") for name, translated in zip(documents, translations)}
        for (name, element), translated in zip(titles, translations[len(documents) :]):
            element.text = plain(translated)
            changed[name] = b""
        for name in ncx:
            if name in changed:
                changed[name] = write_xml(roots[name])
        package.changed = changed
        return package.write()

    return FileDocument(texts, write, output_format)
