"""distc's command-line layer: commands, a group of them, options and arguments.

What distc's commands use of click (which it replaces at run time: click and the standard library
it imports were ~60 ms of the ~110 ms a ``distc shard`` run spent importing), with click's
interface for that subset (``@command``, ``@option``, ``@argument``, ``IntRange``, ``UsageError``,
``echo``, ``get_current_context`` ...) and click 8's behaviour for it, error messages and help
pages included: options before, after or between the arguments, ``--opt=value``, ``-ovalue``,
short flags together (``-qo FILE``), ``--`` ending the options; values converted and checked by
their type, then the callbacks, eager options (``--help``, ``--version``) first, the others in
the order given, then the rest; a usage error is ``Usage: ...``, ``Try '... --help' for help.``
and ``Error: ...`` on stderr with exit status 2.  ``Command.main`` is click's: the tests run these
commands with ``click.testing.CliRunner`` (click is a test dependency only).

The help pages and usage lines are built by :mod:`distc.cmdline.help`, imported only when one is
shown.  The running command's :class:`Context` is found by :func:`get_current_context` (a context
variable, set while a context is entered, as click's context stack)."""

from __future__ import annotations

import os
import sys
from contextvars import ContextVar

from .params import (BOOL, FLOAT, INT, STRING, UNPROCESSED, UNSET, Abort, Argument, BadParameter, Choice,
                     CommandLineError, Exit, FloatRange, IntRange, MissingParameter, NoArgsIsHelp, NoSuchCommand,
                     NoSuchOption, Option, Parameter, ParameterSource, ParamType, UsageError, _split_opt, echo,
                     parse_command_line)

__all__ = ["Abort", "Argument", "BOOL", "BadParameter", "Choice", "Command", "CommandLineError", "Context", "Exit",
           "FLOAT", "FloatRange", "Group", "INT", "IntRange", "MissingParameter", "NoSuchCommand", "NoSuchOption",
           "Option", "ParamType", "Parameter", "ParameterSource", "STRING", "UNPROCESSED", "UNSET", "UsageError",
           "argument", "command", "echo", "get_current_context", "group", "option", "version_option"]

_CURRENT: ContextVar = ContextVar("distc_command_context")


def get_current_context(silent: bool = False) -> Context | None:
    """The context of the command running now (None with ``silent`` when none is)."""
    ctx = _CURRENT.get(None)
    if ctx is None and not silent:
        raise RuntimeError("no command is running (no current context)")
    return ctx


# ------------------------------------------------------------------------------ contexts, commands
class Context:
    """One command's run: its parameters' values (``params``), the name it was called by
    (``info_name``), the group's context (``parent``)."""

    def __init__(self, command: Command, parent: Context | None = None, info_name: str | None = None,
                 help_option_names: list[str] | None = None, max_content_width: int | None = None,
                 allow_extra_args: bool | None = None, allow_interspersed_args: bool | None = None,
                 ignore_unknown_options: bool | None = None) -> None:
        self.command, self.parent, self.info_name = command, parent, info_name
        self.params: dict = {}
        self.args: list[str] = []
        self.protected_args: list[str] = []
        self.invoked_subcommand: str | None = None
        self._sources: dict[str, int] = {}
        self._tokens: list = []
        inherit = parent if parent is not None else None
        self.help_option_names = help_option_names or (inherit.help_option_names if inherit else ["--help"])
        self.max_content_width = max_content_width if max_content_width is not None else (
            inherit.max_content_width if inherit else None)
        self.allow_extra_args = command.allow_extra_args if allow_extra_args is None else allow_extra_args
        self.allow_interspersed_args = (command.allow_interspersed_args if allow_interspersed_args is None
                                        else allow_interspersed_args)
        self.ignore_unknown_options = (command.ignore_unknown_options if ignore_unknown_options is None
                                       else ignore_unknown_options)

    def __enter__(self) -> Context:
        self._tokens.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._tokens.pop())

    @property
    def command_path(self) -> str:
        """``distc shard``: the names from the program's to this command's."""
        rv = self.info_name or ""
        if self.parent is not None:
            pieces = [p for q in self.parent.command.get_params(self) for p in q.usage_pieces(self)]
            rv = " ".join([self.parent.command_path, *pieces, rv])
        return rv.lstrip()

    def get_parameter_source(self, name: str) -> int | None:
        return self._sources.get(name)

    def get_usage(self) -> str:
        from .help import usage

        return usage(self)

    def get_help(self) -> str:
        from .help import help_page

        return help_page(self)

    def fail(self, message: str):
        raise UsageError(message, self)

    def exit(self, code: int = 0):
        raise Exit(code)

    def invoke(self, callback, **kwargs):
        """``callback(**kwargs)`` in this context; its usage errors name this command."""
        with self:
            try:
                return callback(**kwargs)
            except UsageError as e:
                e.ctx = e.ctx or self
                raise


