"""Emulator speed: the raw zx core against OakEmuEnv on the same game, side by side.

    .venv/bin/python benchmarks/emulator_speed.py [--game forest_run] [--seconds 5]

Three ways of running the same game with random actions, in one process:

- `zx.Spectrum` (headless): the `zx` package's own Python machine, which renders
  pixels and dispatches port reads through its device list;
- raw core: zx's C++ core driven the way OakEmu-RL does (`ZXSpectrum.run_frames`),
  keys set, no variables read, no observation;
- OakEmuEnv: a full agent step (keys, frame_skip frames, variables, reward,
  episode conditions, the 84x84x4 observation), counted as frames.

The raw core and the env replay the same recorded random-agent episodes (same
start states, same actions), so they emulate exactly the same frames and the
difference between them is the env's own work.

It prints frames/s for each and the env's overhead over the raw core.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from oakemu_rl.emulator import ZXSpectrum
from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.games import GameSession, load_game


def measure(run_chunk: Callable[[], int], seconds: float) -> float:
    """Call run_chunk() (which returns frames run) for about `seconds`; frames per second."""
    frames, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        frames += run_chunk()
    return frames / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="forest_run")
    parser.add_argument("--seconds", type=float, default=6.0, help="per contender, in all")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds (noise control)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--record-steps", type=int, default=3000, help="random-agent steps replayed"
    )
    args = parser.parse_args()

    game = load_game(args.game)
    frame_skip = game.spec.frame_skip
    rng = np.random.default_rng(args.seed)

    # Record episodes of a random agent (start state and actions), so that the raw
    # core and the env then emulate exactly the same frames.
    env = OakEmuEnv(game, seed=args.seed)
    episodes: list[tuple[bytes, list[int]]] = []
    steps = 0
    while steps < args.record_steps:
        env.reset()
        start, actions = env.save_state(), []
        done = False
        while not done:
            action = int(rng.integers(env.num_actions))
            _, _, terminated, truncated, _ = env.step(action)
            actions.append(action)
            done = terminated or truncated
        episodes.append((start, actions))
        steps += len(actions)

    session = GameSession(game)
    machine: ZXSpectrum = session.machine
    key_sets = [frozenset(keys) for keys in game.spec.actions]

    def replay(play_episode: Callable[[bytes, list[int]], None]) -> Callable[[], int]:
        position = 0

        def chunk() -> int:
            nonlocal position
            start, actions = episodes[position % len(episodes)]
            position += 1
            play_episode(start, actions)
            return len(actions) * frame_skip

        return chunk

    def raw_episode(start: bytes, actions: list[int]) -> None:
        machine.load_state(start)
        for action in actions:
            machine.set_keys(key_sets[action])
            machine.run_frames(frame_skip)

    def env_episode(start: bytes, actions: list[int]) -> None:
        env.reset(state=start)
        for action in actions:
            env.step(action)

    raw_chunk, env_chunk = replay(raw_episode), replay(env_episode)

    import zx  # the package's own machine, for reference

    spectrum = zx.Spectrum(headless=True)
    _install_core_state(spectrum, episodes[0][0])

    def zx_chunk() -> int:
        spectrum.run(duration=100 * frame_skip / 50, fast_forward=True)
        return 100 * frame_skip

    contenders = {"zx.Spectrum": zx_chunk, "raw core": raw_chunk, "OakEmuEnv": env_chunk}
    for chunk in contenders.values():
        chunk()  # warm up
    # Interleaved rounds, so that load from other processes hits every contender alike;
    # each round's ratios are taken within the round, and the medians reported.
    rounds: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, chunk in contenders.items():
            rounds[name].append(measure(chunk, args.seconds / args.rounds))
    median = {name: statistics.median(values) for name, values in rounds.items()}
    env_ratio = statistics.median(
        e / r for e, r in zip(rounds["OakEmuEnv"], rounds["raw core"], strict=True)
    )
    zx_ratio = statistics.median(
        r / z for r, z in zip(rounds["raw core"], rounds["zx.Spectrum"], strict=True)
    )
    print(
        f"game: {game.name} ({args.game}), frame_skip {frame_skip}, "
        f"{args.rounds} interleaved rounds, {args.seconds:g} s per contender"
    )
    for name, fps in median.items():
        print(f"  {name:<12} {fps:10,.0f} frames/s (median)")
    print(f"OakEmuEnv / raw core: {env_ratio:.3f}  ->  env overhead {100 * (1 - env_ratio):.1f}% "
          "(target < 15%)")  # fmt: skip
    print(f"raw core / zx.Spectrum: {zx_ratio:.2f}x")


def _install_core_state(spectrum: object, state: bytes) -> None:
    """Give zx.Spectrum the same started game: both wrap the same C++ core, whose
    state bytes end our saved state."""
    view = spectrum._get_state_view()  # type: ignore[attr-defined]
    view[:] = state[-len(view) :]


if __name__ == "__main__":
    main()
