"""What every experiment configuration shares: the common sections, YAML loading, errors.

`ExperimentConfiguration` holds the settings both algorithms have (game, budget, seed,
threads, envs and observation, tester, checkpoints, logging, rollback, restart pool,
demonstrations, reward shaping),
each defined once with one default. `DQNExperimentConfiguration` and
`PPOExperimentConfiguration` add only their own sections.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from ..envs.backends import check_ray_address
from ..envs.observation import ObservationConfig
from ..envs.worker import WorkerPriority, is_worker_priority
from .rollback import RollbackSettings


def _check_worker_nice(value: Any) -> Any:
    if is_worker_priority(value):
        return value
    raise ValueError("expected a nice increment 0-19 or 'idle'")


WorkerNice = Annotated[WorkerPriority, BeforeValidator(_check_worker_nice)]
"""The env workers' scheduling priority: a nice increment 0-19, or 'idle' (SCHED_IDLE)."""


class ConfigError(ValueError):
    """A configuration file or value is wrong; the message names the file and the field."""


class CodeNotAllowedError(ConfigError):
    """A configuration names Python code to import and run, and running it was not allowed."""


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One message per problem: `<source>: <field.path>: <message>`."""
    lines = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"] if not str(part).startswith("function-"))
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown setting"
        elif error["type"] == "missing":
            message = "is required"
        elif "input" in error and not isinstance(error["input"], dict):
            message = f"{message} (got {error['input']!r})"
        lines.append(f"{source}: {loc or '<top level>'}: {message}")
    return "\n".join(lines)


RayAddress = Annotated[str, AfterValidator(check_ray_address)]


class ConfigSection(BaseModel):
    """A section of an experiment configuration: unknown keys are errors, assignments validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EnvSettings(ConfigSection):
    """The training envs and what the agent sees of them."""

    num_envs: int = Field(
        8, ge=1, le=1024, description="Envs the actor steps, each on its own, with no lockstep."
    )
    num_workers: int | None = Field(
        None,
        ge=1,
        description="Workers hosting the envs (null: one per CPU core; for the ray backend, "
        "one per CPU of the cluster).",
    )
    backend: Literal["process", "inline", "ray"] = Field(
        "process",
        description="'process': envs run in worker processes; 'inline': in the training "
        "process (for debugging; one core for everything); 'ray': on Ray actors spread over "
        "a Ray cluster (pip install 'oakemu-rl[ray]').",
    )
    ray_address: RayAddress | None = Field(
        None,
        description="The Ray cluster of the ray backend: 'auto' (the one this machine has "
        "joined) or HOST:PORT of its head (null: $RAY_ADDRESS, else a new local one).",
    )
    worker_nice: WorkerNice = Field(
        "idle",
        description="How far the worker processes lower their scheduling priority: a Unix "
        "nice increment 0-19, or 'idle' (Linux SCHED_IDLE: workers run only on cores that "
        "the learner and actor leave free, and give a core up as soon as either wakes).",
    )
    observation: ObservationConfig = Field(
        default_factory=lambda: ObservationConfig(type="auto", frame_stack=2),
        description="What the agent sees (ignored for gym: envs, which keep their own). The "
        "default, 'auto', was chosen by benchmarks/defaults_sweep.py (docs: Defaults).",
    )
    allowed_actions: list[int] | None = Field(
        None, description="Indices of the game's actions the agent may use (null: all of them)."
    )
    batch_wait_s: float = Field(
        0.0005,
        ge=0,
        le=0.1,
        description="When a poll returns fewer than half of the busy envs' results, wait up "
        "to this long for more, so that one inference pass serves several envs (0: never wait).",
    )
    batch_latency_s: float = Field(
        0.002,
        ge=0,
        le=0.1,
        description="How long a worker process may hold finished results while it has more "
        "commands queued, to send them in one message (fewer wake-ups of the actor; 0: send "
        "each at once). Process backend only: a Ray actor answers each batched call once.",
    )
    restart_workers: bool = Field(
        True,
        description="Restart a worker process that crashes, is killed or hangs; the episodes "
        "it held end as truncated and training goes on (false: the first fault stops the run "
        "cleanly).",
    )
    max_restarts_per_minute: int = Field(
        10,
        ge=0,
        description="More worker restarts than this within a minute stop the run cleanly "
        "(final checkpoint and summary): the game fails every time, not by accident.",
    )
    restart_backoff_s: float = Field(
        0.5,
        ge=0,
        le=60,
        description="Wait before restarting a worker that died again before answering "
        "anything; doubles with each death in a row, up to 5 s.",
    )
    worker_timeout_s: float | None = Field(
        60.0,
        gt=0,
        description="A worker that holds commands and answers nothing for this long (hung, "
        "or stopped) is killed and restarted (null: wait for ever).",
    )

    @model_validator(mode="after")
    def _ray_address_needs_ray(self) -> Self:
        if self.ray_address is not None and self.backend != "ray":
            raise ValueError(
                f"ray_address is set ({self.ray_address!r}) but backend is "
                f"{self.backend!r}: set backend: ray, or remove ray_address"
            )
        return self


