"""Fail when the skilltune package has an import cycle, counting imports made inside functions.

A function-level import hides a cycle from the interpreter (it runs after both modules are
loaded) but not from the reader: the two modules still depend on each other. So every
``import`` in a module counts, wherever it stands, except those under ``if TYPE_CHECKING:``
(never run). Importing ``a.b.c`` also runs the ``__init__`` of ``a.b``: those packages count
as imported too, unless they are packages the importing module itself lives in.

Usage: python tools/check_import_cycles.py [PACKAGE]   (exit 1 and the cycles, or 0)
"""

from __future__ import annotations

import sys

import grimp


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (directly, or the packages they run)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        targets = set()
        for imported in graph.find_modules_directly_imported_by(module):
            targets.add(imported)
            targets |= _parents(imported) - _parents(module) - {module}
        edges[module] = targets & graph.modules
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(component: list[str], edges: dict[str, set[str]]) -> str:
    members = set(component)
    links = [f"    {a} -> {b}" for a in component for b in sorted(edges[a] & members)]
    return "  " + ", ".join(component) + "\n" + "\n".join(links)


def main(argv: list[str]) -> int:
    package = argv[1] if len(argv) > 1 else "skilltune"
    edges = import_graph(package)
    found = cycles(edges)
    if not found:
        print(f"no import cycle in {package} ({len(edges)} modules, imports inside functions counted)")
        return 0
    print(f"import cycles in {package} (imports inside functions counted, TYPE_CHECKING ones not):")
    for component in found:
        print(describe(component, edges))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
