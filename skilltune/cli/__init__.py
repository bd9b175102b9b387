"""The ``skilltune`` command line: a thin layer over the Python API.

Exit codes: 0 done; 1 the command ran and its answer is negative (smoke found
a problem, lint found errors); 2 bad input or usage (nothing written); 3 a run
ended ``blocked`` or ``crash`` (or skilltune itself failed).

The commands live in the modules named by ``skilltune.cli.app.COMMAND_MODULES``; a module is
imported when one of its commands runs, so ``import skilltune.cli`` registers none of them.
"""

from __future__ import annotations

from skilltune.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    import warnings

    from skilltune.cli.app import show_warning

    warnings.showwarning = show_warning
    app(prog_name="skilltune")
