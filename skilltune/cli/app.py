"""The Typer app: its commands loaded lazily, error handling, the --agent syntax and the progress
bar (the parameters several commands share: cli/options.py)."""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup, TyperOption

from skilltune import __version__
from skilltune.errors import SkilltuneError, UsageError

if TYPE_CHECKING:
    from rich.progress import Progress

    from skilltune.runfiles import AgentSpec, RolloutRecord


def reflow(text: str | None) -> str | None:
    """Each paragraph of a help text on one line, so the terminal's width decides where lines break
    (a docstring's line breaks are the source file's; help renderers keep some of them)."""
    if not text:
        return text
    return "\n\n".join(" ".join(part.split()) for part in inspect.cleandoc(text).split("\n\n"))


def bare_flags(params: Any) -> None:
    """No value placeholder (``<bool>``) beside a flag: a flag takes no value."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class ReadableHelp:
    """Help that reads as written: paragraphs reflowed, flags without a value placeholder (a mixin
    for Typer's command and group classes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bare_flags(kwargs.get("params") or [])
        kwargs["help"] = reflow(kwargs.get("help"))
        super().__init__(*args, **kwargs)

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        option: TyperOption | None = super().get_help_option(ctx)  # type: ignore[misc]
        bare_flags([option])
        return option


class Command(ReadableHelp, TyperCommand):
    """A command whose help reads as written."""


class Group(ReadableHelp, TyperGroup):
    """A command group whose help reads as written."""


# Every top-level command and the module that defines it, in the order ``--help`` lists them. A
# module is imported when one of its commands runs (``--help`` lists them all, so it imports them
# all): a command pays for its own imports only, ``--version`` for none. tests/test_cli_app.py
# checks the table against what the modules register.
COMMAND_MODULES: dict[str, str] = {
    "validate": "skilltune.cli.evaluate",
    "run": "skilltune.cli.evaluate",
    "smoke": "skilltune.cli.evaluate",
    "agents": "skilltune.cli.evaluate",
    "lint": "skilltune.cli.evaluate",
    "calibrate": "skilltune.cli.evaluate",
    "compare": "skilltune.cli.compare",
    "train": "skilltune.cli.train",
    "resume": "skilltune.cli.train",
    "audit": "skilltune.cli.inspect",
    "promote": "skilltune.cli.inspect",
    "report": "skilltune.cli.report",
    "view": "skilltune.cli.report",
    "status": "skilltune.cli.report",
    "meta-eval": "skilltune.cli.compare",
    "judge": "skilltune.cli.judge",
    "draft": "skilltune.cli.draft",
}


def _build_command(name: str) -> Any:
    """The Click command or group of ``name``, built the way Typer builds the app's, once the
    module of COMMAND_MODULES that registers it on ``app`` is imported."""
    from typer.main import get_command_from_info, get_command_name, get_group_from_info

    importlib.import_module(COMMAND_MODULES[name])
    for command in app.registered_commands:
        callback = command.callback
        if (command.name or get_command_name(getattr(callback, "__name__", ""))) == name:
            return get_command_from_info(
                command,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    for group in app.registered_groups:
        if group.name == name:
            return get_group_from_info(
                group,
                pretty_exceptions_short=app.pretty_exceptions_short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=app.rich_markup_mode,
            )
    raise RuntimeError(f"{COMMAND_MODULES[name]} registers no command {name!r}: fix COMMAND_MODULES")


class _Commands(MutableMapping[str, Any]):
    """The root group's commands by name: the names (and their order) from COMMAND_MODULES, each
    command built on first read. Reading the names (``in``, ``keys()``: resolving a command, the
    "did you mean" of a typo) imports nothing; ``items()`` and ``values()`` build them all."""

    def __init__(self, built: MutableMapping[str, Any]) -> None:
        self._built = dict(built)  # commands already registered when the group was made
        self._names = [*COMMAND_MODULES, *(name for name in built if name not in COMMAND_MODULES)]

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            self._built[name] = _build_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self._names:
            self._names.append(name)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._names.remove(name)
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)


class RootGroup(Group):
    """The ``skilltune`` group, with Click's lazy subcommands: what TyperGroup's ``list_commands``,
    ``get_command`` and "did you mean" read, ``self.commands``, imports a command's module when
    that command is first read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)


class Typer(typer.Typer):
    """typer.Typer whose groups are Group (or ``cls``) and whose commands are Command unless told
    otherwise; every command is ``guarded``."""

    def __init__(self, *, cls: type[Group] = Group, **kwargs: Any) -> None:
        super().__init__(cls=cls, **kwargs)

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[F], F]:
        register: Callable[[F], F] = super().command(name, cls=cls or Command, **kwargs)

        def decorator(fn: F) -> F:
            return register(guarded(fn))

        return decorator


app = Typer(
    cls=RootGroup,
    name="skilltune",
    help="Tune agent skills by evidence: isolated rollouts, measured scores, gated edits.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def command_group(name: str, *, help: str, epilog: str) -> Typer:
    """The group of subcommands ``skilltune NAME ...``; given no subcommand, it shows its help."""
    group = Typer(help=help, epilog=epilog, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group


out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])
_show_other = warnings.showwarning


def guarded(fn: F) -> F:
    """Print a SkilltuneError's message (no traceback) and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SkilltuneError as exc:
            err.print(f"[red]error:[/red] {exc}", markup=True)
            raise typer.Exit(exc.exit_code) from None
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            err.print("interrupted (Ctrl-C): the running agents were stopped; finished rollouts are on disk")
            raise typer.Exit(130) from None
        except Exception as exc:
            if os.environ.get("SKILLTUNE_DEBUG"):
                raise
            err.print(
                f"internal error: {type(exc).__name__}: {exc}\n(a bug in skilltune: rerun with SKILLTUNE_DEBUG=1 for the traceback)"
            )
            raise typer.Exit(3) from None

    return wrapper  # type: ignore[return-value]


def show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, *args: Any, **kwargs: Any
) -> None:
    """``warnings.showwarning`` of the CLI: a skilltune warning is one ``warning:`` line on stderr."""
    from skilltune.errors import SkilltuneWarning

    if issubclass(category, SkilltuneWarning):
        err.print(f"[yellow]warning:[/yellow] {message}", markup=True)
    else:
        _show_other(message, category, filename, lineno, *args, **kwargs)