class TesterSettings(ConfigSection):
    """Evaluation episodes on envs of the tester's own, apart from training."""

    enabled: bool = Field(True, description="Evaluate periodically during training.")
    every_steps: int = Field(25_000, ge=1, description="Env steps between evaluations.")
    episodes: int = Field(10, ge=1, description="Episodes per periodic evaluation.")
    num_envs: int = Field(4, ge=1, description="Envs the tester plays on at once.")
    max_episode_steps: int = Field(
        27_000, ge=1, description="Agent steps after which an evaluation episode is cut short."
    )
    random_baseline: bool = Field(
        True, description="Evaluate a random policy when a run starts, for comparison."
    )
    final_episodes: int = Field(
        30,
        ge=1,
        description="Episodes of the evaluation at the end of the run (30: two evaluations "
        "of one agent agree within their 95% intervals; see benchmarks/generality.py).",
    )
    video: bool = Field(
        False,
        description="After each evaluation, play one greedy episode in the training process "
        "and write it to TensorBoard as a video (eval/video; OakEmu games only).",
    )
    video_steps: int = Field(
        300, ge=1, le=10_000, description="Agent steps at most in each evaluation video."
    )


class CheckpointSettings(ConfigSection):
    """Checkpoints under <run_dir>/checkpoints (one is also written at every evaluation)."""

    every_steps: int = Field(25_000, ge=1, description="Env steps between checkpoints.")
    keep_last: int = Field(3, ge=1, description="Newest checkpoints kept.")
    keep_best: int = Field(
        1,
        ge=0,
        description="Best checkpoints kept besides: by the low end of their evaluation's 95% "
        "confidence interval of the mean return (a lucky mean over few episodes is not best).",
    )
    on_write_error: Literal["stop", "continue"] = Field(
        "stop",
        description="When a checkpoint cannot be written (a full disk, a lost mount): 'stop' "
        "ends the run cleanly, 'continue' trains on and tries again at the next checkpoint. "
        "Either way the previous checkpoint stays intact and the error is reported.",
    )


class LoggingSettings(ConfigSection):
    """TensorBoard and console output."""

    tensorboard: bool = Field(True, description="Write TensorBoard events to <run_dir>/tb.")
    console: bool = Field(True, description="Show a progress display.")
    console_interval_s: float = Field(
        10.0, gt=0, description="Seconds between progress lines when not on a terminal."
    )
    log_every_steps: int = Field(1_000, ge=1, description="Env steps between actor scalars.")


