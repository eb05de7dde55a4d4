"""Steps/s of OakEmuMultiEnv against Gymnasium's vector envs and SB3's SubprocVecEnv.

    python benchmarks/multienv_throughput.py [--seconds 3] [--rounds 3] [--num-envs 8]

Every contender runs the same number of envs with random actions and resets
episodes as they end (OakEmuMultiEnv with ``auto_reset=True``, the Gymnasium
vector envs with ``autoreset_mode=SameStep``, SubprocVecEnv as it always does).
All contenders are built first and then measured in interleaved rounds, so a
change in the machine's background load hits them alike; the figure is the
median of the rounds. The ideal is the raw steps/s of one env stepped in this
process, times the number of cores.

Scenarios:

- ``forest_run``: the harder bundled game.
- ``cartpole``: Gymnasium's CartPole-v1 (a 10 us step: it measures the overhead).
- ``varying``: forest_run where step times vary: every episode is cut after 25
  steps (so resets, which cost about four steps, are frequent) and env 0 is
  five times slower than the others. Lockstep vector envs wait for the slowest
  env of every step; OakEmuMultiEnv does not.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from oakemu_rl.envs import OakEmuMultiEnv, make_env
from oakemu_rl.envs.multi_env import default_num_workers

ACTION_TABLE = 1 << 14
SLOW_ENV_FACTOR = 5.0
VARYING_EPISODE_STEPS = 25


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class VaryingEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Cuts episodes after `episode_steps` steps; burns `extra_s` CPU seconds per step."""

    def __init__(self, env: gym.Env[Any, Any], episode_steps: int, extra_s: float) -> None:
        super().__init__(env)
        self.episode_steps = episode_steps
        self.extra_s = extra_s
        self._steps = 0

    def reset(self, **kwargs: Any) -> Any:
        self._steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.extra_s:
            _spin(self.extra_s)
        self._steps += 1
        if self._steps >= self.episode_steps:
            truncated = True
        return obs, reward, terminated, truncated, info


def build_env(game: str, varying_step_s: float | None, env_id: int) -> gym.Env[Any, Any]:
    """Env `env_id` of a scenario (module level, so it pickles by reference)."""
    env: gym.Env[Any, Any] = make_env(game)
    if varying_step_s is not None:
        extra = (SLOW_ENV_FACTOR - 1.0) * varying_step_s if env_id == 0 else 0.0
        env = VaryingEnv(env, VARYING_EPISODE_STEPS, extra)
    return env


# -- contenders: each is built once and then `run(seconds)` -> steps/s ------------------


class Contender:
    name = ""

    def run(self, seconds: float) -> float:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Raw(Contender):
    name = "raw single env"

    def __init__(self, factory: Callable[[int], gym.Env[Any, Any]]) -> None:
        self.env = factory(1)
        self.env.reset(seed=1)
        n = int(self.env.action_space.n)  # type: ignore[attr-defined]
        self.actions = np.random.default_rng(1).integers(n, size=ACTION_TABLE).tolist()

    def run(self, seconds: float) -> float:
        env, actions, steps = self.env, self.actions, 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(8):
                _, _, terminated, truncated, _ = env.step(actions[steps % ACTION_TABLE])
                steps += 1
                if terminated or truncated:
                    env.reset()
        return steps / (time.perf_counter() - start)

    def close(self) -> None:
        self.env.close()


def _raw_rate(factory: Callable[[int], gym.Env[Any, Any]], seconds: float, queue: Any) -> None:
    raw = Raw(factory)
    raw.run(min(0.3, seconds))
    queue.put(raw.run(seconds))
    raw.close()


class ParallelRaw(Contender):
    """`cores` processes each stepping one env, no communication: the machine's ceiling now."""

    def __init__(self, factory: Callable[[int], gym.Env[Any, Any]], cores: int) -> None:
        self.name = f"raw x {cores} processes"
        self.factory = factory
        self.cores = cores
        self.ctx = mp.get_context("forkserver")

    def run(self, seconds: float) -> float:
        queue = self.ctx.Queue()
        procs = [
            self.ctx.Process(target=_raw_rate, args=(self.factory, seconds, queue))
            for _ in range(self.cores)
        ]
        for p in procs:
            p.start()
        rates = [queue.get(timeout=seconds + 60) for _ in procs]
        for p in procs:
            p.join()
        return float(sum(rates))