class Command:
    """A command: ``callback`` called with its parameters' values."""
    allow_extra_args = ignore_unknown_options = no_args_is_help = hidden = False
    allow_interspersed_args = True
    options_metavar = "[OPTIONS]"

    def __init__(self, name: str | None, callback=None, params: list[Parameter] | None = None,
                 help: str | None = None, epilog: str | None = None, context_settings: dict | None = None,
                 add_help_option: bool = True) -> None:
        self.name, self.callback, self.params = name, callback, list(params or ())
        self.help, self.epilog, self.short_help = help, epilog, None
        self.context_settings = dict(context_settings or {})
        self.add_help_option = add_help_option
        self._help_option: Option | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __call__(self, *args, **kwargs):
        return self.main(*args, **kwargs)

    # the parameters, --help among them
    def get_help_option_names(self, ctx: Context) -> list[str]:
        taken = {o for p in self.params for o in (*p.opts, *p.secondary_opts)}
        return [n for n in dict.fromkeys(ctx.help_option_names) if n not in taken]

    def get_help_option(self, ctx: Context) -> Option | None:
        names = self.get_help_option_names(ctx)
        if not names or not self.add_help_option:
            return None
        if self._help_option is None:
            def show_help(ctx: Context, param, value) -> None:
                if value:
                    echo(ctx.get_help())
                    ctx.exit()

            self._help_option = Option([*names, "_help"], is_flag=True, expose_value=False, is_eager=True,
                                       help="Show this message and exit.", callback=show_help)
        return self._help_option

    def get_params(self, ctx: Context) -> list[Parameter]:
        help_option = self.get_help_option(ctx)
        return self.params if help_option is None else [*self.params, help_option]

    # help
    def get_usage(self, ctx: Context) -> str:
        return ctx.get_usage()

    def get_help(self, ctx: Context) -> str:
        return ctx.get_help()

    def get_short_help_str(self, limit: int = 45) -> str:
        from .help import short_help

        return short_help(self.short_help or self.help or "", limit, given=bool(self.short_help))

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return [self.options_metavar, *(x for p in self.get_params(ctx) for x in p.usage_pieces(ctx))]

    # a run
    def make_context(self, info_name: str | None, args: list[str], parent: Context | None = None,
                     **extra) -> Context:
        ctx = Context(self, parent=parent, info_name=info_name, **{**self.context_settings, **extra})
        with ctx:
            self.parse_args(ctx, args)
        return ctx

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help:
            raise NoArgsIsHelp(ctx)
        params = self.get_params(ctx)
        values, rest, order = parse_command_line(ctx, params, args)
        given = {}
        for p in order:
            given.setdefault(id(p), len(given))
        for p in sorted(params, key=lambda p: (not p.is_eager, given.get(id(p), len(params) + 1))):
            p.handle(ctx, values)
        for k, v in ctx.params.items():
            if v is UNSET:
                ctx.params[k] = None
        if rest and not ctx.allow_extra_args:
            ctx.fail(f"Got unexpected extra argument{'s' if len(rest) > 1 else ''} ({' '.join(rest)})")
        ctx.args = rest
        return rest

    def invoke(self, ctx: Context):
        if self.callback is not None:
            return ctx.invoke(self.callback, **ctx.params)

    def main(self, args=None, prog_name: str | None = None, complete_var=None, standalone_mode: bool = True,
             **extra):
        """Run the command on ``args`` (default: ``sys.argv[1:]``); with ``standalone_mode``, a
        usage error is shown (exit 2), and the process exits with the command's status."""
        args = sys.argv[1:] if args is None else list(args)
        if prog_name is None:
            prog_name = _program_name()
        code, report = 1, None
        try:
            with self.make_context(prog_name, args, **extra) as ctx:
                rv = self.invoke(ctx)
                if not standalone_mode:
                    return rv
                ctx.exit()
        except Exit as e:
            if not standalone_mode:
                return e.exit_code
            code = e.exit_code
        except Abort:
            if not standalone_mode:
                raise
            report = _aborted
        except (EOFError, KeyboardInterrupt) as e:
            echo(file=sys.stderr)
            if not standalone_mode:
                raise Abort() from e
            report = _aborted
        except CommandLineError as e:
            if not standalone_mode:
                raise
            report, code = e.show, e.exit_code
        except OSError as e:
            import errno

            if e.errno != errno.EPIPE:
                raise
        if report is not None:
            report()
        sys.exit(code)


