"""`oakemu-rl reference`: random and search scores cached by the YAML's SHA-256, and the
normalised score `evaluate` prints from them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from oakemu_rl.cli.main import main
from oakemu_rl.games.loader import file_sha256, load_game
from oakemu_rl.trajectories.reference import (
    GameReference,
    compute_reference,
    normalised_score,
    reference_for,
)
from ppo_testing import small_config


def test_reference_is_cached_by_the_yaml_hash_and_recomputed_when_it_changes(
    write_game: Callable[..., Path], tmp_path: Path
) -> None:
    path = write_game({"max_episode_steps": 12})
    cache = tmp_path / "cache"
    first, cached = reference_for(load_game(path), 2, seed=4, cache_dir=cache)
    assert not cached
    assert first.yaml_sha256 == file_sha256(path)
    assert (cache / "reference" / f"{first.yaml_sha256}.json").is_file()
    # Random play, cheap and noisy, plays 30 episodes by default; the search 2.
    assert (first.random_episodes, len(first.random_scores)) == (30, 30)
    assert (first.episodes, len(first.search_scores)) == (2, 2)
    # The scores are what random play and the search really score from those starts, and
    # the search's starts are random play's first.
    again = compute_reference(load_game(path), 2, seed=4)
    assert again.random_scores == first.random_scores
    assert again.search_scores == first.search_scores
    assert first.random_score == pytest.approx(sum(first.random_scores) / 30)
    fewer = compute_reference(load_game(path), 2, random_episodes=2, seed=4)
    assert fewer.random_scores == first.random_scores[:2]

    second, cached = reference_for(load_game(path), 2, seed=4, cache_dir=cache)
    assert cached and second == first
    # Fewer episodes are served from a larger cached reference; more are measured.
    assert reference_for(load_game(path), 1, seed=4, cache_dir=cache)[1]
    assert not reference_for(load_game(path), 3, seed=4, cache_dir=cache)[1]

    # Any edit of the YAML (here a longer episode) is another game version.
    path.write_text(path.read_text().replace("max_episode_steps: 12", "max_episode_steps: 16"))
    changed, cached = reference_for(load_game(path), 2, seed=4, cache_dir=cache)
    assert not cached
    assert changed.yaml_sha256 != first.yaml_sha256


def test_a_reference_with_too_few_random_episodes_plays_only_random_play_again(
    write_game: Callable[..., Path], tmp_path: Path
) -> None:
    path = write_game({"max_episode_steps": 12})
    game = load_game(path)
    cache = tmp_path / "cache"
    # Cached before random play had a count of its own (3 episodes of each), with a
    # search score no search of this game makes: it must be kept, not measured again.
    old = json.loads(compute_reference(game, 3, random_episodes=3, seed=4).to_json())
    del old["random_episodes"]
    old["search_scores"], old["search_score"] = [99.0, 99.0, 99.0], 99.0
    folder = cache / "reference"
    folder.mkdir(parents=True)
    (folder / f"{file_sha256(path)}.json").write_text(json.dumps(old))

    done: list[int] = []
    reference, cached = reference_for(
        game, 3, random_episodes=10, seed=4, cache_dir=cache, progress=done.append
    )
    assert not cached
    # A progress bar reaches its end: the search's episodes count, served from the cache.
    assert done[0] == 3 and sum(done) == 13
    assert (reference.search_score, reference.episodes) == (99.0, 3)
    assert reference.random_episodes == 10 and len(reference.random_scores) == 10
    assert reference.random_scores[:3] == old["random_scores"]
    done.clear()
    assert reference_for(
        game, 3, random_episodes=10, seed=4, cache_dir=cache, progress=done.append
    ) == (reference, True)
    assert sum(done) == 13


def test_normalised_score() -> None:
    assert normalised_score(10.0, 10.0, 110.0) == 0.0
    assert normalised_score(110.0, 10.0, 110.0) == 1.0
    assert normalised_score(160.0, 10.0, 110.0) == 1.5
    with pytest.raises(ValueError, match="both score 7"):
        normalised_score(3.0, 7.0, 7.0)


def test_reference_command_and_evaluate_prints_the_normalised_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OAKEMU_RL_CACHE", str(tmp_path / "cache"))
    config = small_config(
        game="catch",
        total_steps=256,
        ppo={"rollout_steps": 64},
        checkpoint={"every_steps": 256},
        tester={"enabled": False},
    )
    config_file = tmp_path / "ppo.yaml"
    config_file.write_text(config.to_yaml())
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config_file), "--run-dir", str(run_dir), "--quiet"]) == 0

    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["normalised_score"] is None  # no reference yet

    # A reference of catch as it is now (written as `reference` writes it, with made-up
    # scores: the search on catch takes minutes).
    game = load_game("catch")
    reference = GameReference(
        game="catch",
        yaml_sha256=game.yaml_sha256,
        episodes=1,
        random_episodes=1,
        seed=0,
        random_score=1.0,
        search_score=31.0,
        random_scores=[1.0],
        search_scores=[31.0],
        search_wins=1,
        seconds=0.0,
    )
    folder = tmp_path / "cache" / "reference"
    folder.mkdir(parents=True)
    (folder / f"{reference.yaml_sha256}.json").write_text(reference.to_json())
    assert main(["evaluate", str(run_dir), "--episodes", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["normalised_score"] == pytest.approx((result["mean_score"] - 1.0) / 30.0)
    assert main(["evaluate", str(run_dir), "--episodes", "2"]) == 0
    assert "normalised score" in capsys.readouterr().out
    # `reference` serves it from the cache.
    assert main(["reference", "catch", "--episodes", "1", "--random-episodes", "1"]) == 0
    out = capsys.readouterr().out
    assert "random play scores 1, the search 31" in out and "cached" in out
