"""YAML read strictly, for the files users write by hand (the config, a GPU catalog): a key given
twice in one mapping is an error naming both lines (plain YAML silently keeps the last), and
``1.555e12`` (no dot, no sign) is a float, as a reader of the number means it. Each caller words
the error for its own file."""

from __future__ import annotations

import re

import yaml


class DuplicateKey(yaml.constructor.ConstructorError):
    """A key given twice in one mapping (a YAMLError, so handlers of bad YAML still catch it)."""

    def __init__(self, key: object, line: int, first_line: int) -> None:
        self.key, self.line, self.first_line = key, line, first_line
        super().__init__(None, None, f"duplicate key {key!r} on line {line} (first on line {first_line}); "
                                     "YAML would silently keep only the last: remove or rename one")


def _unique_keys(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise DuplicateKey(key, key_node.start_mark.line + 1, seen[key])
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


class StrictLoader(yaml.SafeLoader):
    """Safe YAML, duplicate keys refused, exponent-only floats: exactly what PyYAML's pure-Python
    loader reads otherwise (Snakemake reads the config with it)."""

    construct_mapping = _unique_keys


class FastStrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same through libyaml where PyYAML has it: the catalog is loaded by every run and job, and
    the pure-Python parser takes several times as long."""

    construct_mapping = _unique_keys


for _loader in (StrictLoader, FastStrictLoader):
    _loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)[eE][-+]?\d+$"),
                                  list("-+0123456789."))
