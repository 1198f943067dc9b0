"""Command-line parsing generated from a dataclass (one source of truth for option names, defaults, help).

The style is transformers' (`HfArgumentParser`): every field is ``--field_name`` (underscores); a bool field is
``--flag`` (true), ``--flag false`` or, when it defaults to true, ``--no_flag``; an optional field takes ``none``.
Fields are shown in ``--help`` in groups: a field's ``group`` metadata, else its section in the declaring class's
``help_groups`` table, else the declaring class.
``--config FILE`` (YAML or JSON, keys are field names) sets options; flags on the command line override it. A
file's values go through the flags' parsers and range checks (an option with a ``separator`` also takes a list);
a field's ``minimum`` metadata is checked as it is parsed.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _base_type(annotation: Any) -> tuple[type, bool]:
    """(the non-None type, whether None is allowed) of an annotation such as ``int | None``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], True
    return annotation, False


def _field_type(cls: type, f: dataclasses.Field) -> tuple[type, bool]:
    kind, optional = _base_type(typing.get_type_hints(cls)[f.name])
    return f.metadata.get(
        "type", kind
    ), optional  # a field that also takes Python objects parses from one type


def _expected(kind: type, optional: bool, metadata: Any) -> str:
    """What an option takes, in words: "an integer >= 1 or none", "one of no, bf16, fp16", ..."""
    if "separator" in metadata:
        text = f"a list (or a {metadata['separator']!r}-separated string)"
    elif "choices" in metadata:
        text = "one of " + ", ".join(str(c) for c in metadata["choices"])
    elif kind is bool:
        text = "true or false"
    else:
        text = {int: "an integer", float: "a number", str: "a string"}.get(kind, kind.__name__)
    if metadata.get("minimum") is not None:
        text += f" >= {metadata['minimum']}"
    return text + (" or none" if optional else "")


def _parser_for(kind: type, optional: bool, metadata: Any):
    """The command-line parser of an option: text -> value, with the option's ``minimum`` (field metadata)."""
    minimum = metadata.get("minimum")

    def parse(text: str):
        if optional and text.lower() in ("none", ""):
            return None
        if kind is bool:
            if text.lower() not in _TRUE + _FALSE:
                raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
            return text.lower() in _TRUE
        value = kind(text)  # a ValueError: argparse's "invalid int value: 'abc'"
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"expected {_expected(kind, optional, metadata)}, got {text!r}")
        return value

    parse.__name__ = kind.__name__ if not optional else f"{kind.__name__} or none"
    return parse


def _config_text(value: Any, kind: type, metadata: Any) -> str:
    """A config file's value as the text the command line would take (YAML/JSON scalars, a list for an option
    with a ``separator``); raises `ValueError` for a value of the wrong shape."""
    if isinstance(value, list) and "separator" in metadata:
        if any(isinstance(v, (bool, list, dict)) or v is None for v in value):
            raise ValueError(f"a list of plain values, got {value!r}")
        return metadata["separator"].join(str(v) for v in value)
    if isinstance(value, bool):
        if kind is str:  # YAML 1.1 reads yes/no/on/off unquoted as booleans
            raise ValueError(f"a string, got the boolean {value!r} (quote the value in the file)")
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ValueError(f"a single value, got {value!r}")


def parse_config_value(cls: type, name: str, value: Any) -> Any:
    """A config file's ``value`` for field ``name`` of dataclass ``cls``, parsed and range-checked as the command
    line parses ``--name`` (plus: a YAML/JSON list for an option that takes a separated list). Raises `ValueError`
    saying what the option expects."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    kind, optional = _field_type(cls, f)
    expected = _expected(kind, optional, f.metadata)
    if value is None:
        if optional:
            return None
        raise ValueError(f"{name}: expected {expected}, got null")
    try:
        parsed = _parser_for(kind, optional, f.metadata)(_config_text(value, kind, f.metadata))
    except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
        raise ValueError(f"{name}: expected {expected}, got {value!r}") from error
    if "choices" in f.metadata and parsed is not None and parsed not in f.metadata["choices"]:
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    return parsed


def parse_field_value(cls: type, name: str, text: str) -> Any:
    """``text`` read as the type of field ``name`` of dataclass ``cls``: ``none`` (or nothing) is None for an
    optional field, a bool is true/false (1/0, yes/no). Raises `ValueError` naming the field and what it expects."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if name not in fields:
        raise ValueError(f"{name!r} is not an option of {cls.__name__}; choose one of {sorted(fields)}.")
    kind, optional = _field_type(cls, fields[name])
    try:
        return _parser_for(kind, optional, fields[name].metadata)(text)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
        expected = _expected(kind, optional, fields[name].metadata)
        raise ValueError(f"{name}={text!r} is not valid: expected {expected}.") from error