def option_value(value: str) -> Any:
    """An option's value: JSON when it parses (numbers, true, lists), else text (a list at commas)."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return [v.strip() for v in value.split(",")] if "," in value else value


def parse_agent_opts(pairs: list[str] | None, flag: str = "--agent-opt") -> dict[str, Any]:
    """``key=value`` pairs; values are JSON when they parse (numbers, true, lists), else text."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {pair!r}: write key=value, e.g. {flag} model=sonnet")
        options[key.strip()] = option_value(value)
    return options


AGENT_SYNTAX = "[NAME=]BACKEND[:key=value,key=value...]"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
# An option starts at a comma followed by ``key=``; other commas belong to a value (ignores=a,b).
_NEXT_OPTION = re.compile(r",(?=\s*[A-Za-z_][A-Za-z0-9_-]*\s*=)")


def parse_agent_spec(value: str) -> AgentSpec:
    """One ``--agent`` value: ``codex``, ``codex:model=gpt-5.5``, ``fast=mock:crn=true,sleep_s=0.1``
    (the name is the backend's when not given). Raises UsageError with the fix."""
    from skilltune.runfiles import AgentSpec

    head, colon, rest = value.partition(":")
    name, eq, backend = head.strip().partition("=")
    if not eq:
        backend = name
    example = "e.g. --agent codex:model=gpt-5.5 or --agent fast=mock:crn=true"
    if not _NAME.fullmatch(name) or not _NAME.fullmatch(backend):
        hint = f" (options follow a colon: --agent {name}:{backend})" if eq and "=" in backend else ""
        raise UsageError(
            f"--agent {value!r}: write {AGENT_SYNTAX}, {example}; a name is letters, digits, - and _{hint}"
        )
    options: dict[str, Any] = {}
    if colon:
        for pair in _NEXT_OPTION.split(rest):
            key, sep, raw = pair.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--agent {value!r}: option {pair!r} is not key=value; {example}")
            if key.strip() in options:
                raise UsageError(f"--agent {value!r}: option {key.strip()!r} is given twice")
            options[key.strip()] = option_value(raw.strip())
    return AgentSpec(label=name, agent=backend, options=options)


def parse_agent_specs(values: list[str] | None, agent_opt: list[str] | None) -> list[AgentSpec]:
    """The ``--agent`` values of a command that takes several (default: the mock agent), with
    ``--agent-opt`` merged into the only one. Raises UsageError for a name used twice, for
    ``--agent-opt`` beside several agents, and for an option given twice."""
    from skilltune.runfiles import distinct_labels

    specs = [parse_agent_spec(v) for v in values or ["mock"]]
    try:
        distinct_labels(specs)
    except ValueError as exc:
        raise UsageError(f"--agent: {exc}") from None
    if agent_opt and len(specs) > 1:
        raise UsageError(
            "--agent-opt is ambiguous with several --agent: give each agent's options in its own "
            "--agent value, e.g. --agent claude:model=sonnet --agent codex:model=gpt-5.5"
        )
    if agent_opt:
        extra = parse_agent_opts(agent_opt)
        twice = sorted(set(extra) & set(specs[0].options))
        if twice:
            raise UsageError(
                f"agent option {twice[0]!r} is given both in --agent and in --agent-opt: keep one"
            )
        specs[0] = specs[0].model_copy(update={"options": {**specs[0].options, **extra}})
    return specs


def _version(value: bool) -> None:
    if value:
        out.print(f"skilltune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Tune agent skills by evidence: isolated rollouts, measured scores, gated edits."""


class progress_bar:
    """A Rich progress bar on a terminal; nothing otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and err.is_terminal
        self.bar: Progress | None = None
        self.task_id: Any = None

    def __enter__(self) -> Callable[[RolloutRecord, int, int], None]:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("rollouts"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            )
            self.bar.start()
        return self.update

    def update(self, record: RolloutRecord, done: int, total: int) -> None:
        if self.bar is None:
            return
        if self.task_id is None:
            self.task_id = self.bar.add_task("rollouts", total=total)
        self.bar.update(self.task_id, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
