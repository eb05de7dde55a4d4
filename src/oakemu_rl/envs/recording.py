"""Episodes as pictures: the Spectrum's screen in its own colours, with its border, scaled
up, and a status line (score, lives, step, the action taken) under it; and animated GIFs of
them. Used by `oakemu-rl evaluate --video` and by the tester's TensorBoard videos.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageFont

from ..emulator.screen import PALETTE
from .oakemu_env import OakEmuEnv

BORDER = 32
"""Border pixels shown on each side of the 256x192 screen."""
STATUS_HEIGHT = 12
"""Height of the status line, in unscaled pixels."""
FRAMES_PER_SECOND = 50


def spectrum_frame(env: OakEmuEnv, scale: int = 2) -> npt.NDArray[np.uint8]:
    """The screen and border as RGB, `scale` times the Spectrum's pixels."""
    machine = env.machine
    height, width = 192 + 2 * BORDER, 256 + 2 * BORDER
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[...] = PALETTE[machine.border & 7]
    frame[BORDER : BORDER + 192, BORDER : BORDER + 256] = PALETTE[machine.screen()]
    if scale > 1:
        frame = frame.repeat(scale, axis=0).repeat(scale, axis=1)
    return frame


def with_status(frame: npt.NDArray[np.uint8], text: str, scale: int = 2) -> Image.Image:
    """`frame` with a status line of `text` under it."""
    height = STATUS_HEIGHT * scale
    image = Image.new("RGB", (frame.shape[1], frame.shape[0] + height), (0, 0, 0))
    image.paste(Image.fromarray(frame), (0, 0))
    font = ImageFont.load_default(size=9 * scale)
    ImageDraw.Draw(image).text(
        (4 * scale, frame.shape[0] + scale), text, fill=(255, 255, 255), font=font
    )
    return image


def action_name(keys: list[str]) -> str:
    return "+".join(keys) if keys else "none"


def frame_duration_ms(env: OakEmuEnv) -> int:
    """How long one agent step lasts on a real Spectrum."""
    return round(1000 * env.game.spec.frame_skip / FRAMES_PER_SECOND)


def play_frames(
    env: OakEmuEnv,
    choose: Callable[[npt.NDArray[Any]], int],
    *,
    episodes: int = 1,
    seed: int | None = 0,
    max_episode_steps: int = 27_000,
    scale: int = 2,
) -> tuple[list[Image.Image], list[float]]:
    """The frames of `episodes` episodes (one a step, one a reset) and their returns;
    episode k is reset with seed `seed + k` (None: unseeded)."""
    actions = [action_name(list(a)) for a in env.game.spec.actions]
    frames: list[Image.Image] = []
    returns = []
    for episode in range(episodes):
        observation, info = env.reset(seed=None if seed is None else seed + episode)
        total, step = 0.0, 0
        status = f"episode {episode + 1}  score {info.get('score', 0):g}  lives {info.get('lives')}"
        frames.append(with_status(spectrum_frame(env, scale), f"{status}  step 0", scale))
        while True:
            action = choose(observation)
            observation, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            step += 1
            status = (
                f"episode {episode + 1}  score {info.get('score', 0):g}  "
                f"lives {info.get('lives')}  step {step}  action {actions[action]}"
            )
            frames.append(with_status(spectrum_frame(env, scale), status, scale))
            if terminated or truncated or step >= max_episode_steps:
                break
        returns.append(total)
    return frames, returns


def gif_bytes(frames: list[Image.Image], duration_ms: int) -> bytes:
    """An animated GIF of `frames`, in memory."""
    buffer = io.BytesIO()
    frames[0].save(
        buffer, format="GIF", save_all=True, append_images=frames[1:], duration=duration_ms, loop=0
    )
    return buffer.getvalue()
