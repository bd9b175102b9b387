"""Fail when a skilltune package imports one in a higher layer.

The layers, top to bottom, are declared in ``LAYERS``: a module may import modules of its own
layer and of the layers below, never above. Imports inside functions count (they still make
one package depend on another); those under ``if TYPE_CHECKING:`` do not (never run). grimp
finds the illegal imports and the chains that carry them.

Usage: python tools/check_layers.py [PACKAGE]   (exit 1 and each illegal dependency, or 0)
"""

from __future__ import annotations

import sys

import grimp

# Top to bottom. Names on one line form a layer whose members may import each other.
LAYERS: list[tuple[str, ...]] = [
    ("cli",),
    ("meta_eval",),
    ("training",),
    ("report", "review", "supervise"),
    ("measure",),
    ("session",),
    ("execute",),
    ("propose",),
    ("gate",),
    ("rollout", "skill_repo"),
    ("judge",),
    ("agents",),
    ("suite",),
    ("runfiles", "rundir"),
    ("score",),
    ("modelcalls",),
    ("proposal", "skill"),
    ("stats",),
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


def illegal(package: str) -> list[str]:
    """One line per illegal dependency: importer -> imported, with the chains that carry it."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
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


def unplaced(package: str) -> list[str]:
    """Top-level modules and packages of ``package`` that no layer names."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
    named = {name for layer in LAYERS for name in layer}
    tops = {m.split(".")[1] for m in graph.modules if m.count(".") >= 1}
    return sorted(tops - named)


def main() -> int:
    package = sys.argv[1] if len(sys.argv) > 1 else "skilltune"
    missing = unplaced(package)
    if missing:
        print(f"modules in no layer of tools/check_layers.py: {', '.join(missing)}; add each to a layer")
        return 1
    lines = illegal(package)
    if lines:
        print(f"{package}: imports against the layer order (tools/check_layers.py, LAYERS):")
        print("\n".join(lines))
        return 1
    print(f"the layers of {package} hold ({len(LAYERS)} layers, imports inside functions counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