class RestartPoolSettings(ConfigSection):
    """Training episodes that start from machine states saved along earlier episodes."""

    enabled: bool = Field(
        False, description="Keep a restart pool (OakEmu games only; evaluation never uses it)."
    )
    capacity: int = Field(
        256, ge=1, description="Saved states kept (the lowest by episode return go first)."
    )
    save_every_steps: int = Field(
        200, ge=1, description="Save an env's machine state every this many steps of an episode."
    )
    restart_probability: float = Field(
        0.25,
        ge=0,
        le=1,
        description="Chance that a new training episode starts from a saved state.",
    )
    priority: Literal["uniform", "return", "progress", "failure", "novelty"] = Field(
        "failure",
        description="Which saved states are drawn most: 'uniform' all alike; 'return' by rank "
        "of the return their episode had reached; 'progress' by rank of `progress_variable` "
        "(later in the game first); 'failure' the states whose restarted episodes the agent "
        "loses most (each state's losses over its restarts, shrunk towards one half); "
        "'novelty' the states in the cells visited least (needs a 'novelty' reward shaper, "
        "whose counts it uses).",
    )
    progress_variable: str | None = Field(
        None,
        description="A game variable that grows as the game goes on (e.g. 'sector'): with "
        "priority 'progress' it ranks states, and TensorBoard shows where restarts start.",
    )
    max_bytes: int = Field(
        256 * 2**20,
        ge=1,
        description="Memory the saved machine states may take (the lowest ranked go first).",
    )


class DemoSettings(ConfigSection):
    """Demonstrations: trajectory files to learn from and to start training episodes from."""

    paths: list[str] = Field(
        default_factory=list,
        description="Trajectory files, or directories of them (oakemu-rl demo, play --record, "
        "a run's trajectories/). Empty: no demonstrations. `train --demos DIR` sets it.",
    )
    learn: bool = Field(
        True,
        description="Learn from the demonstrations' actions: PPO adds a behaviour-cloning loss "
        "(ppo_bc), DQN keeps them in a demonstration part of replay with a large-margin loss "
        "(dqfd).",
    )
    backplay: bool = Field(
        True,
        description="Start training episodes along the demonstrations, from a hand-over point "
        "that begins near the end of each and moves earlier as the agent succeeds from it.",
    )
    backplay_probability: float = Field(
        0.5, ge=0, le=1, description="Chance that a new training episode is a backplay one."
    )
    backplay_stride: int = Field(
        50,
        ge=1,
        description="Agent steps by which a hand-over point moves earlier (machine states "
        "are saved this often along each demonstration).",
    )
    backplay_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Success rate from a hand-over point (a win, or the demonstration's "
        "return from there) at which the point moves earlier.",
    )
    backplay_window: int = Field(
        8, ge=1, description="Episodes from a hand-over point that decide its success rate."
    )
    random_steps: int = Field(
        0,
        ge=0,
        description="Random actions taken right after the hand-over, before the agent acts "
        "(spreads the starts around the demonstration).",
    )
    restart_states: bool = Field(
        True,
        description="Also put the states saved along the demonstrations (every "
        "backplay_stride steps) into the restart pool, when it is enabled.",
    )


class InitAnchorSettings(ConfigSection):
    """How a run started from a distilled student (`train --init-from`) is kept near it
    while reinforcement learning improves on it: an anchor loss towards the frozen
    student, whose weight falls linearly to 0."""

    coef: float = Field(
        1.0,
        ge=0,
        description="The anchor loss's weight at the start (0: no anchor). PPO adds coef x "
        "KL(student || policy) on each minibatch's observations; DQN adds coef x DQfD's "
        "large-margin loss (dqfd.margin) towards the student's most likely action on each "
        "replay batch. Used only by a run started with --init-from.",
    )
    decay_steps: int = Field(
        100_000,
        ge=1,
        description="Env steps over which the weight falls linearly to 0 (after "
        "value_warmup_steps).",
    )
    value_warmup_steps: int = Field(
        0,
        ge=0,
        description="PPO: env steps at the start in which only the value head learns: the "
        "policy and entropy losses are off and the anchor, at its full weight, holds the "
        "policy at the student. A distilled student's value head never learned, so PPO's "
        "first advantages are noise that would move a good policy at random. The anchor's "
        "weight starts falling after them. Needs coef > 0; DQN refuses it.",
    )

    @model_validator(mode="after")
    def _warmup_has_an_anchor(self) -> Self:
        if self.value_warmup_steps and self.coef == 0:
            raise ValueError(
                "init_anchor.value_warmup_steps needs init_anchor.coef > 0: the anchor holds "
                "the policy at the student while the value head learns"
            )
        return self


