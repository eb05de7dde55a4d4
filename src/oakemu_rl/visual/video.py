"""Videos of episodes: the Spectrum's screen in its own colours, with its border, scaled
up, and a status line (score, lives, step, the action taken) under it.

`record_checkpoint` plays greedy episodes of a checkpoint's agent on one env in this
process (the first reset gets the seed, the next ones continue the env's generator: the
episodes `oakemu-rl evaluate RUN --num-envs 1 --seed S` plays) and writes them as a GIF,
or an MP4 with imageio-ffmpeg installed. Same checkpoint and seed, same frames.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageFont

from ..emulator.screen import PALETTE
from ..envs.oakemu_env import OakEmuEnv

BORDER = 32
"""Border pixels shown on each side of the 256x192 screen."""
STATUS_HEIGHT = 12
"""Height of the status line, in unscaled pixels."""
FRAMES_PER_SECOND = 50


class VideoError(ValueError):
    """A video cannot be made (the message says why)."""


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


@dataclass
class Video:
    """What `record` wrote."""

    path: Path
    frames: list[Image.Image]
    episodes: int
    returns: list[float]
    frame_duration_ms: int

    def frame_hashes(self) -> list[str]:
        """A digest of each frame's pixels (equal for equal videos)."""
        import hashlib

        return [hashlib.sha256(f.tobytes()).hexdigest() for f in self.frames]


def record(
    env: OakEmuEnv,
    choose: Callable[[npt.NDArray[Any]], int],
    out: str | Path,
    *,
    episodes: int = 1,
    seed: int = 0,
    max_episode_steps: int = 27_000,
    scale: int = 2,
) -> Video:
    """Play `episodes` episodes with `choose(observation) -> action` and write the video."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise VideoError(f"{out}: expected a .gif or .mp4 file")
    frames, returns = play_frames(
        env, choose, episodes=episodes, seed=seed, max_episode_steps=max_episode_steps, scale=scale
    )
    duration = frame_duration_ms(env)
    _write(frames, out, duration)
    return Video(out, frames, episodes, returns, duration)


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
    """The frames of `episodes` episodes (one a step, one a reset) and their returns."""
    actions = [action_name(list(a)) for a in env.game.spec.actions]
    frames: list[Image.Image] = []
    returns = []
    for episode in range(episodes):
        observation, info = env.reset(seed=seed if episode == 0 else None)
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


def _write(frames: list[Image.Image], out: Path, duration_ms: int) -> None:
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    if out.suffix.lower() == ".gif":
        tmp.write_bytes(gif_bytes(frames, duration_ms))
    else:
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise VideoError(
                f"{out}: MP4 needs imageio-ffmpeg (pip install imageio-ffmpeg); or write a .gif"
            ) from None
        import imageio.v3 as iio

        iio.imwrite(tmp, np.stack([np.asarray(f) for f in frames]), fps=1000 / duration_ms)
    tmp.replace(out)


def record_checkpoint(
    target: Any,
    out: str | Path,
    *,
    episodes: int = 1,
    seed: int = 0,
    scale: int = 2,
    allow_code: bool = False,
) -> Video:
    """Record greedy episodes of a checkpoint's agent (a run directory: its best one)."""
    import torch

    from ..envs.factory import make_env
    from ..envs.gym_backend import is_gym_id
    from ..experiments.evaluation import (
        find_checkpoint,
        load_checkpoint_model,
        read_checkpoint_config,
    )
    from ..experiments.policy import GreedyPolicy
    from ..runtime.checkpoints import Checkpoint

    checkpoint = target if isinstance(target, Checkpoint) else find_checkpoint(target, best=True)
    _, config = read_checkpoint_config(checkpoint, allow_code=allow_code)
    if is_gym_id(config.game):
        raise VideoError(f"{config.game}: videos show a Spectrum's screen; this is a gym: env")
    env = make_env(config.game, config.env.observation)
    assert isinstance(env, OakEmuEnv)
    try:
        space: Any = env.observation_space
        num_actions = int(getattr(env.action_space, "n", 0))
        model = load_checkpoint_model(checkpoint, config, tuple(space.shape), num_actions)
        policy = GreedyPolicy(model, num_actions, config.env.allowed_actions).eval()

        def choose(observation: npt.NDArray[Any]) -> int:
            with torch.no_grad():
                return int(policy(torch.from_numpy(np.asarray(observation)[None]))[0][0])

        return record(
            env,
            choose,
            out,
            episodes=episodes,
            seed=seed,
            max_episode_steps=config.tester.max_episode_steps,
            scale=scale,
        )
    finally:
        env.close()
