"""Sandboxed Jinja2 for ``template:`` and ``command:`` implementations.

Templates run in a :class:`jinja2.sandbox.ImmutableSandboxedEnvironment` with
strict undefined variables: only the call's arguments (and the environment
variables a spec lists, as ``env.NAME``) are visible, and attribute access that
reaches for Python internals raises a security error instead of leaking them.
Rendering a function, method or class (``{{ range }}``) is refused as well, so
that no ``<function ... at 0x...>`` reaches a model.

The linter parses templates (:func:`parse_template`); the built-in kinds
compile them once per tool (:func:`compile_template`) and render them per call
(:func:`render_template`), which turns every failure into one
:class:`TemplateError` with a message fit for a model.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import attrs
import jinja2
import jinja2.meta
import jinja2.nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter

from toolflow._errors import ToolflowError

__all__ = [
    "TEMPLATE_GLOBALS",
    "TemplateEnv",
    "TemplateError",
    "TemplateProblem",
    "compile_template",
    "environment",
    "has_loops",
    "parse_template",
    "render_template",
    "template_environment",
    "template_variables",
]

TEMPLATE_GLOBALS = frozenset({"env", "range", "dict", "lipsum", "cycler", "joiner", "namespace"})
"""Names a template may use without declaring them as parameters."""

NESTING_MESSAGE = "the template nests too deeply"


class TemplateError(ToolflowError):
    """A template cannot be compiled for a tool, or a rendering failed.

    Raised by :func:`render_template` (the message is fit for a model) and by
    the built-in kinds' ``build`` when a tool's templates do not compile.

    Attributes:
        line: The 1-based line inside the template, when known.
    """

    exit_code = 1

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class _Undefined(jinja2.StrictUndefined):
    """Strict undefined values whose messages name environment variables plainly and types by their short name."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        obj, name = self._undefined_obj, self._undefined_name
        if self._undefined_hint or obj is jinja2.utils.missing:
            return super()._undefined_message
        if isinstance(obj, TemplateEnv):
            return f"environment variable {name!r} is not set"
        # Jinja names the module of other types ('jinja2.runtime.Macro object'); the type is enough.
        what = "attribute" if isinstance(name, str) else "element"
        return f"{type(obj).__name__!r} object has no {what} {name!r}"


def _finalize(value: Any) -> Any:
    """Refuse to print functions, methods and classes: their text names Python internals."""
    if callable(value) and not isinstance(value, jinja2.Undefined):
        msg = f"cannot render a function or class ({type(value).__name__!r}); call it or pick a value"
        raise SecurityError(msg)
    return value


MAX_REPEAT = 1_000_000
"""The most items (characters of a string, elements of a list) ``*``, padding, indenting and
``replace`` may make in a template."""

MAX_POWER_DIGITS = 4300
"""The most decimal digits ``**`` of two integers may make in a template (what Python prints of an int)."""

_JINJA_FILTERS = jinja2.filters.FILTERS


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with what can make a huge string from a small number checked before it runs.

    ``'=' * width``, ``10 ** n``, ``name.ljust(width)`` or ``text | indent(width)`` with a number
    the model chose could take all the memory or minutes of one synchronous operation, which no
    timeout interrupts. Jinja also computes operations of constants when it compiles a template
    (``{{ 3 ** 3000000 }}``); intercepted operators are left to run time, where these limits apply.
    """

    intercepted_binops = frozenset({"*", "**", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters["center"] = _checked_center
        self.filters["indent"] = _checked_indent
        self.filters["format"] = _checked_format

    def call(self, context: jinja2.runtime.Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        if isinstance(getattr(obj, "__self__", None), str):
            _check_str_method(obj.__self__, obj.__name__, args, kwargs)
        return super().call(context, obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        text, is_map = value.__self__, value.__name__ == "format_map"
        dry_run = _SpecCheck(self)

        def checked(*args: Any, **kwargs: Any) -> str:
            # A dry run resolves every field's spec (nested `{:{width}}` ones too) and checks it first.
            if not is_map:
                dry_run.vformat(text, args, kwargs)
            elif len(args) == 1 and not kwargs:
                dry_run.vformat(text, (), args[0])
            return wrapper(*args, **kwargs)

        return checked

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            _check_repeat(left, right)
            _check_repeat(right, left)
        elif operator == "%":
            if isinstance(left, str):
                _check_printf(left, right)
        elif _too_many_digits(left, right):
            msg = f"'**' would make a number of more than {MAX_POWER_DIGITS} digits"
            raise jinja2.TemplateRuntimeError(msg)
        return super().call_binop(context, operator, left, right)


def _check_repeat(sequence: object, times: object) -> None:
    if isinstance(sequence, str | list | tuple) and isinstance(times, int) and len(sequence) * times > MAX_REPEAT:
        msg = f"'*' would make {len(sequence) * times:,} items, more than {MAX_REPEAT:,}"
        raise jinja2.TemplateRuntimeError(msg)


def _check_size(what: str, size: int) -> None:
    if size > MAX_REPEAT:
        msg = f"{what} would make {size:,} characters, more than {MAX_REPEAT:,}"
        raise jinja2.TemplateRuntimeError(msg)


def _check_str_method(text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse a str method call whose result would pass :data:`MAX_REPEAT` characters."""
    if name in ("ljust", "rjust", "center", "zfill"):
        width = args[0] if args else kwargs.get("width")
        if isinstance(width, int):
            _check_size(f"{name!r}", width)
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize")
        if isinstance(tabsize, int):
            _check_size("'expandtabs'", len(text) + text.count("\t") * tabsize)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        old, new = args[0], args[1]
        times = text.count(old) if old else len(text) + 1
        _check_size("'replace'", len(text) + times * (len(new) - len(old)))


