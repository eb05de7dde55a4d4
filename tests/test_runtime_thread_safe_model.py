"""ThreadSafeModel under concurrency: actors never see half-published weights."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from oakemu_rl.runtime.thread_safe_model import ThreadSafeModel


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))


def fill(model: nn.Module, value: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)


def test_copies_only_newer_versions() -> None:
    learner, actor = make_model(), make_model()
    container = ThreadSafeModel(learner)
    assert container.version == 0 and container.copy_to(actor, 0) is None
    with container.update() as model:
        fill(model, 1.0)
    assert container.version == 1
    assert container.copy_to(actor, 0) == 1
    assert all(torch.all(p == 1.0) for p in actor.parameters())
    assert container.copy_to(actor, 1) is None
    state = container.state_dict()
    fill(learner, 5.0)
    assert all(torch.all(v == 1.0) for v in state.values())  # a consistent copy
    container.load_state_dict(state)
    assert container.version == 2 and container.copy_to(actor, 1) == 2


def test_concurrent_updates_and_copies_are_consistent() -> None:
    learner = make_model()
    container = ThreadSafeModel(learner)
    stop = threading.Event()
    problems: list[str] = []
    versions_seen: list[list[int]] = [[] for _ in range(3)]

    def learner_loop() -> None:
        for i in range(1, 301):
            # a multi-tensor change: every parameter takes the value i
            with container.update() as model, torch.no_grad():
                for p in model.parameters():
                    p.fill_(float(i))
        stop.set()

    def actor_loop(index: int) -> None:
        actor = make_model().requires_grad_(False)
        version = 0
        while not stop.is_set() or container.version > version:
            copied = container.copy_to(actor, version)
            if copied is None:
                continue
            values = {float(p.flatten()[0]) for p in actor.parameters()}
            uniform = all(torch.all(p == p.flatten()[0]) for p in actor.parameters())
            if len(values) != 1 or not uniform:
                problems.append(f"actor {index} saw torn weights {values} at version {copied}")
            elif values != {float(copied)}:
                problems.append(f"actor {index}: version {copied} holds {values}")
            versions_seen[index].append(copied)
            version = copied

    threads = [threading.Thread(target=actor_loop, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=learner_loop))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not problems, problems[:5]
    for seen in versions_seen:
        assert seen == sorted(seen) and len(set(seen)) == len(seen)  # strictly increasing
        assert seen[-1] == 300  # every actor ends on the final version


def test_copy_to_follows_replaced_tensors_and_rejects_other_models() -> None:
    learner = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    actor = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    container = ThreadSafeModel(learner)
    with container.update():
        pass
    assert container.copy_to(actor, 0) == 1
    # The actor's tensors are replaced (a dtype round trip makes new ones): the next
    # copy must write into the new tensors, not the old ones.
    actor.double().float()
    with container.update(), torch.no_grad():
        learner[0].weight.add_(1.0)
        learner[1].running_mean.add_(2.0)
    assert container.copy_to(actor, 1) == 2
    for name, tensor in learner.state_dict().items():
        assert torch.equal(tensor, actor.state_dict()[name]), name
    with pytest.raises(ValueError, match="weights differ"):
        container.copy_to(nn.Linear(4, 2), 0)
