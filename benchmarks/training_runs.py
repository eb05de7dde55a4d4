"""Train and evaluate as a user would, through the command line: shared by the benchmarks
that compare configurations over games and seeds (`defaults_sweep.py`, `generality.py`).

A run is `oakemu-rl train --config FILE --run-dir DIR --seed S --steps N --quiet` on a
bundled game given by its YAML path (so no preset applies: the defaults and the given
overrides are all there is). A run directory that already holds a summary is reused,
so an interrupted benchmark resumes. Each trained agent is played greedily with
`oakemu-rl evaluate` from its best checkpoint (by the lower bound of the 95% interval),
and random play is the same evaluation with `--random`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oakemu_rl.games.loader import bundled_games, file_sha256

OAKEMU_RL = [sys.executable, "-m", "oakemu_rl.cli.main"]
TRAINING_SET = ("catch", "forest_run", "key_hunt", "deep_dive")
"""The games the defaults are chosen on; every other bundled game is the test set.
`key_hunt` and `deep_dive` (sparse pickups and navigation, like many users' games) joined
after the current defaults were chosen on `catch` and `forest_run`."""


SEARCH_DEMOS = "search_demos"
"""A candidate's setting that is not the configuration's: `{episodes: N}` records N games of
the search demonstrator (`oakemu-rl demo`) before training, and the run learns from them
(`demos.paths`). With a wall-clock budget, the search's time is taken from the run's."""


def test_set() -> list[str]:
    """The bundled games that no default was chosen on."""
    return [game for game in bundled_games() if game not in TRAINING_SET]


@dataclass(frozen=True)
class Evaluation:
    """Greedy (or random) episodes of one agent."""

    mean_return: float
    ci95_low: float
    ci95_high: float
    median_return: float
    mean_score: float
    win_rate: float
    episodes: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evaluation:
        return cls(**{name: float(data[name]) for name in cls.__dataclass_fields__})  # type: ignore[arg-type]

    def interval(self) -> str:
        return f"{self.mean_return:.1f} [{self.ci95_low:.1f}, {self.ci95_high:.1f}]"


def settings_name(settings: dict[str, Any], game_yaml: str) -> str:
    """`dqn-1a2b3c4d`: the algorithm and a digest of the whole configuration the settings
    give on the game, defaults included, so that runs of equal configurations are shared
    (between benchmarks, and between a candidate and the defaults it became).

    The game enters by content (its YAML and the snapshot or tape it names), not by path:
    a checkout elsewhere reuses the runs, and an edited game trains new ones."""
    from oakemu_rl.cli.train_cmd import experiment_type
    from oakemu_rl.games import load_game

    config = experiment_type(settings["algo"]).config_type.for_game(game_yaml, settings)
    dump = config.model_dump(mode="json")
    game = load_game(game_yaml)
    dump["game"] = [game.yaml_sha256, file_sha256(game.snapshot_path)]
    text = json.dumps(dump, sort_keys=True)
    return f"{settings['algo']}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def train(
    out: Path,
    settings: dict[str, Any],
    game: str,
    seed: int,
    steps: int,
    *,
    minutes: float | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Train `settings` (a partial configuration with `algo`) on `game` for `steps` env
    steps, or with `minutes`, for that much wall clock instead (`train --minutes`); the run
    directory and its summary."""
    game_yaml = str(bundled_games()[game])
    search = settings.get(SEARCH_DEMOS)
    settings = {key: value for key, value in settings.items() if key != SEARCH_DEMOS}
    name = settings_name(settings, game_yaml) + (f"-search{search['episodes']}" if search else "")
    budget = f"{minutes:g}min" if minutes is not None else f"{steps}"
    run_dir = out / "runs" / f"{name}-{game}-s{seed}-{budget}"
    summary_path = run_dir / "summary.json"
    if not _finished(summary_path, None if minutes is not None else steps):
        if run_dir.exists():  # an unfinished or interrupted run: start it again
            subprocess.run(["rm", "-rf", str(run_dir)], check=True)
        started = time.monotonic()
        if search:
            demos = out / "demos" / run_dir.name
            seconds = record_search_demos(game_yaml, demos, search["episodes"], seed)
            settings["demos"] = {**settings.get("demos", {}), "paths": [str(demos.resolve())]}
            if minutes is not None:  # the search's time comes out of the run's
                if seconds >= minutes * 60:
                    raise SystemExit(
                        f"{game}: {search['episodes']} search demonstrations took {seconds:.0f} "
                        f"s, the whole budget of {minutes:g} minutes; give more --minutes"
                    )
                minutes -= seconds / 60
        config = out / "configs" / f"{name}-{game}.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump({**settings, "game": game_yaml}, sort_keys=False))
        command = [*OAKEMU_RL, "train", "--config", str(config), "--run-dir", str(run_dir)]
        command += ["--seed", str(seed), "--quiet"]
        command += ["--minutes", f"{minutes:g}"] if minutes is not None else ["--steps", str(steps)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        print(f"  trained {name} on {game}, seed {seed}: {time.monotonic() - started:.0f} s",
              flush=True)  # fmt: skip
    return run_dir, json.loads(summary_path.read_text())


def record_search_demos(game_yaml: str, out: Path, episodes: int, seed: int) -> float:
    """`oakemu-rl demo`: `episodes` games played by the search (on every core) into `out`,
    afresh, with its summary beside it (`out`.json); the wall-clock seconds it took."""
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    command = [*OAKEMU_RL, "demo", game_yaml, "--out", str(out), "--episodes", str(episodes)]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--seed", str(seed), "--json"], check=True, capture_output=True, text=True
    )
    (out.parent / f"{out.name}.json").write_text(done.stdout)
    return time.monotonic() - started


def _finished(summary_path: Path, steps: int | None) -> bool:
    """Whether the run wrote its summary after its whole budget (`steps`, or None: its
    time): a run stopped early (SIGTERM, Ctrl-C) writes one too, with fewer steps or
    stopped as interrupted."""
    if not summary_path.is_file():
        return False
    summary = json.loads(summary_path.read_text())
    if steps is None:
        return str(summary.get("stop_reason", "")).startswith("time limit")
    return bool(summary["steps"] >= steps)


def evaluate(run_dir: Path, episodes: int, seed: int, random: bool = False) -> Evaluation:
    """Play the run's best checkpoint greedily (`random`: uniformly random actions)."""
    cache = run_dir / f"eval-{'random' if random else 'greedy'}-{episodes}-s{seed}.json"
    if not cache.is_file():
        command = [*OAKEMU_RL, "evaluate", str(run_dir), "--episodes", str(episodes)]
        command += ["--seed", str(seed), "--json"] + (["--random"] if random else [])
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        cache.write_text(done.stdout)
    return Evaluation.from_json(json.loads(cache.read_text()))
