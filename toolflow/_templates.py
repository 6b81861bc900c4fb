"""Sandboxed Jinja2 for every template toolflow renders, and the work a template worker does.

Templates run in a :class:`jinja2.sandbox.ImmutableSandboxedEnvironment` with strict undefined
variables: only the call's arguments (and the environment variables a spec lists, as
``env.NAME``) are visible, and attribute access that reaches for Python internals raises a
security error instead of leaking them.

No function, method, class, module, generator or other object whose text would name Python
internals (``<function generate_lorem_ipsum at 0x...>``) ever becomes text, at any depth: every
such value that reaches a template — a global (``lipsum``, ``range``), a variable, an attribute or
item look-up (``x.upper``), a call's or a filter's result (``x | map('upper')``), a macro, a
loop — is sealed (:class:`Sealed`, or a sealed subclass of Jinja's ``Macro`` and
``LoopContext``), and a sealed value refuses ``str()``, ``repr()`` and ``format()``, so printing
it, joining it, ``~``, ``%``, ``str.format``, ``pprint`` or a list's text fails the rendering. A
sealed value still works: the sandbox unseals it to call it or to look its attributes up, and
iterating it iterates the value.

Nothing of a template runs when it is compiled: Jinja's constant folding is off (no optimizer,
every binary operator intercepted, every filter and the finalizer take the context), so
compiling, as ``toolflow lint`` does, costs time in proportion to the template's text.

Rendering happens only in a template worker process (``toolflow._rendering``): a template of
this environment refuses to render anywhere else. :func:`run_job` is what a worker runs: it
limits the growth of the worker's data memory to the per-render budget (:func:`template_budget`)
for the length of the job, and turns running out of it into a :class:`TemplateError`.

The linter parses templates (:func:`parse_template`); the built-in kinds compile them once per
tool (:func:`compile_template`) and render them per call (``toolflow.render_template``, which
runs :func:`render` in a worker and turns every failure into one :class:`TemplateError` with a
message fit for a model).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import attrs
import jinja2
import jinja2.meta
import jinja2.nodes
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.runtime import LoopContext, Macro, TemplateReference
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolflow._errors import ToolflowError, error_text

__all__ = [
    "BUDGET_VARIABLE",
    "DEFAULT_TEMPLATE_BUDGET",
    "TEMPLATE_GLOBALS",
    "CompiledTemplate",
    "Sealed",
    "TemplateEnv",
    "TemplateError",
    "TemplateProblem",
    "compile_template",
    "environment",
    "evaluate_expression",
    "parse_template",
    "render",
    "run_job",
    "single_expression",
    "template_budget",
    "template_environment",
    "template_variables",
]

T = TypeVar("T")

TEMPLATE_GLOBALS = frozenset({"env", "range", "dict", "lipsum", "cycler", "joiner", "namespace"})
"""Names a template may use without declaring them as parameters."""

NESTING_MESSAGE = "the template nests too deeply"

DEFAULT_TEMPLATE_BUDGET = 64 * 2**20
"""Bytes of memory one rendering may add to its worker process, unless :data:`BUDGET_VARIABLE` says otherwise."""

BUDGET_VARIABLE = "TOOLFLOW_TEMPLATE_BUDGET"
"""The environment variable that sets the per-render budget: bytes, or a number with ``KiB``, ``MiB`` or ``GiB``."""


class TemplateError(ToolflowError):
    """A template cannot be compiled for a tool, or a rendering failed.

    Raised by ``toolflow.render_template`` (the message is fit for a model) and by
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
        if isinstance(obj, Sealed):
            obj = obj.value
        if isinstance(obj, TemplateEnv):
            return f"environment variable {name!r} is not set"
        # Jinja names the module of other types ('jinja2.runtime.Macro object'); the type is enough.
        what = "attribute" if isinstance(name, str) else "element"
        return f"{type(obj).__name__!r} object has no {what} {name!r}"


# --- sealing ------------------------------------------------------------------------------------


FUNCTION_REFUSAL = "cannot render a function, class or module; call it or pick a value"
OBJECT_REFUSAL = "cannot render an iterator or an object; make it a list (| list) or pick a value"
NOT_ITERABLE = "a function, class, module or object is not iterable"


