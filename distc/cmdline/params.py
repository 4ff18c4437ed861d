"""The errors of :mod:`distc.cmdline` (a usage error is exit status 2) and ``echo``; options,
arguments and their types, and the parsing of a command line into their values."""

from __future__ import annotations

import sys

UNSET = type("Unset", (), {"__repr__": lambda self: "UNSET"})()  # no value given, no default


class ParameterSource:
    """Where a parameter's value came from (:meth:`Context.get_parameter_source`)."""
    COMMANDLINE = 1
    DEFAULT = 3


# ------------------------------------------------------------------------------------------ errors
class CommandLineError(Exception):
    """An error shown to the user as ``Error: message`` (exit status ``exit_code``)."""
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def format_message(self) -> str:
        return self.message

    def __str__(self) -> str:
        return self.message

    def show(self, file=None) -> None:
        echo(f"Error: {self.format_message()}", file=sys.stderr if file is None else file)


class UsageError(CommandLineError):
    """A command line that does not parse, or options that exclude each other (exit 2)."""
    exit_code = 2

    def __init__(self, message: str, ctx: Context | None = None) -> None:
        super().__init__(message)
        self.ctx = ctx

    def show(self, file=None) -> None:
        """``Usage: ...``, ``Try '... --help' for help.``, a blank line, ``Error: ...``."""
        file = sys.stderr if file is None else file
        ctx = self.ctx
        if ctx is not None:
            hint = ""
            if ctx.command.get_help_option(ctx) is not None:
                names = ctx.command.get_help_option_names(ctx)
                hint = f"Try '{ctx.command_path} {max(names, key=len)}' for help.\n"
            echo(f"{ctx.get_usage()}\n{hint}", file=file)
        echo(f"Error: {self.format_message()}", file=file)


class BadParameter(UsageError):
    """A bad value: ``Invalid value for '--opt': message`` (``param_hint``, or the parameter's names)."""

    def __init__(self, message: str, ctx: Context | None = None, param: Parameter | None = None,
                 param_hint: str | list[str] | None = None) -> None:
        super().__init__(message, ctx)
        self.param, self.param_hint = param, param_hint

    def format_message(self) -> str:
        hint = self.param_hint if self.param_hint is not None else (
            self.param.error_hint(self.ctx) if self.param is not None else None)
        if hint is None:
            return f"Invalid value: {self.message}"
        return f"Invalid value for {_join_hints(hint)}: {self.message}"


class MissingParameter(BadParameter):
    """A required argument or option not given: ``Missing argument 'MAIN'.``"""

    def format_message(self) -> str:
        hint = self.param.error_hint(self.ctx)
        return f"Missing {self.param.param_type_name} {hint}."


class NoSuchOption(UsageError):
    def __init__(self, name: str, possibilities=None, ctx: Context | None = None) -> None:
        super().__init__(f"No such option {name!r}.", ctx)
        self.option_name, self.possibilities = name, list(possibilities or ())

    def format_message(self) -> str:
        return _with_suggestions(self.message, self.option_name, self.possibilities)


class NoSuchCommand(UsageError):
    def __init__(self, name: str, possibilities=None, ctx: Context | None = None) -> None:
        super().__init__(f"No such command {name!r}.", ctx)
        self.command_name, self.possibilities = name, list(possibilities or ())

    def format_message(self) -> str:
        return _with_suggestions(self.message, self.command_name, self.possibilities)


class NoArgsIsHelp(UsageError):
    """A group run without arguments: its help on stderr, exit 2."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx.get_help(), ctx)

    def show(self, file=None) -> None:
        echo(self.format_message(), file=sys.stderr if file is None else file)


class Exit(RuntimeError):
    """End the command with ``exit_code`` (``--help``, ``--version``)."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.exit_code = code


class Abort(RuntimeError):
    """Stop the command: ``Aborted!``, exit 1."""


def _join_hints(hint) -> str:
    return hint if isinstance(hint, str) else " / ".join(repr(x) for x in hint)


def _with_suggestions(message: str, name: str, possibilities: list[str]) -> str:
    if not possibilities:
        return message
    from difflib import get_close_matches

    close = sorted(get_close_matches(name, possibilities))
    if not close:
        return message
    shown = ", ".join(repr(p) for p in close)
    return f"{message} " + (f"Did you mean {shown}?" if len(close) == 1 else f"(Did you mean one of: {shown}?)")


