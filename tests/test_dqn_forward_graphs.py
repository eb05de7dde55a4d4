"""The traced forward pass (ForwardGraphs) against eager mode: same results, bit for bit."""

from __future__ import annotations

import copy
import threading
import warnings

import pytest
import torch

from oakemu_rl.dqn.model import DQNModel


def twins(**kwargs: object) -> tuple[DQNModel, DQNModel]:
    torch.manual_seed(0)
    eager = DQNModel(**kwargs, traced=False)  # type: ignore[arg-type]
    traced = DQNModel(**kwargs, traced=True)  # type: ignore[arg-type]
    traced.load_state_dict(eager.state_dict())
    for mine, theirs in zip(traced.buffers(), eager.buffers(), strict=True):
        mine.copy_(theirs)  # NoisyNet noise is not in the state dict
    assert traced.graphs is not None and eager.graphs is None
    return eager, traced


def pass_both_ways(
    model: DQNModel, inputs: torch.Tensor, bf16: bool
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        q = model(inputs).float()
    (q * torch.linspace(-1, 1, q.shape[1])).pow(2).mean().backward()
    return q.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


CASES = {
    "small_cnn": ({"observation_shape": (2, 32, 32), "num_actions": 3, "torso": "small_cnn"}, "u8"),
    "nature_cnn": (
        {"observation_shape": (4, 48, 48), "num_actions": 5, "torso": "nature_cnn"},
        "u8",
    ),
    "mlp": ({"observation_shape": (6,), "num_actions": 2, "torso": "mlp"}, "f32"),
    "noisy_plain_head": (
        {"observation_shape": (2, 32, 32), "num_actions": 3, "dueling": False, "noisy": True},
        "u8",
    ),
}


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", list(CASES))
def test_traced_forward_and_backward_are_bit_identical_to_eager(case: str, bf16: bool) -> None:
    kwargs, kind = CASES[case]
    eager, traced = twins(**kwargs)
    shape = (16, *kwargs["observation_shape"])  # type: ignore[misc]
    g = torch.Generator().manual_seed(1)
    inputs = (
        torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
        if kind == "u8"
        else torch.randn(shape, generator=g)
    )
    q_eager, grads_eager = pass_both_ways(eager, inputs, bf16)
    q_traced, grads_traced = pass_both_ways(traced, inputs, bf16)
    assert q_traced.dtype == q_eager.dtype
    assert torch.equal(q_traced, q_eager)
    assert len(grads_traced) == len(grads_eager) == len(list(eager.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(grads_traced, grads_eager, strict=True))
    # A second call runs the cached graph: still identical, and one graph per setting.
    assert torch.equal(pass_both_ways(traced, inputs, bf16)[0], q_eager)
    assert traced.graphs is not None and len(traced.graphs._graphs) == 1


def test_graphs_follow_weight_changes_mode_and_replaced_tensors() -> None:
    eager, traced = twins(observation_shape=(2, 32, 32), num_actions=3, noisy=True)
    inputs = torch.randint(0, 256, (8, 2, 32, 32), dtype=torch.uint8)
    assert torch.equal(traced(inputs), eager(inputs))
    # In-place changes: an optimizer step and a noise draw, then a state-dict load.
    optimizer = torch.optim.Adam(traced.parameters(), lr=0.1)
    traced(inputs).sum().backward()
    optimizer.step()
    traced.reset_noise()
    eager.load_state_dict(traced.state_dict())
    for mine, theirs in zip(traced.buffers(), eager.buffers(), strict=True):
        theirs.copy_(mine)
    assert torch.equal(traced(inputs), eager(inputs))
    # Eval mode takes another branch in the noisy layers: another graph.
    traced.eval(), eager.eval()
    assert torch.equal(traced(inputs), eager(inputs))
    assert traced.graphs is not None and len(traced.graphs._graphs) == 2
    # Replaced tensors (assign=True puts new Parameter objects in): traced again.
    fresh = DQNModel((2, 32, 32), 3, noisy=True).eval()
    traced.load_state_dict(fresh.state_dict(), assign=True)
    assert torch.equal(traced(inputs), fresh(inputs))
    # .to() clears the graphs as well.
    traced.to("cpu", memory_format=torch.channels_last)
    assert len(traced.graphs._graphs) == 0
    assert torch.equal(traced(inputs), fresh(inputs))


def test_a_copy_runs_on_its_own_weights() -> None:
    _, traced = twins(observation_shape=(6,), num_actions=2)
    inputs = torch.randn(4, 6)
    before = traced(inputs)
    twin = copy.deepcopy(traced)
    with torch.no_grad():
        for p in twin.parameters():
            p.add_(1.0)
    assert not torch.equal(twin(inputs), before)
    assert torch.equal(traced(inputs), before)  # the original kept its own tensors
    assert torch.equal(twin(inputs), twin.forward_eager(inputs))


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")
def test_exporters_tracing_the_model_record_the_eager_operators() -> None:
    _, traced = twins(observation_shape=(2, 32, 32), num_actions=3)
    inputs = torch.randint(0, 256, (2, 2, 32, 32), dtype=torch.uint8)
    traced(inputs)  # a cached graph exists
    exported = torch.jit.trace(traced, inputs, check_trace=False)
    kinds = {node.kind() for node in exported.inlined_graph.nodes()}
    assert "aten::_convolution" in kinds  # the layers themselves, not a call into a cached graph
    assert torch.equal(exported(inputs), traced.forward_eager(inputs))


def test_threads_share_one_graph() -> None:
    eager, traced = twins(observation_shape=(6,), num_actions=2)
    inputs = torch.randn(32, 6)
    expected = eager(inputs)
    results: list[bool] = []

    def call() -> None:
        for _ in range(20):
            results.append(torch.equal(traced(inputs), expected))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 80
    assert traced.graphs is not None and len(traced.graphs._graphs) == 1


def test_a_failed_trace_falls_back_to_eager_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    eager, traced = twins(observation_shape=(6,), num_actions=2)

    def no_tracing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no TorchScript in this torch")

    monkeypatch.setattr(torch.jit, "trace_module", no_tracing)
    inputs = torch.randn(4, 6)
    with pytest.warns(RuntimeWarning, match="no TorchScript in this torch.*running it eagerly"):
        assert torch.equal(traced(inputs), eager(inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        assert torch.equal(traced(inputs), eager(inputs))