def _refusal(value: object) -> SecurityError:
    """The error of turning *value* into text: names nothing of it, not even its type."""
    if isinstance(value, type | types.ModuleType) or callable(value):
        return SecurityError(FUNCTION_REFUSAL)
    return SecurityError(OBJECT_REFUSAL)


class Sealed:
    """A value a template may use but never turn into text: a callable, a class, a module, an iterator.

    ``str()``, ``repr()`` and ``format()`` raise :class:`jinja2.exceptions.SecurityError`;
    calling, iterating, ``len()``, ``in`` and truth pass through to the value, and the sandbox
    unseals it before calling it or looking its attributes and items up.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value: Any = value

    def __str__(self) -> str:
        raise _refusal(self.value)

    def __repr__(self) -> str:
        raise _refusal(self.value)

    def __format__(self, format_spec: str) -> str:
        raise _refusal(self.value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.value(*args, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        try:
            return iter(self.value)
        except TypeError:
            raise TypeError(NOT_ITERABLE) from None

    def __len__(self) -> int:
        return len(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __contains__(self, item: object) -> bool:
        return item in self.value

    def __eq__(self, other: object) -> bool:
        return bool(self.value == (other.value if isinstance(other, Sealed) else other))

    def __hash__(self) -> int:
        return hash(self.value)


class _NeverText:
    """Jinja's own runtime objects, sealed: ``str()``, ``repr()`` and ``format()`` refuse."""

    def __repr__(self) -> str:
        raise _refusal(self)

    __str__ = __repr__

    def __format__(self, format_spec: str) -> str:
        raise _refusal(self)


class _SealedMacro(_NeverText, Macro):
    """A macro (or ``caller``): callable, never text."""

    def __iter__(self) -> Iterator[Any]:
        raise TypeError(NOT_ITERABLE)


class _SealedReference(_NeverText, TemplateReference):
    """``self``: its blocks can be called, it is never text."""


class _SealedLoop(_NeverText, LoopContext):
    """``loop``: its attributes work, it is never text (it is callable, for recursive loops)."""


_PLAIN = frozenset({str, int, float, bool, type(None), list, tuple, dict, set, frozenset, range})
_OBJECT_REPR: Any = object.__repr__
_INTERNAL = (type, types.ModuleType, types.GeneratorType, types.CodeType, types.FrameType, types.TracebackType)


def _seal(value: Any) -> Any:
    """*value*, sealed when its text could name Python internals (see :class:`Sealed`)."""
    kind = type(value)
    if kind in _PLAIN or isinstance(value, Sealed | jinja2.Undefined | str):
        return value
    if callable(value) or isinstance(value, _INTERNAL) or kind.__repr__ is _OBJECT_REPR:
        # object.__repr__ is the `<... object at 0x...>` of iterators, cyclers, joiners, ...
        return Sealed(value)
    return value


def _unseal(value: Any) -> Any:
    return value.value if isinstance(value, Sealed) else value


def _sealing(function: Callable[..., Any]) -> Callable[..., Any]:
    """*function* (a filter) as a context filter whose result is sealed.

    Taking the context also keeps Jinja from running the filter when it compiles a template.
    """
    takes = getattr(getattr(function, "jinja_pass_arg", None), "name", None)

    @jinja2.pass_context
    @functools.wraps(function, assigned=("__name__", "__qualname__", "__doc__"), updated=())
    def sealed(context: jinja2.runtime.Context, *args: Any, **kwargs: Any) -> Any:
        if takes == "context":
            return _seal(function(context, *args, **kwargs))
        if takes == "eval_context":
            return _seal(function(context.eval_ctx, *args, **kwargs))
        if takes == "environment":
            return _seal(function(context.environment, *args, **kwargs))
        return _seal(function(*args, **kwargs))

    return sealed


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: Any) -> Any:
    """Refuse to print a callable the sealing let through (an argument given by Python code)."""
    if callable(value) and not isinstance(value, jinja2.Undefined):
        raise _refusal(_unseal(value))
    return value


def _not_json(value: object) -> object:
    """``tojson``'s fallback: a sealed value is refused like any other text conversion."""
    if isinstance(value, Sealed | _NeverText):
        raise _refusal(_unseal(value))
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


# --- the environment ----------------------------------------------------------------------------

