"""PPOExperimentConfiguration: every setting of a PPO run, loadable from YAML.

Every field has a documented default; `oakemu-rl train --algo ppo` with no other
arguments trains on the bundled game `catch` with them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..envs.observation import ObservationConfig
from ..runtime.config_base import ConfigError, ExperimentConfiguration, WorkerNice
from ..runtime.config_base import ConfigSection as _Section
from ..runtime.rollback import RollbackSettings

__all__ = [
    "CheckpointSettings",
    "ConfigError",
    "EnvSettings",
    "LoggingSettings",
    "PPOExperimentConfiguration",
    "PPOModelSettings",
    "PPOSettings",
    "ReplayObservationCacheSettings",
    "RestartPoolSettings",
    "TesterSettings",
]


class EnvSettings(_Section):
    """The training envs."""

    num_envs: int = Field(8, ge=1, le=1024, description="Envs stepped asynchronously by the actor.")
    num_workers: int | None = Field(
        None, ge=1, description="Worker processes hosting the envs (None: one per CPU core)."
    )
    backend: Literal["process", "inline"] = Field(
        "process", description="'process': envs in worker processes; 'inline': in this process."
    )
    worker_nice: WorkerNice = Field(
        0,
        description="How much the worker processes lower their scheduling priority (a Unix "
        "nice increment 0-19, or 'idle' for Linux SCHED_IDLE): "
        "where the learner, the actor and the workers want more cores than there are, the "
        "learner and actor win them, and the workers still get every idle core.",
    )
    observation: ObservationConfig = Field(
        default_factory=lambda: ObservationConfig(height=48, width=48, frame_stack=2),
        description="What the agent sees (ignored for gym: envs, which keep their own).",
    )
    allowed_actions: list[int] | None = Field(
        None, description="Indices of the game's actions the agent may use (None: all of them)."
    )
    batch_wait_s: float = Field(
        0.0005,
        ge=0,
        le=0.1,
        description="After a poll returns fewer than half the busy envs' results, wait up to "
        "this long for more, so one inference pass serves several envs (0: never wait).",
    )
    batch_latency_s: float = Field(
        0.002,
        ge=0,
        le=0.1,
        description="How long a worker may hold finished results while it has more commands "
        "queued, to send them in one message (OakEmuMultiEnv's batch_latency): each message "
        "wakes the actor, and wake-ups cost CPU on both sides. With 0.2 ms, the multi-env's "
        "default, an emulated step (about 0.5 ms) went out alone; at 2 ms a worker's results "
        "go out together when its queue runs dry.",
    )


class PPOModelSettings(_Section):
    """The actor-critic network: a shared torso with a policy head and a value head."""

    torso: Literal["auto", "small_cnn", "nature_cnn", "mlp"] = Field(
        "auto",
        description="Feature extractor; 'auto' picks small_cnn for images and mlp for vectors.",
    )
    mlp_hidden: list[int] = Field(
        default_factory=lambda: [64, 64], description="Hidden layer sizes of the mlp torso."
    )
    cnn_features: int = Field(256, ge=1, description="Units of the linear layer after a CNN torso.")
    activation: Literal["tanh", "relu"] = Field(
        "tanh", description="Activation of the mlp torso (CNN torsos use relu)."
    )
    input_scale: float | None = Field(
        None,
        gt=0,
        description="Observations are multiplied by this (None: 1/255 for uint8 observations, "
        "else 1). RAM observations of small values learn faster with a larger scale.",
    )


class PPOSettings(_Section):
    """Rollouts and the PPO update."""

    rollout_steps: int = Field(
        128, ge=1, description="Steps each env contributes to a rollout (its buffer column)."
    )
    learning_rate: float = Field(2.5e-4, gt=0, description="Adam learning rate at the start.")
    anneal_lr: bool = Field(
        True, description="Anneal the learning rate linearly to 0 over total_steps."
    )
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE lambda.")
    epochs: int = Field(4, ge=1, description="Passes over each rollout.")
    minibatches: int = Field(4, ge=1, description="Minibatches per epoch.")
    clip_coef: float = Field(0.2, gt=0, description="Clip range of the policy ratio.")
    clip_value_loss: bool = Field(True, description="Clip the value loss around old values.")
    value_loss_form: Literal["max", "clipped"] = Field(
        "max",
        description="With clip_value_loss: 'max' takes 0.5 x the larger of the clipped and "
        "unclipped squared errors (CleanRL, the PPO paper's code); 'clipped' takes 0.5 x "
        "the squared error of the clipped prediction alone (Stable-Baselines3).",
    )
    value_clip_coef: float | None = Field(
        None, gt=0, description="Clip range of the value loss (None: clip_coef)."
    )
    ent_coef: float = Field(0.01, ge=0, description="Entropy bonus coefficient.")
    vf_coef: float = Field(0.5, ge=0, description="Value loss coefficient.")
    max_grad_norm: float = Field(0.5, gt=0, description="Gradient-norm clipping.")
    target_kl: float | None = Field(
        None, gt=0, description="Stop the epochs of a rollout once the approximate KL exceeds it."
    )
    normalize_advantages: bool = Field(True, description="Normalise advantages per minibatch.")
    reward_scale: float = Field(1.0, gt=0, description="Rewards are multiplied by this.")
    reward_clip: float | None = Field(
        None, gt=0, description="Clip scaled rewards to [-reward_clip, reward_clip] (None: off)."
    )
    overlap_collection: bool = Field(
        False,
        description="Collect the next rollout (into a second buffer) while the learner trains "
        "on the last one, instead of waiting: the envs never stand idle, at the price of a "
        "policy lag of up to one rollout (the steps collected before the new weights arrive "
        "come from the previous ones; their stored log-probs keep the clipped ratio right). "
        "Rollouts that end at a checkpoint or evaluation are still handed over with a wait, "
        "so every checkpoint is a consistent state.",
    )


class TesterSettings(_Section):
    """Periodic evaluation on separate envs (greedy by default)."""

    enabled: bool = Field(True, description="Run the tester.")
    every_steps: int = Field(25_000, ge=1, description="Env steps between evaluations.")
    episodes: int = Field(10, ge=1, description="Episodes per evaluation.")
    num_envs: int = Field(4, ge=1, description="Envs of the tester.")
    deterministic: bool = Field(
        True, description="Take the most likely action (False: sample from the policy)."
    )
    max_episode_steps: int = Field(
        27_000, ge=1, description="Steps after which an evaluation episode is cut short."
    )
    random_baseline: bool = Field(
        True, description="Evaluate a random policy at the start, for comparison."
    )
    final_episodes: int = Field(20, ge=1, description="Episodes of the final evaluation.")


class CheckpointSettings(_Section):
    """Checkpoints under <run_dir>/checkpoints (also written at every evaluation)."""

    every_steps: int = Field(25_000, ge=1, description="Env steps between checkpoints.")
    keep_last: int = Field(3, ge=1, description="Newest checkpoints kept.")
    keep_best: int = Field(1, ge=0, description="Best (by evaluation return) checkpoints kept.")


class LoggingSettings(_Section):
    """TensorBoard and console output."""

    tensorboard: bool = Field(True, description="Write TensorBoard events to <run_dir>/tb.")
    console: bool = Field(True, description="Show a progress display.")
    console_interval_s: float = Field(10.0, gt=0, description="Seconds between console lines.")
    log_every_steps: int = Field(1_000, ge=1, description="Env steps between actor scalars.")


class RestartPoolSettings(_Section):
    """Episodes that start from machine states saved along earlier episodes."""

    enabled: bool = Field(False, description="Keep a restart pool (OakEmu games only).")
    capacity: int = Field(256, ge=1, description="Saved states kept (the best by return).")
    save_every_steps: int = Field(
        200, ge=1, description="Save an env's machine state every this many episode steps."
    )
    restart_probability: float = Field(
        0.25, ge=0, le=1, description="Chance that a new episode starts from a pool state."
    )


class ReplayObservationCacheSettings(_Section):
    """Observations of recorded trajectories, kept for the behaviour-cloning sampler."""

    enabled: bool = Field(False, description="Create the cache.")
    capacity: int = Field(4096, ge=1, description="Observations kept (least recently used go).")


class PPOExperimentConfiguration(ExperimentConfiguration):
    """A PPO run: game, budget and every algorithm setting."""

    algo: Literal["ppo"] = Field("ppo", description="The algorithm.")
    game: str = Field("catch", description="Bundled game name, game YAML path, or gym:<id>.")
    total_steps: int = Field(200_000, ge=1, description="Env steps of the run.")
    seed: int = Field(0, ge=0, description="Seed of envs, action sampling, minibatches, weights.")
    device: str = Field("cpu", description="Torch device: cpu, cuda, cuda:N or auto.")
    torch_threads: int = Field(
        0, ge=0, description="Torch threads in the main process (0: CPU cores minus workers)."
    )
    run_name: str | None = Field(None, description="Name of the run (default: from the game).")
    max_time_s: float | None = Field(
        None, gt=0, description="Stop after this many seconds of training, whatever the steps."
    )
    target_eval_return: float | None = Field(
        None, description="Stop early once an evaluation reaches this mean return."
    )
    env: EnvSettings = Field(default_factory=EnvSettings)
    model: PPOModelSettings = Field(default_factory=PPOModelSettings)
    ppo: PPOSettings = Field(default_factory=PPOSettings)
    tester: TesterSettings = Field(default_factory=TesterSettings)
    checkpoint: CheckpointSettings = Field(default_factory=CheckpointSettings)
    rollback: RollbackSettings = Field(default_factory=RollbackSettings)
    restart_pool: RestartPoolSettings = Field(default_factory=RestartPoolSettings)
    replay_observation_cache: ReplayObservationCacheSettings = Field(
        default_factory=ReplayObservationCacheSettings
    )
    logging: LoggingSettings = Field(default_factory=LoggingSettings)

    @model_validator(mode="after")
    def _consistent(self) -> PPOExperimentConfiguration:
        if self.env.allowed_actions is not None and not self.env.allowed_actions:
            raise ValueError("env.allowed_actions must name at least one action (or be null)")
        if self.restart_pool.enabled and self.game.startswith("gym:"):
            raise ValueError(
                f"restart_pool.enabled: {self.game} is a Gymnasium env, which has no machine "
                "state to save; restart pools need an OakEmu game"
            )
        batch = self.env.num_envs * self.ppo.rollout_steps
        if self.ppo.minibatches > batch:
            raise ValueError(
                f"ppo.minibatches ({self.ppo.minibatches}) exceeds the rollout size "
                f"env.num_envs x ppo.rollout_steps = {batch}"
            )
        return self

    @property
    def rollout_size(self) -> int:
        """Transitions per rollout: env.num_envs x ppo.rollout_steps."""
        return self.env.num_envs * self.ppo.rollout_steps
