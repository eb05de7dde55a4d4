"""The search teacher: labels one machine state with a value and a soft target per action.

The emulator is deterministic and saves and restores its whole state in microseconds, so
the value of an action can be found by trying it. From a saved state the teacher holds
each action for `hold` steps, then looks `horizon` steps further with a small beam search
(`width` states kept per step, every action tried from each, states with identical memory
merged), as `SearchDemonstrator` does for whole episodes. An action's outcome is the best
the search reaches after it: fewest lives lost, then a win, then the most reward.

A beam that narrow finds a safe future for most actions, but not for all: where every
path it kept for an action happens to crash, the action looks deadly when it is not (on
`forest_run`, with width 8, 16% of actions were wrongly called unsafe, and the safe set
was exact in only 49% of 150 states). So each action the beam found losing more lives
than the best one is then checked by a depth-first search for a path that loses no more
(`verify_budget` emulator steps at most, failed states remembered): a path it finds
makes the action safe, so the safe set no longer depends on which paths the beam pruned.
The next label of the same episode searches from the state one step on, to a step
further: its searches meet many states the last label's met at the same step. So what the
searches learn is kept for the episode's next labels (by the step a state was reached at):
a state that failed to last r steps fails to last more and is not searched again, and a
path found from a state is extended a step rather than found anew.

Its target is a soft distribution over actions: the actions that lose the fewest lives
share all the mass, each weighted by ``exp((return - best) / temperature)``; an action
that loses a life where a safe one exists gets none. With ``temperature_scale="spread"``
the temperature is a share of the state's own spread of those returns (best minus worst
safe), so the target is as sharp whatever the game's reward weights: a pickup worth 0.1
in the YAML counts as much as one worth 10.

With `search="safety"` there is no beam: each action gets the depth-first search alone,
which ends at its first path that loses no more lives than the best action's, and the
target is even over the actions that have one (about 1/5 of the beam's emulator steps).
The actions share `verify_budget` fairly, and where it runs out before any safe path is
found, the target goes to the actions whose paths got furthest. With `prune="situation"`
the searches remember a failed state by the YAML's variables besides the scored ones
rather than by its memory, so moves that differ only in what the YAML does not name (a
shot fired) are searched once.
`search="margin"` finds the same safe set, then weights each safe action by the room it
leaves: how many of the actions one step after it still have such a future. A student
that imitates it keeps away from the tight spots where only one move survives, so it
meets fewer states where a single wrong move loses a life.

A game may keep state that its screen never shows: a frame counter that says on which
frame of the next step the forest scrolls, say. Two states that look the same can then
have different safe moves, and a student taught each state's own safe set learns a
guess. With `hidden` (data variables and their ranges), on a state where some move loses
a life, a move that is safe in the state but not with some other value of those variables
counts as unsafe, so the label names only the moves that are safe whatever the screen
cannot show (where there are such moves; where there are none the state's own label
stands).

Nothing here knows a game: the YAML's reward, win and loss conditions and its `lives`
variable (and the `hidden` variables a user names) are all it uses. It runs beside an
env's emulator (`OakEmuEnv(teacher=...)`), in the env worker, on a session of its own, so
the env's episode is never disturbed and no machine state crosses a pipe.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ..games.loader import GameDefinition
from ..games.session import GameSession
from .held_action import hold_action

__all__ = [
    "MAX_HIDDEN_COMBINATIONS",
    "LabelWithTeacher",
    "SearchTeacher",
    "TeacherLabel",
    "TeacherLabels",
    "TeacherSettings",
    "soft_target",
]

WIN_BONUS = 1e6
"""Added to a path's rank key when it wins: a win outranks any return."""

MAX_HIDDEN_COMBINATIONS = 1024
"""The most combinations of `hidden` values a label checks: each is a search, and more
would not fit one `verify_budget` anyway."""


