"""Videos of episodes: the Spectrum's screen in its own colours, with its border, scaled
up, and a status line (score, lives, step, the action taken) under it.

`record_checkpoint` plays greedy episodes of a checkpoint's agent on one env in this
process (episode k gets env seed `seed + k`: the episodes `oakemu-rl evaluate RUN --seed S`
plays) and writes them as a GIF,
or an MP4 with imageio-ffmpeg installed. Same checkpoint and seed, same frames.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from ..envs.oakemu_env import OakEmuEnv
from ..envs.recording import frame_duration_ms, gif_bytes, play_frames


class VideoError(ValueError):
    """A video cannot be made (the message says why)."""


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
    max_steps: int | None = None,
    allow_code: bool = False,
) -> Video:
    """Record greedy episodes of a checkpoint's agent (a run directory: its best one), each
    cut after `max_steps` steps (default: the run's `tester.max_episode_steps`)."""
    from ..envs.factory import make_env
    from ..envs.gym_backend import is_gym_id
    from ..experiments.evaluation import checkpoint_policy, find_checkpoint, read_checkpoint_config
    from ..runtime.checkpoints import Checkpoint

    checkpoint = target if isinstance(target, Checkpoint) else find_checkpoint(target, best=True)
    _, config = read_checkpoint_config(checkpoint, allow_code=allow_code)
    if is_gym_id(config.game):
        raise VideoError(f"{config.game}: videos show a Spectrum's screen; this is a gym: env")
    env = make_env(config.game, config.env.observation)
    assert isinstance(env, OakEmuEnv)
    try:
        return record(
            env,
            checkpoint_policy(checkpoint, config, env).act,
            out,
            episodes=episodes,
            seed=seed,
            max_episode_steps=max_steps or config.tester.max_episode_steps,
            scale=scale,
        )
    finally:
        env.close()
