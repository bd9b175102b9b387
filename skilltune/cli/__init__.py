"""The ``skilltune`` command line: a thin layer over the Python API.

Exit codes: 0 done; 1 the command ran and its answer is negative (smoke found
a problem, lint found errors); 2 bad input or usage (nothing written); 3 a run
ended ``blocked`` or ``crash`` (or skilltune itself failed).
"""

# isort: skip_file
# Importing the command modules registers their commands; the order is the order of --help.
from __future__ import annotations

from skilltune.cli.app import app
from skilltune.cli import evaluate, train, compare, inspect, judge, draft, report

__all__ = ["app", "compare", "draft", "evaluate", "inspect", "judge", "main", "report", "train"]


def main() -> None:
    import warnings

    from skilltune.cli.app import show_warning

    warnings.showwarning = show_warning
    app(prog_name="skilltune")