class ClipShaper(ConfigSection):
    """Clip the reward into [min, max]."""

    type: Literal["clip"] = Field(description="'clip'.")
    min: float = Field(-1.0, description="Lowest reward.")
    max: float = Field(1.0, description="Highest reward.")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min > self.max:
            raise ValueError(f"clip: min {self.min} is above max {self.max}")
        return self


class ScaleShaper(ConfigSection):
    """Multiply the reward by a factor."""

    type: Literal["scale"] = Field(description="'scale'.")
    factor: float = Field(1.0, description="The factor.")


class SignShaper(ConfigSection):
    """Replace the reward by its sign."""

    type: Literal["sign"] = Field(description="'sign'.")


class LifeLossShaper(ConfigSection):
    """Subtract a penalty when a life is lost."""

    type: Literal["life_loss"] = Field(description="'life_loss'.")
    penalty: float = Field(1.0, description="Subtracted when the `lives` variable falls.")


class NormalizeShaper(ConfigSection):
    """Divide the reward by a running estimate of the scale of the discounted return."""

    type: Literal["normalize"] = Field(description="'normalize'.")
    gamma: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Discount of the return whose scale is estimated (null: the algorithm's "
        "discount factor, learner.gamma or ppo.gamma).",
    )
    clip: float | None = Field(
        10.0,
        gt=0,
        description="Clip the normalised reward into [-clip, clip] (null: no clip).",
    )
    epsilon: float = Field(
        1e-8, gt=0, description="Added to the variance before its square root is taken."
    )


class NoveltyShaper(ConfigSection):
    """Add a count-based exploration bonus (#Exploration, Tang et al. 2017): each step's
    next state falls in a cell, and the bonus is coef / sqrt(visits of that cell so far),
    so rarely seen situations pay. A cell is a SimHash of the observation, or the game's
    data variables cut into bins (Go-Explore's cells)."""

    type: Literal["novelty"] = Field(description="'novelty'.")
    coef: float = Field(
        0.01,
        gt=0,
        description="The bonus for a first visit, in the learner's reward units (after the "
        "shapers before this one).",
    )
    cell: Literal["observation", "variables"] = Field(
        "observation",
        description="What a cell is: 'observation', a SimHash of the next observation (any "
        "env); 'variables', the game's data variables, each cut into bins (OakEmu games). "
        "A SimHash of a whole screen barely sees a small player move; variables do.",
    )
    bits: int = Field(
        16,
        ge=1,
        le=24,
        description="With cell 'observation': bits of the SimHash, 2^bits cells at most "
        "(fewer: coarser cells, whose counts grow faster).",
    )
    variables: list[str] | None = Field(
        None,
        min_length=1,
        description="With cell 'variables': the data variables that name a cell (null: "
        "those the actions move, found by holding each action from states of random play; "
        "the run's log names them).",
    )
    levels: int = Field(
        8,
        ge=1,
        le=256,
        description="With cell 'variables': each variable's bins are its spread over 400 "
        "steps of random play / levels wide, so random play spans about this many of them.",
    )
    seed: int = Field(
        0, ge=0, description="Seed of the SimHash's projection, or of the random play."
    )

    @model_validator(mode="after")
    def _settings_of_the_cell(self) -> NoveltyShaper:
        fields = type(self).model_fields
        other = {"observation": ("variables", "levels"), "variables": ("bits",)}[self.cell]
        inert = [name for name in other if getattr(self, name) != fields[name].default]
        if inert:
            raise ValueError(
                f"novelty: {', '.join(inert)} apply to another cell than {self.cell!r}"
            )
        return self


class CallableShaper(ConfigSection):
    """A user function named by import path."""

    type: Literal["callable"] = Field(description="'callable'.")
    target: str = Field(
        description="'module:function' taking (reward, info) and returning the new reward."
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to the function."
    )


ShaperConfig = Annotated[
    ClipShaper
    | ScaleShaper
    | SignShaper
    | LifeLossShaper
    | NormalizeShaper
    | NoveltyShaper
    | CallableShaper,
    Field(discriminator="type"),
]
"""One entry of `reward_shaping`, told apart by its `type`."""