def float_list(text: str, option: str, what: str, positive: bool = False) -> list[float]:
    """Parse a comma-separated option such as ``"0.6, 1.0"``; raises ValueError naming ``option``."""
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        values = [math.nan]
    if any(not math.isfinite(v) or (positive and v <= 0) for v in values):
        raise ValueError(f"--{option} must be comma-separated {what}, got {text!r}.")
    return values


def _group_titles(cls: type) -> dict[str, str]:
    """The ``--help`` group of every field: the title of the last ``help_groups`` entry (a class attribute
    mapping a field name to a title that applies from that field on) of the class that declares the field, else
    the declaring class's name."""
    titles, current = {}, {}
    for f in dataclasses.fields(cls):
        owner = next(c for c in reversed(cls.__mro__) if f.name in getattr(c, "__annotations__", {}))
        current[owner] = owner.__dict__.get("help_groups", {}).get(
            f.name, current.get(owner, f"{owner.__name__} options")
        )
        titles[f.name] = f.metadata.get("group", current[owner])
    return titles


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> argparse.ArgumentParser:
    """Add one ``--name`` option per field of dataclass ``cls``, in argument groups (module docstring)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    titles = _group_titles(cls)
    for f in dataclasses.fields(cls):
        kind, optional = _field_type(cls, f)
        title = titles[f.name]
        group = groups.setdefault(title, parser.add_argument_group(title))
        help_text = f.metadata.get("help", "")
        # argparse %-formats help strings: a literal % in a help text or a default must be doubled
        help_text = f"{help_text} (default: {f.default})".replace("%", "%%")
        kwargs: dict[str, Any] = {
            "default": f.default,
            "help": help_text,
            "type": _parser_for(kind, optional, f.metadata),
        }
        if kind is bool:
            kwargs.update(nargs="?", const=True, metavar="true|false")
        elif "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        group.add_argument(f"--{f.name}", **kwargs)
        if kind is bool and f.default is True:
            group.add_argument(f"--no_{f.name}", dest=f.name, action="store_false", help=f"--{f.name} false")
    return parser


def read_config_file(cls: type, path: str | Path) -> dict[str, Any]:
    """The options in a YAML or JSON file (a mapping of field names of ``cls`` to values), each parsed and
    range-checked as its command-line flag is (`parse_config_value`).

    Raises:
        ValueError: the file is missing or unreadable, not a mapping, names an unknown option (with the
            nearest option names) or holds a value its option does not take (the option, the file, what it takes).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--config {str(path)!r} does not exist; pass a YAML or JSON file of options.")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            values = json.loads(text)
        else:
            import yaml

            values = yaml.safe_load(text)
    except Exception as error:  # json/yaml parse errors
        raise ValueError(
            f"--config {str(path)!r} is not valid {path.suffix.lstrip('.') or 'YAML'}: {error}"
        ) from error
    if not isinstance(values, dict):
        raise ValueError(f"--config {str(path)!r} must hold a mapping of option names to values.")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in values if k not in names]
    if unknown:
        hints = {k: difflib.get_close_matches(k, names, n=1) for k in unknown}
        raise ValueError(
            f"--config {str(path)!r} has unknown option(s): "
            + ", ".join(f"{k!r}" + (f" (did you mean {h[0]!r}?)" if h else "") for k, h in hints.items())
        )
    try:
        return {name: parse_config_value(cls, name, value) for name, value in values.items()}
    except ValueError as error:
        raise ValueError(f"--config {str(path)!r}: {error}") from error


def parse_dataclass(
    cls: type[T], argv: list[str] | None = None, description: str | None = None, prog: str | None = None
) -> T:
    """Parse ``argv`` (default: sys.argv) into an instance of dataclass ``cls``; ``--config FILE`` sets defaults
    that flags override. Bad flags and a bad config file exit with status 2 and one line, as argparse does."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="YAML or JSON file of options (e.g. a run's OUTPUT_DIR/checkpoints/train_config.json); flags override it",
    )
    add_dataclass_arguments(parser, cls)
    known, _ = parser.parse_known_args(argv)
    if known.config is not None:
        try:
            parser.set_defaults(**read_config_file(cls, known.config))
        except ValueError as error:
            parser.error(str(error))
    values = vars(parser.parse_args(argv))
    values.pop("config")
    return cls(**values)