_IN_WORKER = False
"""Set in a template worker process by :func:`run_job`: only there may a template render."""


class _Template(jinja2.Template):
    """A template of the sandbox: its macros and loops are sealed, and it renders only in a template worker."""

    @classmethod
    def _from_namespace(cls, environment: jinja2.Environment, namespace: Any, template_globals: Any) -> jinja2.Template:
        # The compiled code looks these names up in its module's namespace when it runs.
        namespace["Macro"] = _SealedMacro
        namespace["LoopContext"] = _SealedLoop
        namespace["TemplateReference"] = _SealedReference
        return super()._from_namespace(environment, namespace, template_globals)

    def new_context(
        self,
        vars: dict[str, Any] | None = None,  # noqa: A002 - Jinja's name
        shared: bool = False,
        locals: Mapping[str, Any] | None = None,  # noqa: A002 - Jinja's name
    ) -> jinja2.runtime.Context:
        if not _IN_WORKER:
            msg = "templates render only in a template worker: use toolflow.render_template or run_in_template_worker"
            raise TemplateError(msg)
        return super().new_context(vars, shared, locals)


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox, sealing every value that could print Python internals (see the module docs)."""

    template_class = _Template
    # Intercepted operators are never computed when a template is compiled (Jinja folds the others).
    intercepted_binops = frozenset(ImmutableSandboxedEnvironment.default_binop_table)

    def __init__(self, **options: Any) -> None:
        super().__init__(optimized=False, **options)
        self.filters = {name: _sealing(function) for name, function in self.filters.items()}
        self.globals = {name: _seal(value) for name, value in self.globals.items()}
        self.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": _not_json}

    def getattr(self, obj: Any, attribute: str) -> Any:
        obj = _unseal(obj)
        if type(obj) is dict and attribute in obj:
            # Data first: `order.items` is the order's items, not the dict method (Jinja's order).
            return _seal(obj[attribute])
        return _seal(super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        return _seal(super().getitem(_unseal(obj), argument))

    def call(self, context: jinja2.runtime.Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        return _seal(super().call(context, _unseal(obj), *args, **kwargs))


@functools.cache
def environment() -> ImmutableSandboxedEnvironment:
    """Return the shared sandboxed environment (autoescape off: results are not HTML)."""
    return _Sandbox(undefined=_Undefined, autoescape=False, keep_trailing_newline=True, finalize=_finalize)


def template_environment() -> ImmutableSandboxedEnvironment:
    """The sandboxed Jinja2 environment toolflow renders every template in (for plugin kinds).

    Its templates render only inside ``toolflow.run_in_template_worker``, where the per-render
    budget holds; compiling and parsing work anywhere.
    """
    return environment()


# --- compiling ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TemplateProblem:
    """A template that does not compile: the message and the 1-based line inside the template."""

    message: str
    line: int


@attrs.frozen(kw_only=True)
class CompiledTemplate:
    """A template compiled in the sandbox, ready for ``toolflow.render_template``.

    It travels to template workers as its source, and each worker compiles a source once.

    Attributes:
        source: The template text.
        constant: The rendering, when the template is plain text (no Jinja syntax); ``None`` otherwise.
    """

    source: str
    constant: str | None = attrs.field(default=None, eq=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_sent, (self.source, self.constant))


def _sent(source: str, constant: str | None) -> CompiledTemplate:
    """A template received by a worker (compiled there on first use)."""
    return CompiledTemplate(source=source, constant=constant)


@functools.lru_cache(maxsize=512)
def _jinja(source: str) -> jinja2.Template:
    """*source* compiled in the sandbox, once per process (errors are not cached)."""
    return environment().from_string(source)


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


def compile_template(source: str) -> CompiledTemplate | TemplateProblem:
    """Compile *source* for rendering; return the template or the problem that stops it compiling.

    Compiling goes further than :func:`parse_template`: unknown filters and
    tests, and nesting beyond what Python compiles, are found here. Nothing of the
    template runs.
    """
    try:
        _jinja(source)
        tree = environment().parse(source)
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
    return CompiledTemplate(source=source, constant=_constant(tree))


def _constant(tree: jinja2.nodes.Template) -> str | None:
    """The text of a template without Jinja syntax, else ``None``."""
    text = []
    for node in tree.body:
        if not isinstance(node, jinja2.nodes.Output):
            return None
        for child in node.nodes:
            if not isinstance(child, jinja2.nodes.TemplateData):
                return None
            text.append(child.data)
    return "".join(text)


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


# --- rendering (in a template worker) -----------------------------------------------------------


def render(template: CompiledTemplate, variables: Mapping[str, Any]) -> str:
    """Render *template* with *variables* in this worker; raises nothing but :class:`TemplateError`.

    Raises:
        TemplateError: The rendering failed; the message says why without
            naming Python internals (an undefined variable, a refused attribute,
            an error raised by an operation of the template).
    """
    with _failures():
        return _jinja(template.source).render({name: _seal(value) for name, value in variables.items()})


def single_expression(tree: jinja2.nodes.Template) -> jinja2.nodes.Expr | None:
    """The expression of a template that is exactly one ``{{ expression }}``, else ``None``."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], jinja2.nodes.Output):
        return None
    output = tree.body[0].nodes
    if len(output) != 1 or isinstance(output[0], jinja2.nodes.TemplateData):
        return None
    return output[0]


