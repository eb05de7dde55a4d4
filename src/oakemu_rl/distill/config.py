"""DistillExperimentConfiguration: the shared settings plus distillation's own, loadable
from YAML.

The student is a `PPOModel` (the `model:` section is PPO's), so that `train --init-from`
starts PPO from a distilled student by loading its weights as they are. Every field has
a documented default; `oakemu-rl config show --algo distill` prints them all.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..ppo.config import PPOModelSettings, PPOTesterSettings
from ..runtime.config_base import ConfigError, ExperimentConfiguration
from ..runtime.config_base import ConfigSection as _Section
from ..runtime.rollback import RollbackSettings
from ..runtime.shrink_perturb import ShrinkPerturbSettings
from ..trajectories.teacher import TeacherSettings

__all__ = ["ConfigError", "DistillExperimentConfiguration", "DistillSettings"]


class DistillSettings(_Section):
    """The teacher, who acts (the beta schedule), the aggregated dataset and the update."""

    search: Literal["beam", "safety", "margin"] = Field(
        "beam",
        description="Teacher: 'beam' ranks the actions by the most reward a beam search finds "
        "after each (the safe ones, checked depth first); 'safety' only finds, depth first, "
        "which actions have a future that loses no life more than the best, and spreads the "
        "target evenly over them: about 1/5 of the emulator steps a label (catch, horizon 14), "
        "for a student that learns to survive, not to score; 'margin' weights each of those "
        "by how many actions one step after it still have such a future, so the student "
        "keeps away from tight spots. width, temperature and temperature_scale are the "
        "beam's; verify_budget caps each search.",
    )
    horizon: int = Field(
        16,
        ge=0,
        description="Teacher: steps its lookahead searches after each action's first `hold` "
        "steps. It must see as far as a decision matters (catch: the ball falls about 31 "
        "steps and the basket moves 2 columns a step, so 16 reaches every column).",
    )
    width: int = Field(
        8,
        ge=1,
        description="Teacher: states its beam keeps after each searched step (at least one "
        "per action). A label costs up to actions x (hold + horizon x width) emulator steps, "
        "plus verify_budget.",
    )
    hold: int = Field(
        1, ge=1, description="Teacher: steps each labelled action is held before the search."
    )
    temperature: float = Field(
        1.0,
        gt=0,
        description="Teacher: how sharply the soft target prefers the safe action with the "
        "most reward (in the units temperature_scale says; small: nearly the argmax). "
        "Actions that lose more lives than the safest one get no mass.",
    )
    temperature_scale: Literal["reward", "spread"] = Field(
        "reward",
        description="Teacher: what temperature is measured in. 'reward': reward units, so "
        "the target's sharpness depends on the YAML's weights (at temperature 1 a move to a "
        "pickup worth 1 gets e times the mass of one without, to one worth 0.1 1.1 times); "
        "'spread': a share of each state's spread of safe returns (best minus worst), the "
        "same whatever the weights (temperature 0.25: the worst safe action gets e^-4 of "
        "the best's mass).",
    )
    verify_budget: int = Field(
        2000,
        ge=0,
        description="Teacher: emulator steps per label a depth-first search may spend "
        "checking each action the beam found losing more lives than the best one, for a "
        "path that loses no more (0: the beam's verdict stands). A narrow beam can prune "
        "every safe future of an action; the check keeps such actions in the target.",
    )
    hidden: dict[str, tuple[int | str, int | str]] = Field(
        default_factory=dict,
        description="Teacher: data variables of the game YAML whose values the screen does "
        "not show (a frame counter that says on which frame of a step something moves), "
        "each with its lowest and highest value: a number, or the name of a data variable "
        "that holds it, as {scroll_timer: [1, scroll_period]}. On a state where some move "
        "loses a life, a move counts as safe only if it is safe with every combination of "
        "their values, so the student is not taught a move that was safe by a count it cannot "
        "see (where no move is safe in every combination, the state's own label stands). Each "
        "combination costs a search: the checks share one more verify_budget. At most 1,024 "
        "combinations; an empty range or more is refused.",
    )
    prune: Literal["state", "situation"] = Field(
        "state",
        description="Teacher: what its depth-first searches remember a failed state by. "
        "'state': the whole machine state (exact: only the very same state is not searched "
        "again); 'situation': the game YAML's variables besides the scored ones, at the same "
        "step and with the same lives lost, so moves that differ only in what the YAML does "
        "not name (a shot fired, a score) are searched once. Far fewer emulator steps where "
        "the YAML names what decides survival (a position): on forest_run, fewer searches "
        "cut short by verify_budget. A wrong merge can only make a move look unsafe, never "
        "safe: a safe verdict is always a path the emulator played.",
    )
    beta_start: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Chance that the teacher acts (an action drawn from its soft target) "
        "instead of the student (its most likely action), at the run's first step.",
    )
    beta_end: float = Field(
        0.0, ge=0, le=1, description="That chance once the decay (beta_decay_steps) is done."
    )
    beta_decay_steps: int | None = Field(
        20_000,
        ge=1,
        description="Env steps over which the chance the teacher acts goes linearly from "
        "beta_start to beta_end (DAgger: the student plays more and more of each episode); "
        "null: over the run's budget (total_steps, or max_time_s where that runs out "
        "first; a resumed session's own max_time_s, as PPO's learning-rate annealing), so a "
        "run budgeted in minutes ends with the student playing.",
    )
    intervene: bool = Field(
        False,
        description="Where the student acts and the teacher's label says its action loses "
        "a life that another action keeps, the teacher acts instead (drawn from its target) "
        "and the state is marked critical. The episode goes on past the student's mistakes, "
        "so later stages of the game are labelled too, and the marked states are exactly "
        "where the student errs (distill/interventions). Costs nothing: the label is made "
        "either way.",
    )
    dataset_bytes: int = Field(
        256 * 2**20,
        ge=1,
        description="Memory of the aggregated dataset (observations, soft targets, flags); "
        "when full, the oldest states go first, so it holds the states the recent students "
        "visited. Observations of 0s and 255s (attributes as planes) take one bit a value. "
        "Saved in every checkpoint.",
    )
    learning_starts: int = Field(
        256, ge=1, description="Labelled states in the dataset before the first update."
    )
    batch_size: int = Field(256, ge=1, description="Labelled states in each minibatch.")
    loss: Literal["cross_entropy", "safe_set"] = Field(
        "cross_entropy",
        description="The student's loss. 'cross_entropy': matched to the teacher's soft "
        "target, mass split as the target splits it; 'safe_set': the negative log of the "
        "student's total mass on the actions the target allows, so it may put it all on one "
        "of several safe moves (forest_run's moves come with and without SPACE: split six "
        "ways, a small error lets an unsafe move be the most likely); its minibatches are "
        "drawn only from the states where some move is unsafe, since the others teach it "
        "nothing. Only with search: safety, whose target says no more than which moves are "
        "safe.",
    )
    learning_rate: float = Field(1e-3, gt=0, description="Adam learning rate.")
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")
    updates_per_step: float = Field(
        0.25,
        gt=0,
        description="Learner updates per labelled env step, held both ways: the learner "
        "waits while it is ahead, so a small dataset is not trained on over and over, and "
        "the actor waits while the learner is more than max_lag_updates behind.",
    )
    max_lag_updates: int = Field(
        16,
        ge=1,
        description="How far the learner may fall behind updates_per_step before the actor "
        "waits (perf/actor_wait_s).",
    )
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient-norm clipping.")
    shrink_perturb: ShrinkPerturbSettings = Field(
        default_factory=ShrinkPerturbSettings,
        description="Periodic shrink and perturb (or, with shrink 0, a reset) of the student, "
        "which otherwise loses the plasticity to fit the growing dataset (off by default).",
    )
    refit_every_updates: int | None = Field(
        None,
        ge=1,
        description="Refit the student on the side (null: never): after this many updates "
        "of the acting student, a freshly initialised candidate trains on the dataset "
        "instead, while the acting student stays as it is; at each measurement "
        "(eval_every_updates) the candidate replaces it once it chooses safe actions on "
        "held-out states at least as often (distill/holdout_safe; accuracy where no "
        "held-out state is critical), or is dropped after this many updates without. A "
        "fresh network fits the grown dataset better than one trained on it all along "
        "(plasticity), and unlike shrink_perturb's reset the acting student never plays "
        "worse for it. Needs holdout_fraction > 0.",
    )
    members: int = Field(
        1,
        ge=1,
        le=8,
        description="Students in the acting network (1: one). With more, each is "
        "initialised on its own and trained on minibatches of its own, and what acts, is "
        "evaluated, checkpointed and exported is the mean of their policies "
        "(`StudentEnsemble`), wrong less often than any one of them; each update trains "
        "every member, so the learner's compute grows with their number. A run started "
        "from a student (--init-from) needs one.",
    )
    ema_decay: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Act with a moving average of the student's weights (null: the trained "
        "weights themselves): after each update the average keeps this share of itself and "
        "takes the rest from the trained weights (less while it is young: at most (1 + n) / "
        "(10 + n) after n updates). The average is what acts, is evaluated, checkpointed and "
        "exported; the optimizer goes on training the weights it averages, and a refit "
        "candidate keeps an average of its own, judged and swapped in as the student's. "
        "The trained weights swing from one update to the next on a growing dataset; their "
        "average smooths that out at no cost at play time.",
    )
    critical_steps: int = Field(
        8,
        ge=0,
        description="States before a lost life (or a lost game) of a training episode that "
        "are marked critical (0: none).",
    )
    critical_weight: float = Field(
        4.0,
        ge=1,
        description="How much more often a critical state is drawn into a minibatch than "
        "another one.",
    )
    holdout_fraction: float = Field(
        0.05,
        ge=0,
        le=0.5,
        description="Share of the labelled states kept out of training, to measure held-out "
        "imitation accuracy (distill/holdout_accuracy) on (0: not measured).",
    )
    eval_every_updates: int = Field(
        100,
        ge=1,
        description="Learner updates between logging distill/loss and measuring "
        "distill/holdout_accuracy.",
    )

    def teacher_settings(self) -> TeacherSettings:
        """The teacher's lookahead these settings describe."""
        return TeacherSettings(
            horizon=self.horizon,
            width=self.width,
            hold=self.hold,
            temperature=self.temperature,
            temperature_scale=self.temperature_scale,
            verify_budget=self.verify_budget,
            search=self.search,
            hidden=tuple((name, low, high) for name, (low, high) in self.hidden.items()),
            prune=self.prune,
        )

    @model_validator(mode="after")
    def _search_uses_its_settings(self) -> DistillSettings:
        # A saved configuration lists every field, so only a value off its default says
        # that a user meant the beam's setting for the safety search.
        fields = type(self).model_fields
        beam_only = [
            name
            for name in ("width", "temperature", "temperature_scale")
            if getattr(self, name) != fields[name].default
        ]
        if self.search != "beam" and beam_only:
            raise ValueError(
                f"distill.{beam_only[0]} is a setting of the beam search; search: "
                f"{self.search} does not use it (leave it out, or set search: beam)"
            )
        return self

    @model_validator(mode="after")
    def _loss_reads_what_the_target_says(self) -> DistillSettings:
        if self.loss == "safe_set" and self.search != "safety":
            raise ValueError(
                f"distill.loss: safe_set learns only which actions the target allows; search: "
                f"{self.search}'s weights among them would do nothing (use search: safety, or "
                "loss: cross_entropy)"
            )
        return self

    @model_validator(mode="after")
    def _average_is_of_one_network(self) -> DistillSettings:
        if self.ema_decay is not None and self.shrink_perturb.every_updates is not None:
            raise ValueError(
                "distill.ema_decay and distill.shrink_perturb: an average over a shrunk "
                "student's weights mixes two networks; use refit_every_updates to renew an "
                "averaged student"
            )
        return self

    @model_validator(mode="after")
    def _refit_is_possible(self) -> DistillSettings:
        if self.refit_every_updates is not None:
            if self.shrink_perturb.every_updates is not None:
                raise ValueError(
                    "distill.refit_every_updates and distill.shrink_perturb both renew the "
                    "student; choose one"
                )
            if self.holdout_fraction == 0:
                raise ValueError(
                    "distill.refit_every_updates: the candidate replaces the student when it "
                    "scores as well on held-out states; set holdout_fraction above 0"
                )
        return self


