"""The layers of src/mheval, checked from the code (docs/architecture.md).

The import graph is drawn with `ast` from every module of the package: `import mheval.x`,
`from mheval.x import y` and relative imports, at module level, inside functions and under
`if TYPE_CHECKING:` alike (a deferred import is still a dependency). `from package import name` points
at the submodule `package.name` when one exists, else at the package itself; the parent packages an
import runs on the way are not counted as arrows.

A *room* is a package directly under `mheval/` (`engine`, `judges`, ...) or a top-level module
(`verdict`, `cli`, ...); the package root `mheval/__init__.py` is the room `mheval`. Each room sits on
a layer; an import may point to its own layer or any layer below. An arrow that points up *climbs*.
The arrows that climb today are listed in KNOWN_CLIMBS, each one debt to remove: a new one fails the
test, and so does an entry that no longer climbs (delete it, the debt is paid). No room may hold a circle
of modules that import each other.

Run `python tests/test_layers.py` for the figures (rooms, arrows, climbs, circles, deferred imports).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "mheval"

# Bottom to top. A room may import rooms of its own layer and of the layers below it.
LAYERS: list[tuple[str, set[str]]] = [
    (
        "foundation",
        {
            "errors",
            "yamlio",
            "fileio",
            "textscan",
            "labels",
            "records",
            "progress",
            "digest",
            "version",
            "plugins",
            "cpu",
        },
    ),
    ("core", {"verdict", "protocols", "stats", "resources", "redaction"}),
    ("access", {"models", "config"}),
    # Below judging: the judges read what they judge, the cases and a conversation's scenario, truth and protocols.
    ("inputs", {"suites", "conversations"}),
    ("judging", {"judges"}),
    ("store", {"runfolder"}),
    ("analysis", {"analysis", "training"}),
    ("running and rating", {"engine", "annotate"}),
    ("reading", {"reporting", "gating"}),
    ("surface", {"api", "cli", "commands", "inspect", "__main__", "mheval"}),
]
LAYER_OF: dict[str, int] = {room: i for i, (_, rooms) in enumerate(LAYERS) for room in rooms}

# Arrows that climb a layer, each listed with its reason as debt to remove (issue 30, "the house"): none
# today. An entry here lets one climb pass the test until its import goes; then delete the entry.
KNOWN_CLIMBS: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mheval"


def _imported(node: ast.AST, module: str, is_package: bool, known: dict[str, Path]) -> Iterator[str]:
    """The mheval modules one import statement points at."""

    def resolve(name: str) -> str | None:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in known else None

    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == "mheval" or alias.name.startswith("mheval."):
                target = resolve(alias.name)
                if target:
                    yield target
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        if not (source == "mheval" or source.startswith("mheval.")):
            return
        for alias in node.names:
            target = resolve(f"{source}.{alias.name}") if f"{source}.{alias.name}" in known else resolve(source)
            if target:
                yield target


@cache
def import_graph() -> tuple[dict[str, set[str]], int]:
    """Arrows module -> module inside mheval, and how many imports of mheval sit inside functions."""
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    deferred = 0
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        in_function: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                in_function.update(id(n) for n in ast.walk(fn) if n is not fn)
        for node in ast.walk(tree):
            targets = [t for t in _imported(node, module, path.name == "__init__.py", known) if t != module]
            graph[module].update(targets)
            if targets and id(node) in in_function:
                deferred += 1
    return dict(graph), deferred


def climbs(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in graph.items() for b in targets if LAYER_OF[room_of(b)] > LAYER_OF[room_of(a)]}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components (Tarjan) of more than one module, arrows inside one room only."""
    inner = {a: {b for b in bs if room_of(b) == room_of(a)} for a, bs in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(inner.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(inner):
        if v not in index:
            visit(v)
    return found


def test_every_room_has_a_layer() -> None:
    rooms = {room_of(m) for m in modules()}
    missing = sorted(rooms - set(LAYER_OF))
    assert not missing, f"give these rooms a layer in LAYERS (tests/test_layers.py, docs/architecture.md): {missing}"


def diagram_layers() -> list[tuple[str, set[str]]]:
    """The layers as docs/architecture.md draws them, bottom to top (its first code block: a layer's name, then
    its rooms, each column two spaces or more apart; a parenthesis is a note)."""
    text = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## The layers", 1)[1].split("```", 2)[1]
    rows = []
    for line in block.splitlines():
        fields = re.split(r"\s{2,}", re.sub(r"\(.*?\)", "", line).strip())
        if len(fields) > 1 and "│" not in line:
            rows.append((fields[0], {room for field in fields[1:] for room in field.split()}))
    return rows[::-1]


def test_the_documented_layers_are_the_tested_ones() -> None:
    assert diagram_layers() == LAYERS


def test_the_check_sees_a_climb_and_a_circle() -> None:
    graph = {
        "mheval.stats.icc": {"mheval.engine.runner", "mheval.records"},
        "mheval.engine.runner": {"mheval.engine.units", "mheval.stats.icc"},
        "mheval.engine.units": {"mheval.engine.runner"},
    }
    assert climbs(graph) == {("mheval.stats.icc", "mheval.engine.runner")}
    assert circles(graph) == [frozenset({"mheval.engine.runner", "mheval.engine.units"})]


def test_no_new_import_climbs_a_layer() -> None:
    graph, _ = import_graph()
    new = sorted(climbs(graph) - set(KNOWN_CLIMBS))
    assert not new, "imports that climb a layer (docs/architecture.md says what may import what):\n" + "\n".join(
        f"  {a} ({room_of(a)}, layer {LAYERS[LAYER_OF[room_of(a)]][0]}) -> {b} "
        f"({room_of(b)}, layer {LAYERS[LAYER_OF[room_of(b)]][0]})"
        for a, b in new
    )


def test_known_climbs_are_still_there() -> None:
    graph, _ = import_graph()
    paid = sorted(set(KNOWN_CLIMBS) - climbs(graph))
    assert not paid, "these arrows no longer climb: delete them from KNOWN_CLIMBS:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in paid
    )


def test_no_circle_inside_a_room() -> None:
    """No two modules of one room import each other, directly or round a loop (deferred and TYPE_CHECKING
    imports count): a circle means a piece both need belongs in a module of its own below them."""
    graph, _ = import_graph()
    found = sorted(sorted(c) for c in circles(graph))
    assert not found, "import circles inside one room (move the shared piece into a module below both):\n" + (
        "\n".join(f"  {' <-> '.join(c)}" for c in found)
    )


def figures() -> dict[str, int]:
    graph, deferred = import_graph()
    room_arrows = {(room_of(a), room_of(b)) for a, bs in graph.items() for b in bs if room_of(a) != room_of(b)}
    climbing = climbs(graph)
    return {
        "modules": len(modules()),
        "rooms": len({room_of(m) for m in modules()}),
        "module arrows": sum(len(bs) for bs in graph.values()),
        "room arrows": len(room_arrows),
        "climbing module arrows": len(climbing),
        "climbing room arrows": len({(room_of(a), room_of(b)) for a, b in climbing}),
        "circles inside a room": len(circles(graph)),
        "imports of mheval inside functions": deferred,
    }


if __name__ == "__main__":
    for name, value in figures().items():
        print(f"{name}: {value}")
    graph_, _ = import_graph()
    for a, b in sorted(climbs(graph_)):
        print(f"climbs: {a} -> {b}")
    for c in circles(graph_):
        print(f"circle: {' <-> '.join(sorted(c))}")
    sys.exit(0)
