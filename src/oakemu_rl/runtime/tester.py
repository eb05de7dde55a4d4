"""TesterBase: evaluation episodes on envs of the tester's own, on request or periodically.

The algorithms' testers (DQN's `Tester`, `PPOTester`) differ only in how they pick an
action: this base plays the episodes, runs the evaluation thread, logs `eval/*` scalars
and keeps the results.

Episode k of a tester (counted over all its evaluations) is reset with env seed
`seed + k` and draws its random actions from a generator of its own, so what is played
depends on neither the number of envs nor the order in which they finish their steps:
`evaluate --seed S` gives the same episodes with any `--num-envs`, and `play-onnx --seed S`
the same ones again.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from ..envs.lives import clean_win_rate
from .config_base import ExperimentConfiguration
from .context import RuntimeContext
from .env_lifecycle import EnvironmentState, EnvLifecycle
from .env_owner import EnvFactory, EnvOwner, make_multi_env
from .inference_batch import InferenceBatch
from .metrics import VideoSink
from .statistics import mean_confidence_interval
from .thread_safe_model import ThreadSafeModel

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

C = TypeVar("C", bound=ExperimentConfiguration)

#: Env seeds of a tester are offset from the training envs' seeds by this much.
TESTER_SEED_OFFSET = 1_000_003

EpisodeRecord = tuple[float, float, int, str | None, int]
"""(return, score, length, outcome, lives lost) of one evaluation episode."""


@dataclass
class EvaluationResult:
    """The outcome of a set of evaluation episodes."""

    episodes: int
    mean_return: float
    std_return: float
    mean_score: float
    win_rate: float
    mean_length: float
    clean_win_rate: float = float("nan")
    """The share of episodes won with no life lost (a game without lives: the win rate)."""
    returns: list[float] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    outcomes: list[str | None] = field(default_factory=list)
    lives_lost: list[int] = field(default_factory=list)
    step: int = 0
    policy: str = "greedy"
    median_return: float = float("nan")
    ci95_low: float = float("nan")
    """The 95% confidence interval of the mean return (Student's t), low end."""
    ci95_high: float = float("nan")
    elapsed_s: float | None = None
    """The run's training seconds when the evaluated weights were taken (None: unknown)."""

    @property
    def interval(self) -> str:
        """'mean return 12.30 (95% CI 10.10 to 14.50, median 12.00)'."""
        return (
            f"mean return {self.mean_return:.2f} (95% CI {self.ci95_low:.2f} to "
            f"{self.ci95_high:.2f}, median {self.median_return:.2f})"
        )

    def to_dict(self, *, details: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not details:
            for key in ("returns", "scores", "outcomes", "lives_lost"):
                data.pop(key)
        return data


def summarise(records: list[EpisodeRecord], step: int, policy: str) -> EvaluationResult:
    """An EvaluationResult from (return, score, length, outcome, lives lost) records."""
    returns = [r[0] for r in records]
    scores = [r[1] for r in records]
    nan = float("nan")
    low, high = mean_confidence_interval(returns)
    return EvaluationResult(
        episodes=len(records),
        mean_return=float(np.mean(returns)) if records else nan,
        std_return=float(np.std(returns)) if records else nan,
        mean_score=float(np.mean(scores)) if records else nan,
        win_rate=float(np.mean([r[3] == "win" for r in records])) if records else nan,
        mean_length=float(np.mean([r[2] for r in records])) if records else nan,
        clean_win_rate=clean_win_rate([r[3] for r in records], [r[4] for r in records]),
        returns=returns,
        scores=scores,
        outcomes=[r[3] for r in records],
        lives_lost=[r[4] for r in records],
        step=step,
        policy=policy,
        median_return=float(np.median(returns)) if records else nan,
        ci95_low=low,
        ci95_high=high,
    )


def is_better(result: EvaluationResult, best: EvaluationResult | None) -> bool:
    """Whether `result` beats `best` by the low end of its 95% interval: a lucky mean over
    few episodes does not displace a result that is surely good."""
    return best is None or result.ci95_low > best.ci95_low


class EvaluationAborted(Exception):
    """The tester was stopped in the middle of an evaluation."""


class TesterBase(ABC, Generic[C]):
    """Plays evaluation episodes with the tester model on envs of its own.

    `evaluate` (in each subclass, with its own policy options) runs episodes now, on
    the calling thread. `start` runs a thread that consumes weights handed to
    `request_evaluation`, evaluates them, logs `eval/*` scalars at the requesting step
    and calls `on_result`. Subclasses say how an action is chosen (`_explore_action`
    for actions played without the model, `_greedy_actions` for the model's).

    Args:
        context: the run's context.
        tester_model: the model the tester plays with.
        learner_model: where `sync_from_learner` copies weights from.
        env_factory: builds the tester's multi-env (default: `tester.num_envs` envs of the
            configured game, seeded apart from the training envs).
        on_result: called with each result of the evaluation thread.
    """

    def __init__(
        self,
        context: RuntimeContext[C],
        tester_model: nn.Module,
        learner_model: ThreadSafeModel[Any] | None = None,
        env_factory: EnvFactory | None = None,
        *,
        on_result: Callable[[EvaluationResult], None] | None = None,
    ) -> None:
        config = context.config
        num_envs = config.tester.num_envs
        self.context = context
        self.config = config
        self.tester_model = tester_model.eval()
        self.learner_model = learner_model
        self.on_result = on_result
        self._envs = EnvOwner(
            env_factory
            or (lambda: make_multi_env(config, num_envs=num_envs, seed_offset=TESTER_SEED_OFFSET)),
            num_envs,
        )
        self.lifecycle = EnvLifecycle(num_envs, context.seed, "tester")
        self._inference: InferenceBatch[int] = InferenceBatch(num_envs)
        self._episodes_started = 0
        self._random_policy = False
        self._requests: queue.Queue[tuple[int, dict[str, Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._abort = threading.Event()
        self._busy = threading.Event()
        self.results: list[EvaluationResult] = []
        self.best: EvaluationResult | None = None

    @property
    def env(self) -> OakEmuMultiEnv | None:
        """The tester's multi-env, once opened."""
        return self._envs.env

    # -- choosing actions -----------------------------------------------------------------

    @abstractmethod
    def _random_action(self, rng: np.random.Generator) -> int:
        """A uniformly random action among the allowed ones."""

    @abstractmethod
    def _greedy_actions(
        self, outputs: torch.Tensor, rngs: Sequence[np.random.Generator]
    ) -> npt.NDArray[np.int64]:
        """The actions the model's outputs (one row per env) choose (a policy that samples
        draws row i's action from `rngs[i]`)."""

    def _explore_action(self, rng: np.random.Generator) -> int | None:
        """An action to play without the model (random baseline, epsilon), or None."""
        return self._random_action(rng) if self._random_policy else None

    def _choose(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        action = self._explore_action(state.rng)
        if action is not None:
            state.last_action = action
            env.submit(state.env_id, action)
        else:
            assert state.observation is not None
            self._inference.add(state.env_id, state.observation)

    def _flush_inference(self, env: OakEmuMultiEnv) -> None:
        if not len(self._inference):
            return
        observations, env_ids = self._inference.take()
        batch = torch.from_numpy(observations).to(self.context.device)
        rngs = [self.lifecycle[env_id].rng for env_id in env_ids]
        with torch.inference_mode():
            actions = self._greedy_actions(self.tester_model(batch), rngs)
        with env.batch():
            for env_id, action in zip(env_ids, actions.tolist(), strict=True):
                self.lifecycle[env_id].last_action = int(action)
                env.submit(env_id, int(action))

    # -- evaluation -----------------------------------------------------------------------

    def sync_from_learner(self) -> None:
        """Copy the learner's current weights into the tester model."""
        if self.learner_model is not None:
            self.learner_model.copy_to(self.tester_model, -1)

    def _start_episode(self, env: OakEmuMultiEnv, state: EnvironmentState, episode: int) -> None:
        """Reset `state`'s env for the tester's `episode`-th episode: env seed `seed +
        episode` and a random generator of the episode's own."""
        base = env.seed
        key = [self.context.seed if base is None else base, episode, *b"tester"]
        state.rng = np.random.default_rng(np.random.SeedSequence(key))
        state.extra["episode"] = episode
        self.lifecycle.request_reset(env, state, seed=None if base is None else base + episode)

    def _play(
        self, episodes: int, max_episode_steps: int, step: int, policy: str
    ) -> EvaluationResult:
        """Play `episodes` episodes (each cut after `max_episode_steps`) and summarise them
        in the order they were started."""
        env = self._envs.open()
        first = self._episodes_started
        self._episodes_started += episodes
        records: dict[int, EpisodeRecord] = {}
        started = 0
        for state in self.lifecycle.states[: min(episodes, self.lifecycle.num_envs)]:
            self._start_episode(env, state, first + started)
            started += 1
        try:
            while len(records) < episodes:
                if self._abort.is_set():
                    raise EvaluationAborted
                for result in env.poll(timeout=0.5):
                    state = self.lifecycle[result.env_id]
                    if result.is_reset or state.awaiting_reset:
                        state.begin_episode(result.observation, result.info)
                        self._choose(env, state)
                        continue
                    if result.info.get("worker_lost"):
                        # Lost with its worker, not played out: it does not count; replay it.
                        self._start_episode(env, state, state.extra["episode"])
                        continue
                    self.lifecycle.on_step(state, result, float(result.reward))
                    ended = result.terminated or result.truncated
                    if ended or state.episode_length >= max_episode_steps:
                        outcome = result.info.get("outcome") if ended else "truncated"
                        records[state.extra["episode"]] = (
                            state.episode_return,
                            state.last_score,
                            state.episode_length,
                            outcome,
                            state.lives_lost,
                        )
                        if started < episodes:
                            self._start_episode(env, state, first + started)
                            started += 1
                        else:
                            state.awaiting_reset = True
                    else:
                        state.observation = np.array(result.observation, copy=True)
                        self._choose(env, state)
                self._flush_inference(env)
        except BaseException:
            self._envs.close()  # envs may be mid-command: start afresh next time
            raise
        return summarise([records[k] for k in sorted(records)], step, policy)

    @abstractmethod
    def evaluate(
        self,
        episodes: int | None = None,
        *,
        random_policy: bool = False,
        step: int = 0,
        max_episode_steps: int | None = None,
    ) -> EvaluationResult:
        """Play `episodes` episodes (default: `tester.episodes`) with the configured policy,
        or with random actions (`random_policy`), and summarise them."""

    # -- thread ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the evaluation thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tester", daemon=True)
            self._thread.start()

    def request_evaluation(self, step: int, weights: dict[str, Any] | None = None) -> None:
        """Evaluate `weights` (default: the learner's weights when the thread gets to it)."""
        self._requests.put((step, weights or {}))

    @property
    def busy(self) -> bool:
        """True while requests are queued or running."""
        return self._busy.is_set() or not self._requests.empty()

    def _run(self) -> None:
        self.context.enter_thread()
        while True:
            request = self._requests.get()
            if request is None:
                return
            step, weights = request
            self._busy.set()
            try:
                if weights:
                    self.tester_model.load_state_dict(weights)
                else:
                    self.sync_from_learner()
                result = self.evaluate(step=step)
                self._record(result)
                if self.config.tester.video:
                    self.record_video(step)
            except EvaluationAborted:
                return
            except BaseException as exc:
                self.context.report_error(exc)
                return
            finally:
                self._busy.clear()

    def _record(self, result: EvaluationResult) -> None:
        self.results.append(result)
        if is_better(result, self.best):
            self.best = result
        sink = self.context.metrics
        sink.scalar("eval/mean_return", result.mean_return, result.step)
        sink.scalar("eval/mean_return_ci_low", result.ci95_low, result.step)
        sink.scalar("eval/mean_return_ci_high", result.ci95_high, result.step)
        sink.scalar("eval/median_return", result.median_return, result.step)
        sink.scalar("eval/mean_score", result.mean_score, result.step)
        sink.scalar("eval/win_rate", result.win_rate, result.step)
        sink.scalar("eval/clean_win_rate", result.clean_win_rate, result.step)
        sink.scalar("eval/mean_length", result.mean_length, result.step)
        if self.on_result is not None:
            self.on_result(result)

    def stop(self, timeout: float = 30.0, *, abort: bool = False) -> None:
        """Stop the thread after the queued evaluations (or at once with `abort`)."""
        if abort:
            while True:
                try:
                    self._requests.get_nowait()
                except queue.Empty:
                    break
            self._abort.set()
        if self._thread is not None:
            self._requests.put(None)
            self._thread.join(timeout)
            self._thread = None
        self._abort.clear()

    def record_video(self, step: int) -> None:
        """Play one greedy episode (at most `tester.video_steps` steps) on an env in this
        process and send it to the metrics sinks as the video `eval/video`."""
        from ..envs.factory import make_env
        from ..envs.oakemu_env import OakEmuEnv
        from ..envs.recording import frame_duration_ms, gif_bytes, play_frames

        config = self.config
        env = make_env(config.game, config.env.observation)
        if not isinstance(env, OakEmuEnv):  # a gym: env has no Spectrum screen to show
            env.close()
            return
        device = next(self.tester_model.parameters()).device
        rngs = [np.random.default_rng(np.random.SeedSequence([config.seed, *b"video"]))]

        def choose(observation: npt.NDArray[Any]) -> int:
            batch = torch.from_numpy(np.asarray(observation)[None]).to(device)
            with torch.no_grad():
                return int(self._greedy_actions(self.tester_model(batch), rngs)[0])

        try:
            frames, _ = play_frames(
                env,
                choose,
                seed=config.seed + TESTER_SEED_OFFSET,
                max_episode_steps=config.tester.video_steps,
                scale=1,
            )
            gif = gif_bytes(frames, frame_duration_ms(env))
        finally:
            env.close()
        width, height = frames[0].size
        metrics = self.context.metrics
        if isinstance(metrics, VideoSink):
            metrics.video("eval/video", gif, width, height, step)

    def abort(self) -> None:
        """Cut the evaluation in progress short (it raises EvaluationAborted); safe from a
        signal handler."""
        self._abort.set()

    def close(self) -> None:
        """Stop the thread and close the envs."""
        self.stop(abort=True)
        self._envs.close()