class DistillExperimentConfiguration(ExperimentConfiguration):
    """A distillation run: the shared settings, the student network (PPO's) and the
    teacher, beta schedule, dataset and update."""

    algo: Literal["distill"] = Field("distill", description="The algorithm.")
    total_steps: int = Field(50_000, ge=1, description="Env steps of the run.")
    tester: PPOTesterSettings = Field(default_factory=PPOTesterSettings, description="Evaluation.")
    model: PPOModelSettings = Field(
        default_factory=PPOModelSettings,
        description="The student: PPO's actor-critic network (its policy head is trained; "
        "the value head is left for PPO after train --init-from).",
    )
    distill: DistillSettings = Field(
        default_factory=DistillSettings,
        description="Teacher, beta schedule, aggregated dataset and update.",
    )
    rollback: RollbackSettings = Field(
        default_factory=lambda: RollbackSettings(watch_collapse=False),
        description="Automatic rollback to an earlier checkpoint when training breaks down. "
        "Distill watches only for non-finite losses by default: every label stays valid, "
        "and the tester's score dips while beta hands the play to the student, which a "
        "rollback (restoring older weights, halving the learning rate) would only slow.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> DistillExperimentConfiguration:
        self._check_shared()
        if self.game.startswith("gym:"):
            raise ValueError(
                f"game: {self.game} is a Gymnasium env; algo distill's teacher searches from "
                "saved machine states, so it needs an OakEmu game (a bundled name or a game "
                "YAML)"
            )
        if self.env.allowed_actions is not None:
            raise ValueError(
                "env.allowed_actions: distill's teacher searches over the game's whole action "
                "set; narrow the actions in the game YAML instead (or leave this null)"
            )
        if self.reward_shaping:
            raise ValueError(
                "reward_shaping: distill learns from the teacher's soft targets, not from "
                "rewards; leave it empty (the teacher ranks actions by the game's own reward)"
            )
        if self.episodic_life:
            raise ValueError(
                "episodic_life: distill has no bootstrapped targets for a lost life to end "
                "(the teacher already weighs lost lives); set it to false"
            )
        if self.demos.paths and self.demos.learn:
            raise ValueError(
                "demos.learn: distill learns from its teacher, not from demonstrated actions; "
                "set demos.learn: false to start episodes along the demonstrations (backplay, "
                "restart states)"
            )
        if self.demos.random_steps:
            raise ValueError(
                "demos.random_steps: distill's episodes are played by the student and the "
                "teacher; set it to 0"
            )
        return self