def _checked_center(value: Any, width: int = 80) -> str:
    """The ``center`` filter, refusing a width beyond :data:`MAX_REPEAT`."""
    if isinstance(width, int):
        _check_size("'center'", width)
    return _JINJA_FILTERS["center"](value, width)  # type: ignore[no-any-return]


def _checked_indent(s: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    """The ``indent`` filter, refusing an indentation that would pass :data:`MAX_REPEAT` characters."""
    text = str(s)
    per_line = width if isinstance(width, int) else len(str(width))
    _check_size("'indent'", len(text) + (text.count("\n") + 1) * per_line)
    return _JINJA_FILTERS["indent"](s, width, first, blank)  # type: ignore[no-any-return]


class _SpecCheck(SandboxedFormatter):
    """A dry run of ``str.format`` in the sandbox: each field's spec, once resolved, is checked.

    A field is written without its spec: enough for a nested field (``{:>{width}}``), whose spec
    is empty, and nothing of the size a spec could ask for.
    """

    def format_field(self, value: Any, format_spec: str) -> str:
        match = _FORMAT_SPEC.fullmatch(format_spec)
        if match is not None:
            for number in match.groups():
                if number:
                    _check_size("a format width", int(number))
        return format(value, "")


_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[a-zA-Z%]?")
"""The standard format spec: its width and precision are captured."""

_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.?)", re.DOTALL)
"""A ``%`` conversion: its width and precision (a number, or ``*`` taken from the values) are captured."""


def _check_printf(text: str, values: object) -> None:
    """Refuse ``text % values`` when a conversion's width or precision passes :data:`MAX_REPEAT`."""
    positional = values if isinstance(values, tuple) else (values,)
    index = 0
    for match in _PRINTF.finditer(text):
        if match[3] == "%":
            continue  # `%%` is a literal percent sign
        for part in (match[1], match[2]):
            if part == "*":
                star = positional[index] if index < len(positional) else None
                index += 1
                if isinstance(star, int):
                    _check_size("a '%' width", star)
            elif part:
                _check_size("a '%' width", int(part))
        index += 1


def _checked_format(value: Any, *args: Any, **kwargs: Any) -> str:
    """The ``format`` filter (``value % args``), refusing a width beyond :data:`MAX_REPEAT`."""
    if not (args and kwargs):
        _check_printf(str(value), kwargs or args)
    return _JINJA_FILTERS["format"](value, *args, **kwargs)  # type: ignore[no-any-return]


def _too_many_digits(base: object, exponent: object) -> bool:
    if not isinstance(base, int) or not isinstance(exponent, int) or exponent <= 0 or base in (-1, 0, 1):
        return False
    return exponent * math.log10(abs(base)) >= MAX_POWER_DIGITS  # the digits of |base| ** exponent, less one


@functools.cache
def environment() -> ImmutableSandboxedEnvironment:
    """Return the shared sandboxed environment (autoescape off: results are not HTML)."""
    return _Sandbox(
        undefined=_Undefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
    )


@attrs.frozen(kw_only=True)
class TemplateProblem:
    """A template that does not compile: the message and the 1-based line inside the template."""

    message: str
    line: int


def parse_template(source: str) -> jinja2.nodes.Template | TemplateProblem:
    """Parse *source*; return its syntax tree or the problem that stops it compiling."""
    try:
        return environment().parse(source)
    except jinja2.TemplateSyntaxError as exc:
        return TemplateProblem(message=exc.message or "template syntax error", line=exc.lineno or 1)
    except RecursionError:
        # Jinja's parser recurses once per nesting level.
        return TemplateProblem(message=NESTING_MESSAGE, line=1)
    except ValueError as exc:
        return _literal_problem(exc)


def _literal_problem(exc: ValueError) -> TemplateProblem:
    """The lexer reads number literals with ``int()``, which refuses more than 4,300 digits."""
    reason = str(exc).split(";", 1)[0]  # without Python's advice on raising the limit
    return TemplateProblem(message=f"a number the template writes cannot be read ({reason})", line=1)


def template_variables(tree: jinja2.nodes.Template) -> AbstractSet[str]:
    """Return the free variables of a parsed template (those it reads but never sets)."""
    return jinja2.meta.find_undeclared_variables(tree)


