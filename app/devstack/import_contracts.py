"""The project's own import-linter contract type: `acyclic_modules`, no import cycle between any two modules.

import-linter's layers contract forbids imports that go up a layer; its acyclic_siblings contract
works at package level, which Hato's domain packages (views beside queries and service, DESIGN.md)
cannot satisfy without meaning anything wrong. What matters is that no module can reach itself: this
contract finds every strongly connected group of modules (Tarjan) and reports one concrete cycle in
each. Used by .importlinter; run by `make lint`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from importlinter import Contract, ContractCheck, fields, output


def strongly_connected(nodes: Iterable[str], successors: Callable[[str], Iterable[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively: every group of nodes that can all reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[set[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(successors(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


class AcyclicModulesContract(Contract):
    """No module of these packages imports itself back, however indirectly."""

    type_name = "acyclic_modules"
    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        modules = {
            descendant for package in self.packages for descendant in {package, *graph.find_descendants(package)}
        }

        def imported_by(module: str) -> set[str]:
            return graph.find_modules_directly_imported_by(module) & modules

        cycles = []
        for group in strongly_connected(modules, imported_by):
            if len(group) == 1 and next(iter(group)) not in imported_by(next(iter(group))):
                continue
            start = min(group)
            successor = min(imported_by(start) & group)
            # Any chain from successor back to start stays inside the group, so it closes the cycle.
            chain = graph.find_shortest_chain(importer=successor, imported=start) if successor != start else ()
            cycles.append([start, *(chain or (start,))])
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(" -> ".join(cycle), bold=False)
            output.new_line()
