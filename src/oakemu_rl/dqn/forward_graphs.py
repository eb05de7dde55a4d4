"""ForwardGraphs: a module's forward pass as TorchScript graphs, one per kind of input.

An eager forward pass of a small network calls from Python into C++ once per layer.
Each call costs interpreter time and gives up the GIL, which the actor, prefetch and
replay-writer threads then hold for a while: on 2 cores the DQN learner's forward
pass spent a fifth of its time on these. A traced graph is one call.

The graphs run with the JIT's optimisations switched off (a thread-local setting), so
they execute the same aten operators as eager mode, in the same order: outputs and
gradients are bit-identical (`tests/test_dqn_forward_graphs.py`). A graph shares the
module's parameter and buffer tensors, so in-place changes (optimizer steps,
`load_state_dict`, NoisyNet noise draws) are seen at once; when the tensors themselves
are replaced (`.to()`, `load_state_dict(assign=True)`), call `clear()`.

TorchScript is deprecated in favour of torch.compile, which on CPU needs a C++ compiler
and tens of seconds per graph; where tracing fails (a torch without it), the method
runs eagerly, with one warning.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import torch
from torch import nn
from torch.jit._fuser import optimized_execution
from torch.jit._trace import TracerWarning


class ForwardGraphs:
    """Runs `getattr(module, method)` through a cached trace of it.

    A trace is made on first use for each input dtype, rank and device, autocast
    setting and train/eval mode (a graph fixes the branches its trace took), and again
    when the module's first parameter was replaced.

    Args:
        module: the module whose method is traced.
        method: the method to trace; it must be a pure function of the input tensor
            and the module's tensors (no data-dependent Python control flow).
    """

    def __init__(self, module: nn.Module, method: str = "forward_eager") -> None:
        self._module = module
        self._method = method
        self._graphs: dict[tuple[Any, ...], torch.jit.ScriptModule] = {}
        self._first: torch.Tensor | None = None
        self._lock = threading.Lock()
        self._unavailable = False

    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        module = self._module
        device = inputs.device.type
        autocast = torch.is_autocast_enabled(device)
        key = (
            inputs.dtype,
            inputs.dim(),
            inputs.device,
            autocast,
            torch.get_autocast_dtype(device) if autocast else None,
            module.training,
        )
        graph = self._graphs.get(key)
        if graph is None or self._first is not next(module.parameters(), None):
            graph = None if self._unavailable else self._trace(key, inputs)
        # Unoptimised, the graph runs the operators its trace recorded (thread-local).
        with optimized_execution(False):
            result: torch.Tensor = getattr(module if graph is None else graph, self._method)(inputs)
        return result

    def clear(self) -> None:
        """Forget every graph (after the module's tensors were replaced)."""
        with self._lock:
            self._graphs.clear()
            self._first = None

    def _trace(self, key: tuple[Any, ...], inputs: torch.Tensor) -> torch.jit.ScriptModule | None:
        with self._lock:
            first = next(self._module.parameters(), None)
            if self._first is not first:
                self._graphs.clear()
                self._first = first
            graph = self._graphs.get(key)
            if graph is None:
                try:
                    with (
                        optimized_execution(False),
                        torch.no_grad(),
                        warnings.catch_warnings(),
                    ):
                        warnings.simplefilter("ignore", TracerWarning)
                        warnings.simplefilter("ignore", DeprecationWarning)
                        graph = torch.jit.trace_module(  # type: ignore[no-untyped-call]
                            self._module, {self._method: inputs}, check_trace=False
                        )
                except Exception as exc:  # any failure: run eagerly
                    self._unavailable = True
                    warnings.warn(
                        f"tracing {type(self._module).__name__}.{self._method} failed "
                        f"({exc}); running it eagerly",
                        RuntimeWarning,
                        stacklevel=3,
                    )
                    return None
                self._graphs[key] = graph
            return graph

    # Copies and pickles start without graphs: a copied graph would hold copies of the
    # tensors, not the copied module's own.
    def __getstate__(self) -> dict[str, Any]:
        return {"_module": self._module, "_method": self._method}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._module = state["_module"]
        self._method = state["_method"]
        self._graphs = {}
        self._first = None
        self._lock = threading.Lock()
        self._unavailable = False
