"""PPOTester: evaluation episodes of the policy on envs of its own."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from ..dqn.tester import EvaluationResult
from ..runtime.agent import Agent
from ..runtime.context import RuntimeContext
from ..runtime.env_lifecycle import EnvironmentState
from ..runtime.thread_safe_model import ThreadSafeModel
from .config import PPOExperimentConfiguration
from .model import PPOModel

if TYPE_CHECKING:
    from ..envs.multi_env import OakEmuMultiEnv

__all__ = ["TESTER_SEED_OFFSET", "EvaluationResult", "PPOTester", "summarise"]

#: Env seeds of the tester are offset from the training envs' seeds by this much.
TESTER_SEED_OFFSET = 1_000_003


def summarise(
    records: list[tuple[float, float, int, str | None]], step: int, policy: str
) -> EvaluationResult:
    """An EvaluationResult from (return, score, length, outcome) records."""
    returns = [r[0] for r in records]
    scores = [r[1] for r in records]
    nan = float("nan")
    return EvaluationResult(
        episodes=len(records),
        mean_return=float(np.mean(returns)) if records else nan,
        std_return=float(np.std(returns)) if records else nan,
        mean_score=float(np.mean(scores)) if records else nan,
        win_rate=float(np.mean([r[3] == "win" for r in records])) if records else nan,
        mean_length=float(np.mean([r[2] for r in records])) if records else nan,
        returns=returns,
        scores=scores,
        outcomes=[r[3] for r in records],
        step=step,
        policy=policy,
    )


class PPOTester(Agent[PPOExperimentConfiguration]):
    """Plays evaluation episodes with the tester model: the most likely action
    (`tester.deterministic`, the default), a sampled one, or a random one (baseline).

    `evaluate` runs episodes now, on the calling thread. `start` runs a thread that
    evaluates the weights handed to `request_evaluation`, logs `eval/*` scalars at the
    requesting step and calls `on_result`.
    """

    def __init__(
        self,
        context: RuntimeContext[PPOExperimentConfiguration],
        tester_model: PPOModel,
        learner_model: ThreadSafeModel[PPOModel] | None = None,
        env_factory: Callable[[], OakEmuMultiEnv] | None = None,
        *,
        on_result: Callable[[EvaluationResult], None] | None = None,
    ) -> None:
        config = context.config
        super().__init__(
            context, tester_model, config.tester.num_envs, env_factory, stream="tester"
        )
        self.config = config
        self.tester_model = tester_model.eval()
        self.learner_model = learner_model
        self.on_result = on_result
        self._rng = context.spawn_rng("tester")
        self._generator = torch.Generator().manual_seed(context.seed + 104729)
        self._deterministic = config.tester.deterministic
        self._random_policy = False
        self._allowed = (
            np.array(sorted(set(config.env.allowed_actions)), dtype=np.int64)
            if config.env.allowed_actions
            else np.arange(tester_model.num_actions)
        )
        self._requests: queue.Queue[tuple[int, dict[str, Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._abort = threading.Event()
        self._busy = threading.Event()
        self.results: list[EvaluationResult] = []
        self.best: EvaluationResult | None = None

    def _default_env_factory(self) -> OakEmuMultiEnv:
        from .actor import make_multi_env

        return make_multi_env(
            self.config, num_envs=self.config.tester.num_envs, seed_offset=TESTER_SEED_OFFSET
        )

    # -- inference hooks ------------------------------------------------------------------

    def _greedy_actions(self, q_values: torch.Tensor) -> npt.NDArray[np.int64]:
        logits = q_values
        if self._deterministic:
            return logits.argmax(dim=1).cpu().numpy()
        probs = torch.softmax(logits.float().cpu(), dim=1)
        return torch.multinomial(probs, 1, generator=self._generator).squeeze(1).numpy()

    def _on_inference_complete(self, env_id: int, action: int) -> None:
        assert self._env is not None
        self.lifecycle[env_id].last_action = action
        self._env.submit(env_id, action)

    def _choose(self, env: OakEmuMultiEnv, state: EnvironmentState) -> None:
        if self._random_policy:
            action = int(self._allowed[self._rng.integers(len(self._allowed))])
            state.last_action = action
            env.submit(state.env_id, action)
        else:
            assert state.observation is not None
            self._queue_for_inference(state.env_id, state.observation)

    # -- evaluation -----------------------------------------------------------------------

    def sync_from_learner(self) -> None:
        """Copy the learner's current weights into the tester model."""
        if self.learner_model is not None:
            self.learner_model.copy_to(self.tester_model, -1)

    def evaluate(
        self,
        episodes: int | None = None,
        *,
        random_policy: bool = False,
        deterministic: bool | None = None,
        step: int = 0,
        max_episode_steps: int | None = None,
    ) -> EvaluationResult:
        """Play `episodes` episodes (default: the configured number) and summarise them."""
        settings = self.config.tester
        episodes = episodes or settings.episodes
        limit = max_episode_steps or settings.max_episode_steps
        self._random_policy = random_policy
        self._deterministic = settings.deterministic if deterministic is None else deterministic
        env = self._open_env()
        records: list[tuple[float, float, int, str | None]] = []
        started = 0
        for state in self.lifecycle.states[: min(episodes, self.lifecycle.num_envs)]:
            self.lifecycle.request_reset(env, state)
            started += 1
        try:
            while len(records) < episodes:
                if self._abort.is_set():
                    raise _Aborted
                for result in env.poll(timeout=0.5):
                    state = self.lifecycle[result.env_id]
                    if result.is_reset or state.awaiting_reset:
                        state.begin_episode(result.observation, result.info)
                        self._choose(env, state)
                        continue
                    self.lifecycle.on_step(state, result, float(result.reward))
                    ended = result.terminated or result.truncated
                    if ended or state.episode_length >= limit:
                        outcome = result.info.get("outcome") if ended else "truncated"
                        records.append(
                            (state.episode_return, state.last_score, state.episode_length, outcome)
                        )
                        if started < episodes:
                            self.lifecycle.request_reset(env, state)
                            started += 1
                        else:
                            state.awaiting_reset = True
                    else:
                        state.observation = np.array(result.observation, copy=True)
                        self._choose(env, state)
                with torch.inference_mode():
                    self._flush_pending_inference()
        except BaseException:
            self._close_env()  # envs may be mid-command: start afresh next time
            raise
        policy = "greedy" if self._deterministic else "stochastic"
        if random_policy:
            policy = "random"
        return summarise(records[:episodes], step, policy)

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
            except _Aborted:
                return
            except BaseException as exc:
                self.context.report_error(exc)
                return
            finally:
                self._busy.clear()

    def _record(self, result: EvaluationResult) -> None:
        self.results.append(result)
        if self.best is None or result.mean_return > self.best.mean_return:
            self.best = result
        sink = self.context.metrics
        sink.scalar("eval/mean_return", result.mean_return, result.step)
        sink.scalar("eval/mean_score", result.mean_score, result.step)
        sink.scalar("eval/win_rate", result.win_rate, result.step)
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

    def close(self) -> None:
        """Stop the thread and close the envs."""
        self.stop(abort=True)
        self._close_env()


class _Aborted(Exception):
    pass
