"""Results of the scaleplan functions.

Each result wraps the JSON object that ``scaleplan <command> --json`` prints (the native core
produces exactly that object, with the outcome's ``to_json()``), so a result equals the command's
output by construction: ``to_dict()`` returns the object, ``r["key"]`` reads any key, and every key
reads as an attribute too (``r.plans[0].layout``, ``r.plans[0].tokens_per_s_per_gpu``, ``r.mfu``).
Objects inside it read the same way; the classes below name the ones with a use of their own.
A key the command prints only when asked for (``explain``, ``export``, ``how_sure``, a plan's
``cost``, ...) reads as None when absent; any other missing name raises AttributeError.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Dict, Iterator, List, Optional, Tuple, Type, TypeVar

__all__ = [
    "Result",
    "RankedPlan",
    "Explanation",
    "PlanResult",
    "StageBreakdown",
    "SimulateResult",
    "ModelResult",
    "Preset",
    "ModelList",
    "StageMemory",
    "MemoryResult",
    "CollectiveRow",
    "CollectiveResult",
    "RecordRow",
    "ValidateResult",
    "SweepResult",
    "RunResult",
    "CompareResult",
    "RefitResult",
    "ProfileResult",
    "ClusterList",
    "Model",
    "Cluster",
    "Layout",
]

R = TypeVar("R", bound="Result")


class Result:
    """A command's ``--json`` object, read by key or by attribute.

    ``_nested`` maps a key to the class its object (or each object of its list) is read as;
    other objects inside read as plain :class:`Result`. ``_optional`` names the keys the command
    leaves out unless asked for, which read as None."""

    _nested: ClassVar[Dict[str, Type["Result"]]] = {}
    _optional: ClassVar[Tuple[str, ...]] = ()

    def __init__(self, data: Optional[Dict[str, Any]] = None):
        object.__setattr__(self, "_raw", {} if data is None else data)

    @classmethod
    def from_dict(cls: Type[R], data: Dict[str, Any]) -> R:
        """The result of a command's ``--json`` object."""
        return cls(data)

    def _wrap(self, key: str, value: Any) -> Any:
        if isinstance(value, dict):
            return self._nested.get(key, Result)(value)
        if isinstance(value, list) and any(isinstance(v, dict) for v in value):
            kind = self._nested.get(key, Result)
            return [kind(v) if isinstance(v, dict) else v for v in value]
        return value

    def __getattr__(self, name: str) -> Any:
        raw = object.__getattribute__(self, "_raw")
        if name in raw:
            value = self._wrap(name, raw[name])
            object.__setattr__(self, name, value)  # read once: `r.plans is r.plans`
            return value
        if name in self._optional:
            return None
        raise AttributeError(
            f"{type(self).__name__} has no key {name!r} (keys: {', '.join(raw) or 'none'})"
        )

    def __getitem__(self, key: str) -> Any:
        """Any key of the ``--json`` object, as the object holds it."""
        return self._raw[key]

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def keys(self) -> List[str]:
        """The keys of the ``--json`` object."""
        return list(self._raw)

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the ``--json`` object, or ``default``."""
        return self._raw.get(key, default)

    def to_dict(self) -> Dict[str, Any]:
        """The whole result as the command's ``--json`` prints it (a deep copy)."""
        return copy.deepcopy(self._raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Result) and self._raw == other._raw

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k}={v!r}" for k, v in self._raw.items() if not isinstance(v, (dict, list))
        )
        return f"{type(self).__name__}({shown})"


class RankedPlan(Result):
    """One ranked layout of ``plan``: its prediction and why it ranks where it does. ``cost``,
    ``gpu_hours``, ``days_to_train`` and ``time_to_train_s`` come with ``train_tokens``;
    ``frameworks`` says which frameworks run the layout as predicted."""

    _optional = ("time_to_train_s", "days_to_train", "gpu_hours", "cost")


class Explanation(Result):
    """``plan(explain=...)``: where the given layout ranks, and why."""

    _optional = ("iteration_s", "tokens_per_s_per_gpu", "mfu")


