"""Fail when a skilltune package imports one in a higher layer.

The layers, top to bottom, are declared in ``LAYERS``: a module may import modules of its own
layer and of the layers below, never above. Imports inside functions count (they still make
one package depend on another), and so do those under ``if TYPE_CHECKING:``: an annotation
that names a higher layer's type is a dependency too, only one the interpreter does not run.
One exception, the package's own ``__init__``: it names its lazy API (``skilltune.train``...)
under ``if TYPE_CHECKING:`` for type checkers and imports none of it at run time, so its
annotation-only imports are left out (otherwise every ``from skilltune import __version__``
would seem to depend on the whole API). grimp finds the illegal imports and the chains that
carry them.

Usage: python tools/check_layers.py [PACKAGE]   (exit 1 and each illegal dependency, or 0)
"""

from __future__ import annotations

import sys

import grimp

# Top to bottom. Names on one line form a layer whose members may import each other.
LAYERS: list[tuple[str, ...]] = [
    ("__main__",),  # python -m skilltune: the command
    ("cli",),
    ("meta_eval",),
    ("training",),
    ("report", "review", "supervise"),
    ("measure",),
    ("session",),
    ("execute",),
    ("draft",),
    ("propose",),
    ("gate",),
    ("rollout", "skill_repo"),
    ("judge",),
    ("agents",),
    ("suite",),
    ("runfiles", "rundir"),
    ("score",),
    ("modelcalls",),
    ("proposal", "skill", "contracts"),
    ("stats",),
    ("settings",),
    (
        "process",
        "sandbox",
        "store",
        "textfmt",
        "plugins",
        "progress",
        "prompts",
        "validation",
        "metric",
        "errors",
    ),
]


def layer_graph(package: str) -> grimp.ImportGraph:
    """The package's import graph, annotation-only imports included, but for those of the
    package's own ``__init__`` (its lazy API, named for type checkers only)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False)
    run_time = grimp.build_graph(package, exclude_type_checking_imports=True)
    facade = run_time.find_modules_directly_imported_by(package)
    for imported in graph.find_modules_directly_imported_by(package) - facade:
        graph.remove_import(importer=package, imported=imported)
    return graph


def illegal(package: str, graph: grimp.ImportGraph | None = None) -> list[str]:
    """One line per illegal dependency: importer -> imported, with the chains that carry it."""
    graph = graph or layer_graph(package)
    found = graph.find_illegal_dependencies_for_layers(
        layers=[grimp.Layer(*names, independent=False) for names in LAYERS], containers={package}
    )
    lines = []
    for dep in sorted(found, key=lambda d: (d.importer, d.imported)):
        lines.append(f"{dep.importer} (lower) imports {dep.imported} (higher):")
        for route in dep.routes:
            chain = " -> ".join([*route.heads, *route.middle, *route.tails])
            lines.append(f"  {chain}")
    return lines


def unplaced(package: str, graph: grimp.ImportGraph | None = None) -> list[str]:
    """Top-level modules and packages of ``package`` that no layer names."""
    graph = graph or grimp.build_graph(package)
    named = {name for layer in LAYERS for name in layer}
    tops = {m.split(".")[1] for m in graph.modules if m.count(".") >= 1}
    return sorted(tops - named)


def main() -> int:
    package = sys.argv[1] if len(sys.argv) > 1 else "skilltune"
    graph = layer_graph(package)
    missing = unplaced(package, graph)
    if missing:
        print(f"modules in no layer of tools/check_layers.py: {', '.join(missing)}; add each to a layer")
        return 1
    lines = illegal(package, graph)
    if lines:
        print(f"{package}: imports against the layer order (tools/check_layers.py, LAYERS):")
        print("\n".join(lines))
        return 1
    print(
        f"the layers of {package} hold ({len(LAYERS)} layers, imports inside functions and under "
        "TYPE_CHECKING counted)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
