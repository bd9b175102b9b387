"""The run-setting flags of ``train`` and ``resume``, generated from TrainConfig's fields."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, get_args, get_origin

import typer

from skilltune.cli.app import Command, bare_flags, parse_agent_opts, parse_agent_specs
from skilltune.errors import UsageError

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

_GIVEN = "skilltune.settings"  # ctx.meta key: the settings given on the command line


def _option(name: str, info: FieldInfo, panel: str, show_default: bool) -> inspect.Parameter:
    """The Typer parameter of one setting: a flag with the field's default, or key=value pairs for a table."""
    import annotated_types

    from skilltune.runfiles.config import setting_flags

    spec = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    flags = setting_flags(name)
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


def setting_options(names: Callable[[], list[str]], panel: str, show_default: bool) -> list[Any]:
    """Typer's parameters for the named settings, in the model's order."""
    from skilltune.runfiles import TrainConfig

    wanted = set(names())
    fields = TrainConfig.model_fields
    signature = inspect.Signature(
        [_option(name, info, panel, show_default) for name, info in fields.items() if name in wanted]
    )

    def settings(**given: Any) -> None:
        """Only its signature is read: Typer turns it into parameters."""

    settings.__signature__ = signature  # type: ignore[attr-defined]
    holder = typer.Typer(add_completion=False)
    holder.command()(settings)
    params = list(typer.main.get_command(holder).params)
    bare_flags(params)
    return params


def flag_settings() -> list[str]:
    """Every setting that has a flag (not the SUITE argument, nor what only --config sets)."""
    from skilltune.runfiles import TrainConfig
    from skilltune.runfiles.config import setting_flags

    return [name for name in TrainConfig.model_fields if setting_flags(name)]


def resumable_settings() -> list[str]:
    """What a resume may change, and the option tables whose redacted secrets it takes again."""
    from skilltune.training.config import MAY_CHANGE_ON_RESUME, SECRET_TABLES

    return [*MAY_CHANGE_ON_RESUME, *SECRET_TABLES]


class SettingsCommand(Command):
    """A command with a flag per run setting (``names``), generated from the model when first needed.

    Each flag's names, default, choices (a ``Literal``), range (``ge``/``le``) and help come from
    the field (its default, description and ``_cli`` spec in skilltune/runfiles/config.py), so
    the model is the one place a setting is defined. The flags are built the first time the
    command's parameters are needed (its ``--help``, or running it): ``skilltune --version``,
    ``--help`` and ``validate`` never import the model.

    Running it, the settings given on the command line (not the defaults) reach the callback
    through ``given_settings(ctx)``: a flag's default is the model's, shown in ``--help``, and a
    setting not given stays unset, so ``--config`` or the stored run supplies it.
    """

    names: ClassVar[Callable[[], list[str]]] = staticmethod(flag_settings)
    panel: ClassVar[str] = "Settings"
    show_default: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._settings: list[Any] | None = None
        self._declared: list[Any] = []
        super().__init__(*args, **kwargs)

    @property
    def params(self) -> list[Any]:
        if self._settings is None:
            self._settings = setting_options(type(self).names, self.panel, self.show_default)
            after = sum(1 for p in self._declared if p.param_type_name == "argument")
            self._declared[after:after] = self._settings
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
    """``resume``: flags for the settings a resume may change; one not given stays as the run had it
    (so no default is shown)."""

    names = staticmethod(resumable_settings)
    panel = "Settings a resume may change"
    show_default = False


def given_settings(ctx: typer.Context) -> dict[str, Any]:
    """The settings given as flags, as TrainConfig takes them: paths as text, tables as dicts."""
    from skilltune.runfiles.config import setting_flags

    settings: dict[str, Any] = {}
    agents: dict[str, Any] = {}
    for name, value in ctx.meta.get(_GIVEN, {}).items():
        if name == "agent":
            agents = agent_settings(list(value))
        elif isinstance(value, list | tuple):
            settings[name] = parse_agent_opts(list(value), setting_flags(name)[0])
        else:
            settings[name] = str(value) if isinstance(value, Path) else value
    if "agent_options" in agents and "agent_options" in settings:
        twice = sorted(set(agents["agent_options"]) & set(settings["agent_options"]))
        if twice:
            raise UsageError(
                f"agent option {twice[0]!r} is given both in --agent and in --agent-opt: keep one"
            )
        agents["agent_options"] |= settings["agent_options"]
    return settings | agents


def agent_settings(values: list[str]) -> dict[str, Any]:
    """``--agent`` given once (``agent``, with its options in ``agent_options``: a run as before) or
    more than once (``agents``: a run that tunes for several agents)."""
    specs = parse_agent_specs(values, None)
    if len(specs) == 1:
        spec = specs[0]
        return {"agent": spec.agent} | ({"agent_options": dict(spec.options)} if spec.options else {})
    return {"agents": [spec.model_dump(mode="json") for spec in specs]}