@dataclass(frozen=True)
class TeacherSettings:
    """How far and how wide the teacher looks from each state.

    Args:
        horizon: steps searched after each action's first `hold` steps.
        width: states the beam keeps after each of those steps (at least one per
            action that still has a future).
        hold: steps each labelled action is held before the search goes on.
        temperature: how sharply the target prefers the safe action with the most
            reward (in reward units; small: nearly the argmax).
        temperature_scale: "reward": `temperature` is in reward units; "spread": it is a
            share of each state's spread of safe returns (best minus worst), so the
            target does not depend on the YAML's reward weights.
        verify_budget: emulator steps the depth-first search may take per label: with the
            beam, to check the actions it found losing lives (0: no check, the beam's
            verdict stands); with `search="safety"`, to find each action's safe path.
        search: "beam" ranks every action by the most reward a beam finds after it;
            "safety" only asks, depth first, which actions have a future that loses no
            more lives than the best one, and spreads the target evenly over them (far
            cheaper: the first safe path found ends an action's search; `width` and
            `temperature` are not used); "margin" weights each of those actions by how
            many actions one step after it still have such a future (a second
            `verify_budget` for the count).
        hidden: data variables the screen does not show, each as (name, lowest, highest);
            a bound is a number or the name of a data variable holding it. On a state
            where some action loses a life, a safe action that is unsafe with any other
            combination of their values counts as unsafe (one more `verify_budget` for
            those checks).
        prune: what the depth-first searches remember a failure by. "state": the whole
            machine state, so only the very same state is not searched twice (exact);
            "situation": the game's variables besides the scored ones, at the same step
            and with the same lives lost, so a move that differs from one already searched
            only in what the YAML does not name (a shot fired, a score) is not searched
            again. Far fewer steps where the YAML names what decides survival (a
            position); a state wrongly merged can only make an action look unsafe, never
            safe, since a safe verdict is always a real path.
    """

    horizon: int = 12
    width: int = 8
    hold: int = 1
    temperature: float = 1.0
    temperature_scale: Literal["reward", "spread"] = "reward"
    verify_budget: int = 2000
    search: Literal["beam", "safety", "margin"] = "beam"
    hidden: tuple[tuple[str, int | str, int | str], ...] = ()
    prune: Literal["state", "situation"] = "state"

    def __post_init__(self) -> None:
        for name in ("width", "hold"):
            if getattr(self, name) < 1:
                raise ValueError(f"teacher {name} must be at least 1, got {getattr(self, name)}")
        if self.horizon < 0:
            raise ValueError(f"teacher horizon must be 0 or more, got {self.horizon}")
        if self.verify_budget < 0:
            raise ValueError(f"teacher verify_budget must be 0 or more, got {self.verify_budget}")
        if not self.temperature > 0:
            raise ValueError(f"teacher temperature must be above 0, got {self.temperature}")
        if self.temperature_scale not in ("reward", "spread"):
            raise ValueError(
                "teacher temperature_scale must be 'reward' or 'spread', got "
                f"{self.temperature_scale!r}"
            )
        if self.search not in ("beam", "safety", "margin"):
            raise ValueError(
                f"teacher search must be 'beam', 'safety' or 'margin', got {self.search!r}"
            )
        if self.prune not in ("state", "situation"):
            raise ValueError(f"teacher prune must be 'state' or 'situation', got {self.prune!r}")

    def cost(self, num_actions: int) -> int:
        """The most emulator steps one label can take."""
        held = num_actions * self.hold
        hidden = self.verify_budget if self.hidden else 0
        if self.search == "safety":
            return held + self.verify_budget + hidden
        if self.search == "margin":
            return held + 2 * self.verify_budget + hidden
        beam = self.horizon * max(self.width, num_actions) * num_actions
        return held + beam + self.verify_budget + hidden

    def check_hidden(self, game: GameDefinition, session: GameSession | None = None) -> None:
        """Raise ValueError unless every name in `hidden` is a data variable of `game` and
        the ranges, with bounds read from the game's start state where they are variables,
        are not empty and give at most `MAX_HIDDEN_COMBINATIONS` combinations (a range
        bounded by a variable is checked again whenever a label reads it). The start state
        is reached on `session` when given (a session of `game`), else on one of its own."""
        for name, *bounds in self.hidden:
            for what in (name, *(b for b in bounds if isinstance(b, str))):
                game.data_variable(what)
        values: dict[str, int] = {}
        if any(isinstance(bound, str) for _, *bounds in self.hidden for bound in bounds):
            session = session or GameSession(game)
            session.reset(0)
            values = session.read_values()
        _hidden_ranges(self.hidden, values, "at the start")