class Multi(Contender):
    name = "OakEmuMultiEnv"

    def __init__(
        self, factory: Callable[[int], gym.Env[Any, Any]], num_envs: int, workers: int
    ) -> None:
        self.envs = OakEmuMultiEnv(
            env_factory=factory, num_envs=num_envs, num_workers=workers, auto_reset=True
        )
        self.num_envs = num_envs
        n = int(self.envs.action_space.n)
        self.actions = np.random.default_rng(2).integers(n, size=ACTION_TABLE).tolist()
        self.envs.reset_all()
        while self.envs.in_flight:
            self.envs.poll()
        for env_id in range(num_envs):
            self.envs.submit(env_id, 0)

    def run(self, seconds: float) -> float:
        envs, actions, steps = self.envs, self.actions, 0
        poll, submit = envs.poll, envs.submit
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for r in poll():
                submit(r.env_id, actions[steps % ACTION_TABLE])
                steps += 1
        return steps / (time.perf_counter() - start)

    def close(self) -> None:
        self.envs.close()


class GymVector(Contender):
    def __init__(
        self, kind: str, factory: Callable[[int], gym.Env[Any, Any]], num_envs: int
    ) -> None:
        self.name = f"{kind}"
        fns = [functools.partial(factory, i) for i in range(num_envs)]
        mode = gym.vector.AutoresetMode.SAME_STEP
        if kind == "AsyncVectorEnv":
            self.envs: Any = gym.vector.AsyncVectorEnv(
                fns, context="forkserver", autoreset_mode=mode
            )
        else:
            self.envs = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
        self.envs.reset(seed=0)
        n = int(self.envs.single_action_space.n)
        self.actions = np.random.default_rng(3).integers(n, size=(256, num_envs))
        self.num_envs = num_envs

    def run(self, seconds: float) -> float:
        envs, actions, k = self.envs, self.actions, 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(actions[k % 256])
            k += 1
        return k * self.num_envs / (time.perf_counter() - start)

    def close(self) -> None:
        self.envs.close()


class Sb3Subproc(Contender):
    name = "SB3 SubprocVecEnv"

    def __init__(self, factory: Callable[[int], gym.Env[Any, Any]], num_envs: int) -> None:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        fns = [functools.partial(factory, i) for i in range(num_envs)]
        self.envs = SubprocVecEnv(fns, start_method="forkserver")  # type: ignore[arg-type]
        self.envs.reset()
        n = int(self.envs.action_space.n)  # type: ignore[attr-defined]
        self.actions = np.random.default_rng(4).integers(n, size=(256, num_envs))
        self.num_envs = num_envs

    def run(self, seconds: float) -> float:
        envs, actions, k = self.envs, self.actions, 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(actions[k % 256])
            k += 1
        return k * self.num_envs / (time.perf_counter() - start)

    def close(self) -> None:
        self.envs.close()


def have_sb3() -> bool:
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return False
    return True


# -- the run ------------------------------------------------------------------------------


def background_load(seconds: float = 1.0) -> float | None:
    """Busy cores on the machine while this process sleeps (Linux), else None."""

    def sample() -> list[int] | None:
        try:
            with open("/proc/stat") as f:
                return [int(x) for x in f.readline().split()[1:]]
        except OSError:
            return None

    a = sample()
    time.sleep(seconds)
    b = sample()
    if a is None or b is None:
        return None
    d = [y - x for x, y in zip(a, b, strict=False)]
    total = sum(d)
    idle = d[3] + d[4]
    cores = default_num_workers()
    return (total - idle) / total * cores if total else None