def echo(message=None, file=None, nl: bool = True, err: bool = False) -> None:
    """``message`` and a newline on stdout (``err``: stderr; ``file``), flushed."""
    if file is None:
        file = sys.stderr if err else sys.stdout
        if file is None:  # (a closed standard stream)
            return
    text = "" if message is None else str(message)
    if nl:
        text += "\n"
    if text:
        file.write(text)
    file.flush()


# ------------------------------------------------------------------------------------------ types
class ParamType:
    name = "text"

    def convert(self, value, param, ctx):
        return value

    def metavar(self, param) -> str | None:
        return None

    def fail(self, message: str, param, ctx):
        raise BadParameter(message, ctx=ctx, param=param)


class _Number(ParamType):
    number = int

    def convert(self, value, param, ctx):
        try:
            rv = self.number(value)
        except ValueError:
            rv = None
        if rv is None or rv != rv:  # (not a number: click takes 'nan', which no tolerance or size means)
            self.fail(f"{value!r} is not a valid {self.name}.", param, ctx)
        return rv


class _Int(_Number):
    name = "integer"


class _Float(_Number):
    name = "float"
    number = float


class _Bool(ParamType):
    name = "boolean"


class _Range(_Number):
    """A number within bounds (``min_open``/``max_open``: the bound itself excluded)."""

    def __init__(self, min=None, max=None, min_open: bool = False, max_open: bool = False) -> None:
        self.min, self.max, self.min_open, self.max_open = min, max, min_open, max_open

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        low = self.min is not None and (rv <= self.min if self.min_open else rv < self.min)
        high = self.max is not None and (rv >= self.max if self.max_open else rv > self.max)
        if low or high:
            self.fail(f"{rv} is not in the range {self.describe()}.", param, ctx)
        return rv

    def describe(self) -> str:
        if self.min is None:
            return f"x{'<' if self.max_open else '<='}{self.max}"
        if self.max is None:
            return f"x{'>' if self.min_open else '>='}{self.min}"
        return f"{self.min}{'<' if self.min_open else '<='}x{'<' if self.max_open else '<='}{self.max}"


class IntRange(_Range):
    name = "integer range"


class FloatRange(_Range):
    name = "float range"
    number = float


class Choice(ParamType):
    """One of ``choices`` (as given: case matters)."""
    name = "choice"

    def __init__(self, choices) -> None:
        self.choices = tuple(choices)

    def convert(self, value, param, ctx):
        for c in self.choices:
            if str(c) == str(value):
                return c
        shown = ", ".join(repr(str(c)) for c in self.choices)
        self.fail(f"{value!r} is not {'one of ' if len(self.choices) != 1 else ''}{shown}.", param, ctx)

    def metavar(self, param) -> str:
        shown = "|".join(str(c) for c in self.choices)
        return f"{{{shown}}}" if param.required and param.param_type_name == "argument" else f"[{shown}]"


STRING, INT, FLOAT, BOOL, UNPROCESSED = ParamType(), _Int(), _Float(), _Bool(), ParamType()
_TYPES = {int: INT, float: FLOAT, str: STRING, bool: BOOL}


def _type_of(given, default) -> ParamType:
    if isinstance(given, ParamType):
        return given
    if given is not None:
        return _TYPES[given]
    if default is UNSET or default is None:
        return STRING
    return _TYPES.get(type(default[0] if isinstance(default, (tuple, list)) and default else default), STRING)


