"""The one YAML loader for files an operator hands gpu-remedy (settings, goodput scenario files).

`yaml.safe_load` builds no objects, but it still takes any size, any nesting (a deep `[[[[...` ends in a
RecursionError traceback) and any number of aliases (a "billion laughs" file expands to gigabytes). This loader
composes the document first and checks it before building anything: size, nesting depth, alias uses, and the number
of nodes after aliases are expanded; then, if asked, that every number is finite and within a magnitude. Every
refusal is one `YamlLimitError` line naming the file and the limit (the CLIs turn it into exit 2).
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

MAX_BYTES = 1024 * 1024  # settings and scenario files are a few KB
MAX_DEPTH = 32  # the deepest settings path is 4 levels
MAX_ALIASES = 64  # anchors are a convenience; a file that needs more is not a config
MAX_NODES = 100_000  # after alias expansion: stops "billion laughs" long before it costs memory


_NUMBER_TEXT = re.compile(r"^[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf(?:inity)?|nan)$",
                          re.IGNORECASE)


class YamlLimitError(ValueError):
    """A YAML file that is not valid, or is over one of the loader's limits; the message is one line."""


def _one_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or ["invalid YAML"])[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def _check_graph(root: yaml.Node, what: str, max_depth: int, max_aliases: int, max_nodes: int) -> None:
    """Depth, alias uses and expanded size of a composed document, walked without recursion."""
    seen: set[int] = set()
    aliases = expanded = 0
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        expanded += 1
        if expanded > max_nodes:
            raise YamlLimitError(f"{what}: more than {max_nodes} values once aliases are expanded (limit)")
        if depth > max_depth:
            mark = node.start_mark
            raise YamlLimitError(f"{what}: line {mark.line + 1}: nested deeper than {max_depth} levels (limit)")
        if id(node) in seen:  # the composer hands back the anchored node itself for every alias
            aliases += 1
            if aliases > max_aliases:
                raise YamlLimitError(f"{what}: more than {max_aliases} alias uses (limit)")
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _check_numbers(data: Any, what: str, max_abs: float) -> None:
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, str) and _NUMBER_TEXT.match(value.strip()):
            # YAML 1.1 reads `1e300` (no dot) and `inf` as text; pydantic then turns them into numbers
            stack.append((float(value.strip()), path))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                raise YamlLimitError(f"{what}: {path or 'value'}: {value} is not a finite number")
            if abs(value) > max_abs:
                raise YamlLimitError(f"{what}: {path or 'value'}: {value:g} is out of range (at most {max_abs:g} in size)")


def load_yaml(text: str | bytes, what: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH,
              max_aliases: int = MAX_ALIASES, max_nodes: int = MAX_NODES, max_abs_number: float | None = None) -> Any:
    """Parse one YAML document under the limits; `what` (usually the path) starts every error message.

    max_abs_number: when given, every number must be finite and no larger than this in size."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_bytes:
            raise YamlLimitError(f"{what}: {len(text)} bytes, over the {max_bytes}-byte limit for a YAML file")
        text = bytes(text).decode("utf-8", errors="replace")
    if len(text.encode("utf-8", errors="replace")) > max_bytes:
        raise YamlLimitError(f"{what}: over the {max_bytes}-byte limit for a YAML file")
    try:
        loader = yaml.SafeLoader(text)  # the reader checks every character here: binary data fails now
    except yaml.YAMLError as exc:
        raise YamlLimitError(f"{what}: not valid YAML: {_one_line(exc)}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(node, what, max_depth, max_aliases, max_nodes)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise YamlLimitError(f"{what}: not valid YAML: {_one_line(exc)}") from None
    except RecursionError:  # nesting deep enough to exhaust the composer before our own depth check sees it
        raise YamlLimitError(f"{what}: nested deeper than {max_depth} levels (limit)") from None
    finally:
        loader.dispose()
    if max_abs_number is not None:
        _check_numbers(data, what, max_abs_number)
    return data