def _hidden_ranges(
    hidden: tuple[tuple[str, int | str, int | str], ...], values: Mapping[str, int], where: str
) -> dict[str, range]:
    """Each `hidden` variable's range of values, bounds that name a variable read from
    `values` (`where` says in which state, for the error). ValueError if a range is empty
    or the combinations number more than `MAX_HIDDEN_COMBINATIONS`."""
    ranges = {}
    for name, low, high in hidden:
        first = values[low] if isinstance(low, str) else low
        last = values[high] if isinstance(high, str) else high
        if first > last:
            read = (
                "" if (first, last) == (low, high) else f" reads as [{first}, {last}] {where} and"
            )
            raise ValueError(f"{name!r}: range [{low}, {high}]{read} is empty")
        ranges[name] = range(first, last + 1)
    combinations = math.prod(len(r) for r in ranges.values())
    if combinations > MAX_HIDDEN_COMBINATIONS:
        read = ", ".join(f"{n} in [{r.start}, {r.stop - 1}]" for n, r in ranges.items())
        raise ValueError(
            f"the ranges give {combinations} combinations {where} ({read}); at most "
            f"{MAX_HIDDEN_COMBINATIONS} are checked: narrow them"
        )
    return ranges


@dataclass(frozen=True)
class TeacherLabel:
    """One state's label: per action, the best outcome the lookahead found after it."""

    lives_lost: npt.NDArray[np.int16]
    """Fewest lives lost on any path after the action (a lost game counts as one more)."""
    returns: npt.NDArray[np.float32]
    """The most reward collected on a path with that few lives lost (the safety search:
    the reward of the first such path it found)."""
    won: npt.NDArray[np.bool_]
    """Whether such a path wins the game."""
    target: npt.NDArray[np.float32]
    """The soft action distribution the student is trained towards (sums to 1)."""
    simulated_steps: int
    """Emulator steps the label took."""

    @property
    def safe(self) -> npt.NDArray[np.bool_]:
        """The actions that lose the fewest lives."""
        safe: npt.NDArray[np.bool_] = self.lives_lost == self.lives_lost.min()
        return safe

    @property
    def best_action(self) -> int:
        """The action with the most target mass (the lowest index on a tie)."""
        return int(np.argmax(self.target))


@dataclass
class _Path:
    state: bytes
    lives: int | None
    lives_lost: int
    episode_return: float
    firsts: int
    """The first actions (a bit each) from which a path reaches this same state."""
    ended: str | None = None
    situation: tuple[int, ...] = ()

    def key(self) -> tuple[int, float]:
        won = WIN_BONUS if self.ended == "win" else 0.0
        return (-self.lives_lost, won + self.episode_return)


def soft_target(
    lives_lost: npt.NDArray[np.integer],
    returns: npt.NDArray[np.floating],
    temperature: float,
    scale: Literal["reward", "spread"] = "reward",
) -> npt.NDArray[np.float32]:
    """Mass only on the actions that lose the fewest lives, by a softmax of their returns
    over `temperature` (with `scale="spread"`, times those returns' best minus worst)."""
    safe = lives_lost == lives_lost.min()
    if scale == "spread":
        spread = float(returns[safe].max() - returns[safe].min())
        temperature *= spread if spread > 0 else 1.0  # all alike: the target is even anyway
    scaled = np.where(safe, returns / temperature, -np.inf)
    scaled = scaled - scaled[safe].max()
    weights = np.exp(scaled)
    target: npt.NDArray[np.float32] = (weights / weights.sum()).astype(np.float32)
    return target