# ------------------------------------------------------------------------------------- parameters
class Parameter:
    param_type_name = "parameter"
    is_flag = hidden = False
    opts: list[str]
    secondary_opts: list[str] = []

    def __init__(self, decls, type=None, required: bool = False, default=UNSET, callback=None, nargs: int = 1,
                 multiple: bool = False, metavar: str | None = None, expose_value: bool = True,
                 is_eager: bool = False, help: str | None = None) -> None:
        self.decls, self.type = tuple(decls), _type_of(type, default)
        self.required, self.default, self.callback, self.nargs = required, default, callback, nargs
        self.multiple, self.metavar, self.expose_value, self.is_eager, self.help = (
            multiple, metavar, expose_value, is_eager, help)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def get_default(self, ctx: Context):
        return self.default

    def handle(self, ctx: Context, opts: dict) -> None:
        """Take this parameter's value from the parsed ``opts`` (or its default) into ``ctx.params``:
        converted by its type, checked, passed through its callback."""
        value = opts.get(self.name, UNSET)
        source = ParameterSource.COMMANDLINE
        if value is UNSET:
            value, source = self.get_default(ctx), ParameterSource.DEFAULT
        ctx._sources[self.name] = source
        try:
            value = self.process(ctx, value)
        except BadParameter as e:
            e.ctx = e.ctx or ctx
            e.param = e.param or self
            raise
        except UsageError as e:
            e.ctx = e.ctx or ctx
            raise
        if self.expose_value:
            ctx.params[self.name] = value

    def process(self, ctx: Context, value):
        many = self.multiple or self.nargs == -1
        if value is UNSET:
            value = () if many else UNSET
        elif value is None:
            value = () if many else None
        else:
            conv = self.type.convert
            one = (lambda v: conv(v, self, ctx)) if self.nargs == 1 else (
                lambda v: tuple(conv(x, self, ctx) for x in v))
            value = tuple(one(v) for v in value) if self.multiple else one(value)
        if self.required and (value is UNSET or (many and value == ())):
            raise MissingParameter("", ctx=ctx, param=self)
        if self.callback is not None:
            value = self.callback(ctx, self, None if value is UNSET else value)
        return value

    def usage_pieces(self, ctx: Context) -> list[str]:
        return []

    def error_hint(self, ctx: Context | None) -> str:
        return " / ".join(f"'{x}'" for x in self.opts)


class Option(Parameter):
    """``-o/--output VALUE``, a flag (``--amp``; ``--x/--no-x``), ``multiple`` (repeatable)."""
    param_type_name = "option"

    def __init__(self, decls, show_default=None, is_flag: bool | None = None, hidden: bool = False,
                 type=None, default=UNSET, **attrs) -> None:
        self.name, self.opts, self.secondary_opts = _option_names(decls)
        self.is_flag = bool(is_flag) if is_flag is not None else bool(self.secondary_opts)
        super().__init__(decls, type=BOOL if self.is_flag and type is None else type, default=default, **attrs)
        self.show_default, self.hidden = show_default, hidden

    def get_default(self, ctx: Context):
        if self.default is UNSET and self.is_flag:
            return False
        return self.default

    def make_metavar(self) -> str:
        if self.metavar is not None:
            return self.metavar
        return (self.type.metavar(self) or self.type.name.upper()) + ("..." if self.nargs != 1 else "")


class Argument(Parameter):
    """A positional parameter (``nargs=-1``: all that are left; required unless it has a default)."""
    param_type_name = "argument"

    def __init__(self, decls, required: bool | None = None, **attrs) -> None:
        (decl,) = decls
        self.name, self.opts = decl.replace("-", "_").lower(), [decl]
        if required is None:
            required = attrs.get("default", UNSET) is UNSET and attrs.get("nargs", 1) > 0
        super().__init__(decls, required=required, **attrs)

    def make_metavar(self) -> str:
        if self.metavar is not None:
            return self.metavar
        var = self.type.metavar(self) or self.name.upper()
        if not self.required and not (var.startswith("[") and var.endswith("]")):
            var = f"[{var}]"
        return var + ("..." if self.nargs != 1 else "")

    def usage_pieces(self, ctx: Context) -> list[str]:
        return [self.make_metavar()]

    def error_hint(self, ctx: Context | None) -> str:
        return f"'{self.make_metavar()}'"


def _names_option(word: str, short: dict, long: dict) -> bool:
    """Whether ``word`` names one of the command's options (``--json``, ``-qo-``, ``--rank=1``: never
    a value but as ``--opt=VALUE``; ``-`` and ``-1`` are values)."""
    if word[:1] != "-" or len(word) < 2:
        return False
    if word[:2] == "--":
        return word.partition("=")[0] in long
    return word[:2] in short


def _split_opt(opt: str) -> tuple[str, str]:
    """``("--", "name")``, ``("-", "o")``; ``("", word)`` for a word that is not an option."""
    first = opt[:1]
    if first.isalnum():
        return "", opt
    if opt[1:2] == first:
        return opt[:2], opt[2:]
    return first, opt[1:]


