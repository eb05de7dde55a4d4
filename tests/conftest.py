"""Shared fixtures: a tiny game built from a hand-assembled program."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

from oakemu_rl.emulator import save_snapshot
from z80_programs import RESULTS, counter_with_routine, snapshot_48k

# Fuzzing profiles (tests/test_fuzz.py): a quick pass in every test run, a long one with
# `make fuzz`. No deadline: a slow example on a busy machine is not a bug; a hang is
# caught by the test's timeout.
settings.register_profile("ci", max_examples=150, deadline=None)
settings.register_profile("fuzz", max_examples=20_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def counter_game_spec(snapshot: str = "counter.sna") -> dict[str, Any]:
    """A game whose 'score' is a frame counter and whose 'rare' routine runs every 4th frame."""
    return {
        "name": "Counter",
        "machine": "48k",
        "snapshot": snapshot,
        "play_area": {"x": 0, "y": 0, "width": 256, "height": 192},
        "frame_skip": 2,
        "max_episode_steps": 40,
        "data": {
            "score": {"address": RESULTS, "type": "byte"},
            "seed": {"address": RESULTS + 2, "type": "word"},
            "lives": {"address": RESULTS + 4, "type": "number_string", "length": 1},
        },
        "routines": {"tick": 0x8100, "rare": 0x8110},
        "start": [{"randomize": ["seed"]}, {"wait": 3}, {"run_until": "tick"}],
        "actions": [[], ["Q"], ["KEMPSTON_FIRE"]],
        "reward": {"variables": {"score": {"reward": 1.0}}, "events": {"rare": 5.0}, "time": -0.5},
        "episode": {"win": [{"variable": "score", "op": "greater-or-equal", "reference": 60}]},
    }


@pytest.fixture
def write_game(tmp_path: Path) -> Callable[..., Path]:
    """Write a game YAML (the counter game, updated with overrides) next to its snapshot."""
    save_snapshot(snapshot_48k(counter_with_routine()), tmp_path / "counter.sna")

    def write(overrides: dict[str, Any] | None = None, name: str = "counter.yaml") -> Path:
        spec = counter_game_spec()
        for key, value in (overrides or {}).items():
            if value is None:
                spec.pop(key, None)
            else:
                spec[key] = value
        path = tmp_path / name
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return path

    return write
