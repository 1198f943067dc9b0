"""Command-line parsing generated from a dataclass (one source of truth for option names, defaults, help)."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def _base_type(annotation: Any) -> tuple[type, bool]:
    """(the non-None type, whether None is allowed) of an annotation such as ``int | None``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], True
    return annotation, False


def _none_or(kind: type):
    def parse(text: str):
        return None if text.lower() in ("none", "") else kind(text)

    parse.__name__ = kind.__name__
    return parse


def parse_field_value(cls: type, name: str, text: str) -> Any:
    """``text`` read as the type of field ``name`` of dataclass ``cls``: ``none`` (or nothing) is None for an
    optional field, a bool is true/false (1/0, yes/no). Raises `ValueError` naming the field and what it expects."""
    fields = {f.name for f in dataclasses.fields(cls)}
    if name not in fields:
        raise ValueError(f"{name!r} is not an option of {cls.__name__}; choose one of {sorted(fields)}.")
    kind, optional = _base_type(typing.get_type_hints(cls)[name])
    kind = next(f for f in dataclasses.fields(cls) if f.name == name).metadata.get("type", kind)
    if optional and text.lower() in ("none", ""):
        return None
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"{name}={text!r} must be true or false.")
        return text.lower() in ("true", "1", "yes")
    try:
        return kind(text)
    except (TypeError, ValueError) as error:
        expected = kind.__name__ + (" or none" if optional else "")
        raise ValueError(f"{name}={text!r} is not a valid {expected}.") from error


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> argparse.ArgumentParser:
    """Add one ``--name`` option per field of dataclass ``cls`` (bools get ``--name/--no-name``)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind, optional = _base_type(hints[f.name])
        kind = f.metadata.get("type", kind)  # a field that also takes Python objects parses from one type
        help_text = f.metadata.get("help", "")
        # argparse %-formats help strings: a literal % in a help text or a default must be doubled
        help_text = f"{help_text} (default: {f.default})".replace("%", "%%")
        kwargs: dict[str, Any] = {"default": f.default, "help": help_text}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _none_or(kind) if optional else kind
            if "choices" in f.metadata:
                kwargs["choices"] = f.metadata["choices"]
        parser.add_argument(f"--{f.name}", **kwargs)
    return parser


def parse_dataclass(cls: type[T], argv: list[str] | None = None, description: str | None = None) -> T:
    """Parse ``argv`` (default: sys.argv) into an instance of dataclass ``cls``."""
    parser = add_dataclass_arguments(argparse.ArgumentParser(description=description), cls)
    return cls(**vars(parser.parse_args(argv)))