class _SearchMemo:
    """What the depth-first searches learned, kept for the labels of one episode.

    Both are remembered by the step of the episode a state was reached at and by how many
    more lives a search from it could still lose:

    - a failure, by what `TeacherSettings.prune` remembers the state by, with the fewest
      steps it was found unable to last. Failing to last r steps is failing to last more,
      so it stays true for the next labels of the episode, whose searches end later:
      they do not search the same doomed futures again.
    - a path found, by the exact machine state, with the path's last state and what it
      lost and gained on the way. The emulator is deterministic, so a later search that
      reaches the same state at the same step has that path too, and needs only to extend
      it to its own end (a step further for the next label) instead of finding one anew.
    """

    def __init__(self) -> None:
        self._failed: dict[int, dict[object, int]] = {}
        self._found: dict[int, dict[tuple[bytes, int], tuple[_Path, int, int, float]]] = {}
        self.end = 0
        """The step of the episode the current label's searches end at."""

    def begin(self, first: int, end: int) -> None:
        """A new label whose searches go from step `first` to step `end`: forget what was
        learned before `first`, which no path of it can reach."""
        self.end = end
        for by_step in (self._failed, self._found):
            for step in [step for step in by_step if step < first]:
                del by_step[step]

    def failed(self, key: object, remaining: int) -> bool:
        """Whether a state remembered by `key`, `remaining` steps before the end, is known
        to fail."""
        at_step = self._failed.get(self.end - remaining)
        return at_step is not None and at_step.get(key, remaining + 1) <= remaining

    def add_failure(self, key: object, remaining: int) -> None:
        """Remember that the state `key`, `remaining` steps before the end, fails."""
        at_step = self._failed.setdefault(self.end - remaining, {})
        if at_step.get(key, remaining + 1) > remaining:
            at_step[key] = remaining

    def found(self, path: _Path, remaining: int, more: int) -> tuple[_Path, int] | None:
        """A path found from `path`'s very state (`remaining` steps before the end, with
        `more` lives still to lose) by an earlier search: its last state, counted from
        `path`, and the steps it falls short of the end (0: none, or it won); None if none
        was found."""
        at_step = self._found.get(self.end - remaining)
        entry = None if at_step is None else at_step.get((path.state, more))
        if entry is None:
            return None
        leaf, leaf_step, lost, gained = entry
        rebased = _Path(
            leaf.state,
            leaf.lives,
            path.lives_lost + lost,
            path.episode_return + gained,
            path.firsts,
            leaf.ended,
            leaf.situation,
        )
        short = 0 if leaf.ended == "win" else max(0, self.end - leaf_step)
        return rebased, short

    def add_found(self, path: _Path, remaining: int, more: int, leaf: _Path) -> None:
        """Remember `leaf`, the last state of a path found from `path` (`remaining` steps
        before the end, `more` lives still to lose)."""
        self._found.setdefault(self.end - remaining, {})[(path.state, more)] = (
            leaf,
            self.end,  # where every path found ends, but for a win (never extended)
            leaf.lives_lost - path.lives_lost,
            leaf.episode_return - path.episode_return,
        )


