"""Load and validate game definitions before any emulator starts."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.constructor import ConstructorError
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..emulator.errors import SnapshotError
from ..emulator.snapshots import READERS, Snapshot, load_snapshot
from ..emulator.tape import CACHE_DIR_NAME, TapeError, is_tape_path, tape_snapshot
from .errors import GameDefinitionError
from .schema import DataVariable, GameSpec, PressStep, RandomizeStep, RunUntilStep, clean_message

BUNDLED_DIR = Path(__file__).parent / "bundled"


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, as hex (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class GameDefinition:
    """A validated game: the parsed YAML plus where it and its snapshot live."""

    spec: GameSpec
    path: Path

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def key(self) -> str:
        """A short identifier: the YAML file's stem."""
        return self.path.stem

    @property
    def yaml_sha256(self) -> str:
        """The SHA-256 of the YAML file's bytes as they are now: what trajectories,
        references and exported policies are tied to."""
        return file_sha256(self.path)

    @property
    def snapshot_path(self) -> Path:
        return (self.path.parent / self.spec.snapshot).resolve()

    @property
    def from_tape(self) -> bool:
        """Whether `snapshot:` names a .tap or .tzx file, loaded through the ROM."""
        return is_tape_path(self.spec.snapshot)

    @cached_property
    def snapshot(self) -> Snapshot:
        """The starting machine: the snapshot file, or the state a tape leads to (cached in
        `.oakemu-cache/` next to the YAML, keyed by the tape's hash)."""
        if self.from_tape:
            return tape_snapshot(self.snapshot_path, self.path.parent / CACHE_DIR_NAME)
        return load_snapshot(self.snapshot_path)

    @property
    def num_actions(self) -> int:
        return len(self.spec.actions)

    def data_variable(self, name: str) -> DataVariable:
        """The data variable `name`; raises ValueError naming the game's file and the
        variables it defines where it has none of that name."""
        if name not in self.spec.data:
            raise ValueError(
                f"{name!r} is not a data variable of {self.path}; defined: "
                f"{', '.join(self.spec.data)}"
            )
        return self.spec.data[name]


def bundled_games() -> dict[str, Path]:
    """The games shipped with OakEmu-RL, by key."""
    return {p.stem: p for p in sorted(BUNDLED_DIR.glob("*/*.yaml"))}


def resolve_game_path(game: str | Path) -> Path:
    """A bundled game's key, or a path to a YAML file."""
    bundled = bundled_games()
    if isinstance(game, str) and game in bundled:
        return bundled[game]
    path = Path(game)
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return path
    raise GameDefinitionError(
        game,
        "",
        f"no bundled game of that name and no such YAML file; bundled games: "
        f"{', '.join(bundled) or 'none'}",
    )