class ExperimentConfiguration(ConfigSection):
    """The settings every algorithm's run has; algorithms subclass it with their own sections."""

    algo: str = Field(description="The algorithm: dqn or ppo.")
    game: str = Field("catch", description="A bundled game's name, a game YAML path, or gym:<id>.")
    total_steps: int = Field(60_000, ge=1, description="Env steps of the run.")
    seed: int = Field(
        0, ge=0, description="Seed of the envs, action sampling, minibatches and initial weights."
    )
    device: str = Field("cpu", description="Torch device: cpu, cuda, cuda:N or auto.")
    torch_threads: int = Field(
        0,
        ge=0,
        description="Torch threads of each thread of the training process (0: the CPU cores "
        "left over by the worker processes).",
    )
    run_name: str | None = Field(
        None, description="Name of the run directory (null: <game>-<algo>-<date>-<time>)."
    )
    max_time_s: float | None = Field(
        None, gt=0, description="Stop after this many seconds of training, whatever the steps."
    )
    target_eval_return: float | None = Field(
        None, description="Stop as soon as an evaluation's mean return reaches this."
    )
    env: EnvSettings = Field(default_factory=EnvSettings, description="Training envs.")
    tester: TesterSettings = Field(default_factory=TesterSettings, description="Evaluation.")
    checkpoint: CheckpointSettings = Field(
        default_factory=CheckpointSettings, description="Checkpoints."
    )
    logging: LoggingSettings = Field(default_factory=LoggingSettings, description="Logging.")
    rollback: RollbackSettings = Field(
        default_factory=RollbackSettings,
        description="Automatic rollback to an earlier checkpoint when training breaks down.",
    )
    restart_pool: RestartPoolSettings = Field(
        default_factory=RestartPoolSettings, description="Restarts from saved machine states."
    )
    demos: DemoSettings = Field(
        default_factory=DemoSettings, description="Demonstrations (trajectory files)."
    )
    reward_shaping: list[ShaperConfig] = Field(
        default_factory=list,
        description="Reward shapers, applied in order to each step's reward before the "
        "algorithm learns from it (clip, scale, sign, life_loss, normalize, novelty, "
        "callable).",
    )
    init_anchor: InitAnchorSettings = Field(
        default_factory=InitAnchorSettings,
        description="The anchor to the distilled student of a run started with --init-from.",
    )
    episodic_life: bool = Field(
        False,
        description="A lost life ends bootstrapping: the learner treats a step on which the "
        "game's `lives` fell as terminal (DQN's n-step targets, PPO's GAE) while the episode "
        "goes on (DeepMind's 'episodic life'). Needs a game with a `lives` variable.",
    )

    def _check_shared(self) -> None:
        """Checks every algorithm's configuration passes (called by their validators)."""
        if self.env.allowed_actions is not None and not self.env.allowed_actions:
            raise ValueError("env.allowed_actions must name at least one action (or be null)")
        if self.restart_pool.enabled and self.game.startswith("gym:"):
            raise ValueError(
                f"restart_pool.enabled: {self.game} is a Gymnasium env, which has no machine "
                "state to save; restart pools need an OakEmu game"
            )
        pool = self.restart_pool
        if pool.priority == "progress" and pool.progress_variable is None:
            raise ValueError(
                "restart_pool.priority: 'progress' ranks states by a game variable; set "
                "restart_pool.progress_variable (e.g. 'sector')"
            )
        novelty = [s for s in self.reward_shaping if isinstance(s, NoveltyShaper)]
        if pool.priority == "novelty" and not novelty:
            raise ValueError(
                "restart_pool.priority: 'novelty' draws states by the visit counts of a "
                "novelty bonus; add {type: novelty} to reward_shaping"
            )
        if len(novelty) > 1:
            raise ValueError(
                f"reward_shaping: {len(novelty)} 'novelty' entries; expected at most one"
            )
        normalizers = [s for s in self.reward_shaping if isinstance(s, NormalizeShaper)]
        if len(normalizers) > 1:
            raise ValueError(
                f"reward_shaping: {len(normalizers)} 'normalize' entries; expected at most one "
                "(each would divide by its own estimate of the return's scale)"
            )
        if self.demos.paths and self.game.startswith("gym:"):
            raise ValueError(
                f"demos.paths: {self.game} is a Gymnasium env; demonstrations replay "
                "machine states of an OakEmu game"
            )

    def code_references(self) -> list[str]:
        """The settings that would import and run Python code named in the configuration
        (a Gymnasium id with a module, ``gym:package.module:Env-v0``, and callable reward
        shapers; algorithms add theirs)."""
        refs = []
        if self.game.startswith("gym:") and ":" in self.game[len("gym:") :]:
            module = self.game[len("gym:") :].split(":", 1)[0]
            refs.append(f"game {self.game!r} imports the module {module!r}")
        for i, shaper in enumerate(self.reward_shaping):
            if isinstance(shaper, CallableShaper):
                refs.append(f"reward_shaping[{i}] calls {shaper.target!r}")
        return refs

    def check_code_allowed(self, allow_code: bool, source: str = "the configuration") -> None:
        """Raise CodeNotAllowedError when the configuration names code and `allow_code` is
        false: a config file or a run directory written by someone else must not run code
        on this machine unless its user says so."""
        refs = self.code_references()
        if refs and not allow_code:
            raise CodeNotAllowedError(
                f"{source} would run Python code it names: {'; '.join(refs)}. Code named in a "
                "configuration runs only when you allow it: add --allow-code if you trust "
                "where it came from (in Python: allow_code=True)"
            )

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Load a YAML file; errors name the file and the field."""
        return cls.from_dict(read_settings(path), source=str(path))

    @classmethod
    def for_game(
        cls,
        game: str | None = None,
        settings: dict[str, Any] | None = None,
        source: str = "the configuration",
    ) -> Self:
        """The configuration for `game` (default: `settings`' game, else the default game):
        its preset, if the package ships one for this algorithm, with `settings` laid over
        it. Errors name `source`."""
        from ..presets import find_preset, merge

        settings = dict(settings or {})
        game = game or settings.get("game") or cls.model_fields["game"].default
        algo = str(cls.model_fields["algo"].default)
        preset = find_preset(algo, str(game))
        data = merge(preset.settings(), settings) if preset is not None else settings
        if preset is not None:
            source = f"{source} (over the preset {preset.name})"
        return cls.from_dict(data | {"game": game}, source=source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "config") -> Self:
        """Validate a mapping; errors name `source` and the field."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping of settings at the top level")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc, source)) from None

    def to_yaml(self) -> str:
        """The full configuration as YAML (every field, defaults included)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    def to_commented_yaml(self) -> str:
        """The full configuration as YAML, each setting under a comment that says what it
        does: a file to save, edit and load again (`from_yaml`)."""
        return "\n".join(_commented_lines(self, 0)) + "\n"

    def with_overrides(self, **changes: Any) -> Self:
        """A copy with top-level fields changed (validated); None values are ignored."""
        data = self.model_dump(mode="json")
        data.update({k: v for k, v in changes.items() if v is not None})
        return type(self).from_dict(data)


def read_settings(path: str | Path) -> dict[str, Any]:
    """The mapping of settings in a YAML file; errors name the file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    return data


END_OF_DOCUMENT = "\n...\n"
"""What PyYAML appends to a document that is a lone scalar."""


def _commented_lines(model: BaseModel, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        description = field.description or ""
        if isinstance(value, BaseModel) and not description:
            description = (type(value).__doc__ or "").strip().split("\n")[0]
        if description:
            width = max(40, 92 - indent)
            lines += [f"{pad}# {line}" for line in textwrap.wrap(description, width)]
        if isinstance(value, BaseModel):
            lines.append(f"{pad}{name}:")
            lines += _commented_lines(value, indent + 2)
            continue
        data = model.model_dump(mode="json", include={name})[name]
        text = yaml.safe_dump(data, default_flow_style=True, sort_keys=False, width=10**6)
        lines.append(f"{pad}{name}: {text.removesuffix(END_OF_DOCUMENT).strip()}")
    return lines