class SearchTeacher:
    """Labels saved machine states of one game by lookahead.

    One beam search from the state serves every action: each path remembers the first
    actions that lead to it (paths that reach identical memory are merged and their
    first actions joined), and the beam keeps, besides the best paths, the best path of
    each first action and of each game situation (the YAML's variables besides the scored
    ones: a position, say), so that no action is judged on a pruned future.

    Args:
        game: the game.
        settings: how far and wide to look.
        seed: breaks ties between equally ranked states in the beam.
    """

    def __init__(
        self, game: GameDefinition, settings: TeacherSettings | None = None, *, seed: int = 0
    ) -> None:
        self.game = game
        self.settings = settings or TeacherSettings()
        self.session = GameSession(game)
        self.num_actions = game.num_actions
        self.rng = np.random.default_rng(seed)
        self._has_lives = "lives" in game.spec.data
        scored = set(game.spec.reward.variables) | {"lives"}
        self._situation = [name for name in game.spec.data if name not in scored]
        self.settings.check_hidden(game, self.session)
        self.simulated_steps = 0
        """Emulator steps taken by every label so far."""
        self._closest = 0  # the fewest steps left that a depth-first path reached
        self._memo = _SearchMemo()  # the current label's
        self._episode_step = -1  # the step of the last label given one

    def _lives(self) -> int | None:
        return self.session.values.get("lives") if self._has_lives else None

    def _advance(self, path: _Path, action: int, steps: int, firsts: int) -> _Path:
        """`path` with `action` held for up to `steps` steps (fewer if the episode ends)."""
        held = hold_action(self.session, path.state, action, steps, path.lives)
        self.simulated_steps += len(held.rewards)
        lost = path.lives_lost + held.lives_lost
        if held.outcome == "loss" and not self._has_lives:
            lost += 1  # a lost game is a lost life where the game counts none
        return _Path(
            held.state,
            held.lives,
            lost,
            path.episode_return + float(sum(held.rewards)),
            firsts,
            held.outcome,
            tuple(held.values[name] for name in self._situation),
        )

    def _select(self, children: list[_Path]) -> list[_Path]:
        """The next beam, `width` paths (more when there are more actions): the best path
        of each first action, then one path of each situation not reached at an earlier
        step of this search, then one of each other situation, then the best of the rest.

        A situation is the game variables besides the scored ones, taken over those that
        differ among `children` (a ball that falls alike on every path is not a
        situation); preferring new ones spreads the beam, so a far position is found
        even while every path scores the same."""
        if not children:
            return []
        order = self.rng.permutation(len(children))
        ranked = sorted((children[i] for i in order), key=_Path.key, reverse=True)
        columns = list(zip(*(p.situation for p in ranked), strict=True))
        varying = tuple(i for i, column in enumerate(columns) if len(set(column)) > 1)
        visited = self._visited.setdefault(varying, set())
        projected = {id(p): tuple(p.situation[i] for i in varying) for p in ranked}
        size = max(self.settings.width, self.num_actions)
        chosen: dict[int, _Path] = {}
        for action in range(self.num_actions):
            bit = 1 << action
            leader = next((p for p in ranked if p.firsts & bit), None)
            if leader is not None:
                chosen[id(leader)] = leader
        taken = {projected[i] for i in chosen}
        for novel_only in (True, False):
            for path in ranked:
                if len(chosen) >= size:
                    break
                where = projected[id(path)]
                if where in taken or (novel_only and where in visited):
                    continue
                taken.add(where)
                chosen[id(path)] = path
        for path in ranked:
            if len(chosen) >= size:
                break
            chosen.setdefault(id(path), path)
        visited.update(projected.values())
        return list(chosen.values())

    def label(self, state: bytes, step: int | None = None) -> TeacherLabel:
        """Label the machine state `state` (from `save_state`); the env it came from is
        untouched: the teacher plays on its own emulator.

        `step`: the state's step in its episode, where consecutive labels come from one
        episode (`TeacherLabels` gives it). What the searches learned (states that fail,
        paths found) is then kept for the next labels (`_SearchMemo`): the same verdicts in
        fewer emulator steps, and more of them found within `verify_budget`. A step no later
        than the last label's starts a new episode. Without it, each label starts afresh."""
        before = self.simulated_steps
        hold, horizon = self.settings.hold, self.settings.horizon
        if step is None or step <= self._episode_step:
            self._memo = _SearchMemo()
        self._episode_step = -1 if step is None else step
        start = 0 if step is None else step
        self._memo.begin(start + hold, start + hold + horizon)
        self.session.reset_to_state(state)
        root = _Path(state, self._lives(), 0, 0.0, 0)
        if self.settings.search == "beam":
            lives_lost, returns, won = self._beam(root)
            self._verify(root, lives_lost, returns, won)
            if self.settings.hidden:
                self._unsafe_if_hidden_differs(state, lives_lost)
            returns_seen = returns + np.where(won, WIN_BONUS, 0.0)
            target = soft_target(
                lives_lost,
                returns_seen,
                self.settings.temperature,
                self.settings.temperature_scale,
            )
        else:
            firsts = [
                self._advance(root, action, self.settings.hold, 0)
                for action in range(self.num_actions)
            ]
            lives_lost, returns, won, reach = self._safe_paths(firsts)
            if self.settings.hidden:
                self._unsafe_if_hidden_differs(state, lives_lost)
            # Every action that keeps the fewest lives is equally good: the target is even.
            # Where the budget ran out before any path was found, the moves that got
            # furthest share it instead: the others were seen to fail sooner.
            furthest = reach[lives_lost == lives_lost.min()].max()
            returns_seen = np.where(won, WIN_BONUS, 0.0) + np.where(
                reach == furthest, 0.0, -WIN_BONUS
            )
            target = soft_target(lives_lost, returns_seen, self.settings.temperature)
            if self.settings.search == "margin":
                room = self._room(firsts, lives_lost)
                if room.sum() > 0:
                    target = (room / room.sum()).astype(np.float32)
        return TeacherLabel(lives_lost, returns, won, target, self.simulated_steps - before)

    def hidden_variants(self, state: bytes) -> Iterator[bytes]:
        """`state` with its `hidden` variables set to every other combination of values
        in their ranges (bounds read from `state`), made one at a time as they are asked
        for. ValueError as `_hidden_ranges` says."""
        self.session.reset_to_state(state)
        values = self.session.read_values()
        ranges = _hidden_ranges(self.settings.hidden, values, "in this state")
        names = list(ranges)
        actual = tuple(values[name] for name in names)
        for combination in itertools.product(*ranges.values()):
            if combination == actual:
                continue
            self.session.reset_to_state(state)
            for name, value in zip(names, combination, strict=True):
                self.session.write_value(name, value)
            yield self.session.save_state()

    def _unsafe_if_hidden_differs(self, state: bytes, lives_lost: npt.NDArray[np.int16]) -> None:
        """On a critical state (some action loses more lives than another), mark (in place,
        one life more) the safe actions that lose more lives in some hidden variant of
        `state` where another safe action does not. Elsewhere no action can be wrong, so
        nothing is checked. A variant whose check the extra `verify_budget` cuts short, or
        in which no safe action survives, proves nothing and is skipped; where every safe
        action would be marked, none is."""
        allowed = int(lives_lost.min())
        candidates = np.flatnonzero(lives_lost == allowed)
        if len(candidates) == self.num_actions:
            return
        end = self.simulated_steps + self.settings.verify_budget
        failed_somewhere = np.zeros(self.num_actions, dtype=bool)
        for variant in self.hidden_variants(state):
            self.session.reset_to_state(variant)
            root = _Path(variant, self._lives(), 0, 0.0, 0)
            survives = np.zeros(self.num_actions, dtype=bool)
            memo = _SearchMemo()  # a variant's futures are its own
            memo.begin(0, self._memo.end)
            for action in candidates:
                first = self._advance(root, int(action), self.settings.hold, 0)
                path = self._depth_first(first, self.settings.horizon, allowed, memo, end)
                survives[action] = path is not None
            if self.simulated_steps >= end:
                break
            if survives[candidates].any():
                failed_somewhere[candidates] |= ~survives[candidates]
        if failed_somewhere[candidates].all():
            return
        lives_lost[failed_somewhere] = allowed + 1

    def _outcomes(
        self,
    ) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """Per action: lives lost (none found yet: the most), return and win."""
        return (
            np.full(self.num_actions, np.iinfo(np.int16).max, dtype=np.int16),
            np.full(self.num_actions, -np.inf, dtype=np.float32),
            np.zeros(self.num_actions, dtype=bool),
        )

    def _safe_paths(
        self, firsts: list[_Path]
    ) -> tuple[
        npt.NDArray[np.int16], npt.NDArray[np.float32], npt.NDArray[np.bool_], npt.NDArray[np.int32]
    ]:
        """Depth first, for each action (`firsts`: the root with it held), a path of
        `horizon` steps after it that loses no more lives than the held step of the best
        action did; where no action has one, one that loses a life more, and so on (three
        tries). Each action's search ends at its first such path. They share
        `verify_budget` steps fairly: each action in turn gets an even share of what is
        left, then the actions whose share ran out go on with what the others left. An
        action with no path found counts as losing one life more than the actions with
        one. Also returned, per action: how many steps after it its furthest path got
        without losing more (`horizon` where a path was found), so that where the budget
        runs out before any path is found the target can still favour the moves that got
        furthest."""
        settings = self.settings
        lives_lost, returns, won = self._outcomes()
        reach = np.full(self.num_actions, -1, dtype=np.int32)
        end = self.simulated_steps + settings.verify_budget
        fewest = min(path.lives_lost for path in firsts)
        allowed = fewest
        memo = self._memo
        for allowed in range(fewest, fewest + 3):
            reach[:] = -1
            pending = list(range(self.num_actions))
            for _ in range(2):  # even shares, then the leftovers for those cut short
                cut_short = []
                for index, action in enumerate(pending):
                    share_end = self.simulated_steps + (end - self.simulated_steps) // (
                        len(pending) - index
                    )
                    self._closest = settings.horizon - int(reach[action])
                    found = self._depth_first(
                        firsts[action], settings.horizon, allowed, memo, share_end
                    )
                    reach[action] = settings.horizon - self._closest
                    if found is not None:
                        lives_lost[action] = found.lives_lost
                        returns[action] = found.episode_return
                        won[action] = found.ended == "win"
                        reach[action] = settings.horizon
                    elif self.simulated_steps >= share_end:
                        cut_short.append(action)
                pending = cut_short
                if not pending or self.simulated_steps >= end:
                    break
            if (lives_lost <= allowed).any() or self.simulated_steps >= end:
                break
        unresolved = ~np.isfinite(returns)
        lives_lost[unresolved] = allowed + 1
        returns[unresolved] = 0.0
        return lives_lost, returns, won, reach

    def _room(
        self,
        firsts: list[_Path],
        lives_lost: npt.NDArray[np.int16],
    ) -> npt.NDArray[np.float32]:
        """Per action that loses the fewest lives (`firsts`: the root with it held): how
        many actions one step after it have a future of `horizon - 1` steps more that loses
        no more lives (a winning action: all of them); 0 for the others. The counts share
        `verify_budget` steps; an action not tried before they run out counts as none."""
        allowed = int(lives_lost.min())
        end = self.simulated_steps + self.settings.verify_budget
        remaining = max(0, self.settings.horizon - 1)
        memo = self._memo
        room = np.zeros(self.num_actions, dtype=np.float32)
        for action in np.flatnonzero(lives_lost == allowed):
            first = firsts[int(action)]
            if first.ended is not None:  # the held step ended the game
                room[action] = self.num_actions if first.ended == "win" else 0
                continue
            for second in range(self.num_actions):
                if self.simulated_steps >= end:
                    return room
                child = self._advance(first, second, 1, 0)
                if self._depth_first(child, remaining, allowed, memo, end) is not None:
                    room[action] += 1
        return room

    def _beam(
        self, root: _Path
    ) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """Per action, the best outcome a beam search finds after it: fewest lives lost,
        then a win, then the most reward."""
        settings = self.settings
        self._visited: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
        finished: list[_Path] = []
        beam: list[_Path] = []
        merged: dict[bytes, _Path] = {}
        for action in range(self.num_actions):
            first = self._advance(root, action, settings.hold, 1 << action)
            if first.ended is not None:
                finished.append(first)
                continue
            if first.state in merged:
                merged[first.state].firsts |= first.firsts
            else:
                merged[first.state] = first
        beam = list(merged.values())
        for _ in range(settings.horizon):
            if not beam:
                break
            children: dict[bytes, _Path] = {}
            for path in beam:
                for action in range(self.num_actions):
                    child = self._advance(path, action, 1, path.firsts)
                    if child.ended is not None:
                        finished.append(child)
                        continue
                    # Keyed by the state itself: Python's bytes hash is faster than a
                    # digest, and equal memory is equal futures.
                    known = children.get(child.state)
                    if known is None:
                        children[child.state] = child
                    else:
                        known.firsts |= child.firsts
                        if child.key() > known.key():
                            known.lives_lost = child.lives_lost
                            known.episode_return = child.episode_return
            beam = self._select(list(children.values()))
        lives_lost, returns, won = self._outcomes()
        lowest = (-(2**31), -np.inf)
        best: list[tuple[int, float]] = [lowest] * self.num_actions
        for path in finished + beam:
            key = path.key()
            for action in range(self.num_actions):
                if path.firsts >> action & 1 and key > best[action]:
                    best[action] = key
                    lives_lost[action] = path.lives_lost
                    returns[action] = path.episode_return
                    won[action] = path.ended == "win"
        return lives_lost, returns, won

    def _verify(
        self,
        root: _Path,
        lives_lost: npt.NDArray[np.int16],
        returns: npt.NDArray[np.float32],
        won: npt.NDArray[np.bool_],
    ) -> None:
        """Look depth-first, within `verify_budget` steps, for a path after each action
        the beam found losing more lives than the best action that loses no more; update
        the action's outcome (in place) where one is found."""
        allowed = int(lives_lost.min())
        budget_end = self.simulated_steps + self.settings.verify_budget
        memo = self._memo
        for action in np.flatnonzero(lives_lost > allowed):
            if self.simulated_steps + self.settings.hold > budget_end:
                return  # not even the action's held steps fit in what is left
            first = self._advance(root, int(action), self.settings.hold, 0)
            found = self._depth_first(first, self.settings.horizon, allowed, memo, budget_end)
            if found is not None:
                lives_lost[action] = found.lives_lost
                returns[action] = found.episode_return
                won[action] = found.ended == "win"

    def _depth_first(
        self, path: _Path, remaining: int, allowed: int, memo: _SearchMemo, end: int
    ) -> _Path | None:
        """A path from `path` that goes on `remaining` steps (or wins) losing at most
        `allowed` lives in all; None when there is none or the steps run out at `end`.
        `memo` holds what this search and earlier ones learned: failures are not searched
        again, and a path found from the same state is extended rather than found anew.
        `_closest` is lowered to the fewest remaining steps any path reached without
        losing more."""
        if path.lives_lost > allowed or path.ended == "loss":
            return None
        self._closest = min(self._closest, remaining)
        if remaining == 0 or path.ended == "win":
            return path
        more = allowed - path.lives_lost  # lives a path from here may still lose
        key = self._memo_key(path, more)
        if memo.failed(key, remaining):
            return None
        known = memo.found(path, remaining, more)
        if known is not None:
            leaf, short = known
            found = self._depth_first(leaf, short, allowed, memo, end)
            if found is not None:
                memo.add_found(path, remaining, more, found)
                return found
        for action in range(self.num_actions):
            if self.simulated_steps >= end:
                return None
            child = self._advance(path, action, 1, 0)
            found = self._depth_first(child, remaining - 1, allowed, memo, end)
            if found is not None:
                memo.add_found(path, remaining, more, found)
                return found
        if self.simulated_steps < end:  # a search cut short proves nothing
            memo.add_failure(key, remaining)
        return None

    def _memo_key(self, path: _Path, more: int) -> object:
        """What a failed search from `path` is remembered by (`settings.prune`), beside
        its step: the machine state, or the situation with the lives left; with `more`,
        the lives it could still lose."""
        if self.settings.prune == "situation":
            return (path.situation, path.lives, more)
        return (path.state, more)