def evaluate_expression(source: str, variables: Mapping[str, Any]) -> Any:
    """The value of the template *source*, exactly one ``{{ expression }}``, in this worker.

    The value keeps its type, and must be JSON data: strings, numbers, booleans, ``None``,
    lists (tuples become lists) and mappings (their keys become strings).

    Raises:
        TemplateError: As :func:`render`; also when *source* is not one expression, or the
            value is not JSON data (a function, an iterator, ``range(3)``, an undefined value).
    """
    with _failures():
        value = _expression(source)(**{name: _seal(value) for name, value in variables.items()})
        return _plain(value, 0)


@functools.lru_cache(maxsize=512)
def _expression(source: str) -> TemplateExpression:
    """The expression of *source* compiled in the sandbox, once per process."""
    expression = single_expression(environment().parse(source))
    if expression is None:
        msg = "template error: not exactly one {{ expression }}"
        raise TemplateError(msg)
    body = [jinja2.nodes.Assign(jinja2.nodes.Name("result", "store"), expression, lineno=1)]
    template = environment().from_string(jinja2.nodes.Template(body, lineno=1))
    return TemplateExpression(template, undefined_to_none=False)


def _plain(value: Any, depth: int) -> Any:
    """*value* as JSON data; TemplateError when it is not."""
    value = _unseal(value)
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()  # noqa: SLF001 - the strict undefined's own message
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if depth >= MAX_VALUE_DEPTH:
        msg = f"template error: the value nests deeper than {MAX_VALUE_DEPTH} levels"
        raise TemplateError(msg)
    if isinstance(value, list | tuple):
        return [_plain(item, depth + 1) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item, depth + 1) for key, item in value.items()}
    what = "a function" if callable(value) else "an iterator or an object"
    msg = f"template error: the expression gives {what}, not JSON data (text, a number, a list or a mapping)"
    raise TemplateError(msg)


MAX_VALUE_DEPTH = 64
"""The deepest nesting of lists and mappings an expression may give (as the loader allows in a spec)."""


@contextlib.contextmanager
def _failures() -> Iterator[None]:
    """Turn every failure of a template into a :class:`TemplateError` with a message fit for a model."""
    try:
        yield
    except TemplateError:
        raise
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
        msg = f"template error: {error_text(exc)}"
        raise TemplateError(msg) from None


def render_each(templates: Sequence[CompiledTemplate], variables: Mapping[str, Any]) -> list[str]:
    """Render each of *templates* with *variables*, in order (one job for a worker).

    Raises:
        TemplateError: One failed; its ``line`` is set to its index in *templates*.
    """
    texts = []
    for index, template in enumerate(templates):
        try:
            texts.append(render(template, variables))
        except TemplateError as exc:
            raise TemplateError(str(exc), line=index) from None
    return texts


_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def template_budget(environ: Mapping[str, str] | None = None) -> int:
    """The per-render budget in bytes: :data:`BUDGET_VARIABLE` of *environ* (default ``os.environ``), or the default.

    Raises:
        TemplateError: The variable is set to something that is not a size of at least 1 MiB.
    """
    text = (os.environ if environ is None else environ).get(BUDGET_VARIABLE)
    if text is None:
        return DEFAULT_TEMPLATE_BUDGET
    return _parse_budget(text)