def _option_names(decls) -> tuple[str, list[str], list[str]]:
    """(name, option strings, secondary option strings) of ``("-o", "--output")``, ``("--json",
    "as_json")``, ``("--coshard/--no-coshard",)``: the name given, or the longest-prefixed option's."""
    name, opts, secondary = None, [], []
    for d in decls:
        if d.isidentifier():
            name = d
        elif "/" in d:
            first, second = (s.strip() for s in d.split("/", 1))
            opts.append(first)
            secondary.append(second)
        else:
            opts.append(d)
    if name is None:
        best = sorted((_split_opt(o) for o in opts), key=lambda p: -len(p[0]))[0]
        name = best[1].replace("-", "_").lower()
    return name, opts, secondary


# ------------------------------------------------------------------------------------------ parsing
def parse_command_line(ctx: Context, params: list[Parameter], args: list[str]) -> tuple[dict, list[str], list]:
    """``(values by name, arguments left over, parameters in the order given)``: the options and
    arguments of ``args`` as strings (flags: their constant), not yet converted."""
    short, long = {}, {}
    for p in params:
        if isinstance(p, Option):
            for names, const in ((p.opts, True), (p.secondary_opts, False)):
                for o in names:
                    prefix, rest = _split_opt(o)
                    (short if len(prefix) == 1 and len(rest) == 1 else long)[o] = (p, const)
    rargs, largs, values, order = list(args), [], {}, []

    given: dict[str, tuple[str, object]] = {}  # a single-valued option's name -> (as given, value)

    def take(p: Option, const, name: str, explicit: str | None = None) -> None:
        if p.is_flag:
            if explicit is not None:
                raise UsageError(f"Option {name!r} does not take a value.")  # (no usage line: as click)
            value = const
        else:
            if explicit is None and rargs and _names_option(rargs[0], short, long):
                from .messages import option_as_value
                raise UsageError(option_as_value(p, name, rargs[0]), ctx)
            if explicit is not None:
                rargs.insert(0, explicit)
            if not rargs:
                raise UsageError(f"Option {name!r} requires an argument.")
            value = rargs.pop(0)
        if p.multiple:
            values.setdefault(p.name, []).append(value)
        else:
            if p.name in given and not (p.is_flag and given[p.name][1] == value):  # (-q -q: the same)
                from .messages import given_twice
                raise UsageError(given_twice(p, given[p.name], (name, value)), ctx)
            given[p.name] = (name, value)
            values[p.name] = value
        order.append(p)

    def shorts(arg: str) -> None:
        unknown = []
        for i, ch in enumerate(arg[1:], 2):
            name = arg[0] + ch
            if name not in short:
                if ctx.ignore_unknown_options:
                    unknown.append(ch)
                    continue
                raise NoSuchOption(name, ctx=ctx)
            p, const = short[name]
            if not p.is_flag and i < len(arg):  # -ofile (its value given with it, as --output=file: -o-x.ir is '-x.ir')
                take(p, const, name, arg[i:])
                break
            take(p, const, name)
        if unknown:
            largs.append(arg[0] + "".join(unknown))

    while rargs:
        arg = rargs.pop(0)
        if arg == "--":
            break
        if arg[:1] == "-" and len(arg) > 1:
            name, eq, value = arg.partition("=")
            if name in long:
                take(*long[name], name, value if eq else None)
            elif arg[:2] != "--":
                shorts(arg)
            elif ctx.ignore_unknown_options:
                largs.append(arg)
            else:
                raise NoSuchOption(name, possibilities=long, ctx=ctx)
        elif ctx.allow_interspersed_args:
            largs.append(arg)
        else:
            rargs.insert(0, arg)
            break
    rest = largs + rargs
    for p in params:  # positional arguments: one each, the one with nargs=-1 what the others leave
        if isinstance(p, Argument):
            order.append(p)
    arguments = [p for p in params if isinstance(p, Argument)]
    many = next((i for i, p in enumerate(arguments) if p.nargs == -1), None)
    head = arguments if many is None else arguments[:many]
    tail = [] if many is None else arguments[many + 1:]
    for p in head:
        values[p.name] = rest.pop(0) if rest else UNSET
    for p in reversed(tail):
        values[p.name] = rest.pop() if rest else UNSET
    if many is not None:
        values[arguments[many].name] = tuple(rest) or UNSET
        rest = []
    return values, rest, order


