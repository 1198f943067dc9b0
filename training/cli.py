"""The command line of an options dataclass, parsed by transformers' `HfArgumentParser`.

Each option is declared once, as a field: its type, its default and, in its metadata, its ``help`` and its
``choices`` or its range (``ge``, ``gt``, ``le``, ``lt``; `corpus.options.option_problem` checks it, for flags,
config-file values and Python alike). `OptionParser` adds to HfArgumentParser:
- one style: ``--field_name`` only (no hyphenated aliases); a bool is ``--flag`` (true), ``--flag false`` or, when
  it defaults to true, ``--no_flag``; an optional field also takes ``none``;
- a value out of range is refused as it is parsed (exit 2, one line naming the option and what it takes), and so
  is a path its field's ``path`` kind refuses (`paths.path_problem`: a link loop, a device, a FIFO, a file
  where a folder is expected, ...);
- ``--help`` groups: the title of a field's section in its declaring class's ``help_groups`` table (a field name
  -> a title that applies from that field on), else the declaring class's name;
- an unknown option is refused with the nearest option name.
`parse_dataclass` adds ``--config FILE`` (YAML or JSON, keys are field names): its values go through the flags'
parsers (an option with a ``separator`` also takes a list); flags on the command line override it.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import typing
from pathlib import Path
from typing import Any, TypeVar

from transformers import HfArgumentParser
from transformers.hf_argparser import DataClassType, string_to_bool

from vanilla_transformer.convert.common import bounded_repr, read_config_file
from vanilla_transformer.corpus.options import option_problem, option_range
from vanilla_transformer.paths import path_problem

T = TypeVar("T")

# the add_argument keywords of a field's metadata; the others (range, separator, ...) are ours
_ARGPARSE_KEYS = set("action nargs const default type choices required help metavar dest".split())
_WORDS = {int: "an integer", float: "a number", str: "a string", string_to_bool: "true or false"}


def _nearest(name: str, names: typing.Iterable[str], quote: str = "'") -> str:
    """`` (did you mean 'x'?)`` for the option name nearest to ``name``, or nothing."""
    match = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {quote}{match[0]}{quote}?)" if match else ""


class PathError(argparse.ArgumentTypeError):
    """A path option's value that its ``path`` kind refuses (the message: `path_problem`'s)."""


class OptionValue:
    """The argparse ``type`` of one option: ``base`` (HfArgumentParser's type of the field), ``none`` for an
    optional field, then the field's range (`option_problem`); argparse checks the ``choices`` after it."""

    def __init__(self, option: dataclasses.Field, base: Any, optional: bool):
        self.option, self.base, self.optional = option, base, optional
        # argparse's "invalid int or none value: 'abc'"
        self.__name__ = getattr(base, "__name__", str(base)) + (" or none" if optional else "")

    @property
    def expected(self) -> str:
        """What the option takes, in words: "an integer >= 1 or none", "one of no, bf16, fp16", ..."""
        metadata = self.option.metadata
        if "separator" in metadata:
            text = f"a list (or a {metadata['separator']!r}-separated string)"
        elif "choices" in metadata:
            text = "one of " + ", ".join(map(str, metadata["choices"]))
        else:
            text = " ".join(filter(None, (_WORDS.get(self.base, self.__name__), option_range(metadata))))
        return text + (" or none" if self.optional else "")

    def __call__(self, text: str) -> Any:
        if self.optional and text.lower() in ("none", ""):
            return None
        value = self.base(text)
        if "path" in self.option.metadata and (problem := path_problem(value, self.option.metadata["path"])):
            raise PathError(problem)
        if "choices" not in self.option.metadata and option_problem(self.option, value) is not None:
            raise argparse.ArgumentTypeError(f"expected {self.expected}, got {text!r}")
        return value

    def parse(self, value: Any) -> Any:
        """``value`` (a flag's text, or a config file's YAML/JSON value: a list for an option with a
        ``separator``) parsed and checked as argparse does; raises `ValueError` saying what the option takes."""
        separator = self.option.metadata.get("separator")
        plain = (str, int, float)
        try:
            if value is None and self.optional:
                return None
            if isinstance(value, list) and separator and all(type(v) in plain for v in value):
                value = separator.join(map(str, value))
            # YAML 1.1 reads yes/no/on/off as booleans: a string option takes them quoted only
            if isinstance(value, bool) and self.base is not str:
                value = str(value).lower()
            if type(value) not in plain:
                raise ValueError(value)
            parsed = self(str(value))
            if parsed is not None and parsed not in self.option.metadata.get("choices", (parsed,)):
                raise ValueError(value)
        except PathError as error:
            raise ValueError(f"{self.option.name}: {error}") from error
        except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
            got = "null" if value is None else bounded_repr(value)
            raise ValueError(f"{self.option.name}: expected {self.expected}, got {got}") from error
        return parsed


class OptionParser(HfArgumentParser):
    """`HfArgumentParser` over the options dataclass ``cls`` with what this module adds (module docstring); further
    arguments can be added, as to any argparse parser."""

    def __init__(self, cls: type, **kwargs: Any):
        self.option_fields = {f.name: f for f in dataclasses.fields(cls)}
        self.option_values: dict[str, OptionValue] = {}
        self._hints = typing.get_type_hints(cls)
        self._titles = _group_titles(cls)
        self._help_groups: dict[str, Any] = {}
        self._flags: list[str] = []
        # the default is baked into each field's help (a caller may replace the defaults, see evaluate)
        kwargs.setdefault("formatter_class", argparse.HelpFormatter)
        super().__init__(DataClassType(cls), **kwargs)

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:
        """An option of a field, as HfArgumentParser makes it, in this module's style; other arguments as given."""
        self._flags += [n for n in names if n.startswith("--") and "-" not in n[2:]]
        name = kwargs.get("dest", names[0].lstrip("-"))
        option = self.option_fields.get(name)
        if option is None:
            return super().add_argument(*names, **kwargs)
        names = tuple(n for n in names if "-" not in n[2:])
        kwargs = {k: v for k, v in kwargs.items() if k in _ARGPARSE_KEYS}
        if kwargs.get("action") == "store_false":
            kwargs.update(default=argparse.SUPPRESS, help=f"--{name} false")
        else:
            optional = type(None) in typing.get_args(self._hints[name])
            base = option.metadata.get("type", kwargs["type"])
            kwargs["type"] = self.option_values[name] = OptionValue(option, base, optional)
            # argparse %-formats help strings: a literal % must be doubled
            kwargs["help"] = f"{kwargs.get('help', '')} (default: {option.default})".replace("%", "%%")
            if base is string_to_bool:
                kwargs.update(nargs="?", const=True, metavar="true|false")
            if optional and "choices" in kwargs:
                # none unsets an optional choice too (argparse checks the parsed value against the choices)
                shown = "{" + ",".join(map(str, kwargs["choices"])) + "}"
                kwargs.update(choices=[*kwargs["choices"], None], metavar=shown)
        title = self._titles[name]
        if title not in self._help_groups:
            self._help_groups[title] = self.add_argument_group(title)
        return self._help_groups[title].add_argument(*names, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        """argparse's (usage, one ``error:`` line, exit 2), naming the option nearest to an unrecognized one."""
        if message.startswith("unrecognized arguments: "):
            message += _nearest(message.split()[2].split("=")[0], self._flags, quote="")
        super().error(message)

    def read_config_file(self, path: str | Path) -> dict[str, Any]:
        """The options in a YAML or JSON file (field names -> values), each parsed as its flag parses it.

        Raises:
            ValueError: the file is missing or unreadable, not a mapping, names an unknown option (with the
                nearest name) or holds a value its option does not take (the option, the file, what it takes).
        """
        path = Path(path)
        where = f"--config {str(path)!r}"
        if (problem := path_problem(path, "file")) is not None:
            raise ValueError(f"--config {problem}")
        try:
            # bounded in size, YAML without aliases (`convert.common.read_config_file`)
            values = read_config_file(path, "a YAML or JSON file of options")
        except (OSError, ValueError) as error:
            raise ValueError(f"--config: {str(error).splitlines()[0]}") from error
        if not isinstance(values, dict):
            raise ValueError(f"{where} must hold a mapping of option names to values.")
        unknown = [k for k in values if k not in self.option_values]
        if unknown:
            raise ValueError(
                f"{where} has unknown option(s): "
                + ", ".join(f"{k!r}{_nearest(str(k), self.option_values)}" for k in unknown)
            )
        try:
            return {name: self.option_values[name].parse(value) for name, value in values.items()}
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from error


def _group_titles(cls: type) -> dict[str, str]:
    """The ``--help`` group of every field of ``cls`` (module docstring)."""
    titles, current = {}, {}
    for f in dataclasses.fields(cls):
        owner = next(c for c in reversed(cls.__mro__) if f.name in getattr(c, "__annotations__", {}))
        current[owner] = owner.__dict__.get("help_groups", {}).get(
            f.name, current.get(owner, f"{owner.__name__} options")
        )
        titles[f.name] = current[owner]
    return titles


def parse_field_value(cls: type, name: str, text: str) -> Any:
    """``text`` read as the flag ``--name`` of dataclass ``cls`` reads it. Raises `ValueError` naming the field and
    what it expects."""
    values = OptionParser(cls).option_values
    if name not in values:
        raise ValueError(f"{name!r} is not an option of {cls.__name__}{_nearest(name, values)}.")
    return values[name].parse(text)


def float_list(text: str, option: str, what: str, positive: bool = False) -> list[float]:
    """Parse a comma-separated option such as ``"0.6, 1.0"``; raises ValueError naming ``option``."""
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        values = [math.nan]
    if any(not math.isfinite(v) or (positive and v <= 0) for v in values):
        raise ValueError(f"--{option} must be comma-separated {what}, got {text!r}.")
    return values


def parse_dataclass(
    cls: type[T], argv: list[str] | None = None, description: str | None = None, prog: str | None = None
) -> T:
    """Parse ``argv`` (default: sys.argv) into an instance of dataclass ``cls``; ``--config FILE`` sets defaults
    that flags override. Bad flags and a bad config file exit with status 2 and one line, as argparse does."""
    parser = OptionParser(cls, prog=prog, description=description)
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="YAML or JSON file of options (e.g. a run's OUTPUT_DIR/checkpoints/train_config.json); flags override it",
    )
    known, _ = parser.parse_known_args(argv)
    if known.config is not None:
        try:
            parser.set_defaults(**parser.read_config_file(known.config))
        except ValueError as error:
            parser.error(str(error))
    (cfg,) = parser.parse_dict(vars(parser.parse_args(argv)), allow_extra_keys=True)
    return cfg