def _aborted() -> None:
    echo("Aborted!", file=sys.stderr)


def _program_name() -> str:
    """How usage lines name the program: ``distc``, or ``python -m distc``."""
    main = sys.modules.get("__main__")
    path = sys.argv[0] if sys.argv else ""
    package = getattr(main, "__package__", None)
    if not package:
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    return f"python -m {package}" + (f".{name}" if name != "__main__" else "")


class Group(Command):
    """Commands under one program name: ``distc COMMAND [ARGS]...``."""
    allow_extra_args, allow_interspersed_args, no_args_is_help = True, False, True
    subcommand_metavar = "COMMAND [ARGS]..."

    def __init__(self, name: str | None = None, commands: dict | None = None, **attrs) -> None:
        super().__init__(name, **attrs)
        self.commands: dict[str, Command] = dict(commands or {})

    def add_command(self, cmd: Command, name: str | None = None) -> None:
        self.commands[name or cmd.name] = cmd

    def command(self, *args, **kwargs):
        def decorator(f) -> Command:
            cmd = command(*args, **kwargs)(f)
            self.add_command(cmd)
            return cmd

        return decorator

    def get_command(self, ctx: Context, name: str) -> Command | None:
        return self.commands.get(name)

    def list_commands(self, ctx: Context) -> list[str]:
        return sorted(self.commands)

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), self.subcommand_metavar]

    def format_commands(self, ctx: Context, formatter) -> None:
        rows = [(n, c) for n in self.list_commands(ctx) for c in [self.get_command(ctx, n)]
                if c is not None and not c.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(n) for n, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in rows])

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        if rest:
            ctx.protected_args, ctx.args = rest[:1], rest[1:]
        return ctx.args

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str, Command, list[str]]:
        name = args[0]
        cmd = self.get_command(ctx, name)
        if cmd is None:
            if _split_opt(name)[0]:  # an option after `--`: its own error first
                self.parse_args(ctx, args)
            raise NoSuchCommand(name, possibilities=self.commands, ctx=ctx)
        return name, cmd, args[1:]

    def invoke(self, ctx: Context):
        if not ctx.protected_args:
            ctx.fail("Missing command.")
        args = [*ctx.protected_args, *ctx.args]
        ctx.args, ctx.protected_args = [], []
        with ctx:
            name, cmd, args = self.resolve_command(ctx, args)
            ctx.invoked_subcommand = name
            super().invoke(ctx)
            with cmd.make_context(name, args, parent=ctx) as sub:
                return cmd.invoke(sub)


# ------------------------------------------------------------------------------------- decorators
def command(name: str | None = None, cls: type | None = None, **attrs):
    """``@command("shard")`` over a function that its ``@option``/``@argument`` decorate."""
    def decorator(f) -> Command:
        params = list(reversed(f.__dict__.pop("__cmdline_params__", [])))
        cmd_name = name or f.__name__.lower().replace("_", "-")
        cmd = (cls or Command)(cmd_name, callback=f, params=params, help=attrs.pop("help", f.__doc__), **attrs)
        cmd.__doc__ = f.__doc__
        return cmd

    return decorator


def group(name: str | None = None, **attrs):
    return command(name, cls=attrs.pop("cls", Group), **attrs)


def _remember(f, param: Parameter):
    if isinstance(f, Command):
        f.params.append(param)
    else:
        f.__dict__.setdefault("__cmdline_params__", []).append(param)
    return f


def option(*decls: str, cls: type | None = None, **attrs):
    return lambda f: _remember(f, (cls or Option)(decls, **attrs))


def argument(*decls: str, cls: type | None = None, **attrs):
    return lambda f: _remember(f, (cls or Argument)(decls, **attrs))


def version_option(version: str, *decls: str, prog_name: str, message: str = "%(prog)s, version %(version)s"):
    """``-V/--version``: ``distc, version X`` and exit 0."""
    def show(ctx: Context, param, value) -> None:
        if value:
            echo(message % {"prog": prog_name, "package": None, "version": version})
            ctx.exit()

    return option(*(decls or ("--version",)), is_flag=True, expose_value=False, is_eager=True,
                  help="Show the version and exit.", callback=show)
