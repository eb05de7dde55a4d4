"""The multi-env of an actor or a tester: built from the configuration, opened once, closed."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config_base import ExperimentConfiguration

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

EnvFactory = Callable[[], "OakEmuMultiEnv"]


def make_multi_env(
    config: ExperimentConfiguration,
    *,
    num_envs: int | None = None,
    seed_offset: int = 0,
    env_wrapper: Callable[[Any], Any] | None = None,
) -> OakEmuMultiEnv:
    """The multi-env a configuration describes (`num_envs` envs, seeds offset by
    `seed_offset`, each env wrapped where it runs by `env_wrapper` when given: see
    `OakEmuMultiEnv`)."""
    from ..envs.multi_env import OakEmuMultiEnv
    from ..envs.observation_choice import auto_choice

    env = config.env
    # `auto` is chosen here (and remembered by this process), not again in every worker.
    choice = auto_choice(env.observation, config.game)
    observation = env.observation if choice is None else choice.config
    return OakEmuMultiEnv(
        config.game,
        num_envs=num_envs or env.num_envs,
        num_workers=env.num_workers,
        backend=env.backend,
        seed=config.seed + seed_offset,
        observation_config=observation,
        worker_nice=env.worker_nice,
        batch_latency=env.batch_latency_s,
        restart_workers=env.restart_workers,
        max_restarts_per_minute=env.max_restarts_per_minute,
        restart_backoff=env.restart_backoff_s,
        worker_timeout=env.worker_timeout_s,
        ray_address=env.ray_address,
        env_wrapper=env_wrapper,
    )


class EnvOwner:
    """Opens a multi-env from `factory` on first use, checks it has `num_envs` envs (and
    whatever `check` asks), and closes it.

    Args:
        factory: builds the multi-env.
        num_envs: how many envs it must have.
        check: raises ValueError when the env does not suit its user (for example the
            observation shape a buffer expects).
    """

    def __init__(
        self,
        factory: EnvFactory,
        num_envs: int,
        check: Callable[[OakEmuMultiEnv], None] | None = None,
    ) -> None:
        self._factory = factory
        self.num_envs = num_envs
        self._check = check
        self._env: OakEmuMultiEnv | None = None

    def open(self) -> OakEmuMultiEnv:
        """The multi-env, built on the first call."""
        if self._env is None:
            env = self._factory()
            try:
                if env.num_envs != self.num_envs:
                    raise ValueError(
                        f"the env factory made {env.num_envs} envs; expected {self.num_envs}"
                    )
                if self._check is not None:
                    self._check(env)
            except BaseException:
                env.close()
                raise
            self._env = env
        return self._env

    def close(self) -> None:
        """Close the multi-env (the next `open` builds a new one)."""
        if self._env is not None:
            self._env.close()
            self._env = None

    @property
    def env(self) -> OakEmuMultiEnv | None:
        """The multi-env, while open."""
        return self._env

    @property
    def result_queue_depth(self) -> int:
        """Results waiting in the multi-env's queue (0 while closed)."""
        return int(self._env.result_queue_depth) if self._env is not None else 0
