"""The setting flags of a command, generated from its settings model's fields (skilltune/settings.py,
TrainConfig): one generator for train, resume, run, calibrate, compare, smoke and judge's commands."""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar, get_args, get_origin

import typer

from skilltune.cli.app import Command, bare_flags, parse_agent_opts, parse_agent_specs

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from skilltune.settings import Settings

    S = TypeVar("S", bound=Settings)

_GIVEN = "skilltune.settings"  # ctx.meta key: the settings given on the command line


def _option(
    flags: list[str], name: str, info: FieldInfo, panel: str, show_default: bool
) -> inspect.Parameter:
    """The Typer parameter of one setting: a flag with the field's default, or key=value pairs for a table."""
    import annotated_types

    spec = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    annotation: Any = info.annotation
    # a required setting (skill, tag) may come from --config: its flag is optional
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    if info.is_required():
        annotation = annotation | None
    bounds: dict[str, Any] = {}
    for rule in info.metadata:
        if isinstance(rule, annotated_types.Ge):
            bounds["min"] = rule.ge
        elif isinstance(rule, annotated_types.Le):
            bounds["max"] = rule.le
    if get_origin(annotation) is dict:  # an option table: repeatable key=value pairs
        annotation, default = list[str] | None, None
    elif spec.get("repeatable"):  # --agent: one value or several (given_settings reads them)
        annotation, default = list[str], [default]
    elif annotation is bool:
        flags = [f"{flags[0]}/--no-{flags[0].removeprefix('--')}", *flags[1:]]
    elif spec.get("path"):
        annotation = Path | None if type(None) in get_args(annotation) else Path
        default = Path(default) if default is not None else None
    option = typer.Option(
        *flags, help=info.description, rich_help_panel=panel, show_default=show_default, **bounds
    )
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, option]
    )


def setting_options(model: type[Settings], names: list[str], panel: str, show_default: bool) -> list[Any]:
    """Typer's parameters for the named settings of ``model``, in that order."""
    fields = model.model_fields
    signature = inspect.Signature(
        [_option(model.flags(name), name, fields[name], panel, show_default) for name in names]
    )

    def settings(**given: Any) -> None:
        """Only its signature is read: Typer turns it into parameters."""

    settings.__signature__ = signature  # type: ignore[attr-defined]  # Typer reads a function's parameters from its signature
    holder = typer.Typer(add_completion=False)
    holder.command()(settings)
    params = list(typer.main.get_command(holder).params)
    bare_flags(params)
    return params


class SettingsCommand(Command):
    """A command with a flag per setting of its model, generated when first needed.

    ``model`` names the settings model (``module:Class``, imported when the flags are built: its
    ``--help`` or running it; ``skilltune --version``, ``--help`` and ``validate`` never import it);
    ``only`` keeps some of its settings (default: every one with a flag, in ``flag_names`` order).
    ``settings_command`` makes the class of a command.
    Each flag's names, default, choices (a ``Literal``), range (``ge``/``le``) and help come from the
    field (its default, description and ``cli()`` spec), so the model is the one place a setting is
    defined, for the command line and the Python API alike.

    Running it, the settings given on the command line (not the defaults) reach the callback
    through ``given_settings(ctx)`` (or, as the model, ``command_settings``): a flag's default is
    the model's, shown in ``--help``, and a setting not given stays unset, so the model, ``--config``
    or the stored run supplies it.
    """

    model: ClassVar[str] = "skilltune.runfiles:TrainConfig"
    only: ClassVar[Collection[str] | None] = None
    panel: ClassVar[str] = "Settings"
    show_default: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._settings: list[Any] | None = None
        self._declared: list[Any] = []
        super().__init__(*args, **kwargs)

    @classmethod
    def settings_model(cls) -> type[Settings]:
        module, _, name = cls.model.partition(":")
        model: type[Settings] = getattr(importlib.import_module(module), name)
        return model

    @classmethod
    def names(cls, model: type[Settings]) -> list[str]:
        """The settings that get a flag, in ``--help``'s order."""
        return [name for name in model.flag_names() if cls.only is None or name in cls.only]

    @property
    def params(self) -> list[Any]:
        if self._settings is None:
            model = self.settings_model()
            self._settings = setting_options(model, self.names(model), self.panel, self.show_default)
            self._declared.extend(self._settings)
        return self._declared

    @params.setter
    def params(self, value: list[Any]) -> None:
        self._declared = list(value)

    def invoke(self, ctx: Any) -> Any:
        given: dict[str, Any] = {}
        for param in self._settings or []:
            value = ctx.params.pop(param.name)
            source = ctx.get_parameter_source(param.name)
            if source is not None and source.name != "DEFAULT" and value is not None:
                given[param.name] = value
        ctx.meta[_GIVEN] = given
        return super().invoke(ctx)


class ResumeCommand(SettingsCommand):
    """``resume``: flags for the settings a resume may change, and the option tables whose redacted
    secrets it takes again; one not given stays as the run had it (so no default is shown)."""

    panel = "Settings a resume may change"
    show_default = False

    @classmethod
    def names(cls, model: type[Settings]) -> list[str]:
        from skilltune.training.config import MAY_CHANGE_ON_RESUME, SECRET_TABLES

        return [name for name in model.flag_names() if name in {*MAY_CHANGE_ON_RESUME, *SECRET_TABLES}]


@functools.cache
def settings_command(model: str, only: tuple[str, ...] | None = None) -> type[SettingsCommand]:
    """The command class whose flags are ``model``'s settings (``module:Class``; a bare name is a
    model of skilltune/settings.py), or those of them in ``only``."""
    path = model if ":" in model else f"skilltune.settings:{model}"
    return type(f"{path.rpartition(':')[2]}Command", (SettingsCommand,), {"model": path, "only": only})


def given_settings(ctx: typer.Context) -> dict[str, Any]:
    """The settings given as flags, as the model takes them: paths as text, tables as dicts, and a
    repeatable ``--agent`` as one agent (``agent``, its options in ``agent_options``) or several
    (``agents``), with ``--agent-opt`` merged into the only one."""
    if not isinstance(ctx.command, SettingsCommand):
        raise TypeError(f"{ctx.command.name} has no setting flags: it is no SettingsCommand")
    model = ctx.command.settings_model()
    given = dict(ctx.meta.get(_GIVEN, {}))
    settings: dict[str, Any] = {}
    agents = given.get("agent")
    if isinstance(agents, list | tuple):  # a repeatable --agent
        given.pop("agent")
        settings = agent_settings(list(agents), given.pop("agent_options", None))
    for name, value in given.items():
        if isinstance(value, list | tuple):
            settings[name] = parse_agent_opts(list(value), model.flags(name)[0])
        else:
            settings[name] = str(value) if isinstance(value, Path) else value
    return settings


def agent_settings(values: list[str], agent_opt: list[str] | None = None) -> dict[str, Any]:
    """``--agent`` given once (``agent``, with its options and ``--agent-opt``'s in ``agent_options``:
    a run as before) or more than once (``agents``: a run that tunes for several agents)."""
    specs = parse_agent_specs(values, agent_opt)
    if len(specs) == 1:
        spec = specs[0]
        return {"agent": spec.agent} | ({"agent_options": dict(spec.options)} if spec.options else {})
    return {"agents": [spec.model_dump(mode="json") for spec in specs]}


def command_settings(ctx: typer.Context, model: type[S]) -> S:
    """The command's settings: ``model`` with the flags given applied (UsageError: what it refuses)."""
    return model.of(**given_settings(ctx))