@functools.lru_cache(maxsize=8)
def _parse_budget(text: str) -> int:
    number = text.strip().rstrip("BbIiKkMmGg ")
    unit = text.strip()[len(number) :].strip().lower()
    if number.isdigit() and unit in _UNITS and int(number) * _UNITS[unit] >= 2**20:
        return int(number) * _UNITS[unit]
    msg = f"{BUDGET_VARIABLE}={text!r} is not a size of at least 1 MiB (bytes, or a number with KiB, MiB or GiB)"
    raise TemplateError(msg)


def budget_text(budget: int) -> str:
    """*budget* for people: ``64 MiB``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if budget % size == 0:
            return f"{budget // size} {unit}"
    return f"{budget:,} bytes"


def run_job(budget: int, function: Callable[..., T], args: tuple[Any, ...]) -> T:
    """``function(*args)`` in this template worker, its memory growth limited to *budget* bytes.

    On Linux the worker's ``RLIMIT_DATA`` (heap and private anonymous mappings) is set to its
    current data size plus *budget* for the length of the job, so an allocation past the budget
    raises :class:`MemoryError` (elsewhere there is no limit). An exception caused by running out
    becomes a :class:`TemplateError` saying so; other exceptions are raised as they are. What the
    job leaves behind is given back before the next job measures the data size (see
    :func:`_give_back`), so that no job starts with the last one's memory as headroom.
    """
    global _IN_WORKER  # noqa: PLW0603 - a process is a template worker once it runs a job
    _IN_WORKER = True
    limits = _limit_data(budget)
    error: BaseException | None = None
    try:
        return function(*args)
    except BaseException as exc:  # noqa: BLE001 - sent back to the caller, below
        error = exc
        if _out_of_memory(exc):
            msg = f"the template needed more than {budget_text(budget)} of memory (the per-render budget)"
            error = TemplateError(msg)
    finally:
        if limits is not None:
            import resource  # noqa: PLC0415 - POSIX only

            resource.setrlimit(resource.RLIMIT_DATA, limits[:2])
            _give_back(limits[2], failed=error is not None)
    # The error is pickled to the caller: without its chain and the worker's frames (a recursion
    # error's thousand frames do not pickle), outside the except block that would chain it again.
    error.__cause__ = error.__context__ = None
    raise error.with_traceback(None)


def _data_size() -> int:
    """This process's data size in bytes: what ``RLIMIT_DATA`` counts (the heap, private mappings), and the stack.

    Read from ``/proc/self/statm``, which the kernel writes in half the time of ``status``: it is
    read twice a rendering.
    """
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")


def _limit_data(budget: int) -> tuple[int, int, int] | None:
    """Set ``RLIMIT_DATA`` to the data size plus *budget*; the limits to restore, and the size (``None``: not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import resource  # noqa: PLC0415 - POSIX only

    size = _data_size()
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = size + budget if hard == resource.RLIM_INFINITY else min(size + budget, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return soft, hard, size


_GIVE_BACK_ABOVE = 1 << 20
"""Growth of the data size, in bytes, past which a job's memory is given back to the system."""


def _give_back(before: int, *, failed: bool) -> None:
    """Free what a job left in this worker, before the next job measures the data size.

    A job that failed can leave its objects in reference cycles (a traceback's frames hold its
    locals) until the collector runs, and the C library keeps freed heap for reuse: counted in
    the next job's starting size, either would be headroom on top of its budget, and a worker
    could grow by a budget a job. So a failed job's garbage is collected, and grown heap is
    trimmed (glibc's ``malloc_trim``; elsewhere the collection alone).
    """
    if failed:
        gc.collect()
    if _data_size() - before > _GIVE_BACK_ABOVE and (trim := _malloc_trim()) is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` (glibc's; ``None`` with another C library)."""
    import ctypes  # noqa: PLC0415 - only template workers need it

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def _out_of_memory(exc: BaseException) -> bool:
    """Whether *exc* is a :class:`MemoryError` or was raised while handling one."""
    seen: BaseException | None = exc
    for _ in range(16):
        if seen is None:
            return False
        if isinstance(seen, MemoryError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
