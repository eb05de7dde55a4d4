"""Can a student on two stacked frames see forest_run's timing? (distill, issue 28)

    python benchmarks/forest_run_timing.py [--episodes 3] [--horizon 12]

forest_run scrolls one row every `scroll_period` frames (4 in sectors 1-3, 3 in sectors
4-6, 2 in sectors 7-8) and an env step is 4 frames. In sectors 4-6 the steps scroll 2, 1,
1, 2, 1, 1, ... rows, so after a 1-row step the next may scroll 1 row or 2, and two
stacked frames (the distill benchmark's `frame_stack: 2`) show only the last step's.
Which one it is lives in `scroll_timer` (1 or 2), which the screen does not show.

The safety teacher plays from the start into sector 7 (each action drawn from its target).
On every state of sectors 4-6 with `scroll_timer` 1 or 2 it labels the state twice: as it
is, and with the timer set to the other value. On the critical states (some action loses a
life, another does not) it counts how often the two safe sets differ, how often they share
no action (then no student on two frames can be sure of a safe move), and how often the
action an imitating student would favour (the one the two even targets weight most) is
unsafe in the real state.
"""

from __future__ import annotations

import argparse
import collections

import numpy as np
import numpy.typing as npt

from oakemu_rl.games.loader import load_game
from oakemu_rl.games.session import GameSession
from oakemu_rl.trajectories.teacher import SearchTeacher, TeacherLabel, TeacherSettings

SCROLL_TIMER = 0x800E  # forest_run.asm: frames until the next row scrolls
AMBIGUOUS_SECTORS = range(4, 7)  # scroll_period 3


def safe_set(label: TeacherLabel) -> npt.NDArray[np.bool_]:
    safe: npt.NDArray[np.bool_] = label.lives_lost == label.lives_lost.min()
    return safe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=12)
    args = parser.parse_args()
    game = load_game("forest_run")
    teacher = SearchTeacher(game, TeacherSettings(horizon=args.horizon, search="safety"))
    env, probe = GameSession(game), GameSession(game)
    rng = np.random.default_rng(1)
    counts: collections.Counter[str] = collections.Counter()
    for episode in range(args.episodes):
        env.reset(3000 + episode)
        while True:
            state = env.save_state()
            sector = int(env.values["sector"])
            timer = env.machine.read_byte(SCROLL_TIMER)
            label = teacher.label(state)
            if sector in AMBIGUOUS_SECTORS and timer in (1, 2):
                counts["states"] += 1
                if label.lives_lost.min() < label.lives_lost.max():
                    counts["critical"] += 1
                    probe.reset_to_state(state)
                    probe.machine.write(SCROLL_TIMER, [3 - timer])
                    real, other = safe_set(label), safe_set(teacher.label(probe.save_state()))
                    counts["safe sets differ"] += int((real != other).any())
                    counts["no shared safe action"] += int(not (real & other).any())
                    favoured = int(np.argmax(real / real.sum() + other / other.sum()))
                    counts["favoured action unsafe"] += int(not real[favoured])
            step = env.step(int(rng.choice(len(label.target), p=label.target)))
            if step.outcome in ("win", "loss") or int(env.values["sector"]) > 6:
                break
        print(f"episode {episode + 1}/{args.episodes}: {dict(counts)}", flush=True)
    critical = max(1, counts["critical"])
    print(
        f"sectors 4-6, scroll_timer 1 or 2: {counts['states']} states, {counts['critical']} "
        f"critical; on those the safe set depends on the hidden timer in "
        f"{counts['safe sets differ']} ({counts['safe sets differ'] / critical:.0%}), the two "
        f"share no safe action in {counts['no shared safe action']}, and the favoured action is "
        f"unsafe in {counts['favoured action unsafe']}"
    )


if __name__ == "__main__":
    main()