_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A key appears twice in one mapping of a YAML file."""

    def __init__(self, key: Hashable, field: str, mark: Mark, first_mark: Mark) -> None:
        self.key = key
        self.field = field  # the duplicated key's path in the YAML, e.g. "data.score"
        self.line = mark.line + 1  # 1-based, as an editor shows it
        self.first_line = first_mark.line + 1
        if self.line == self.first_line:
            here = f"line {self.line}, column {mark.column + 1}"
            there = f"column {first_mark.column + 1} of the same line"
        else:
            here, there = f"line {self.line}", f"line {self.first_line}"
        super().__init__(
            context="while constructing a mapping",
            context_mark=first_mark,
            problem=f"duplicate key {key!r} on {here}; first defined on {there}",
            problem_mark=mark,
        )


class GameYamlLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, except that a key repeated in one mapping is a DuplicateKeyError
    instead of "the last one wins". Keys brought in by a `<<` merge may still be overridden."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()
        self._root: Node | None = None

    def construct_document(self, node: Node) -> Any:
        self._root = node
        return super().construct_document(node)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        self._check_duplicates(node)
        return super().construct_mapping(node, deep=deep)

    def flatten_mapping(self, node: MappingNode) -> None:
        # A `<<` merge flattens the merged mapping into its own node: check it before that.
        self._check_duplicates(node)
        super().flatten_mapping(node)

    def _check_duplicates(self, node: MappingNode) -> None:
        if id(node) in self._checked or not isinstance(node, MappingNode):
            return
        self._checked.add(id(node))
        seen: dict[Hashable, Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
                continue  # a non-scalar key is left to PyYAML ("found unhashable key")
            key = self.construct_object(key_node)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue
            if first is not key_node:
                parent = _node_path(self._root, node) if self._root is not None else None
                field = f"{parent}.{key_node.value}" if parent else str(key_node.value)
                raise DuplicateKeyError(key, field, key_node.start_mark, first.start_mark)


def _node_path(root: Node, target: Node) -> str | None:
    """Where `target` sits under `root`, written as the loader names fields (a.b[0].c)."""
    stack: list[tuple[Node, str]] = [(root, "")]
    visited: set[int] = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in visited:
            continue  # an alias seen before (anchors may even be recursive)
        visited.add(id(node))
        children: list[tuple[Node, str]] = []
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE_TAG:
                    children.append(
                        (value_node, f"{path}.{key_node.value}" if path else key_node.value)
                    )
                else:
                    children.append((value_node, path))
        elif isinstance(node, SequenceNode):
            children = [(item, f"{path}[{n}]") for n, item in enumerate(node.value)]
        stack.extend(reversed(children))  # depth first, in document order
    return None


def read_game_yaml(text: str, path: Path) -> Any:
    """Parse a game YAML's text with GameYamlLoader, raising GameDefinitionError."""
    try:
        return yaml.load(text, Loader=GameYamlLoader)  # a SafeLoader subclass
    except DuplicateKeyError as exc:
        raise GameDefinitionError(
            path, exc.field, f"{exc.problem}; expected each key once in a mapping"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise GameDefinitionError(path, where, f"invalid YAML: {problem}") from None


def _location(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif not item.startswith(("function-", "list[", "dict[", "tagged-union", "union[")):
            parts.append(("." if parts else "") + item)
    return "".join(parts)


def _describe(error: Any) -> str:
    message = clean_message(str(error["msg"]))
    if error["type"] == "missing":
        return "is required but missing"
    if error["type"] == "extra_forbidden":
        return "unknown key"
    given = error.get("input")
    if error["type"] not in ("value_error",) and given is not None and not isinstance(given, dict):
        return f"{message}; got {given!r}"
    return message


def parse_game(data: Any, path: Path) -> GameSpec:
    """Validate already-loaded YAML data, raising GameDefinitionError."""
    if not isinstance(data, dict):
        raise GameDefinitionError(path, "", "expected a mapping of fields at the top level")
    try:
        spec = GameSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise GameDefinitionError(path, _location(first["loc"]), _describe(first)) from None
    _check_references(spec, path)
    return spec


def _check_references(spec: GameSpec, path: Path) -> None:
    data, routines = spec.data, spec.routines

    def need_variable(name: str, field: str) -> None:
        if name not in data:
            raise GameDefinitionError(
                path, field, f"variable {name!r} is not defined in data; defined: "
                f"{', '.join(data) or 'none'}"
            )  # fmt: skip

    def need_routine(name: str, field: str) -> None:
        if name not in routines:
            raise GameDefinitionError(
                path, field, f"routine {name!r} is not defined in routines; defined: "
                f"{', '.join(routines) or 'none'}"
            )  # fmt: skip

    for n, step in enumerate(spec.start):
        if isinstance(step, RandomizeStep):
            for name in step.randomize:
                need_variable(name, f"start[{n}].randomize")
        elif isinstance(step, RunUntilStep):
            need_routine(step.run_until, f"start[{n}].run_until")
        elif isinstance(step, PressStep) and not step.press:
            raise GameDefinitionError(path, f"start[{n}].press", "needs at least one key")
    for name in spec.reward.variables:
        need_variable(name, f"reward.variables.{name}")
    for name in spec.reward.events:
        need_routine(name, f"reward.events.{name}")
    for kind in ("win", "loss"):
        for n, cond in enumerate(getattr(spec.episode, kind)):
            if cond.variable is not None:
                need_variable(cond.variable, f"episode.{kind}[{n}].variable")
            if cond.event is not None:
                need_routine(cond.event, f"episode.{kind}[{n}].event")
    seen: dict[frozenset[str], int] = {}
    for n, keys in enumerate(spec.actions):
        combo = frozenset(keys)
        if combo in seen:
            raise GameDefinitionError(
                path, f"actions[{n}]", f"repeats action {seen[combo]} ({sorted(combo)})"
            )
        seen[combo] = n


def load_game(game: str | Path) -> GameDefinition:
    """Load a game by bundled key or YAML path; validate it and its snapshot.

    Every problem is a GameDefinitionError naming the file, the field and what
    was expected, raised before any emulator starts.
    """
    path = resolve_game_path(game).resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GameDefinitionError(path, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GameDefinitionError(path, "", f"cannot be read: {exc}") from None
    spec = parse_game(read_game_yaml(text, path), path)
    definition = GameDefinition(spec, path)
    suffix = Path(spec.snapshot).suffix
    if suffix.lower() not in READERS and not definition.from_tape:
        raise GameDefinitionError(
            path, "snapshot", f"unknown snapshot format {suffix!r}; expected a .z80, .sna or "
            ".szx snapshot, or a .tap or .tzx tape",
        )  # fmt: skip
    if definition.from_tape and spec.machine != "48k":
        raise GameDefinitionError(
            path, "snapshot", f"{spec.snapshot} is a tape, which loads on a 48K machine, but "
            f"machine is {spec.machine}; expected machine: 48k",
        )  # fmt: skip
    try:
        snapshot = definition.snapshot
    except (SnapshotError, TapeError) as exc:
        raise GameDefinitionError(path, "snapshot", exc.problem + f" ({exc.path})") from None
    if snapshot.model != spec.machine:
        raise GameDefinitionError(
            path,
            "snapshot",
            f"{spec.snapshot} is a {snapshot.model} snapshot but machine is {spec.machine}",
        )
    return definition
