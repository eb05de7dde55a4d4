"""A game's reference scores, and the normalised score they give any agent.

Atari results are reported as human-normalised scores: (agent - random) / (human -
random). A user's game has no human baseline, but every game has our search: the
`SearchDemonstrator` plays it from its YAML alone. So the reference of a game is the mean
score of random play and of the search from fresh starts (the search's starts are the
first of random play's: random play is cheap and noisy, so it plays more of them), and

    normalised = (agent - random) / (search - random)

is 0 for random play and 1 for the search (a yardstick, not a ceiling: a good policy can
pass 1).

References are cached as JSON files named by the SHA-256 of the game's YAML, so editing the
YAML (its reward, say) makes the cached reference stale and it is computed again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..games.loader import GameDefinition
from ..games.session import GameSession
from .search import SearchDemonstrator, SearchSettings

__all__ = [
    "GameReference",
    "compute_reference",
    "default_cache_dir",
    "load_reference",
    "normalised_score",
    "reference_for",
]

CACHE_ENV = "OAKEMU_RL_CACHE"
"""Environment variable naming the cache folder (default: ~/.cache/oakemu-rl)."""


def default_cache_dir() -> Path:
    """Where references are cached: $OAKEMU_RL_CACHE, else $XDG_CACHE_HOME/oakemu-rl."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "oakemu-rl"


@dataclass(frozen=True)
class GameReference:
    """The reference scores of one version of a game's YAML."""

    game: str
    yaml_sha256: str
    episodes: int
    """Episodes of the search."""
    random_episodes: int
    seed: int
    random_score: float
    search_score: float
    random_scores: list[float]
    search_scores: list[float]
    search_wins: int
    seconds: float

    def normalise(self, score: float) -> float:
        """`score` as a fraction of the way from random play to the search."""
        return normalised_score(score, self.random_score, self.search_score)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def normalised_score(score: float, random_score: float, search_score: float) -> float:
    """(score - random) / (search - random); a clear error where they are equal."""
    span = search_score - random_score
    if span == 0:
        raise ValueError(
            f"the search and random play both score {random_score:g}: no normalised score"
        )
    return (score - random_score) / span


def _cache_file(cache_dir: Path, sha: str) -> Path:
    return cache_dir / "reference" / f"{sha}.json"


def load_reference(game: GameDefinition, cache_dir: Path | None = None) -> GameReference | None:
    """The cached reference of `game`'s YAML as it is now; None if there is none (or the
    cached file is unreadable)."""
    path = _cache_file(cache_dir or default_cache_dir(), game.yaml_sha256)
    try:
        data = json.loads(path.read_text())
        # Written before random play had a count of its own: it played the search's.
        data.setdefault("random_episodes", data.get("episodes"))
        return GameReference(**data)
    except (OSError, ValueError, TypeError):
        return None


def _start_seeds(seed: int, count: int) -> list[int]:
    """The first `count` fresh starts drawn from `seed` (a longer draw begins with them)."""
    return [int(s) for s in np.random.default_rng(seed).integers(1, 2**31 - 1, count)]


def _random_scores(
    game: GameDefinition,
    episodes: int,
    seed: int,
    progress: Callable[[int], None] | None = None,
) -> list[float]:
    rng = np.random.default_rng([seed, 1])
    session = GameSession(game)
    scores = []
    for start in _start_seeds(seed, episodes):
        session.reset(start)
        while session.step(int(rng.integers(game.num_actions))).outcome is None:
            pass
        scores.append(float(session.values.get("score", 0)))
        if progress is not None:
            progress(1)
    return scores


def compute_reference(
    game: GameDefinition,
    episodes: int = 3,
    *,
    random_episodes: int = 30,
    seed: int = 0,
    search: SearchSettings | None = None,
    progress: Callable[[int], None] | None = None,
) -> GameReference:
    """Play `random_episodes` episodes of random play and `episodes` of the search from
    fresh starts drawn from `seed` (the search's are random play's first); `progress` is
    called with 1 after each episode of either."""
    if episodes < 1 or random_episodes < 1:
        raise ValueError(
            f"episodes and random_episodes must be at least 1, got {episodes} and {random_episodes}"
        )
    started = time.monotonic()
    random_scores = _random_scores(game, random_episodes, seed, progress)
    demonstrator = SearchDemonstrator(game, search, seed=seed)
    search_scores, wins = [], 0
    for start in _start_seeds(seed, episodes):
        result = demonstrator.play(start)
        search_scores.append(result.trajectory.score)
        wins += result.won
        if progress is not None:
            progress(1)
    return GameReference(
        game=game.key,
        yaml_sha256=game.yaml_sha256,
        episodes=episodes,
        random_episodes=random_episodes,
        seed=seed,
        random_score=float(np.mean(random_scores)),
        search_score=float(np.mean(search_scores)),
        random_scores=random_scores,
        search_scores=search_scores,
        search_wins=wins,
        seconds=time.monotonic() - started,
    )


def reference_for(
    game: GameDefinition,
    episodes: int = 3,
    *,
    random_episodes: int = 30,
    seed: int = 0,
    cache_dir: Path | None = None,
    refresh: bool = False,
    progress: Callable[[int], None] | None = None,
) -> tuple[GameReference, bool]:
    """The reference of `game`, from the cache when it holds one of this YAML from `seed`
    with at least `episodes` search and `random_episodes` random episodes (unless
    `refresh`), else measured and cached: only random play again where the cached search
    suffices. Returns (reference, whether it came from the cache as it was). `progress`
    counts every episode asked for, those served from the cache at once."""
    cache_dir = cache_dir or default_cache_dir()
    cached = None if refresh else load_reference(game, cache_dir)
    if cached is not None and cached.seed == seed and cached.episodes >= episodes:
        if cached.random_episodes >= random_episodes:
            if progress is not None:
                progress(episodes + random_episodes)
            return cached, True
        if progress is not None:
            progress(episodes)
        started = time.monotonic()
        random_scores = _random_scores(game, random_episodes, seed, progress)
        reference = replace(
            cached,
            random_episodes=random_episodes,
            random_score=float(np.mean(random_scores)),
            random_scores=random_scores,
            seconds=cached.seconds + time.monotonic() - started,
        )
    else:
        reference = compute_reference(
            game, episodes, random_episodes=random_episodes, seed=seed, progress=progress
        )
    path = _cache_file(cache_dir, reference.yaml_sha256)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(reference.to_json())
    partial.replace(path)
    return reference, False
