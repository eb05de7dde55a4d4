"""PPOExperimentConfiguration: the shared settings plus PPO's own, loadable from YAML.

Every field has a documented default; `oakemu-rl train --algo ppo` with no other
arguments trains on the bundled game `catch` with them. `oakemu-rl config show --algo ppo`
prints them all.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ..runtime.config_base import ConfigError, ExperimentConfiguration, TesterSettings
from ..runtime.config_base import ConfigSection as _Section
from ..runtime.torsos import TorsoName

__all__ = [
    "ConfigError",
    "PPOBCSettings",
    "PPOExperimentConfiguration",
    "PPOModelSettings",
    "PPOSettings",
    "PPOTesterSettings",
    "reward_shaping_from_ppo_settings",
]


class PPOModelSettings(_Section):
    """The actor-critic network: a shared torso with a policy head and a value head."""

    torso: TorsoName = Field(
        "auto",
        description="Feature extractor; 'auto' picks small_cnn for images and mlp for vectors. "
        "cell_cnn keeps every pixel in its first convolution, for observations whose pixels "
        "are whole objects (attribute cells).",
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

    # rollout_steps, learning_rate and epochs: chosen by benchmarks/defaults_sweep.py.
    rollout_steps: int = Field(
        64, ge=1, description="Steps each env contributes to a rollout (its buffer column)."
    )
    learning_rate: float = Field(1e-3, gt=0, description="Adam learning rate at the start.")
    anneal_lr: bool = Field(
        True,
        description="Anneal the learning rate linearly to 0 over the run's budget: "
        "total_steps, or max_time_s where that runs out first.",
    )
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE lambda.")
    epochs: int = Field(8, ge=1, description="Passes over each rollout.")
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
    value_normalization: bool = Field(
        False,
        description="PopArt: the value head learns returns normalised by a running mean and "
        "standard deviation of every rollout's returns, and its last layer is rescaled when "
        "they change, so that its predictions (used for GAE) keep their meaning. The value "
        "loss and its clip range (value_clip_coef) then work in units of the returns' "
        "standard deviation, whatever the rewards' scale.",
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


class PPOBCSettings(_Section):
    """A behaviour-cloning loss on demonstrations (with `demos.paths` and `demos.learn`)."""

    coef: float = Field(
        1.0, ge=0, description="Weight of the BC loss (cross-entropy of demonstrated actions)."
    )
    final_coef: float = Field(0.0, ge=0, description="The weight at the end of the decay.")
    decay_steps: int = Field(
        100_000, ge=1, description="Env steps over which the weight falls linearly to final_coef."
    )
    batch_size: int = Field(
        256, ge=1, description="Demonstration steps in each minibatch's BC loss."
    )
    cache_bytes: int = Field(
        128 * 2**20,
        ge=1,
        description="Memory for materialised demonstration observations (an LRU cache; what "
        "does not fit is rebuilt by replaying the demonstration when it is needed).",
    )


class PPOTesterSettings(TesterSettings):
    """Evaluation episodes: the most likely action, or one sampled from the policy."""

    deterministic: bool = Field(
        True, description="Take the most likely action (false: sample from the policy)."
    )


_OLD_REWARD_DEFAULTS: dict[str, float | None] = {"reward_scale": 1.0, "reward_clip": None}


def reward_shaping_from_ppo_settings(data: Any) -> Any:
    """Move the settings `ppo.reward_scale` and `ppo.reward_clip`, which PPO had before
    reward shaping was shared, out of a mapping of settings (copied, not changed in place).

    Their defaults (1.0 and null) are dropped; other values become the equivalent
    `reward_shaping` entries, `{type: scale, factor}` then `{type: clip, min: -c, max: c}`.
    A mapping that sets both them and `reward_shaping` is refused (ValueError). Anything
    that is not a mapping with a `ppo` mapping is returned as it is.
    """
    if not isinstance(data, dict) or not isinstance(data.get("ppo"), dict):
        return data
    ppo = dict(data["ppo"])
    old = {key: ppo.pop(key) for key in _OLD_REWARD_DEFAULTS if key in ppo}
    if not old:
        return data
    shapers: list[dict[str, Any]] = []
    named: list[str] = []
    for key, value in old.items():
        if value == _OLD_REWARD_DEFAULTS[key]:
            continue
        named.append(f"ppo.{key}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"ppo.{key}: expected a positive number (got {value!r})")
        if key == "reward_scale":
            shapers.append({"type": "scale", "factor": float(value)})
        else:
            shapers.append({"type": "clip", "min": -float(value), "max": float(value)})
    if shapers and data.get("reward_shaping"):
        keys = " and ".join(named)
        raise ValueError(
            f"both {keys} and reward_shaping are set: write {keys} into reward_shaping "
            "instead, as {type: scale, factor: F} and {type: clip, min: -C, max: C} "
            "entries where you want them applied"
        )
    data = dict(data, ppo=ppo)
    if shapers:
        data["reward_shaping"] = shapers
    return data


class PPOExperimentConfiguration(ExperimentConfiguration):
    """A PPO run: the shared settings, and the actor-critic network and the PPO update."""

    algo: Literal["ppo"] = Field("ppo", description="The algorithm.")
    total_steps: int = Field(200_000, ge=1, description="Env steps of the run.")
    tester: PPOTesterSettings = Field(default_factory=PPOTesterSettings, description="Evaluation.")
    model: PPOModelSettings = Field(
        default_factory=PPOModelSettings, description="The actor-critic network."
    )
    ppo: PPOSettings = Field(default_factory=PPOSettings, description="Rollouts and the update.")
    bc: PPOBCSettings = Field(
        default_factory=PPOBCSettings, description="Behaviour cloning on demonstrations."
    )

    @model_validator(mode="before")
    @classmethod
    def _old_reward_settings(cls, data: Any) -> Any:
        """Configurations written before reward shaping was shared (a run directory's
        config.yaml among them) load: see `reward_shaping_from_ppo_settings`."""
        return reward_shaping_from_ppo_settings(data)

    @model_validator(mode="after")
    def _consistent(self) -> PPOExperimentConfiguration:
        self._check_shared()
        if self.demos.random_steps:
            raise ValueError(
                "demos.random_steps: PPO learns from its own policy's actions, and random "
                "hand-over steps would be off-policy; set it to 0 (DQN takes them)"
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