class PlanResult(Result):
    """``plan``: the ranked layouts that fit, fastest first, and the search's counts."""

    _nested = {"plans": RankedPlan, "explain": Explanation}
    _optional = ("explain", "robustness", "export", "deadline")

    @property
    def best(self) -> Optional[RankedPlan]:
        """The first plan, or None when nothing fits (``no_fit`` says why)."""
        plans = self.plans
        return plans[0] if plans else None


class StageBreakdown(Result):
    """One simulated rank of ``simulate``: seconds by category and its peak memory."""


class SimulateResult(Result):
    """``simulate``: one training iteration of a layout."""

    _nested = {"breakdown": StageBreakdown}
    _optional = ("how_sure", "chakra")


class ModelResult(Result):
    """``model``: parameters and training FLOPs per token."""


class Preset(Result):
    """A bundled model preset."""


class ModelList(Result):
    """``model list``: the bundled presets."""

    _nested = {"models": Preset}


class StageMemory(Result):
    """One pipeline stage of ``memory``: bytes per GPU by category."""


class MemoryResult(Result):
    """``memory``: per-GPU memory of every pipeline stage of a layout, and whether it fits."""

    _nested = {"stages": StageMemory}


class CollectiveRow(Result):
    """One message size of ``collective``."""

    _optional = ("measured_busbw_gbps",)


class CollectiveResult(Result):
    """``collective``: time, algbw and busbw of a collective, nccl-tests style."""

    _nested = {"results": CollectiveRow}
    _optional = ("fit",)


class RecordRow(Result):
    """One record of ``validate``: predicted against measured (``skipped`` says why not)."""

    _nested = {"breakdown": StageBreakdown}
    _optional = (
        "skipped",
        "predicted",
        "measured",
        "abs_pct_error",
        "speed_ratio",
        "predicted_memory_gib",
        "measured_memory_gib",
    )


class ValidateResult(Result):
    """``validate``: published runs re-simulated, and the errors' statistics."""

    _nested = {"rows": RecordRow}
    _optional = ("how_sure",)


class SweepResult(Result):
    """``sweep``: the best plan of one job at each GPU count."""


class RunResult(Result):
    """``run``: a layout executed by the runtime, measured beside its prediction."""


class CompareResult(Result):
    """``compare``: a predicted timeline beside a measured one."""


class RefitResult(Result):
    """``refit``: a calibrated profile's kernel models refitted to measured kernel times."""


class ProfileResult(Result):
    """``profile``: this machine calibrated into a profile."""


class ClusterList(Result):
    """``cluster list``: the bundled cluster profiles."""


class Model(ModelResult):
    """A loaded model (``load_model``): what ``model`` reports about it, and ``source``, the
    preset name or config path that the other functions accept as ``model=``."""

    def __init__(self, data: Optional[Dict[str, Any]] = None, source: str = ""):
        super().__init__(data)
        object.__setattr__(self, "source", source)


class Cluster(Result):
    """A loaded cluster profile (``load_cluster``), as ``cluster show --json`` gives it, and
    ``source``, the name or path that the other functions accept as ``cluster=``."""

    def __init__(self, data: Optional[Dict[str, Any]] = None, source: str = ""):
        super().__init__(data)
        object.__setattr__(self, "source", source)

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node (``node.gpus_per_node``)."""
        return int(self._raw.get("node", {}).get("gpus_per_node", 0))


class Layout(Result):
    """A parsed layout (``parse_layout``): the canonical string (``text``, ``str(layout)``) and
    its keys (DESIGN.md "Layout string"), each key the string leaves out at its default (``dp``
    0: derived from the GPUs)."""

    _defaults: ClassVar[Dict[str, Any]] = {
        "tp": 1, "pp": 1, "dp": 0, "cp": 1, "ep": 1, "etp": 1, "vpp": 1, "mbs": 1, "gbs": 0,
        "zero": 0, "schedule": "1f1b", "sp": "", "recompute": "none", "dtype": "bf16",
    }  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        if name in self._defaults and name not in self._raw:
            return self._defaults[name]
        return super().__getattr__(name)

    @property
    def text(self) -> str:
        """The canonical layout string."""
        return self._raw["layout"]

    def __str__(self) -> str:
        return self.text
