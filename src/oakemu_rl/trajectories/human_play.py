"""Playing a game yourself in a pygame window, recorded as a trajectory file.

The window shows the Spectrum's screen, scaled up; its title says the game, score and
lives. Agent steps are paced as on a real Spectrum: 50 frames a second, `frame_skip`
frames a step. Each step takes the action whose keys are the keys held:

- letters, digits, Space and Enter are the Spectrum's keys of the same name; Shift is
  CAPS_SHIFT, Alt is SYMBOL_SHIFT and Ctrl is KEMPSTON_FIRE;
- the arrow keys stand for a pair of the game's keys where the game's actions use both:
  left/right for KEMPSTON_LEFT/KEMPSTON_RIGHT, O/P, Z/X or 5/8, and up/down for
  KEMPSTON_UP/KEMPSTON_DOWN, Q/A or 7/6 (the first pair that fits);
- of the held keys, only those some action uses count: the action with exactly those
  keys, else the action with the most keys all held, else the action with no keys
  (action 0 when there is none);
- Esc or closing the window stops (the trajectory is saved, its outcome null).

`play` takes its events from pygame's queue, or from any callable called once before each
step (a test's script).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..emulator.screen import to_rgb
from ..envs.lives import lives_lost as count_lives_lost
from ..envs.oakemu_env import OakEmuEnv
from ..envs.observation import ObservationConfig
from ..games.loader import GameDefinition, load_game
from .trajectory_file import SUFFIX, Trajectory, game_file_label

__all__ = [
    "PlayError",
    "PlayResult",
    "action_for_keys",
    "arrow_keys",
    "host_key_map",
    "play",
]

SPECTRUM_FPS = 50
ARROW_PAIRS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("LEFT", "RIGHT"): (("KEMPSTON_LEFT", "KEMPSTON_RIGHT"), ("O", "P"), ("Z", "X"), ("5", "8")),
    ("UP", "DOWN"): (("KEMPSTON_UP", "KEMPSTON_DOWN"), ("Q", "A"), ("7", "6")),
}
"""For each pair of arrow keys, the pairs of Spectrum keys they may stand for, in order."""
MODIFIERS = {"SHIFT": "CAPS_SHIFT", "ALT": "SYMBOL_SHIFT", "CTRL": "KEMPSTON_FIRE"}


class PlayError(ValueError):
    """Playing cannot start (no window, a bad argument); the message says why."""


@dataclass
class PlayResult:
    """What `play` recorded and where it saved it."""

    trajectory: Trajectory
    path: Path
    stopped: bool
    """True when the player stopped before the episode ended."""


def arrow_keys(actions: Sequence[Sequence[str]]) -> dict[str, str]:
    """The Spectrum key each arrow key stands for in a game with these actions."""
    used = {key for action in actions for key in action}
    found: dict[str, str] = {}
    for arrows, pairs in ARROW_PAIRS.items():
        for pair in pairs:
            if set(pair) <= used:
                found.update(zip(arrows, pair, strict=True))
                break
    return found


def host_key_map(actions: Sequence[Sequence[str]]) -> dict[str, str]:
    """Host key names (``A``, ``7``, ``SPACE``, ``ENTER``, ``SHIFT``, ``LEFT``, ...) ->
    the Spectrum key each stands for in a game with these actions."""
    keys = {c: c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}
    keys.update(SPACE="SPACE", ENTER="ENTER", **MODIFIERS)
    keys.update(arrow_keys(actions))
    return keys


def action_for_keys(actions: Sequence[Sequence[str]], held: Iterable[str]) -> int:
    """The action for the held Spectrum keys (see the module's description)."""
    sets = [frozenset(action) for action in actions]
    used = frozenset().union(*sets)
    pressed = frozenset(held) & used
    for index, keys in enumerate(sets):
        if keys == pressed:
            return index
    subsets = [(len(keys), -index) for index, keys in enumerate(sets) if keys and keys <= pressed]
    if subsets:
        return -max(subsets)[1]
    for index, keys in enumerate(sets):
        if not keys:
            return index
    return 0


def _pygame_codes(pygame: Any) -> dict[int, str]:
    """pygame key codes -> host key names."""
    codes = {ord(c.lower()): c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}
    codes.update({getattr(pygame, f"K_KP{d}"): str(d) for d in range(10)})
    named = {
        "K_SPACE": "SPACE",
        "K_RETURN": "ENTER",
        "K_KP_ENTER": "ENTER",
        "K_LSHIFT": "SHIFT",
        "K_RSHIFT": "SHIFT",
        "K_LALT": "ALT",
        "K_RALT": "ALT",
        "K_LCTRL": "CTRL",
        "K_RCTRL": "CTRL",
        "K_LEFT": "LEFT",
        "K_RIGHT": "RIGHT",
        "K_UP": "UP",
        "K_DOWN": "DOWN",
    }
    codes.update({getattr(pygame, constant): name for constant, name in named.items()})
    return codes


def _import_pygame() -> Any:
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError:
        raise PlayError("playing needs pygame: pip install 'pygame>=2.5'") from None
    return pygame


def _open_window(pygame: Any, width: int, height: int) -> Any:
    chosen = os.environ.get("SDL_VIDEODRIVER")
    no_window = "no display to open a window on{}; set SDL_VIDEODRIVER (dummy: play unseen)"
    if sys.platform.startswith("linux") and not (
        chosen or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        # Checked first: SDL would print its own complaints, then fall back to no window.
        raise PlayError(no_window.format(" (DISPLAY and WAYLAND_DISPLAY are not set)"))
    # The display alone: initialising everything would open audio devices for nothing.
    try:
        pygame.display.init()
        window = pygame.display.set_mode((width, height))
    except pygame.error as exc:
        pygame.display.quit()
        raise PlayError(f"cannot open a window: {exc}") from None
    driver = pygame.display.get_driver()
    if not chosen and driver in ("offscreen", "dummy"):
        pygame.display.quit()
        raise PlayError(no_window.format(f" (SDL found only its {driver!r} video driver)"))
    return window


def play(
    game: str | Path | GameDefinition,
    record: str | Path,
    *,
    scale: int = 3,
    seed: int | None = None,
    max_steps: int | None = None,
    events: Callable[[], Iterable[Any]] | None = None,
    realtime: bool = True,
) -> PlayResult:
    """Play `game` in a window and save the episode to `record` (a ``*.trajectory.json``).

    Args:
        game: a bundled game's name, a YAML path or a loaded game.
        record: the trajectory file to write (atomically, when the episode ends or the
            player stops).
        scale: window pixels per Spectrum pixel.
        seed: seeds the episode's start (`reset(seed=...)`); None: a random start.
        max_steps: end the episode (outcome ``truncated``) after this many steps.
        events: called once before each step, returns the pygame events since the last
            step (default: pygame's event queue).
        realtime: pace the steps as on a Spectrum (off: as fast as the emulator runs).
    """
    record = Path(record)
    if not record.name.endswith(SUFFIX) or len(record.name) == len(SUFFIX):
        raise PlayError(f"{record}: expected a file name ending in {SUFFIX}")
    if record.is_dir():
        raise PlayError(f"{record}: is a directory; expected a {SUFFIX} file")
    if scale < 1:
        raise PlayError(f"scale must be at least 1, got {scale}")
    if max_steps is not None and max_steps < 1:
        raise PlayError(f"max_steps must be at least 1, got {max_steps}")
    definition = game if isinstance(game, GameDefinition) else load_game(game)
    spec = definition.spec
    actions = [list(action) for action in spec.actions]
    host_keys = host_key_map(actions)
    record.parent.mkdir(parents=True, exist_ok=True)

    pygame = _import_pygame()
    codes = _pygame_codes(pygame)
    # Observations are not used here: the smallest the env makes.
    env = OakEmuEnv(definition, ObservationConfig(height=8, width=8, frame_stack=1), seed=seed)
    _, info = env.reset()  # before the window: a failing start procedure leaves none open
    window = _open_window(pygame, 256 * scale, 192 * scale)
    next_events = events if events is not None else pygame.event.get
    start_seed = int(info["episode_seed"])
    lives = info.get("lives")
    collected: list[int] = []
    rewards: list[float] = []
    lives_lost = 0
    outcome: str | None = None
    stopped = False
    held: set[int] = set()
    clock = pygame.time.Clock()

    def show(info: dict[str, Any]) -> None:
        frame = to_rgb(env.machine.screen())
        if scale > 1:
            frame = frame.repeat(scale, axis=0).repeat(scale, axis=1)
        height, width = frame.shape[:2]
        surface = pygame.image.frombuffer(
            np.ascontiguousarray(frame).tobytes(), (width, height), "RGB"
        )
        window.blit(surface, (0, 0))
        title = f"{spec.name} - score {info.get('score', 0)}"
        left = info.get("lives")
        pygame.display.set_caption(title if left is None else f"{title}, lives {left}")
        pygame.display.flip()

    try:
        show(info)
        while True:
            for event in next_events():
                if event.type == pygame.QUIT or (
                    event.type == pygame.KEYDOWN and event.key == pygame.K_ESCAPE
                ):
                    stopped = True
                elif event.type == pygame.KEYDOWN:
                    held.add(event.key)
                elif event.type == pygame.KEYUP:
                    held.discard(event.key)
                elif event.type == pygame.WINDOWFOCUSLOST:
                    held.clear()  # keys released elsewhere send no KEYUP here
            if stopped:
                break
            spectrum_keys = {host_keys[codes[c]] for c in held if codes.get(c) in host_keys}
            action = action_for_keys(actions, spectrum_keys)
            _, reward, terminated, truncated, info = env.step(action)
            collected.append(action)
            rewards.append(float(reward))
            lives_lost += count_lives_lost(lives, info.get("lives"))
            lives = info.get("lives")
            show(info)
            if terminated or truncated:
                outcome = info["outcome"]
                break
            if max_steps is not None and len(collected) >= max_steps:
                outcome = "truncated"
                break
            if realtime:
                clock.tick(SPECTRUM_FPS / spec.frame_skip)
    finally:
        pygame.display.quit()
        values = env.session.values
        trajectory = Trajectory(
            game=spec.name,
            game_file=game_file_label(definition),
            game_sha256=definition.yaml_sha256,
            actions=np.array(collected, dtype=np.int16),
            rewards=np.array(rewards, dtype=np.float32),
            start_seed=start_seed,
            outcome=outcome,
            episode_return=float(np.sum(rewards, dtype=np.float64)),
            score=float(values.get("score", 0)),
            lives_lost=lives_lost,
            source="play",
            info={"seed": seed, "max_steps": max_steps, "values": values},
        )
        trajectory.save(record)
        env.close()
    return PlayResult(trajectory, record, stopped)
