"""DQNExperimentConfiguration: the shared settings plus DQN's own, loadable from YAML.

Every field has a default that works on the bundled games; `oakemu-rl train` with no
arguments uses them on `catch`. `oakemu-rl config show --algo dqn` prints them all.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..runtime.config_base import CheckpointSettings, ExperimentConfiguration, TesterSettings
from ..runtime.config_base import ConfigError as ConfigError  # re-exported
from ..runtime.config_base import ConfigSection as _Section
from ..runtime.shrink_perturb import ShrinkPerturbSettings
from ..runtime.torsos import TorsoName


class ModelSettings(_Section):
    """The Q-network."""

    torso: TorsoName = Field(
        "auto",
        description="Feature extractor; 'auto' picks small_cnn for images and mlp for vectors. "
        "cell_cnn keeps every pixel in its first convolution, for observations whose pixels "
        "are whole objects (attribute cells).",
    )
    mlp_hidden: list[int] = Field(
        default_factory=lambda: [128, 128], description="Hidden layer sizes of the mlp torso."
    )
    head_hidden: int = Field(256, ge=0, description="Hidden units of the Q head (0: linear head).")
    dueling: bool = Field(True, description="Dueling head: separate value and advantage streams.")
    noisy: bool = Field(False, description="Factorised-Gaussian NoisyNet layers in the head.")
    noisy_sigma0: float = Field(0.5, gt=0, description="Initial noise scale of NoisyNet layers.")
    compile: bool = Field(
        False,
        description="Compile the learner's and target network's forward passes with "
        "torch.compile (needs a C++ compiler on CPU; the first updates wait for it). "
        "Fewer Python calls per update; the actor and tester stay eager.",
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
    threads: int = Field(
        0, ge=0, description="Torch threads of the learner thread (0: the run's torch_threads)."
    )
    shrink_perturb: ShrinkPerturbSettings = Field(
        default_factory=ShrinkPerturbSettings,
        description="Periodic shrink and perturb of the online network (off by default).",
    )
    precision: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="'bf16': the learner's forward passes run in bfloat16 autocast (mixed "
        "precision; weights, loss and optimizer stay float32). Fast on CPUs with AVX512-BF16 "
        "or AMX and on recent GPUs.",
    )


class NStepAnnealSettings(_Section):
    """An n-step return annealed over the run's start (BBF, Schwarzer et al. 2023: long
    returns spread a sparse reward fast while the Q-values are still poor; short ones
    bias the target less once they are good)."""

    start: int = Field(10, ge=1, description="n of the first transitions written.")
    steps: int = Field(
        50_000, ge=1, description="Transitions over which n falls linearly to replay.n_step."
    )


class ReplaySettings(_Section):
    """The replay buffer and its writer."""

    capacity: int = Field(100_000, ge=1, description="Capacity in transitions.")
    prioritized: bool = Field(False, description="Prioritized replay (sum tree).")
    alpha: float = Field(0.6, ge=0, description="Priority exponent.")
    beta_start: float = Field(0.4, ge=0, le=1, description="Importance-weight exponent at start.")
    beta_steps: int | None = Field(
        None,
        ge=1,
        description="Env steps over which beta reaches 1 (None: the run's budget, "
        "total_steps or max_time_s, whichever runs out first).",
    )
    priority_eps: float = Field(1e-6, gt=0, description="Added to |TD error| for priorities.")
    n_step: int = Field(3, ge=1, description="Steps of the n-step return.")
    n_step_anneal: NStepAnnealSettings | None = Field(
        None,
        description="Anneal n from n_step_anneal.start down to n_step over n_step_anneal.steps "
        "transitions (BBF: from 10 to 3); null: n_step throughout. Demonstrations keep n_step.",
    )
    stage_size: int = Field(
        32, ge=1, description="Transitions staged on the actor before a batch goes to the writer."
    )
    writer_queue_size: int = Field(64, ge=1, description="Batches the writer queue holds.")


class DQfDSettings(_Section):
    """Learning from demonstrations as DQfD does (with `demos.paths` and `demos.learn`)."""

    demo_fraction: float = Field(
        0.25,
        ge=0,
        le=1,
        description="Share of each learner batch drawn from the demonstration part of replay "
        "(its n-step transitions are never overwritten).",
    )
    margin: float = Field(
        0.8,
        ge=0,
        description="Large margin: the demonstrated action's Q must beat every other action's "
        "by this much.",
    )
    margin_coef: float = Field(
        1.0, ge=0, description="Weight of the large-margin loss against the TD loss."
    )


class DQNTesterSettings(TesterSettings):
    """Evaluation episodes: greedy, or epsilon-greedy with `epsilon`."""

    epsilon: float = Field(
        0.0, ge=0, le=1, description="Chance of a random action in evaluation episodes."
    )


class DQNCheckpointSettings(CheckpointSettings):
    """Checkpoints; DQN's may also hold the replay buffer."""

    save_replay_buffer: bool = Field(
        False,
        description="Include the replay buffer, so that --resume continues with it instead "
        "of refilling it first (large: the whole buffer is written at every checkpoint).",
    )


class DQNExperimentConfiguration(ExperimentConfiguration):
    """A DQN run: the shared settings, and the Q-network, exploration, learner and replay."""

    algo: Literal["dqn"] = Field("dqn", description="The algorithm.")
    tester: DQNTesterSettings = Field(default_factory=DQNTesterSettings, description="Evaluation.")
    checkpoint: DQNCheckpointSettings = Field(
        default_factory=DQNCheckpointSettings, description="Checkpoints."
    )
    model: ModelSettings = Field(default_factory=ModelSettings, description="The Q-network.")
    exploration: ExplorationSettings = Field(
        default_factory=ExplorationSettings, description="Exploration."
    )
    learner: LearnerSettings = Field(default_factory=LearnerSettings, description="The learner.")
    replay: ReplaySettings = Field(default_factory=ReplaySettings, description="Replay.")
    dqfd: DQfDSettings = Field(
        default_factory=DQfDSettings, description="Learning from demonstrations (DQfD)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> DQNExperimentConfiguration:
        self._check_shared()
        if self.exploration.type == "noisy" and not self.model.noisy:
            raise ValueError("exploration.type 'noisy' needs model.noisy: true")
        if self.init_anchor.value_warmup_steps:
            raise ValueError(
                "init_anchor.value_warmup_steps is PPO's (its value head learns first); DQN "
                "learns its Q heads with the anchor's margin loss from the start: leave it out"
            )
        return self
