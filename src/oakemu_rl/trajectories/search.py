"""Search demonstrations: winning trajectories found by looking ahead with save and restore.

The emulator is deterministic and its whole state saves and restores in microseconds, so
a game can be played by search instead of by a policy. Nothing here knows a game: the
YAML's reward, its win and loss conditions and its ``lives`` variable (where it has one)
are all the search uses.

The search is a beam search over moves (an action held for `hold` steps). It keeps the
`beam` best machine states reached after the same number of moves; each grows one child
per action; children whose memory is identical to another's are merged; the best
`beam` children, ranked by lives lost (fewest first) and then by return, form the next
beam. The first child to win ends the search, and its path is the trajectory. A beam
that dies out entirely (every path lost) ends in the best loss found.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from ..games.loader import GameDefinition
from ..games.session import GameSession
from .held_action import hold_action
from .trajectory_file import Trajectory, game_file_label

__all__ = ["SearchDemonstrator", "SearchResult", "SearchSettings"]


@dataclass(frozen=True)
class SearchSettings:
    """How hard the search looks.

    Args:
        beam: machine states kept after each move.
        hold: steps each move holds its action.
        backtrack: moves undone when every move from the beam loses a life.
        max_widen: how many times wider than `beam` a retried search may grow.
        max_retries: backtracks allowed in one episode.
    """

    beam: int = 8
    hold: int = 2
    backtrack: int = 8
    max_widen: int = 4
    max_retries: int = 20

    def __post_init__(self) -> None:
        for name in ("beam", "hold", "backtrack", "max_widen"):
            if getattr(self, name) < 1:
                raise ValueError(f"search {name} must be at least 1, got {getattr(self, name)}")


@dataclass
class SearchResult:
    """One searched episode: its trajectory and what the search cost."""

    trajectory: Trajectory
    seconds: float
    simulated_steps: int
    retries: int

    @property
    def won(self) -> bool:
        return self.trajectory.won


@dataclass
class _Node:
    """A machine state reached by a path of moves."""

    state: bytes
    parent: _Node | None
    actions: list[int]  # the steps from the parent
    rewards: list[float]
    episode_return: float
    lives_lost: int
    lives: int | None
    steps: int
    outcome: str | None = None
    situation: tuple[int, ...] = ()
    """The game variables besides the scored ones (see `SearchDemonstrator._select`)."""

    def rank(self) -> tuple[int, float]:
        return (-self.lives_lost, self.episode_return)

    def path(self) -> tuple[list[int], list[float]]:
        actions: list[int] = []
        rewards: list[float] = []
        node: _Node | None = self
        chunks = []
        while node is not None:
            chunks.append(node)
            node = node.parent
        for chunk in reversed(chunks):
            actions += chunk.actions
            rewards += chunk.rewards
        return actions, rewards


class SearchDemonstrator:
    """Plays a game by beam search from its YAML alone.

    Args:
        game: the game.
        settings: the search effort.
        seed: breaks ties between equally ranked states (the episode's own seed is
            `play`'s argument).
        allowed_actions: action indices the search may use (default: all).
    """

    def __init__(
        self,
        game: GameDefinition,
        settings: SearchSettings | None = None,
        *,
        seed: int = 0,
        allowed_actions: list[int] | None = None,
    ) -> None:
        self.game = game
        self.settings = settings or SearchSettings()
        self.session = GameSession(game)
        self.rng = np.random.default_rng(seed)
        self.actions = list(range(game.num_actions)) if allowed_actions is None else allowed_actions
        if not self.actions:
            raise ValueError("the search needs at least one allowed action")
        self.max_steps = game.spec.max_episode_steps
        self._has_lives = "lives" in game.spec.data
        scored = set(game.spec.reward.variables) - {"lives"}
        self._situation_variables = [name for name in game.spec.data if name not in scored]
        self._sha = game.yaml_sha256
        self.simulated_steps = 0

    def _lives(self) -> int | None:
        return self.session.values.get("lives") if self._has_lives else None

    def _child(self, node: _Node, action: int) -> _Node:
        """Hold `action` for a move from `node`'s state."""
        held = hold_action(
            self.session,
            node.state,
            action,
            self.settings.hold,
            node.lives,
            steps_left=self.max_steps - node.steps,
        )
        self.simulated_steps += len(held.rewards)
        return _Node(
            held.state,
            node,
            [action] * len(held.rewards),
            held.rewards,
            node.episode_return + float(sum(held.rewards)),
            node.lives_lost + held.lives_lost,
            held.lives,
            node.steps + len(held.rewards),
            held.outcome,
            tuple(held.values[name] for name in self._situation_variables),
        )

    def _expand(self, beam: list[_Node]) -> tuple[list[_Node], list[_Node]]:
        """Every move from every state of `beam`: (children still playing, merged where
        their memory is identical; children whose episode ended)."""
        children: dict[bytes, _Node] = {}
        ended: list[_Node] = []
        for node in beam:
            for action in self.actions:
                child = self._child(node, action)
                if child.outcome is not None:
                    ended.append(child)
                    continue
                key = hashlib.blake2b(child.state, digest_size=16).digest()
                if key not in children or child.rank() > children[key].rank():
                    children[key] = child
        return list(children.values()), ended

    def _select(self, children: list[_Node], width: int) -> list[_Node]:
        """The `width` best children: first the best of each group of children whose game
        variables (besides the scored ones) are equal, so that the beam keeps different
        situations (positions, say) rather than one situation with different scores;
        then the best of the rest. Ties are broken at random."""
        order = self.rng.permutation(len(children))
        ranked = sorted((children[i] for i in order), key=_Node.rank, reverse=True)
        leaders: dict[tuple[int, ...], _Node] = {}
        for node in ranked:
            leaders.setdefault(node.situation, node)
        chosen = list(leaders.values())[:width]
        if len(chosen) < width:
            taken = {id(n) for n in chosen}
            chosen += [n for n in ranked if id(n) not in taken][: width - len(chosen)]
            chosen.sort(key=_Node.rank, reverse=True)
        return chosen

    def play(self, episode_seed: int) -> SearchResult:
        """Play one episode from the game's start (`start.randomize` drawing from
        `episode_seed`) and return its trajectory.

        When every move from the beam loses a life, the search goes back a few moves and
        searches again with a wider beam (up to `max_retries` times an episode)."""
        s = self.settings
        started = time.monotonic()
        simulated_before = self.simulated_steps
        session = self.session
        session.reset(episode_seed)
        root = _Node(session.save_state(), None, [], [], 0.0, 0, self._lives(), 0)
        beam = [root]
        history: list[list[_Node]] = []  # the beams before `beam`, newest last
        width = s.beam
        retries = 0
        best_win: _Node | None = None
        best_end: _Node | None = None
        while beam:
            children, ended = self._expand(beam)
            for child in ended:
                if child.outcome == "win":
                    if best_win is None or child.rank() > best_win.rank():
                        best_win = child
                elif best_end is None or (child.steps, child.rank()) > (
                    best_end.steps,
                    best_end.rank(),
                ):
                    best_end = child
            fewest_lost = min(n.lives_lost for n in beam)
            survivors = [c for c in children if c.lives_lost == fewest_lost]
            won_cleanly = best_win is not None and best_win.lives_lost <= fewest_lost
            if won_cleanly:
                break
            kept = next((i for i, level in enumerate(reversed(history)) if not level), len(history))
            if not survivors and retries < s.max_retries and kept:
                # Every move loses a life (or the game): undo a few and look wider.
                retries += 1
                back = min(kept, s.backtrack)
                beam = history[-back]
                del history[-back:]
                width = min(width * 2, s.beam * s.max_widen)
                continue
            history.append(beam)
            if len(history) > s.backtrack:
                history[-s.backtrack - 1] = []  # keep the states of recent beams only
            if best_win is not None and not survivors:
                break  # a win that lost a life, and nothing better goes on
            beam = self._select(children, width)
            width = max(s.beam, width - 1)  # back to the usual width, slowly
        end = best_win or best_end
        assert end is not None
        actions, rewards = end.path()
        session.reset_to_state(end.state)
        values = session.values
        s = self.settings
        trajectory = Trajectory(
            game=self.game.name,
            game_file=game_file_label(self.game),
            game_sha256=self._sha,
            actions=np.array(actions, dtype=np.int16),
            rewards=np.array(rewards, dtype=np.float32),
            start_seed=int(episode_seed),
            outcome=end.outcome,
            episode_return=float(np.sum(rewards, dtype=np.float64)),
            score=float(values.get("score", 0)),
            lives_lost=end.lives_lost,
            source="demo",
            info={
                "search": {"beam": s.beam, "hold": s.hold, "retries": retries},
                "simulated_steps": self.simulated_steps - simulated_before,
                "values": values,
            },
        )
        return SearchResult(
            trajectory, time.monotonic() - started, self.simulated_steps - simulated_before, retries
        )
