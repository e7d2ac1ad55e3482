"""Typed results of the scaleplan functions.

Each result is a dataclass built from the JSON object that ``scaleplan <command> --json`` prints
(the native core produces exactly that object). The fields most code reads are typed attributes
(``r.plans[0].layout``, ``r.plans[0].tokens_per_s_per_gpu``, ``r.mfu``); ``to_dict()`` returns the
whole object, equal to the command's ``--json`` output, including keys that have no attribute.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Type, TypeVar

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
    "Model",
    "Cluster",
    "Layout",
]

R = TypeVar("R", bound="Result")


@dataclass
class Result:
    """Base of every result: typed attributes plus the JSON object they were read from."""

    _raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Fields whose values are results themselves: name -> class (a list becomes a list of them).
    _nested: ClassVar[Dict[str, Type["Result"]]] = {}

    @classmethod
    def from_dict(cls: Type[R], data: Dict[str, Any]) -> R:
        """Builds the result from a command's ``--json`` object."""
        kwargs: Dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "_raw" or f.name not in data:
                continue
            value = data[f.name]
            nested = cls._nested.get(f.name)
            if nested is not None and isinstance(value, list):
                value = [nested.from_dict(v) for v in value]
            elif nested is not None and isinstance(value, dict):
                value = nested.from_dict(value)
            kwargs[f.name] = value
        return cls(_raw=data, **kwargs)

    def to_dict(self) -> Dict[str, Any]:
        """The whole result as the command's ``--json`` prints it (a deep copy)."""
        return copy.deepcopy(self._raw)

    def __getitem__(self, key: str) -> Any:
        """Any key of the ``--json`` object, also those without an attribute."""
        return self._raw[key]


@dataclass
class RankedPlan(Result):
    """One ranked layout of ``plan``: its prediction and why it ranks where it does."""

    rank: int = 0
    layout: str = ""
    reason: str = ""
    iteration_s: float = 0.0
    tokens_per_s_per_gpu: float = 0.0
    mfu: float = 0.0
    peak_memory_bytes: int = 0  # allocated peak, as simulate's
    reserved_memory_bytes: int = 0  # what must fit (reserved + overhead); headroom is from it
    memory_capacity_bytes: int = 0
    headroom_bytes: int = 0
    lower_bound_s: float = 0.0
    breakdown: Dict[str, Any] = field(default_factory=dict)
    time_to_train_s: Optional[float] = None  # with train_tokens
    days_to_train: Optional[float] = None  # with train_tokens
    gpu_hours: Optional[float] = None  # with train_tokens
    cost: Optional[float] = None  # with train_tokens and gpu_hour_cost
    # Which frameworks run the layout as predicted: [{"framework", "format", "runs", "needs"}].
    frameworks: List[Dict[str, Any]] = field(default_factory=list)


@dataclass
class Explanation(Result):
    """``plan(explain=...)``: where the given layout ranks, and why."""

    layout: str = ""
    valid: bool = False
    in_space: bool = False
    fits: bool = False
    rank: int = 0
    rank_max: int = 0
    why: str = ""
    iteration_s: Optional[float] = None
    tokens_per_s_per_gpu: Optional[float] = None
    mfu: Optional[float] = None


@dataclass
class PlanResult(Result):
    """``plan``: the ranked layouts that fit, fastest first, and the search's counts."""

    _nested: ClassVar[Dict[str, Type[Result]]] = {"plans": RankedPlan, "explain": Explanation}
    model: str = ""
    cluster: str = ""
    gpus: int = 0
    seq: int = 0
    gbs: int = 0
    framework: str = ""
    plans: List[RankedPlan] = field(default_factory=list)
    candidates: int = 0
    fit: int = 0
    simulated: int = 0
    bounded: int = 0
    failed: int = 0
    errors: List[str] = field(default_factory=list)
    no_fit: str = ""
    search_s: float = 0.0
    threads: int = 0
    notes: List[str] = field(default_factory=list)
    explain: Optional[Explanation] = None
    robustness: Optional[Dict[str, Any]] = None
    export: Optional[Dict[str, Any]] = None
    # With deadline: met, gpus, nodes, the chosen count's days/GPU-hours/cost, every count tried.
    deadline: Optional[Dict[str, Any]] = None

    @property
    def best(self) -> Optional[RankedPlan]:
        """The first plan, or None when nothing fits (``no_fit`` says why)."""
        return self.plans[0] if self.plans else None


@dataclass
class StageBreakdown(Result):
    """One simulated rank of ``simulate``: seconds by category and its peak memory."""

    stage: int = 0
    global_rank: int = 0
    compute: float = 0.0
    recompute: float = 0.0
    comm: Dict[str, float] = field(default_factory=dict)
    comm_overlapped: Dict[str, float] = field(default_factory=dict)
    bubble: float = 0.0
    idle: float = 0.0
    total: float = 0.0
    peak_memory_bytes: int = 0


@dataclass
class SimulateResult(Result):
    """``simulate``: one training iteration of a layout."""

    _nested: ClassVar[Dict[str, Type[Result]]] = {"breakdown": StageBreakdown}
    model: str = ""
    cluster: str = ""
    layout: str = ""
    gpus: int = 0
    seq: int = 0
    iteration_s: float = 0.0
    tokens_per_s: float = 0.0
    tokens_per_s_per_gpu: float = 0.0
    mfu: float = 0.0
    hfu: float = 0.0
    peak_memory_bytes: int = 0
    peak_reserved_bytes: int = 0
    fits: bool = False
    breakdown: List[StageBreakdown] = field(default_factory=list)
    attention: str = ""
    how_sure: Optional[Dict[str, Any]] = None
    chakra: Optional[Dict[str, Any]] = None


