"""Fuzzing the readers of files users bring: snapshots (.z80, .sna, .szx) and game YAMLs.

The only acceptable failure is the project's own error (SnapshotError,
GameDefinitionError): no other exception, no hang, no interpreter crash. A snapshot
that does parse is also installed in the emulator, where bad values would reach C++.
Inputs are mutations of valid files (flipped, inserted and deleted bytes, truncations),
which get past the first checks, and plain random bytes.

The CI profile runs a quick pass; ``make fuzz`` runs the long one
(``HYPOTHESIS_PROFILE=fuzz``), see conftest.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oakemu_rl.emulator import ZXSpectrum
from oakemu_rl.emulator.errors import SnapshotError
from oakemu_rl.emulator.snapshots import (
    Snapshot,
    load_snapshot,
    read_sna,
    read_szx,
    read_z80,
    write_sna,
    write_szx,
    write_z80,
)
from oakemu_rl.games.errors import GameDefinitionError
from oakemu_rl.games.loader import bundled_games, load_game

pytestmark = pytest.mark.timeout(600)

CATCH_YAML = bundled_games()["catch"]
CATCH = load_snapshot(CATCH_YAML.parent / "catch.sna")


def _as_128k(snapshot: Snapshot) -> Snapshot:
    pages = {5: snapshot.ram_pages[5], 2: snapshot.ram_pages[2], 0: snapshot.ram_pages[0]}
    pages.update({p: bytes(16384) for p in (1, 3, 4, 6, 7)})
    return Snapshot("128k", snapshot.registers, pages, border=snapshot.border, port_7ffd=0x10)


VALID: dict[str, list[bytes]] = {
    ".z80": [write_z80(CATCH), write_z80(_as_128k(CATCH))],
    ".sna": [write_sna(CATCH), write_sna(_as_128k(CATCH))],
    ".szx": [write_szx(CATCH), write_szx(CATCH, compress=False), write_szx(_as_128k(CATCH))],
}
READ = {".z80": read_z80, ".sna": read_sna, ".szx": read_szx}


@st.composite
def mutated(draw: st.DrawFn, originals: list[bytes]) -> bytes:
    """A valid file with a few random edits, or cut short."""
    data = bytearray(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        # Most of what a reader checks lives in the first bytes: aim there more often.
        limit = draw(st.sampled_from([64, 256, len(data)]))
        at = draw(st.integers(0, max(0, min(limit, len(data)) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete" and data:
            del data[at : at + draw(st.integers(1, 16))]
        elif kind == "truncate":
            del data[at:]
    return bytes(data)


def _check_snapshot_bytes(suffix: str, data: bytes) -> None:
    try:
        snapshot = READ[suffix](data, f"fuzzed{suffix}")
    except SnapshotError as exc:
        assert f"fuzzed{suffix}" in str(exc)  # the message names the file
        return
    machine = ZXSpectrum(snapshot.model)
    machine.load_snapshot(snapshot)
    machine.run_frames(1)


@pytest.mark.parametrize("suffix", sorted(VALID))
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_mutated_snapshot_reads_or_raises_snapshot_error(
    suffix: str, data: st.DataObject
) -> None:
    _check_snapshot_bytes(suffix, data.draw(mutated(VALID[suffix])))


@pytest.mark.parametrize("suffix", sorted(VALID))
@given(raw=st.binary(max_size=200_000))
def test_random_bytes_read_or_raise_snapshot_error(suffix: str, raw: bytes) -> None:
    _check_snapshot_bytes(suffix, raw)


# -- game YAMLs --------------------------------------------------------------------------

CATCH_SPEC: dict[str, Any] = yaml.safe_load(CATCH_YAML.read_text())

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=4) | st.dictionaries(
        st.text(max_size=10), children, max_size=4
    )


values = st.recursive(scalars, _containers, max_leaves=12)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a nested spec."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += _paths(child, (*prefix, i))
    return found


SPEC_PATHS = _paths(CATCH_SPEC)


@st.composite
def mutated_spec(draw: st.DrawFn) -> Any:
    """The catch game's spec with a few fields replaced, deleted or added."""
    spec = copy.deepcopy(CATCH_SPEC)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(SPEC_PATHS))
        parent: Any = spec
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[path[-1]] = draw(values)
            elif action == "delete":
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.text(max_size=10))] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced this path
    return spec


def _check_game_yaml(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzzed.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_game(path)
    except GameDefinitionError as exc:
        assert "fuzzed.yaml" in str(exc)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(spec=mutated_spec())
def test_a_mutated_game_yaml_loads_or_raises_game_definition_error(
    tmp_path: Path, spec: Any
) -> None:
    (tmp_path / "catch.sna").write_bytes((CATCH_YAML.parent / "catch.sna").read_bytes())
    _check_game_yaml(tmp_path, yaml.safe_dump(spec, allow_unicode=True))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=2_000))
def test_random_text_as_a_game_yaml_raises_game_definition_error(tmp_path: Path, text: str) -> None:
    _check_game_yaml(tmp_path, text)
