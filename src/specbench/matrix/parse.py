"""Matrix text → plain data: YAML parsed strictly, its errors located for a person to fix.

PyYAML's safe loader lets a repeated key silently win (``repeats: 3`` … ``repeats: 10``, or an
arm written twice), so the measurement would not be the one the file seems to describe. Here a
repeated key is an error naming the key and both lines. A syntax error keeps the parser's
line, column and caret snippet (flattened onto one line the caret points at nothing).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from specbench.errors import ConfigError, YamlSyntaxError
from specbench.store.redact import SECRET_FLAGS, mask_url_passwords

MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_MATRIX_BYTES = 16 * 1024 * 1024  # far above any matrix; a bound so /dev/zero-like input ends


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: str, first: int, second: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.first, self.second = key, first, second


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """Refuses a mapping that states one key twice (merge keys ``<<`` may still override: that is
    what they are for)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                raise DuplicateKeyError(key_node.value, seen[key_node.value], line)
            seen[key_node.value] = line
        return super().construct_mapping(node, deep=deep)


class UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """The pure-Python safe loader: its marks carry the text, so a syntax error shows its line."""


# libyaml's parser where PyYAML was built with it: a 10 MB comment parses in a tenth of a second
# instead of seconds. Its marks carry no text, so a syntax error is parsed again by the Python
# loader for the caret snippet (errors are rare; speed matters on every valid matrix).
_CLoader: type[yaml.SafeLoader] | None = getattr(yaml, "CSafeLoader", None)
FastUniqueKeyLoader: type[Any] = (
    type("FastUniqueKeyLoader", (_UniqueKeys, _CLoader), {}) if _CLoader else UniqueKeyLoader
)


def read_matrix_text(path: Path) -> str:
    """The matrix file's text: a regular file (a FIFO or a device would block or never end),
    of bounded size, in UTF-8."""
    from specbench.matrix.files import read_regular

    return read_regular(path, MAX_MATRIX_BYTES, "matrix file")


def parse_matrix_yaml(path: Path, text: str) -> Any:
    """The YAML document in ``text``; ConfigError naming ``path``, the line and the problem."""
    try:
        try:  # safe loaders only: no arbitrary objects
            return check_depth(path, yaml.load(text, Loader=FastUniqueKeyLoader))
        except yaml.MarkedYAMLError:
            if FastUniqueKeyLoader is UniqueKeyLoader:
                raise
            return yaml.load(text, Loader=UniqueKeyLoader)  # the same error, with its snippet
    except DuplicateKeyError as exc:
        raise ConfigError(
            f"{path}:{exc.second}: {exc.key}: given twice (lines {exc.first} and {exc.second}); "
            "the second would silently replace the first: keep one"
        ) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(path, exc) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a matrix") from None


MAX_DEPTH = 64  # a matrix nests a few levels; libyaml builds far deeper, which later code would recurse on


def check_depth(path: Path, data: Any) -> Any:
    """``data``, refused if nested deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    todo: list[tuple[Any, int]] = [(data, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(f"{path}: nested too deeply to be a matrix (more than {MAX_DEPTH} levels)")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        todo += [(child, depth + 1) for child in children]
    return data


def _syntax_error(path: Path, exc: yaml.MarkedYAMLError) -> YamlSyntaxError:
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    problem = exc.problem or exc.context or "not valid YAML"
    context = ""
    if exc.context and exc.problem and exc.context_mark is not None:
        context = f" ({exc.context} at line {exc.context_mark.line + 1})"
    snippet = _snippet(mark)
    if not snippet.strip(" ^\n") and exc.context_mark is not None:  # at the end: show where it began
        snippet = _snippet(exc.context_mark)
    return YamlSyntaxError(f"{where}: not valid YAML: {problem}{context}".replace("\n", " "), snippet)


def _snippet(mark: yaml.Mark | None) -> str:
    """The offending line with a caret under the column; left out when that line may hold a
    secret (a key flag, a KEY/TOKEN-like name, a URL with a password): errors are printed."""
    text = (mark.get_snippet(indent=2, max_length=100) or "") if mark is not None else ""
    line = text.split("\n", 1)[0]
    if _SECRETISH.search(line) or mask_url_passwords(line) != line:
        return ""
    return text


_SECRETISH = re.compile(
    "|".join([*(re.escape(f) for f in SECRET_FLAGS), "key|token|secret|passw|pwd|auth|credential"]), re.I
)
