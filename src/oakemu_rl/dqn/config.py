"""DQNExperimentConfiguration: every setting of a DQN run, loadable from YAML.

Every field has a default that works on the bundled games; `oakemu-rl train` with no
arguments uses them on `catch`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ..envs.observation import ObservationConfig
from ..runtime.config_base import ConfigError as ConfigError  # re-exported
from ..runtime.config_base import ConfigSection as _Section
from ..runtime.config_base import ExperimentConfiguration, WorkerNice
from ..runtime.config_base import format_validation_error as format_validation_error
from ..runtime.rollback import RollbackSettings


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
        "idle",
        description="How much the worker processes lower their scheduling priority: a Unix "
        "nice increment 0-19, or 'idle' (Linux SCHED_IDLE: the workers run only on cores "
        "nothing else wants, and give a core up at once when the learner or actor wakes). "
        "With fewer cores than busy threads the learner is DQN's critical path; on 2 cores "
        "'idle' measured faster than nice 10, and 10 faster than 0 (benchmarks/README.md). "
        "On a machine shared with other busy jobs, 'idle' workers get only what those leave.",
    )
    observation: ObservationConfig = Field(
        default_factory=lambda: ObservationConfig(height=32, width=32, frame_stack=2),
        description="What the agent sees (ignored for gym: envs, which keep their own).",
    )
    allowed_actions: list[int] | None = Field(
        None, description="Indices of the game's actions the agent may use (None: all of them)."
    )


class ModelSettings(_Section):
    """The Q-network."""

    torso: Literal["auto", "small_cnn", "nature_cnn", "mlp"] = Field(
        "auto",
        description="Feature extractor; 'auto' picks small_cnn for images and mlp for vectors.",
    )
    mlp_hidden: list[int] = Field(
        default_factory=lambda: [128, 128], description="Hidden layer sizes of the mlp torso."
    )
    head_hidden: int = Field(256, ge=0, description="Hidden units of the Q head (0: linear head).")
    dueling: bool = Field(True, description="Dueling head: separate value and advantage streams.")
    noisy: bool = Field(False, description="Factorised-Gaussian NoisyNet layers in the head.")
    noisy_sigma0: float = Field(0.5, gt=0, description="Initial noise scale of NoisyNet layers.")
    traced: bool = Field(
        True,
        description="Run the network's forward passes as traced TorchScript graphs, run "
        "unoptimised: the same operators and bit-identical results, but one call from "
        "Python instead of one per layer (less interpreter time, fewer waits for the GIL "
        "that the actor and prefetch threads share with the learner).",
    )


class ExplorationSettings(_Section):
    """How actions are explored."""

    type: Literal["linear", "exponential", "noisy"] = Field(
        "linear",
        description="Epsilon-greedy with a linear or exponential schedule, or NoisyNet "
        "exploration (requires model.noisy).",
    )
    epsilon_start: float = Field(1.0, ge=0, le=1, description="Epsilon at step 0.")
    epsilon_end: float = Field(0.02, ge=0, le=1, description="Epsilon after decay_steps.")
    decay_steps: int = Field(
        40_000, ge=1, description="Env steps over which epsilon goes from start to end."
    )


class TargetSettings(_Section):
    """The target network."""

    type: Literal["hard", "polyak"] = Field(
        "hard", description="'hard': copy every `period` updates; 'polyak': blend with `tau`."
    )
    period: int = Field(250, ge=1, description="Updates between hard target copies.")
    tau: float = Field(0.005, gt=0, le=1, description="Polyak blend factor per update.")


class LearnerSettings(_Section):
    """The learner thread."""

    learning_rate: float = Field(5e-4, gt=0, description="Adam learning rate.")
    adam_eps: float = Field(1.5e-4, gt=0, description="Adam epsilon.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor.")
    batch_size: int = Field(64, ge=1, description="Transitions per update.")
    learning_starts: int = Field(
        2_000,
        ge=0,
        description="Env steps sampled at random before learning (and greedy actions) start.",
    )
    replay_ratio: float = Field(
        0.25, gt=0, description="Learner updates per env step, held between actor and learner."
    )
    max_lag_updates: int = Field(
        64,
        ge=1,
        description="How far the learner may fall behind the ratio before the actor waits.",
    )
    double_dqn: bool = Field(True, description="Double DQN targets (online argmax, target value).")
    huber_delta: float = Field(1.0, gt=0, description="Huber loss threshold.")
    max_grad_norm: float = Field(10.0, gt=0, description="Gradient-norm clipping.")
    target: TargetSettings = Field(default_factory=TargetSettings, description="Target network.")
    log_every_updates: int = Field(100, ge=1, description="Updates between learner metric logs.")
    prefetch: bool = Field(
        True,
        description="Sample the next batch and its target-network values on a second thread "
        "while the learner trains on the current one (same results, less time per update).",
    )
    split_batch: bool = Field(
        False,
        description="Split each batch's forward and backward passes between the learner and "
        "the prefetch thread (needs prefetch; the gradients add up: the same step up to the "
        "order of float sums). Off by default: on 2 cores it was no faster and cost about "
        "16% more CPU.",
    )
    threads: int = Field(
        0, ge=0, description="Torch threads of the learner thread (0: the run's torch_threads)."
    )
    precision: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="'bf16': the learner's forward passes run in bfloat16 autocast (mixed "
        "precision; weights, loss and optimizer stay float32). Fast on CPUs with AVX512-BF16 "
        "or AMX and on recent GPUs.",
    )


class ReplaySettings(_Section):
    """The replay buffer and its writer."""

    capacity: int = Field(100_000, ge=1, description="Capacity in transitions.")
    prioritized: bool = Field(False, description="Prioritized replay (sum tree).")
    alpha: float = Field(0.6, ge=0, description="Priority exponent.")
    beta_start: float = Field(0.4, ge=0, le=1, description="Importance-weight exponent at start.")
    beta_steps: int | None = Field(
        None, ge=1, description="Env steps over which beta reaches 1 (None: the whole run)."
    )
    priority_eps: float = Field(1e-6, gt=0, description="Added to |TD error| for priorities.")
    n_step: int = Field(3, ge=1, description="Steps of the n-step return.")
    stage_size: int = Field(
        32, ge=1, description="Transitions staged on the actor before a batch goes to the writer."
    )
    writer_queue_size: int = Field(64, ge=1, description="Batches the writer queue holds.")


class ClipShaper(_Section):
    """Clip the reward into [min, max]."""

    type: Literal["clip"] = Field(description="'clip'.")
    min: float = Field(-1.0, description="Lowest reward.")
    max: float = Field(1.0, description="Highest reward.")


class ScaleShaper(_Section):
    """Multiply the reward by a factor."""

    type: Literal["scale"] = Field(description="'scale'.")
    factor: float = Field(1.0, description="The factor.")


class SignShaper(_Section):
    """Replace the reward by its sign."""

    type: Literal["sign"] = Field(description="'sign'.")


class LifeLossShaper(_Section):
    """Subtract a penalty when a life is lost."""

    type: Literal["life_loss"] = Field(description="'life_loss'.")
    penalty: float = Field(1.0, description="Subtracted when the `lives` variable falls.")


class CallableShaper(_Section):
    """A user function named by import path."""

    type: Literal["callable"] = Field(description="'callable'.")
    target: str = Field(
        description="'module:function' taking (reward, info) and returning the new reward."
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to the function."
    )


ShaperConfig = Annotated[
    ClipShaper | ScaleShaper | SignShaper | LifeLossShaper | CallableShaper,
    Field(discriminator="type"),
]


class TesterSettings(_Section):
    """Periodic greedy evaluation on separate envs."""

    enabled: bool = Field(True, description="Run the tester.")
    every_steps: int = Field(25_000, ge=1, description="Env steps between evaluations.")
    episodes: int = Field(5, ge=1, description="Episodes per evaluation.")
    num_envs: int = Field(4, ge=1, description="Envs of the tester.")
    epsilon: float = Field(0.0, ge=0, le=1, description="Epsilon of evaluation episodes.")
    max_episode_steps: int = Field(
        27_000, ge=1, description="Steps after which an evaluation episode is cut short."
    )
    random_baseline: bool = Field(
        True, description="Evaluate a random policy at the start, for comparison."
    )
    final_episodes: int = Field(10, ge=1, description="Episodes of the final greedy evaluation.")


class CheckpointSettings(_Section):
    """Checkpoints under <run_dir>/checkpoints."""

    every_steps: int = Field(25_000, ge=1, description="Env steps between checkpoints.")
    keep_last: int = Field(3, ge=1, description="Newest checkpoints kept.")
    keep_best: int = Field(1, ge=0, description="Best (by evaluation return) checkpoints kept.")
    save_replay_buffer: bool = Field(
        False, description="Include the replay buffer, so --resume continues it exactly."
    )


class LoggingSettings(_Section):
    """TensorBoard and console output."""

    tensorboard: bool = Field(True, description="Write TensorBoard events to <run_dir>/tb.")
    console: bool = Field(True, description="Show a progress display.")
    console_interval_s: float = Field(10.0, gt=0, description="Seconds between console lines.")
    log_every_steps: int = Field(1_000, ge=1, description="Env steps between actor scalars.")


class DQNExperimentConfiguration(ExperimentConfiguration):
    """A DQN run: game, budget and every algorithm setting."""

    algo: Literal["dqn"] = Field("dqn", description="The algorithm.")
    game: str = Field("catch", description="Bundled game name, game YAML path, or gym:<id>.")
    total_steps: int = Field(
        60_000, ge=1, description="Env steps of the run (about 3 minutes on catch, 2 cores)."
    )
    seed: int = Field(0, ge=0, description="Seed of envs, exploration, sampling and weights.")
    device: str = Field("cpu", description="Torch device: cpu, cuda, cuda:N or auto.")
    torch_threads: int = Field(
        0, ge=0, description="Torch threads in the main process (0: CPU cores minus workers)."
    )
    run_name: str | None = Field(None, description="Name of the run (default: from the game).")
    max_time_s: float | None = Field(
        None, gt=0, description="Stop after this many seconds of training, whatever the steps."
    )
    target_eval_return: float | None = Field(
        None, description="Stop early once a greedy evaluation reaches this mean return."
    )
    env: EnvSettings = Field(default_factory=EnvSettings, description="Training envs.")
    model: ModelSettings = Field(default_factory=ModelSettings, description="The Q-network.")
    exploration: ExplorationSettings = Field(
        default_factory=ExplorationSettings, description="Exploration."
    )
    learner: LearnerSettings = Field(default_factory=LearnerSettings, description="The learner.")
    replay: ReplaySettings = Field(default_factory=ReplaySettings, description="Replay.")
    reward_shaping: list[ShaperConfig] = Field(
        default_factory=list, description="Reward shapers, applied in order."
    )
    tester: TesterSettings = Field(default_factory=TesterSettings, description="Evaluation.")
    checkpoint: CheckpointSettings = Field(
        default_factory=CheckpointSettings, description="Checkpoints."
    )
    logging: LoggingSettings = Field(default_factory=LoggingSettings, description="Logging.")
    rollback: RollbackSettings = Field(
        default_factory=RollbackSettings, description="Automatic rollback on NaN or collapse."
    )

    @model_validator(mode="after")
    def _consistent(self) -> DQNExperimentConfiguration:
        if self.exploration.type == "noisy" and not self.model.noisy:
            raise ValueError("exploration.type 'noisy' needs model.noisy: true")
        if self.env.allowed_actions is not None and not self.env.allowed_actions:
            raise ValueError("env.allowed_actions must name at least one action (or be null)")
        return self
