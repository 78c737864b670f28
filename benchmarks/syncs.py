"""Counting the places where the host waits for the device: reading a tensor's value (`.item()`, `float(t)`,
`if t:`, `.tolist()`), operations whose output size depends on the data (`nonzero`, boolean-mask indexing,
`unique`), and explicit copies to the host (`.cpu()`, `.to("cpu")`). On a GPU each of these stalls the queue of kernels;
counted on any device, so a CPU test can check that a training step has none."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
DATA_DEPENDENT = {aten._local_scalar_dense, aten.nonzero, aten.masked_select, aten._unique2, aten.unique_dim,
                  aten.unique_consecutive, aten.is_nonzero, aten.equal}


class HostSyncCounter(TorchDispatchMode):
    """A context manager that counts host synchronisations by kind (`counts`) and in all (`total`)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self._patched: dict[str, Any] = {}

    @property
    def total(self) -> int:
        """All synchronisations counted so far."""
        return sum(self.counts.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in DATA_DEPENDENT:
            self.counts[func.overloadpacket.__name__] += 1
        elif func.overloadpacket in (aten.index, aten.index_put) and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else ())):
            self.counts["boolean_mask_index"] += 1
        return func(*args, **(kwargs or {}))

    def __enter__(self) -> "HostSyncCounter":
        counts = self.counts
        original_cpu, original_to, original_tolist = torch.Tensor.cpu, torch.Tensor.to, torch.Tensor.tolist

        def cpu(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            counts["cpu"] += 1
            return original_cpu(tensor, *args, **kwargs)

        def to(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            target = kwargs.get("device", args[0] if args else None)
            if (isinstance(target, (str, torch.device)) and torch.device(target).type == "cpu"
                    and tensor.device.type != "cpu"):
                counts["to_cpu"] += 1
            return original_to(tensor, *args, **kwargs)

        def tolist(tensor: torch.Tensor) -> Any:
            counts["tolist"] += 1
            return original_tolist(tensor)

        self._patched = {"cpu": original_cpu, "to": original_to, "tolist": original_tolist}
        torch.Tensor.cpu, torch.Tensor.to, torch.Tensor.tolist = cpu, to, tolist
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        torch.Tensor.cpu, torch.Tensor.to, torch.Tensor.tolist = (
            self._patched["cpu"], self._patched["to"], self._patched["tolist"])
        super().__exit__(*exc)
