"""The rooms' imports run one way: no cycle, no upward import, no private name across rooms.

Every module of the packages is parsed with ``ast`` (imports at module level and inside
functions alike) and mapped to its room; :data:`LAYERS` is the declared order, the table of
``docs/architecture.md`` (a test keeps the two equal).
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("runtime",),
    ("geo",),
    ("fleet",),
    ("tracking",),
    ("stands",),
    ("detectors",),
    ("enforcement",),
    ("maps", "planning"),
    ("db",),
    ("engines",),
    ("api",),
)
"""Bottom first. A room imports rooms of lower layers only (not of its own layer, not above)."""

LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}
PACKAGES = {"runtime", "geo", "fleet", "tracking", "stands", "enforcement", "maps", "planning"}
PACKAGES |= {"db", "engines", "api"}
DETECTORS = "tracking.detectors"
"""The detectors' package: a room of its own, above ``tracking`` and ``stands``."""

PURE = ("geo", "fleet", "tracking", "stands", "detectors", "enforcement", "maps", "planning")
"""Rooms that never talk to the database: storage lives in ``db``."""
DATABASE_LIBRARIES = ("sqlalchemy", "geoalchemy2", "psycopg", "alembic")

ERRORS_MODULE = "_errors"
"""Each package's exceptions (house style: ``<package>/_errors.py``), imported by the rooms
above to catch them: the one underscore module that is not private."""


def room_of(module: str) -> str | None:
    """Return the room of a dotted module name, or None for a module outside the packages."""
    if module == DETECTORS or module.startswith(DETECTORS + "."):
        return "detectors"
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__") and part != ERRORS_MODULE


