"""Position-aware, safe YAML reading.

The document is composed into PyYAML's node tree with the C parser (when the
libyaml extension is present) and a YAML 1.2 core-schema resolver, then turned
into plain Python values by :func:`convert`, which

- refuses every tag outside the core schema (``!!python/...``, ``!custom``,
  ``!!timestamp``, ``!!binary``, ...);
- reports duplicate mapping keys (PyYAML silently keeps the last one);
- shares, rather than copies, aliased nodes, and bounds the size their
  expansion would have, so a "billion laughs" file is a diagnostic;
- refuses collections nested more than :data:`MAX_DEPTH` deep, aliases followed;
- interpolates ``${VAR}`` and ``${VAR:-default}`` in string values, returning each string
  it changed as a ``toolflow._provenance.Interpolated``, which remembers the text as written.

The positions of the nodes :func:`convert` met are kept as the :class:`NodeLocator` of the
document, which turns JSON pointers back into 1-based line and column spans. Every position,
including that of a character the reader refuses, counts lines as YAML does
(:func:`position_of`) and lies inside the text.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import CollectionStartEvent, Event
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader, ReaderError
from yaml.resolver import BaseResolver, Resolver
from yaml.scanner import Scanner

from toolflow._diagnostics import Span
from toolflow._provenance import Interpolated

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPANDED_NODES",
    "DocumentError",
    "NodeLocator",
    "compose",
    "convert",
    "load_data",
    "position_of",
    "span_within",
]

MAX_EXPANDED_NODES = 1_000_000
"""Largest number of nodes a document may expand to once aliases are followed."""

MAX_DEPTH = 64
"""Deepest nesting of collections (mappings and sequences) a document may have, aliases followed.

Everything that reads a spec's values (schema checks, exports, copies of defaults) may recurse
once per level, so the limit keeps them all far from Python's recursion limit; real specs nest
a dozen levels or so.
"""

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
SEQ = "tag:yaml.org,2002:seq"
MAP = "tag:yaml.org,2002:map"
_SCALAR_TAGS = frozenset({STR, INT, FLOAT, BOOL, NULL})


class _CoreResolver(BaseResolver):
    """YAML 1.2 core schema: no ``yes``/``on`` booleans, no sexagesimals, no timestamps."""

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        """Resolve the tag of an untagged (or ``!``-tagged) node; cheaper than BaseResolver's."""
        if kind is ScalarNode:
            if implicit[0] and (value == "" or value[0] in _IMPLICIT_FIRST):
                for tag, regexp in self.yaml_implicit_resolvers.get(value[:1], ()):
                    if regexp.match(value):
                        return tag  # type: ignore[no-any-return]
            return STR
        return SEQ if kind is SequenceNode else MAP

    def descend_resolver(self, current_node: Node | None, current_index: object) -> None:
        """Path resolvers are not used; skip BaseResolver's bookkeeping."""

    def ascend_resolver(self) -> None:
        """Path resolvers are not used; skip BaseResolver's bookkeeping."""


for _tag, _regexp, _first in (
    (BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (INT, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        FLOAT,
        (
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        "-+0123456789.",
    ),
):
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_regexp), list(_first))
_CORE_PATTERNS = {
    tag: regexp for resolvers in _CoreResolver.yaml_implicit_resolvers.values() for tag, regexp in resolvers
}
_IMPLICIT_FIRST = frozenset(ch for ch in _CoreResolver.yaml_implicit_resolvers if ch)