def compile_template(source: str) -> jinja2.Template | TemplateProblem:
    """Compile *source* for rendering; return the template or the problem that stops it compiling.

    Compiling goes further than :func:`parse_template`: unknown filters and
    tests, and nesting beyond what Python compiles, are found here.
    """
    try:
        return environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        return TemplateProblem(message=exc.message or "template syntax error", line=exc.lineno or 1)
    except jinja2.TemplateError as exc:
        return TemplateProblem(message=exc.message or "template error", line=1)
    except RecursionError:
        return TemplateProblem(message=NESTING_MESSAGE, line=1)
    except SyntaxError as exc:
        # Python refuses the generated code: too many nested parentheses or blocks.
        return TemplateProblem(message=f"{NESTING_MESSAGE} ({exc.msg})", line=1)
    except ValueError as exc:
        return _literal_problem(exc)


class TemplateEnv:
    """The ``env`` of a template: exactly the listed environment variables, read when created.

    ``env.NAME`` and ``env['NAME']`` give a listed variable's value; a listed
    variable that is not set is undefined (so ``env.NAME | default('x')``
    works, and a bare read is an error); reading a name that is not listed is
    an error whatever the template does with it, with the message
    ``environment variable 'NAME' <unlisted>``. The object has no public
    attributes, so no variable name is shadowed by a method.
    """

    __slots__ = ("_listed", "_unlisted", "_values")

    def __init__(
        self,
        listed: Iterable[str],
        environ: Mapping[str, str],
        *,
        unlisted: str = "is not listed in the template's env",
    ) -> None:
        self._listed = tuple(dict.fromkeys(listed))
        self._values = {name: environ[name] for name in self._listed if name in environ}
        self._unlisted = unlisted

    def __getitem__(self, name: object) -> str:
        if isinstance(name, str) and name in self._values:
            return self._values[name]
        if name in self._listed:
            raise KeyError(name)
        msg = f"environment variable {name!r} {self._unlisted}"
        raise jinja2.TemplateRuntimeError(msg)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __str__(self) -> str:
        return f"env({', '.join(self._listed)})"

    __repr__ = __str__


CHECK_EVERY = 256
"""How many pieces of output :func:`render_template` writes between two calls of its ``checkpoint``."""


def render_template(
    template: jinja2.Template, variables: Mapping[str, Any], *, checkpoint: Callable[[], None] | None = None
) -> str:
    """Render *template* with *variables*; raises nothing but :class:`TemplateError` and what *checkpoint* raises.

    Args:
        template: A template made by :func:`compile_template`.
        variables: What the template sees.
        checkpoint: Called before the first piece of output and after every :data:`CHECK_EVERY`
            pieces; raising ends the rendering. ``trio.Cancelled`` (any ``BaseException`` that
            is not an ``Exception``) propagates as it is; an ``Exception`` is a failed rendering.
            A tool rendering in a worker thread passes ``trio.from_thread.check_cancelled``, so
            that a long rendering stops soon after its call timed out or was killed.

    Raises:
        TemplateError: The rendering failed; the message says why without
            naming Python internals (an undefined variable, a refused attribute,
            an error raised by an operation of the template).
    """
    try:
        if checkpoint is None:
            return template.render(variables)
        return _render_checked(template, variables, checkpoint)
    except SecurityError as exc:
        msg = f"template refused unsafe access: {str(exc).rstrip('.')}"
        raise TemplateError(msg) from None
    except jinja2.UndefinedError as exc:
        msg = f"template variable error: {exc.message or exc}"
        raise TemplateError(msg) from None
    except jinja2.TemplateError as exc:
        msg = f"template error: {exc.message or exc}"
        raise TemplateError(msg) from None
    except RecursionError:
        msg = "template error: recursion too deep"
        raise TemplateError(msg) from None
    except Exception as exc:  # noqa: BLE001 - any error of an operation inside the template is the template's failure
        msg = f"template error: {type(exc).__name__}: {exc}"
        raise TemplateError(msg) from None


def _render_checked(template: jinja2.Template, variables: Mapping[str, Any], checkpoint: Callable[[], None]) -> str:
    """``template.render(variables)``, piece by piece, calling *checkpoint* every :data:`CHECK_EVERY` pieces."""
    pieces: list[str] = []
    for count, piece in enumerate(template.generate(variables)):
        if count % CHECK_EVERY == 0:
            checkpoint()
        pieces.append(piece)
    return "".join(pieces)


def has_loops(source: str) -> bool:
    """Whether *source* has a ``for`` loop or a macro (which may recurse).

    How long such a template renders depends on its arguments. A template that does not parse
    has none (it never renders).
    """
    tree = parse_template(source)
    if isinstance(tree, TemplateProblem):
        return False
    return any(True for _ in tree.find_all((jinja2.nodes.For, jinja2.nodes.Macro, jinja2.nodes.CallBlock)))


def template_environment() -> ImmutableSandboxedEnvironment:
    """The sandboxed Jinja2 environment toolflow renders every template in (for plugin kinds)."""
    return environment()