def run_scenario(
    title: str,
    factory: Callable[[int], gym.Env[Any, Any]],
    args: argparse.Namespace,
    cores: int,
) -> dict[str, float]:
    print(f"\n== {title}: {args.num_envs} envs, {args.workers} workers, {cores} cores", flush=True)
    contenders: list[Contender] = [Raw(factory)]
    if not args.no_parallel_raw:
        contenders.append(ParallelRaw(factory, cores))
    contenders.append(Multi(factory, args.num_envs, args.workers))
    contenders.append(GymVector("AsyncVectorEnv", factory, args.num_envs))
    contenders.append(GymVector("SyncVectorEnv", factory, args.num_envs))
    if have_sb3() and not args.no_sb3:
        contenders.append(Sb3Subproc(factory, args.num_envs))
    figures: dict[str, list[float]] = {c.name: [] for c in contenders}
    try:
        for c in contenders:  # warm up
            c.run(min(0.5, args.seconds))
        for _ in range(args.rounds):
            for c in contenders:
                figures[c.name].append(c.run(args.seconds))
    finally:
        for c in contenders:
            c.close()
    median = {name: statistics.median(values) for name, values in figures.items()}
    raw = median["raw single env"]
    ideal = raw * cores
    asyncv = median["AsyncVectorEnv"]
    print(f"  {'ideal (raw x ' + str(cores) + ' cores)':<26}{ideal:>10.0f} steps/s")
    for name, value in median.items():
        if name.startswith("raw x") and args.no_parallel_raw:
            continue
        spread = f"(rounds: {', '.join(f'{v:.0f}' for v in figures[name])})"
        line = f"  {name:<26}{value:>10.0f} steps/s  {value / ideal:5.2f} of ideal"
        if name != "raw single env":
            line += f"  {value / asyncv:5.2f}x AsyncVectorEnv"
        print(f"{line}  {spread}", flush=True)
    multi = median["OakEmuMultiEnv"]
    # Ratios of measurements taken seconds apart in the same round vary less with
    # the machine's background load than ratios of medians.
    multi_runs = figures["OakEmuMultiEnv"]
    vs_async = statistics.median(
        m / a for m, a in zip(multi_runs, figures["AsyncVectorEnv"], strict=True)
    )
    vs_ideal = statistics.median(
        m / (r * cores) for m, r in zip(multi_runs, figures["raw single env"], strict=True)
    )
    line = (
        f"  -> OakEmuMultiEnv: {multi / asyncv:.2f}x AsyncVectorEnv, {multi / ideal:.0%} of "
        f"ideal (medians); per-round pairs: {vs_async:.2f}x AsyncVectorEnv, {vs_ideal:.0%} of ideal"
    )
    parallel = next((n for n in figures if n.startswith("raw x")), None)
    if parallel is not None:
        vs_parallel = statistics.median(
            m / p for m, p in zip(multi_runs, figures[parallel], strict=True)
        )
        line += f", {vs_parallel:.0%} of {parallel}"
    print(line, flush=True)
    median["ideal"] = ideal
    return median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--workers", type=int, default=default_num_workers())
    parser.add_argument("--game", default="forest_run", help="the OakEmu game to measure")
    parser.add_argument(
        "--scenarios",
        default="forest_run,cartpole,varying",
        help="comma-separated: forest_run, cartpole, varying",
    )
    parser.add_argument("--no-sb3", action="store_true", help="leave out SB3's SubprocVecEnv")
    parser.add_argument(
        "--no-parallel-raw",
        action="store_true",
        help="leave out the ceiling measured with one raw env per core in parallel",
    )
    args = parser.parse_args(argv)
    cores = default_num_workers()
    load = background_load()
    print(
        f"python {sys.version.split()[0]}, {cores} cores, numpy {np.__version__}, "
        f"gymnasium {gym.__version__}, sb3 {'yes' if have_sb3() else 'not installed'}"
    )
    if load is not None:
        print(f"background load before the run: {load:.2f} busy cores of {cores}")
    for scenario in args.scenarios.split(","):
        if scenario == "forest_run" or scenario == args.game:
            factory = functools.partial(build_env, args.game, None)
            run_scenario(args.game, factory, args, cores)
        elif scenario == "cartpole":
            factory = functools.partial(build_env, "gym:CartPole-v1", None)
            run_scenario("CartPole-v1", factory, args, cores)
        elif scenario == "varying":
            step_s = 1.0 / Raw(functools.partial(build_env, args.game, None)).run(1.0)
            factory = functools.partial(build_env, args.game, step_s)
            run_scenario(
                f"varying: {args.game}, episodes of {VARYING_EPISODE_STEPS} steps, env 0 "
                f"{SLOW_ENV_FACTOR:g}x slower",
                factory,
                args,
                cores,
            )
        else:
            parser.error(f"unknown scenario {scenario!r}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