class TeacherLabels:
    """An env whose every state is labelled by a `SearchTeacher` beside it.

    After each reset and each step that does not end the episode, ``info["teacher"]``
    holds the new state's label: ``target`` (the soft action distribution, a tuple of
    floats), ``lives_lost`` (per action), ``simulated_steps`` and ``seconds``. Everything
    else passes through to the wrapped `OakEmuEnv`.

    Args:
        env: an `OakEmuEnv`.
        settings: the teacher's lookahead.
    """

    def __init__(self, env: Any, settings: TeacherSettings) -> None:
        self.env = env
        self.teacher = SearchTeacher(env.game, settings)
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self._step = 0  # of the episode, for the teacher to carry failures over

    def _labelled(self, info: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        label = self.teacher.label(self.env.save_state(), self._step)
        info["teacher"] = {
            "target": tuple(float(p) for p in label.target),
            "lives_lost": tuple(int(n) for n in label.lives_lost),
            "simulated_steps": label.simulated_steps,
            "seconds": time.perf_counter() - started,
        }
        return info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._step = 0
        return observation, self._labelled(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._step += 1
        if not (terminated or truncated):
            info = self._labelled(info)
        return observation, reward, terminated, truncated, info

    def save_state(self) -> bytes:
        return bytes(self.env.save_state())

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


@dataclass(frozen=True)
class LabelWithTeacher:
    """A picklable env wrapper (`OakEmuMultiEnv(env_wrapper=...)`): `TeacherLabels` with
    `settings`, built where the env runs."""

    settings: TeacherSettings

    def __call__(self, env: Any) -> TeacherLabels:
        return TeacherLabels(env, self.settings)