@dataclass
class ModelResult(Result):
    """``model``: parameters and training FLOPs per token."""

    model: str = ""
    model_type: str = ""
    seq: int = 0
    params_total: int = 0
    params_active: int = 0
    params_embedding: int = 0
    params_by_component: Dict[str, int] = field(default_factory=dict)
    flops_per_token: float = 0.0
    flops: Dict[str, Any] = field(default_factory=dict)
    architecture: Dict[str, Any] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)


@dataclass
class Preset(Result):
    """A bundled model preset."""

    name: str = ""
    model_type: str = ""
    params_total: int = 0
    params_active: int = 0


@dataclass
class ModelList(Result):
    """``model list``: the bundled presets."""

    _nested: ClassVar[Dict[str, Type[Result]]] = {"models": Preset}
    models: List[Preset] = field(default_factory=list)


@dataclass
class StageMemory(Result):
    """One pipeline stage of ``memory``: bytes per GPU by category."""

    stage: int = 0
    layers: int = 0
    params: int = 0
    microbatches_in_flight: int = 0
    weights: int = 0
    gradients: int = 0
    optimizer: int = 0
    activations: int = 0
    buffers: int = 0
    total: int = 0
    fragmentation: int = 0
    reserved: int = 0


@dataclass
class MemoryResult(Result):
    """``memory``: per-GPU memory of every pipeline stage of a layout, and whether it fits."""

    _nested: ClassVar[Dict[str, Type[Result]]] = {"stages": StageMemory}
    model: str = ""
    layout: str = ""
    framework: str = ""
    seq: int = 0
    fits: bool = False
    gpu_memory_bytes: int = 0
    peak_allocated_bytes: int = 0
    peak_reserved_bytes: int = 0
    peak_stage: int = 0
    headroom_bytes: int = 0
    stages: List[StageMemory] = field(default_factory=list)


@dataclass
class CollectiveRow(Result):
    """One message size of ``collective``."""

    bytes: int = 0
    time_s: float = 0.0
    algbw_gbps: float = 0.0
    busbw_gbps: float = 0.0
    algorithm: str = ""
    measured_busbw_gbps: Optional[float] = None


@dataclass
class CollectiveResult(Result):
    """``collective``: time, algbw and busbw of a collective, nccl-tests style."""

    _nested: ClassVar[Dict[str, Type[Result]]] = {"results": CollectiveRow}
    cluster: str = ""
    op: str = ""
    ranks: int = 0
    bus_factor: float = 0.0
    algorithm_choice: str = ""
    placement: Dict[str, Any] = field(default_factory=dict)
    collective_model: str = ""
    results: List[CollectiveRow] = field(default_factory=list)
    fit: Optional[str] = None


@dataclass
class RecordRow(Result):
    """One record of ``validate``: predicted against measured (``skipped`` says why not)."""

    _nested: ClassVar[Dict[str, Type[Result]]] = {"breakdown": StageBreakdown}
    id: str = ""
    group: str = ""
    status: str = ""
    layout: str = ""
    skipped: Optional[str] = None
    framework: str = ""
    metric: str = ""
    predicted: Optional[float] = None
    measured: Optional[float] = None
    abs_pct_error: Optional[float] = None
    speed_ratio: Optional[float] = None
    predicted_memory_gib: Optional[float] = None
    measured_memory_gib: Optional[float] = None
    predicted_fits: bool = False
    predicted_mfu: float = 0.0
    breakdown: List[StageBreakdown] = field(default_factory=list)


@dataclass
class ValidateResult(Result):
    """``validate``: published runs re-simulated, and the errors' statistics."""

    _nested: ClassVar[Dict[str, Type[Result]]] = {"rows": RecordRow}
    file: str = ""
    file_records: int = 0
    records: int = 0
    simulated: int = 0
    skipped: int = 0
    skip_reasons: Dict[str, int] = field(default_factory=dict)
    timed_records: int = 0
    median_abs_pct_error: float = 0.0
    p90_abs_pct_error: float = 0.0
    max_abs_pct_error: float = 0.0
    median_speed_ratio: float = 0.0
    by_group: Dict[str, Any] = field(default_factory=dict)
    memory: Dict[str, Any] = field(default_factory=dict)
    rows: List[RecordRow] = field(default_factory=list)
    how_sure: Optional[Dict[str, Any]] = None


@dataclass
class Model(ModelResult):
    """A loaded model (``load_model``): what ``model`` reports about it, and ``source``, the
    preset name or config path that the other functions accept as ``model=``."""

    source: str = ""


@dataclass
class Cluster(Result):
    """A loaded cluster profile (``load_cluster``), as ``cluster show --json`` gives it."""

    name: str = ""
    description: str = ""
    gpu: Dict[str, Any] = field(default_factory=dict)
    node: Dict[str, Any] = field(default_factory=dict)
    network: Dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node (``node.gpus_per_node``)."""
        return int(self.node.get("gpus_per_node", 0))


@dataclass
class Layout(Result):
    """A parsed layout (``parse_layout``): the canonical string and its keys (DESIGN.md).

    Keys the string leaves out keep the layout's defaults (``dp`` 0: derived from the GPUs)."""

    text: str = ""
    tp: int = 1
    pp: int = 1
    dp: int = 0
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 1
    mbs: int = 1
    gbs: int = 0
    zero: int = 0
    schedule: str = "1f1b"
    sp: str = ""
    recompute: str = "none"
    dtype: str = "bf16"

    def __str__(self) -> str:
        return self.text