class _Limited(Composer):
    """PyYAML's Python composer, refusing collections nested more than :data:`MAX_DEPTH` deep.

    It recurses once per level in Python, so a deep document fails cleanly, and early.
    """

    _depth = 0

    if TYPE_CHECKING:

        def peek_event(self) -> Event: ...  # the parser's, which comes with the composer

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        """Compose one node; raise :class:`DocumentError` at a collection one level too deep."""
        event = self.peek_event()
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise _too_deep(event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _PyComposer(Reader, Scanner, Parser, _Limited, _CoreResolver):
    """The pure-Python reader, scanner, parser and composer, for when PyYAML has no libyaml."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _CoreResolver.__init__(self)


try:
    from yaml.cyaml import CParser  # type: ignore[attr-defined]

    class _CComposer(CParser, _CoreResolver):
        """libyaml's parser and composer: the fast path, for documents that cannot nest deeply."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _CoreResolver.__init__(self)

    class _DeepComposer(_Limited, CParser, _CoreResolver):
        """libyaml's parser (which keeps its own stacks, never recursing) under the Python composer."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            _CoreResolver.__init__(self)

except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _CComposer = _DeepComposer = _PyComposer  # type: ignore[misc, assignment]

_SAFE_DEPTH = 250
# libyaml's composer recurses in C and overflows the stack on documents nested
# tens of thousands deep. A document whose lines are never indented 250 columns,
# that never chains 250 "- " or "? " indicators on one line, and whose brackets
# never nest 250 deep, cannot nest deep enough for that; anything else is
# composed in Python, on libyaml's events, and refused past MAX_DEPTH.
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_CHAINED = re.compile(rf"(?:[-?][ \t]+){{{_SAFE_DEPTH}}}")


def _composer_for(text: str) -> type[_CComposer | _DeepComposer]:
    indented = ("\n" + " " * _SAFE_DEPTH) in text or text.startswith(" " * _SAFE_DEPTH)
    chained = text.count("-") + text.count("?") >= _SAFE_DEPTH and _CHAINED.search(text) is not None
    if indented or chained or _bracket_depth(text) >= _SAFE_DEPTH:
        return _DeepComposer
    return _CComposer


def _bracket_depth(text: str) -> int:
    """Deepest nesting of flow brackets, counting brackets inside strings too (an overestimate)."""
    if text.count("[") + text.count("{") < _SAFE_DEPTH:
        return 0
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", text):  # one C-speed pass leaves only the brackets to walk
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


class _Mark(Protocol):
    """A position in the text, as both PyYAML's readers mark it (0-based)."""

    line: int
    column: int


def _too_deep(mark: _Mark | None) -> DocumentError:
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return DocumentError("TF001", f"the document nests more than {MAX_DEPTH} collections deep", line, column)


class DocumentError(Exception):
    """A problem that makes a document unusable, with its 1-based position.

    Attributes:
        code: The diagnostic code (``TF001`` syntax, ``TF004`` alias expansion).
    """

    def __init__(self, code: str, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line
        self.column = column


def compose(text: str) -> Node | None:
    """Compose *text* into a node tree; ``None`` for an empty document.

    Raises:
        DocumentError: The text is not a single well-formed YAML document.
    """
    with _document_errors(text):
        # Inside the block: the pure-Python reader checks every character as soon as it is built.
        loader = _composer_for(text)(text)
        try:
            node: Node | None = loader.get_single_node()
        finally:
            loader.dispose()
    return node


class _DataLoader(Reader, Scanner, Parser, _Limited, SafeConstructor, Resolver):
    """``yaml.safe_load``'s loader (YAML 1.1 types) on the composer that refuses deep documents."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


def load_data(text: str) -> Any:
    """The one YAML document of *text* as ``yaml.safe_load`` reads it (``None``: empty), held to :data:`MAX_DEPTH`.

    For files that hold data, not specs (a scripted transcript, a test file): no ``${...}``, no
    positions, YAML 1.1's types as before.

    Raises:
        DocumentError: The text is not a single well-formed YAML document, or it nests too deeply.
    """
    with _document_errors(text):
        loader = _DataLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_aliases(node)
            return loader.construct_document(node)
        finally:
            loader.dispose()


def _check_aliases(root: Node) -> None:
    """Refuse a node graph that aliases nest deeper than :data:`MAX_DEPTH`, loop or expand past the node limit.

    The tree itself is held to the depth by the composer; an alias shares a node, so each node's
    height and expanded size are worked out once, and the walk never goes deeper than the limit.
    """
    measured: dict[int, tuple[int, int]] = {}  # id -> (height, expanded size)

    def measure(node: Node, above: int) -> tuple[int, int]:
        if not isinstance(node, (SequenceNode, MappingNode)):
            return 0, 1
        known = measured.get(id(node))
        if known is None:
            if above >= MAX_DEPTH:  # a node that contains itself comes here too
                raise _alias_overflow(node, f"aliases nest the document more than {MAX_DEPTH} collections deep")
            children = node.value if type(node) is SequenceNode else [n for pair in node.value for n in pair]
            height = size = 0
            for child in children:
                child_height, child_size = measure(child, above + 1)
                height, size = max(height, child_height), size + child_size
            known = measured[id(node)] = (height + 1, size + 1)
        if above + known[0] > MAX_DEPTH:
            raise _alias_overflow(node, f"aliases nest the document more than {MAX_DEPTH} collections deep")
        if known[1] > MAX_EXPANDED_NODES:
            raise _alias_overflow(node, f"the document has more than {MAX_EXPANDED_NODES:,} nodes, aliases expanded")
        return known

    measure(root, 0)


def _alias_overflow(node: Node, message: str) -> DocumentError:
    return DocumentError("TF004", message, node.start_mark.line + 1, node.start_mark.column + 1)


@contextlib.contextmanager
def _document_errors(text: str) -> Iterator[None]:
    """Raise what PyYAML (or a recursion through a deep document) raises as a :class:`DocumentError`."""
    try:
        yield
    except RecursionError:
        raise DocumentError("TF001", "the document nests too deeply", 1, 1) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(text, exc) from None
    except ReaderError as exc:
        raise _reader_error(text, exc) from None
    except yaml.YAMLError as exc:
        raise DocumentError("TF001", f"YAML error: {' '.join(str(exc).split())}", 1, 1) from None


def _syntax_error(text: str, exc: yaml.MarkedYAMLError) -> DocumentError:
    """PyYAML's syntax error as a diagnostic: the problem, its context, and where they are."""
    mark = exc.problem_mark or exc.context_mark
    if exc.problem and "maximum nesting depth" in exc.problem:
        # libyaml's own limit (1,000 levels), which its scanner can meet before the composer meets ours.
        return _too_deep(mark)
    # libyaml ends the stream on a line of its own, past the end of a text without a final line break.
    line, column = min((mark.line + 1, mark.column + 1), position_of(text, len(text))) if mark else (1, 1)
    problem = exc.problem or exc.context or "invalid YAML"
    context = ""
    if exc.context and exc.problem and exc.problem.startswith("but "):
        problem = f"{exc.context}, {exc.problem}"
    elif exc.context and exc.problem:
        context = f" {exc.context}"
        start = exc.context_mark
        if start is not None and (start.line + 1, start.column + 1) != (line, column):
            context += f" that starts on line {start.line + 1}, column {start.column + 1}"
    return DocumentError("TF001", f"YAML syntax error: {problem}{context}", line, column)


def _reader_error(text: str, exc: ReaderError) -> DocumentError:
    """A character YAML refuses (a control character, U+FFFE, U+FFFF), placed where it is.

    The C reader gives a byte offset into the UTF-8 encoding and the Python reader a character
    index; both report the first refused character, so the first occurrence of that character
    in *text* is the one, whichever reader ran.
    """
    character = exc.character if isinstance(exc.character, int) else None
    index = text.find(chr(character)) if character is not None else -1
    if index < 0:
        index = min(max(exc.position, 0), len(text))
    line, column = position_of(text, index)
    if character is None:
        message = f"YAML syntax error: {' '.join(str(exc).split())}"
    else:
        message = (
            f"YAML syntax error: the character U+{character:04X} is not allowed;"
            f' write it as the escape "\\u{character:04x}" in a double-quoted string'
        )
    return DocumentError("TF001", message, line, column)


def span_within(node: Node, end: tuple[int, int] | None) -> Span:
    """The 1-based span of *node*, ending at *end* (the position after the text's last character) at the latest.

    libyaml ends the stream on a line of its own, one past the last line of a text that does
    not end with a line break, and a block collection that runs to the end of the text ends
    there.
    """
    start, stop = node.start_mark, node.end_mark
    line, column, end_line, end_column = start.line + 1, start.column + 1, stop.line + 1, stop.column + 1
    if end is not None and (end_line, end_column) > end:
        end_line, end_column = end
        line, column = min((line, column), end)
    return Span(line=line, column=column, end_line=end_line, end_column=end_column)


def position_of(text: str, index: int) -> tuple[int, int]:
    """The 1-based line and column of character *index* of *text*, counting lines as YAML does.

    YAML 1.1 (and so both of PyYAML's readers, whose marks place every other diagnostic)
    ends lines at CRLF, CR, LF, NEL, U+2028 and U+2029; positions found outside the YAML
    reader use the same breaks, so that all of a file's diagnostics agree on its lines.
    """
    prefix = text[:index]
    # str.count and str.rfind run in C: a whole file's end is found without a step per line.
    breaks = sum(prefix.count(b) for b in _BREAKS) - prefix.count("\r\n")
    line_start = max(prefix.rfind(b) for b in _BREAKS) + 1
    return breaks + 1, index - line_start + 1


_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")
"""The line breaks of YAML 1.1, which both of PyYAML's readers count lines by; CRLF is one."""


_ENV = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


_Entry: TypeAlias = "tuple[int, int, int, int, str | None, _Children]"
_Children: TypeAlias = "tuple[_Entry, ...] | dict[object, tuple[_Entry, _Entry]] | None"
"""What a locator keeps of a node: 1-based start line and column, end line and column (as
PyYAML marks them), the style of a scalar (``None`` when plain), and the children: ``None`` for a
scalar, a tuple of entries for a sequence, ``{key: (key entry, value entry)}`` for a mapping.

Plain tuples, ints and strings rather than PyYAML's nodes: each node is a handful of objects
instead of a dozen (the node, two marks and their dictionaries), and tuples of ints leave the
cyclic collector's view after its first pass, so a project's kept locators cost it nothing.
A collection refused for its tag has no children here: :func:`convert` does not enter it."""


class Report(Protocol):
    """How :func:`convert` reports a problem: a code, a message, the node, and whether to point at its key."""

    def __call__(self, code: str, message: str, node: Node, *, at_key: bool = False) -> None: ...


def convert(  # noqa: PLR0915 - the closures share one conversion state
    root: Node,
    report: Report,
    *,
    environ: Mapping[str, str] | None = None,
    max_nodes: int = MAX_EXPANDED_NODES,
    marks: set[int] | None = None,
) -> tuple[Any, _Entry]:
    """Turn the node tree *root* into plain Python values and their positions, reporting problems.

    Returns the value and the positions of its nodes, for a :class:`NodeLocator`; one walk
    makes both. Aliased nodes are converted once and shared. Recoverable problems (a refused
    tag, a duplicate key, an unset variable) go to *report* and conversion goes
    on; the offending value becomes ``None``.

    A string in which ``${...}`` was replaced is an ``Interpolated``. With *marks*,
    the ``id()`` of each one, and of each list and mapping that holds one at any
    depth, is added to it: walks for those strings (``toolflow._provenance``) can
    then skip the rest of the document.

    Raises:
        DocumentError: Collections nest more than :data:`MAX_DEPTH` deep (``TF001``),
            or aliases expand beyond *max_nodes* nodes or that deep, or refer to
            themselves (``TF004``).
    """
    env = os.environ if environ is None else environ
    done: dict[int, tuple[Any, _Entry]] = {}
    sizes: dict[int, int] = {}  # of the collections converted: how many nodes they expand to
    heights: dict[int, int] = {}  # of the collections converted: how deep they nest
    active: set[int] = set()
    expanded = 0
    depth = reach = 0  # collections around the node being converted; the deepest seen under it

    def interpolate(node: ScalarNode) -> str:
        substitutions: list[tuple[str, str]] = []
        replaced = False

        def sub(match: re.Match[str]) -> str:
            nonlocal replaced
            if match[0] == "$${":
                return "${"
            replaced = True
            name, default = match[1], match[2]
            value = env.get(name)
            if value is None or (value == "" and default is not None):
                if default is None:
                    report("TF007", f"environment variable {name!r} is not set", node)
                    return ""
                return default
            substitutions.append((match[0], value))  # only values from the environment are secrets
            return value

        text = _ENV.sub(sub, node.value)
        if not replaced:
            return text
        return Interpolated(text, reference=node.value, substitutions=tuple(substitutions))

    def scalar(node: ScalarNode) -> Any:
        tag, text = node.tag, node.value
        pattern = _CORE_PATTERNS.get(tag)
        if pattern is None:
            report("TF003", f"tag {tag!r} is not allowed", node)
            return None
        if not pattern.match(text):
            # Only an explicit tag can put a core tag on text that does not match it.
            report("TF003", f"{text!r} is not a valid {tag.replace('tag:yaml.org,2002:', '!!')}", node)
            return None
        if tag == INT:
            try:
                return int(text, 0) if text[:2] in ("0o", "0x") else int(text)
            except ValueError:  # more digits than int() converts from decimal text
                report("TF104", f"the integer {text[:12]}... has too many digits", node)
                return None
        if tag == FLOAT:
            lowered = text.lower()
            if lowered.endswith(".inf"):
                return -math.inf if text.startswith("-") else math.inf
            if lowered == ".nan":
                return math.nan
            return float(text)
        if tag == BOOL:
            return text.lower() == "true"
        return None

    marked = 0  # Interpolated strings made, or met again through an alias, so far

    def walk(node: Node) -> tuple[Any, _Entry]:
        # Every scalar is converted here, without a further call: most nodes are scalars.
        nonlocal expanded, marked
        ident = id(node)
        if ident in done:
            return again(node)
        if type(node) is not ScalarNode:
            return collection(node)
        expanded += 1
        text = node.value
        if node.tag != STR:
            value = scalar(node)
        elif "$" in text:
            value = interpolate(node)
            if type(value) is Interpolated:
                marked += 1
                if marks is not None:
                    marks.add(id(value))
        else:
            value = text
        start, end = node.start_mark, node.end_mark
        entry = (start.line + 1, start.column + 1, end.line + 1, end.column + 1, node.style or None, None)
        made = done[ident] = (value, entry)
        return made

    def again(node: Node) -> tuple[Any, _Entry]:
        """An aliased node met again: shared, counted as expanded, and checked against the limits."""
        nonlocal expanded, marked, reach
        ident = id(node)
        expanded += sizes.get(ident, 1)  # a scalar is one node
        if expanded > max_nodes:
            raise _alias_overflow(node, f"document expands to more than {max_nodes:,} nodes through aliases")
        deepest = depth + heights.get(ident, 0)
        if deepest > MAX_DEPTH:
            raise _alias_overflow(node, f"aliases nest the document more than {MAX_DEPTH} collections deep")
        reach = max(reach, deepest)
        made = done[ident]
        if marks is not None and id(made[0]) in marks:
            marked += 1
        return made

    def collection(node: Node) -> tuple[Any, _Entry]:
        nonlocal expanded, depth, reach
        ident = id(node)
        if ident in active:
            raise _alias_overflow(node, "an alias refers to a node that contains it (recursive structure)")
        if depth >= MAX_DEPTH:
            raise _too_deep(node.start_mark)
        before = expanded
        expanded += 1
        active.add(ident)
        marked_before = marked
        depth += 1
        outer, reach = reach, depth
        value: Any
        children: _Children
        if node.tag != (SEQ if type(node) is SequenceNode else MAP):
            report("TF003", f"tag {node.tag!r} is not allowed", node)
            value = children = None
        elif type(node) is SequenceNode:
            pairs = [walk(item) for item in node.value]
            value = [pair[0] for pair in pairs]
            children = tuple(pair[1] for pair in pairs)
        else:
            value, children = mapping(node)  # type: ignore[arg-type]
        active.discard(ident)
        if marks is not None and marked != marked_before:
            marks.add(id(value))
        depth -= 1
        heights[ident] = reach - depth
        reach = max(reach, outer)
        start, end = node.start_mark, node.end_mark
        made = done[ident] = (value, (start.line + 1, start.column + 1, end.line + 1, end.column + 1, None, children))
        sizes[ident] = expanded - before
        return made

    def mapping(node: MappingNode) -> tuple[dict[str, Any], dict[object, tuple[_Entry, _Entry]]]:
        result: dict[str, Any] = {}
        children: dict[object, tuple[_Entry, _Entry]] = {}
        first_lines: dict[str, int] = {}  # of keys defined more than once
        for key_node, value_node in node.value:
            if type(key_node) is not ScalarNode:
                report("TF001", "a mapping key must be a scalar", key_node)
                continue
            if key_node.tag not in _SCALAR_TAGS:
                report("TF003", f"tag {key_node.tag!r} is not allowed", key_node)
                continue
            key = key_node.value
            if key in children:
                earlier = children.pop(key)
                line = first_lines.setdefault(key, earlier[0][0])
                report("TF002", f"duplicate key {key!r} (first defined on line {line})", key_node, at_key=True)
                # A pointer names the last of duplicate keys (the value kept); the earlier ones stay,
                # for in_string(), under their position, which no pointer token equals.
                children[earlier[0][:2]] = earlier
            start, end = key_node.start_mark, key_node.end_mark
            key_entry = (start.line + 1, start.column + 1, end.line + 1, end.column + 1, key_node.style or None, None)
            result[key], value_entry = walk(value_node)
            children[key] = (key_entry, value_entry)
        return result, children

    try:
        return walk(root)
    except RecursionError:
        raise DocumentError("TF004", "the document nests too deeply", 1, 1) from None
    finally:
        # The closures refer to each other, a cycle only the collector frees; without the tables
        # it holds nothing of the document, whose values reference counting then frees with it.
        done.clear()


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _entries(root: _Entry) -> Iterator[_Entry]:
    """Every entry under *root*, once each (aliases are shared)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        found = stack.pop()
        if id(found) in seen:
            continue
        seen.add(id(found))
        yield found
        children = found[5]
        if isinstance(children, tuple):
            stack.extend(children)
        elif children is not None:
            stack.extend(part for pair in children.values() for part in pair)


class NodeLocator:
    """Resolves JSON pointers into a composed document to source spans.

    It keeps the positions of the document's nodes (see :data:`_Entry`), not the node tree.
    """

    def __init__(self, root: _Entry | None, text: str = "") -> None:
        self._root = root
        self._text = text
        self._strings: list[tuple[tuple[int, int], tuple[int, int]]] | None = None
        self._end_of_text: tuple[int, int] | None = None

    def in_string(self, line: int, column: int) -> bool:
        """True when the 1-based position lies inside a quoted or block scalar."""
        if self._strings is None:
            self._strings = [
                ((found[0], found[1]), (found[2], found[3]))
                for found in (_entries(self._root) if self._root is not None else ())
                if found[4]  # plain scalars end before " #"; others can hold it
            ]
        return any(start <= (line, column) < end for start, end in self._strings)

    def _find(self, pointer: str) -> tuple[_Entry | None, _Entry | None]:
        """``(entry, key entry)`` of the deepest part of *pointer* that exists."""
        found, key = self._root, None
        if found is None or not pointer:
            return found, None
        for raw in pointer.split("/")[1:]:
            token = _unescape(raw)
            children = found[5]
            if isinstance(children, dict):
                pair = children.get(token)
                if pair is None:
                    break
                key, found = pair
            elif isinstance(children, tuple) and token.isdigit() and int(token) < len(children):
                found, key = children[int(token)], None
            else:
                break
        return found, key

    def kind(self, pointer: str) -> str | None:
        """``"mapping"``, ``"sequence"`` or ``"scalar"``: what the deepest existing part of *pointer* is."""
        found, _ = self._find(pointer)
        if found is None:
            return None
        children = found[5]
        return "scalar" if children is None else "sequence" if isinstance(children, tuple) else "mapping"

    def locate(self, pointer: str, *, key: bool = False) -> Span:
        """Return the span of the node at *pointer* (or of its key, with ``key=True``)."""
        found, key_entry = self._find(pointer)
        target = key_entry if key and key_entry is not None else found
        if target is None:
            return Span(line=1, column=1, end_line=1, end_column=1)
        line, column, end_line, end_column = target[:4]
        if self._text:
            if self._end_of_text is None:
                self._end_of_text = position_of(self._text, len(self._text))
            end = self._end_of_text
            if (end_line, end_column) > end:
                end_line, end_column = end
                line, column = min((line, column), end)
        return Span(line=line, column=column, end_line=end_line, end_column=end_column)

    def value_position(self, pointer: str, line_in_value: int) -> tuple[int, int] | None:
        """The file position of a 1-based line of the string at *pointer*; ``None`` when there is none.

        A flow scalar written on one line can still hold several lines (through quoted newline
        escapes); they all map to its start, as does a line past the scalar's end.
        """
        found, _ = self._find(pointer)
        if found is None:
            return None
        start = (found[0], found[1])
        block = found[5] is None and found[4] in ("|", ">")
        if not block and found[0] == found[2]:
            return start
        line, column = self.scalar_line(pointer, line_in_value)
        return (line, column) if line <= found[2] else start

    def scalar_line(self, pointer: str, line_in_value: int) -> tuple[int, int]:
        """Map a 1-based line inside a string value to a line and column of the file.

        Block scalars (``|``, ``>``) start on the line after their indicator; the
        column is that of the first non-blank character of the mapped line.
        """
        found, _ = self._find(pointer)
        if found is None:
            return 1, 1
        line0, column0 = found[0] - 1, found[1] - 1
        if found[5] is None and found[4] in ("|", ">"):
            line0 += line_in_value
        else:
            line0 += line_in_value - 1
        lines = self._text.splitlines()
        if 0 <= line0 < len(lines):
            text = lines[line0]
            column = len(text) - len(text.lstrip()) + 1
            if line0 == found[0] - 1:
                column = column0 + 1
            return line0 + 1, column
        return found[0], found[1]
