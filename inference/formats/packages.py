"""Zipped XML packages (OOXML's .docx/.pptx/.xlsx, ODF's .odt/.odp, EPUB) read with bounds and written back with
every entry but the translated parts byte-identical.

`Package.open` refuses what is not a zip (a password-protected Office file is an encrypted OLE container, not a
zip), a truncated zip, an encrypted entry, more entries or more uncompressed bytes than the `FileLimits` allow (a zip
bomb: the sizes the zip declares are what `zipfile` reads at most, and every entry's CRC is checked as it is read).
`parse_xml` parses with lxml without loading a DTD, resolving entities or reaching the network, and refuses a part
that declares a DTD (XML entity expansion). `Package.write` writes the entries in their order with their own
``ZipInfo`` (name, date, compression; an ODF or EPUB ``mimetype`` stays first and stored): macros (vbaProject.bin),
embedded objects and media are copied as bytes, never opened.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# lxml's etree is compiled: no source for the type checker
from lxml import etree  # pyright: ignore[reportAttributeAccessIssue]

from . import DocumentError, FileDocument, FileLimits, TooLarge
from .inline import Run, encode, translatable

# the first bytes of an OLE compound file: an encrypted (password-protected) OOXML file, or a legacy .doc/.ppt/.xls
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def parse_xml(data: bytes, name: str):
    """The root element of XML ``data`` (the part ``name``), parsed by lxml without DTDs, entities or network;
    `DocumentError` for a part that is not well-formed or declares a DTD."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as err:
        raise DocumentError(f"{name} is not well-formed XML: {err}") from None
    if root.getroottree().docinfo.internalDTD is not None or b"<!ENTITY" in data[:4096]:
        raise DocumentError(f"{name} declares a DTD: XML entity declarations are refused")
    return root


def write_xml(root) -> bytes:
    """``root`` serialized as a standalone UTF-8 XML part."""
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)


@dataclass
class Package:
    """The entries of a zip, in order, with their bytes; ``changed`` holds the parts to write anew."""

    infos: list[zipfile.ZipInfo]
    entries: dict[str, bytes]
    changed: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def open(cls, data: bytes, limits: FileLimits, kind: str) -> Package:
        """The package in ``data`` (a ``kind`` file), read within ``limits`` (module docstring)."""
        if data.startswith(OLE_MAGIC):
            raise DocumentError(
                f"this is not a {kind} zip package but an OLE container: a password-protected (encrypted) Office "
                "file, or a legacy binary one; remove the password or save it as .docx/.pptx/.xlsx"
            )
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            infos = archive.infolist()
        except (zipfile.BadZipFile, EOFError, ValueError) as err:
            raise DocumentError(f"this is not a {kind} file: not a readable zip package ({err})") from None
        if len(infos) > limits.max_entries:
            raise TooLarge(
                f"the {kind} package has {len(infos)} entries, more than the limit {limits.max_entries}"
            )
        total = sum(info.file_size for info in infos)
        if total > limits.max_unzipped_bytes:
            raise TooLarge(
                f"the {kind} package unzips to {total} bytes, more than the limit {limits.max_unzipped_bytes}"
            )
        entries = {}
        for info in infos:
            if info.flag_bits & 0x1:
                raise DocumentError(f"the {kind} package is encrypted ({info.filename}): remove its password")
            try:
                entries[info.filename] = archive.read(info)
            except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, OSError) as err:
                raise DocumentError(f"the {kind} package is damaged at {info.filename}: {err}") from None
        return cls(infos, entries)

    def names(self, prefix: str = "", suffix: str = "") -> list[str]:
        """The entry names that start with ``prefix`` and end with ``suffix``, in the package's order."""
        return [
            i.filename for i in self.infos if i.filename.startswith(prefix) and i.filename.endswith(suffix)
        ]

    def write(self) -> bytes:
        """The package with the ``changed`` parts, every other entry as it was."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for info in self.infos:
                archive.writestr(info, self.changed.get(info.filename, self.entries[info.filename]))
        return out.getvalue()


@dataclass
class EditedParts:
    """The paragraphs of a package's XML parts (``roots``, by name) read for translation: each one that holds a
    letter (`add`) becomes a text; `document`'s ``write`` writes each translation into its paragraph and the parts
    that hold one anew."""

    package: Package
    roots: dict[str, Any] = field(default_factory=dict)
    paragraphs: list[tuple[str, Any]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def add(self, name: str, paragraph: Any, runs: list[Run]) -> None:
        """The ``paragraph`` (with a ``base`` attribute) of part ``name`` read into ``runs``."""
        if not translatable(runs):
            return
        encoded = encode(runs)
        paragraph.base = encoded.base
        self.paragraphs.append((name, paragraph))
        self.texts.append(encoded.html)

    def document(self, write_paragraph: Callable[[Any, str], None], output_format: str) -> FileDocument:
        def write(translations: list[str]) -> bytes:
            touched = set()
            for (name, paragraph), translated in zip(self.paragraphs, translations):
                write_paragraph(paragraph, translated)
                touched.add(name)
            self.package.changed = {name: write_xml(self.roots[name]) for name in touched}
            return self.package.write()

        return FileDocument(self.texts, write, output_format)