@dataclass(frozen=True)
class Import:
    """One name a module takes from another module."""

    source: str
    line: int
    target: str
    """Dotted module imported from."""
    name: str | None = None
    """The name taken from ``target`` (``from target import name``), or None."""

    @property
    def private(self) -> bool:
        """Whether it reaches a private module or a private name."""
        parts = [*self.target.split("."), *([self.name] if self.name else [])]
        return any(_is_private(p) for p in parts)

    def __str__(self) -> str:
        what = f"{self.target}.{self.name}" if self.name else self.target
        return f"{self.source}:{self.line} imports {what}"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str, root: Path) -> bool:
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(source: str, module: str, *, is_package: bool, root: Path = ROOT) -> list[Import]:
    """Every import of a module's source, at any depth, with private attribute reads.

    ``from a import b`` where ``a.b`` is a module counts as an import of ``a.b``. An attribute
    read through an imported module (``import a.b`` then ``a.b._c``) counts as importing
    ``_c`` from it.
    """
    tree = ast.parse(source)
    found: list[Import] = []
    aliases: dict[str, str] = {}
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module, node.lineno, alias.name))
                bound = alias.asname or alias.name.split(".")[0]
                aliases[bound] = alias.name if alias.asname else bound
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if alias.name != "*" and _is_module(sub, root):
                    found.append(Import(module, node.lineno, sub))
                    aliases[alias.asname or alias.name] = sub
                else:
                    found.append(Import(module, node.lineno, target, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain: list[str] = []
            value: ast.expr = node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in aliases:
                target = ".".join([aliases[value.id], *chain])
                if _is_module(target, root):
                    found.append(Import(module, node.lineno, target, node.attr))
    return found


def package_modules(root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """Yield ``(dotted name, path)`` of every module of the packages."""
    for package in sorted(PACKAGES):
        for path in sorted((root / package).rglob("*.py")):
            yield _module_name(path, root), path


def cross_room_imports(root: Path = ROOT) -> list[tuple[str, str, Import]]:
    """``(from room, to room, import)`` of every import between two rooms."""
    out = []
    for module, path in package_modules(root):
        here = room_of(module)
        assert here is not None, module
        text = path.read_text(encoding="utf-8")
        for imp in imports_of(text, module, is_package=path.name == "__init__.py", root=root):
            there = room_of(imp.target)
            if there is not None and there != here:
                out.append((here, there, imp))
    return out


def cycle(edges: list[tuple[str, str, Import]]) -> list[str]:
    """A cycle of the graph of rooms (its rooms in order), or ``[]``."""
    graph: dict[str, set[str]] = {room: set() for room in LEVEL}
    for a, b, _ in edges:
        graph[a].add(b)
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def upward(edges: list[tuple[str, str, Import]]) -> list[str]:
    """Imports of a room of the same or a higher layer, as readable lines."""
    return [f"{a} -> {b}: {imp}" for a, b, imp in edges if LEVEL[b] >= LEVEL[a]]


def private(edges: list[tuple[str, str, Import]]) -> list[str]:
    """Imports of another room's private module or name, as readable lines."""
    return [f"{a} -> {b}: {imp}" for a, b, imp in edges if imp.private]


@pytest.fixture(scope="module")
def edges() -> list[tuple[str, str, Import]]:
    return cross_room_imports()


class TestRooms:
    def test_every_package_has_a_room(self) -> None:
        """Each top-level package of the repository is a room of the declared order."""
        skip = {"tests", "bench", "docs", "data"}
        found = {
            p.parent.name
            for p in ROOT.glob("*/__init__.py")
            if p.parent.name not in skip and not p.parent.name.startswith(".")
        }
        assert found == PACKAGES
        assert set(LEVEL) == PACKAGES | {"detectors"}

    def test_no_upward_import(self, edges: list[tuple[str, str, Import]]) -> None:
        """Every import between rooms goes down the order: none sideways, none up."""
        assert upward(edges) == []

    def test_no_cycle_between_rooms(self, edges: list[tuple[str, str, Import]]) -> None:
        """The graph of rooms is acyclic."""
        assert cycle(edges) == []

    def test_no_private_name_across_rooms(self, edges: list[tuple[str, str, Import]]) -> None:
        """No room imports another room's ``_private`` module or name (``_errors`` aside)."""
        assert private(edges) == []

    def test_pure_rooms_do_not_talk_to_the_database(self) -> None:
        """geo, fleet, tracking, stands, detectors, enforcement, maps and planning import no
        database library: storage is ``db``'s."""
        bad = []
        for module, path in package_modules():
            if room_of(module) not in PURE:
                continue
            text = path.read_text(encoding="utf-8")
            for imp in imports_of(text, module, is_package=path.name == "__init__.py"):
                if imp.target.split(".")[0] in DATABASE_LIBRARIES:
                    bad.append(str(imp))
        assert bad == []

    def test_the_order_is_the_documented_one(self) -> None:
        """docs/architecture.md's table of rooms lists the same layers as :data:`LAYERS`."""
        rows = re.findall(
            r"^\| (\d+) \| `?(\w+)`? \|", ARCHITECTURE_DOC.read_text(encoding="utf-8"), re.M
        )
        documented: dict[int, list[str]] = {}
        for level, room in rows:
            documented.setdefault(int(level), []).append(room)
        assert tuple(tuple(documented[k]) for k in sorted(documented)) == LAYERS


class TestChecker:
    """The checks above can fail: the collector sees what they look for."""

    def _edges(self, source: str, module: str) -> list[tuple[str, str, Import]]:
        here = room_of(module)
        assert here is not None
        found = imports_of(source, module, is_package=False)
        return [(here, b, i) for i in found if (b := room_of(i.target)) and b != here]

    @pytest.mark.parametrize(
        ("source", "module"),
        [
            ("from engines.pipeline import analyze_pings\n", "tracking.trips"),
            ("def f():\n    from stands.visits import detect_visits\n", "tracking.stops"),
            ("import tracking.detectors.findings\n", "stands.visits"),
            ("from planning import rules\n", "maps.stand"),
            ("from db.engine import make_engine\n", "enforcement.rulebook"),
        ],
    )
    def test_upward_and_sideways_imports_are_seen(self, source: str, module: str) -> None:
        """Module- and function-level imports up or across a layer are reported."""
        assert len(upward(self._edges(source, module))) == 1

    @pytest.mark.parametrize(
        "source",
        [
            "from tracking.arrays import _text_codes\n",
            "from tracking import _geodesy\n",
            "import tracking._geodesy\n",
            "import stands.visits\nx = stands.visits._level_ranks\n",
            "from stands import visits as v\nx = v._level_ranks\n",
        ],
    )
    def test_private_names_are_seen(self, source: str) -> None:
        """A private module, name or attribute of another room is reported."""
        assert len(private(self._edges(source, "engines.example"))) == 1

    def test_errors_module_and_downward_imports_pass(self) -> None:
        """``_errors`` and imports down the order are allowed."""
        source = (
            "from stands._errors import UnknownStandError\nfrom geo.h3 import latlng_to_cells\n"
        )
        edges = self._edges(source, "engines.example")
        assert len(edges) == 2
        assert upward(edges) == private(edges) == []

    def test_a_cycle_is_seen(self) -> None:
        """Two rooms importing each other make a cycle; one way only does not."""
        down = self._edges("from tracking.frames import LAT\n", "stands.visits")
        up = self._edges("from stands.visits import detect_visits\n", "tracking.trips")
        assert cycle(down) == []
        assert set(cycle(down + up)) == {"tracking", "stands"}
