"""scaleplan from Python: plan, simulate and rank the parallel layouts of a training job.

The functions take keyword arguments named like the command-line options (``--gpus`` is
``gpus=``, ``--memory-margin`` is ``memory_margin=``, ``--fix`` is ``fix=[...]``); counts take the
command line's suffixes (``seq="4k"``, ``train_tokens="15T"``). They return results
(``scaleplan.results``) that read every key of what ``scaleplan <command> --json`` prints as an
attribute (``r.plans[0].layout``) or by key, and whose ``to_dict()`` is that object. Bad input raises :class:`ScaleplanError` (a ``ValueError``) with the message the command
prints after ``error:`` and the option it names in ``.field``. The native work runs without the
GIL, so threads can plan in parallel; ``progress=`` takes a callable that gets a dict per progress
event (``{"phase": ..., ...}``) and per note (``{"phase": "note", "note": ...}``).

Example::

    import scaleplan
    r = scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus=64, seq=8192, gbs=512)
    print(r.plans[0].layout, r.plans[0].tokens_per_s_per_gpu, r.plans[0].mfu)
"""

from __future__ import annotations

import json
import os
import re
import sys
import sysconfig
import tempfile
from typing import Any, Callable, Dict, Iterable, Optional, Union


def _point_at_installed_data() -> None:
    # The bundled presets, profiles and framework definitions are installed under
    # <prefix>/share/scaleplan (python/CMakeLists.txt); the core reads SCALEPLAN_DATA_DIR, which a
    # user's own setting overrides.
    if os.environ.get("SCALEPLAN_DATA_DIR"):
        return
    for prefix in (sysconfig.get_paths().get("data"), sys.prefix):
        if prefix and os.path.isdir(os.path.join(prefix, "share", "scaleplan")):
            os.environ["SCALEPLAN_DATA_DIR"] = os.path.join(prefix, "share", "scaleplan")
            return


_point_at_installed_data()

from . import _core, results  # noqa: E402
from .results import (  # noqa: E402
    Cluster,
    ClusterList,
    CompareResult,
    CollectiveResult,
    Layout,
    MemoryResult,
    Model,
    ModelList,
    ModelResult,
    PlanResult,
    ProfileResult,
    RefitResult,
    Result,
    RunResult,
    SimulateResult,
    SweepResult,
    ValidateResult,
)

__version__ = "0.1.0"

__all__ = [
    "ScaleplanError",
    "load_model",
    "load_cluster",
    "parse_layout",
    "model",
    "model_list",
    "memory",
    "collective",
    "simulate",
    "plan",
    "validate",
    "sweep",
    "run",
    "compare",
    "refit",
    "profile",
    "cluster",
    "cluster_list",
    *results.__all__,
]

ProgressCallback = Callable[[Dict[str, Any]], None]
ModelArg = Union[str, "os.PathLike[str]", Dict[str, Any], Model]
ClusterArg = Union[str, "os.PathLike[str]", Cluster]
# A count as the command line takes it: 4096, "4k" (= 4096), "15T" (tokens: 15 * 10**12).
Count = Union[int, str]


class ScaleplanError(ValueError):
    """Bad input or a failed call.

    ``message`` is the text ``scaleplan`` prints after ``error:``; ``field`` the keyword argument
    it names (``"gpus"`` for ``--gpus: must be positive, got 0``), or None; ``code`` is
    ``"invalid"``, ``"not_found"`` or ``"internal"`` (the command exits 2 for the first two, 1 for
    the last)."""

    def __init__(self, message: str, field: Optional[str] = None, code: str = "invalid"):
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code


# The option an error names: "--gpus: must be positive" (the api's errors start with the option)
# or "layout: tp=3 does not divide ..." (the layout parser's).
_FIELD = re.compile(r"^(?:--([a-z][a-z0-9-]*)[: ]|([a-z][a-z0-9_]*):)")


def _error(native: BaseException) -> ScaleplanError:
    message, code = native.args if len(native.args) == 2 else (str(native), "internal")
    m = _FIELD.match(message)
    field = (m.group(1) or m.group(2)).replace("-", "_") if m else None
    return ScaleplanError(message, field, code)


def _call(fn: Callable[..., str], *args: Any) -> Dict[str, Any]:
    try:
        return json.loads(fn(*args))
    except _core.Error as e:
        raise _error(e) from None


# Models given as a dict are written to a private folder as <name>/config.json (the core reads
# HF configs from files); the folder lives as long as the interpreter.
_configs = tempfile.TemporaryDirectory(prefix="scaleplan-configs-")


def _model_source(model: Any, name: str = "config") -> str:
    if isinstance(model, Model):
        return model.source
    if isinstance(model, dict):
        folder = tempfile.mkdtemp(dir=_configs.name)
        path = os.path.join(folder, name)
        os.makedirs(path)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(model, f)
        return path
    if isinstance(model, os.PathLike):
        return os.fspath(model)
    return model


def _cluster_source(cluster: Any) -> Any:
    if isinstance(cluster, Cluster):
        return cluster.source
    if isinstance(cluster, os.PathLike):
        return os.fspath(cluster)
    return cluster


def _value(key: str, value: Any) -> Any:
    # A keyword argument as the request's JSON holds it: loaded models, clusters and layouts by
    # what names them, paths as strings, several values as a list. Numbers stay numbers: the core
    # reads counts with suffixes ("4k") and numbers given for values with units as the command
    # line does.
    if key == "model":
        return _model_source(value)
    if key == "cluster":
        return _cluster_source(value)
    if isinstance(value, Layout):
        return value.text
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_value(key, v) for v in value]
    return value


def _request(args: Dict[str, Any]) -> str:
    """The request of a command function from its arguments (its ``locals()``): every argument
    that is not None, but ``progress``, converted by :func:`_value`."""
    return json.dumps(
        {k: _value(k, v) for k, v in args.items() if v is not None and k != "progress"}
    )


def _command(fn: Callable[..., str], args: Dict[str, Any]) -> Dict[str, Any]:
    """Runs the native command ``fn`` with the request of ``args`` (with their ``progress``,
    if any) and returns its ``--json`` object."""
    if "progress" in args:
        return _call(fn, _request(args), args["progress"])
    return _call(fn, _request(args))


def load_model(model: ModelArg, name: str = "config") -> Model:
    """Loads a model: a preset name (``"llama3-8b"``; see :func:`model_list`), a path to a HF
    ``config.json`` (or its folder), or a ``config.json`` as a dict (``name`` names it).

    Returns a :class:`Model`: its parameters, FLOPs per token and architecture (what
    :func:`model` reports), and ``source``, which every other function accepts as ``model=``.
    Raises :class:`ScaleplanError` for an unknown preset or an invalid config (``field`` "model").
    """
    source = _model_source(model, name)
    try:
        data = _call(_core.model, _request({"model": source}))
    except ScaleplanError as e:
        if e.field is None:
            e.field = "model"
        raise
    return Model(data, source)


def load_cluster(cluster: ClusterArg) -> Cluster:
    """Loads a cluster profile: a bundled name (``"dgx-h100"``) or a path to a profile JSON
    (docs/hw_profiles.md). Returns a :class:`Cluster` (``to_dict()``: the profile with unit
    strings and the path it came from, ``scaleplan cluster show C --json``; ``source``: what other
    functions accept as ``cluster=``)."""
    source = _cluster_source(cluster)
    try:
        data = json.loads(_core.cluster_show(source))
    except _core.Error as e:
        err = _error(e)
        err.field = err.field or "cluster"
        raise err from None
    return Cluster(data, source)


def parse_layout(text: str) -> Layout:
    """Parses a layout string (``"tp=8,pp=4,dp=16,zero=1"``; DESIGN.md "Layout string") into a
    :class:`Layout` with its canonical text and keys. Raises :class:`ScaleplanError` naming the
    key for an unknown key or a bad value (``field`` "layout")."""
    try:
        canonical = _core.parse_layout(text)
    except _core.Error as e:
        err = _error(e)
        err.field = err.field or "layout"
        raise err from None
    raw: Dict[str, Any] = {}
    for part in canonical.split(","):
        key, _, value = part.partition("=")
        raw[key] = int(value) if value.lstrip("-").isdigit() else value
    return Layout({"layout": canonical, **raw})


def model(model: ModelArg, seq: Count = 4096) -> ModelResult:
    """Parameters (total, active, per component) and training FLOPs per token of a model at
    sequence length ``seq``: ``scaleplan model --model M --seq S --json``."""
    return ModelResult(_command(_core.model, locals()))


def model_list() -> ModelList:
    """The bundled model presets: ``scaleplan model list --json``."""
    return ModelList(_call(_core.model_list))


def memory(
    model: ModelArg,
    layout: Union[str, Layout],
    seq: Count,
    cluster: Optional[ClusterArg] = None,
    gpu_memory: Optional[str] = None,
    gpus: Optional[Count] = None,
    framework: str = "megatron",
    moe_imbalance: Optional[Union[str, float]] = None,
    margin: str = "0",
) -> MemoryResult:
    """Per-GPU memory of every pipeline stage of ``layout``, by category, and whether it fits on
    ``cluster``'s GPUs (or ``gpu_memory``, e.g. ``"80GiB"``): ``scaleplan memory --json``.
    Without ``gpus`` or ``dp`` in the layout, one replica (dp=1) is assumed."""
    return MemoryResult(_command(_core.memory, locals()))


def collective(
    cluster: ClusterArg,
    ranks: Optional[Count] = None,
    op: str = "all_reduce",
    bytes: Optional[Union[str, int]] = None,
    sweep: Optional[str] = None,
    algo: str = "nccl",
    ranks_per_node: Optional[int] = None,
    concurrent: int = 1,
    nccl_log: Optional[str] = None,
    force_base: bool = False,
    progress: Optional[ProgressCallback] = None,
) -> CollectiveResult:
    """Time, algbw and busbw of one collective on a cluster, nccl-tests style:
    ``scaleplan collective --json``. ``bytes`` is one size (``"1GiB"`` or an int of bytes),
    ``sweep`` ``"MIN:MAX[:FACTOR]"`` (default 8B:8GiB); ``nccl_log`` fits the model to a measured
    nccl-tests log first. Warnings of the fit come to ``progress`` as notes."""
    return CollectiveResult(_command(_core.collective, locals()))


def simulate(
    model: Optional[ModelArg] = None,
    cluster: Optional[ClusterArg] = None,
    seq: Optional[Count] = None,
    layout: Optional[Union[str, Layout]] = None,
    gpus: Optional[Count] = None,
    plan: Optional[str] = None,
    framework: Optional[str] = None,
    attention: Optional[str] = None,
    moe_imbalance: Optional[Union[str, float]] = None,
    moe_dispatcher: Optional[str] = None,
    host_launch: Optional[str] = None,
    trace: Optional[str] = None,
    emit_chakra: Optional[str] = None,
    all_ranks: bool = False,
    tp_comm_overlap: bool = False,
    fp8_recipe: Optional[str] = None,
    compile: Optional[str] = None,  # noqa: A002 (the option's name, as on the command line)
    how_sure: bool = False,
    progress: Optional[ProgressCallback] = None,
) -> SimulateResult:
    """One simulated training iteration of ``model`` under ``layout`` on ``cluster``: time,
    tokens/s, MFU/HFU, per-rank breakdown, peak memory: ``scaleplan simulate --json``.

    ``plan`` (a plan file of ``plan(emit="json", out=...)``) gives model, cluster, seq, layout and
    framework instead. ``trace`` writes a Perfetto trace, ``emit_chakra`` (an existing directory)
    Chakra execution traces; ``compile`` (``"model,loss"``, torchtitan only) predicts torchtitan
    under ``torch.compile``; ``fp8_recipe`` (``"delayed"``, ``"tensorwise"``, ``"mxfp8"``,
    ``"nvfp4"``; Megatron-core under ``dtype=fp8``) quantizes the fp8 linears as Transformer Engine's recipe
    does; ``how_sure`` also simulates the layout
    with one resource off at a time. ``progress`` gets the phases of ``all_ranks`` runs."""
    return SimulateResult(_command(_core.simulate, locals()))


def plan(
    model: ModelArg,
    cluster: ClusterArg,
    gpus: Optional[Count] = None,
    seq: Count = 0,
    gbs: Count = 0,
    top: int = 5,
    fix: Optional[Union[str, Iterable[str]]] = None,
    memory_margin: Optional[str] = None,
    framework: Optional[str] = None,
    explain: Optional[Union[str, Layout]] = None,
    emit: Optional[str] = None,
    out: Optional[str] = None,
    moe_imbalance: Optional[Union[str, float]] = None,
    moe_dispatcher: Optional[str] = None,
    host_launch: Optional[str] = None,
    threads: int = 0,
    max_simulations: Count = 0,
    train_tokens: Optional[Count] = None,
    gpu_hour_cost: Optional[float] = None,
    deadline: Optional[str] = None,
    max_gpus: Count = 0,
    allow_cross_node_tp: bool = False,
    tp_comm_overlap: bool = False,
    compile: Optional[str] = None,  # noqa: A002 (the option's name, as on the command line)
    no_robustness: bool = False,
    progress: Optional[ProgressCallback] = None,
) -> PlanResult:
    """Ranks the parallel layouts of a job that fit, fastest first: ``scaleplan plan --json``.

    ``gpus`` GPUs of ``cluster``, sequence length ``seq``, global batch ``gbs`` sequences.
    ``fix`` restricts layout keys (``["zero=0|1", "pp=1"]``), ``memory_margin`` is kept free on
    every GPU (``"4GiB"``), ``explain`` a layout to rank and explain, ``emit`` exports the best plan
    (an ``--emit`` target: docs/planner.md, "Exports") into ``result.export["content"]`` and, with
    ``out``, a file. ``threads`` 0 uses every core. ``progress`` gets the search's counts about
    once a second: ``{"phase", "candidates", "seen", "fitting", "simulated", "bounded",
    "best_tokens_per_s_per_gpu", "best_layout"}``. ``train_tokens`` (e.g. ``15e12``) adds each
    plan's days, GPU-hours and, with ``gpu_hour_cost``, cost; ``deadline`` (``"60d"``, with
    ``train_tokens`` and without ``gpus``) finds the smallest GPU count of whole nodes, up to
    ``max_gpus``, that trains them in time and plans it (``result.deadline`` lists the counts
    tried). ``tp_comm_overlap`` predicts with Transformer Engine's TP communication overlap
    (Megatron-core only; exported to megatron). ``compile`` (``"model,loss"``) predicts torchtitan
    under ``torch.compile`` and writes its ``[compile]`` section into the torchtitan exports."""
    return PlanResult(_command(_core.plan, locals()))


def validate(
    file: Union[str, "os.PathLike[str]"],
    threads: int = 0,
    profile: Optional[Union[str, Iterable[str]]] = None,
    match: Optional[str] = None,
    group: Optional[Union[str, Iterable[str]]] = None,
    framework: Optional[str] = None,
    host_launch: Optional[str] = None,
    how_sure: bool = False,
    progress: Optional[ProgressCallback] = None,
) -> ValidateResult:
    """Re-simulates the published runs of a validation file and compares predicted with measured
    time, throughput or MFU, peak memory and out-of-memory verdicts: ``scaleplan validate FILE
    --json``. ``profile`` substitutes profiles (``"dgx-h100=hf-h100"``), ``match`` selects record
    ids by regular expression, ``group`` published sets. ``progress`` gets
    ``{"phase": "simulate", "done", "total"}`` about every 50 ms."""
    return ValidateResult(_command(_core.validate, locals()))


def sweep(
    model: ModelArg,
    cluster: ClusterArg,
    gpus: Union[str, Iterable[Count]],
    seq: Count,
    gbs: Optional[Count] = None,
    gbs_per_gpu: Optional[float] = None,
    train_tokens: Optional[Count] = None,
    gpu_hour_cost: Optional[Union[str, float]] = None,
    progress: Optional[ProgressCallback] = None,
    **job: Any,
) -> SweepResult:
    """The best plan of one job at several GPU counts: ``scaleplan sweep --json``.

    ``gpus`` is ``"FROM:TO"`` (doubling), ``"FROM:TO:xF"``, ``"FROM:TO:+S"``, ``"64,128,512"`` or a
    list of counts; the global batch is ``gbs`` sequences at every count, or ``gbs_per_gpu`` times
    the GPUs (weak scaling). ``train_tokens`` (and ``gpu_hour_cost``) add each point's days,
    GPU-hours (and cost). ``job`` takes the job's other options as :func:`plan` does: ``fix``,
    ``memory_margin``, ``framework``, ``moe_imbalance``, ``moe_dispatcher``, ``host_launch``,
    ``threads``, ``max_simulations``, ``allow_cross_node_tp`` (every key of
    ``_core.fields("sweep")``; another raises :class:`ScaleplanError`). ``progress`` gets each point
    as it is done: ``{"phase": "point", "done", "total", "point"}``."""
    if not isinstance(gpus, str):
        gpus = ",".join(str(g) for g in gpus)
    args = {k: v for k, v in locals().items() if k != "job"}
    return SweepResult(_command(_core.sweep, {**args, **job}))


def run(
    backend: str = "host",
    steps: int = 5,
    warmup: int = 1,
    timeout: float = 120,
    trace: Optional[str] = None,
    progress: Optional[ProgressCallback] = None,
    **inputs: Any,
) -> RunResult:
    """Executes a layout for real, beside its prediction: ``scaleplan run --json``. ``inputs``
    name the job as :func:`simulate` does (``model``, ``cluster``, ``seq``, ``layout``, or
    ``plan``; ``framework``, ``moe_imbalance``, ``moe_dispatcher``). The ``host``
    backend runs each rank as a CPU thread (a small model: ``llama-tiny``, ``mixtral-tiny``,
    ``deepseek-tiny``); ``cuda`` one rank per GPU. ``steps`` timed steps after ``warmup``; a
    collective waiting longer than ``timeout`` seconds fails; ``trace`` writes the measured
    timeline (for :func:`compare` and :func:`refit`). ``progress`` gets ``{"phase": "executing"}``
    as the execution starts, then ``{"phase": "step", "done", "total"}`` after each step."""
    args = {k: v for k, v in locals().items() if k != "inputs"}
    return RunResult(_command(_core.run, {**args, **inputs}))


def compare(
    predicted: Union[str, "os.PathLike[str]"],
    measured: Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]],
    trace: Optional[str] = None,
) -> CompareResult:
    """A predicted timeline (``simulate(trace=...)``) beside a measured one (PyTorch profiler
    traces, one per rank, or a ``run(trace=...)`` file): ``scaleplan compare --json``. ``trace``
    writes both timelines, rank beside rank, as one Perfetto trace."""
    if isinstance(measured, (str, os.PathLike)):
        measured = [measured]
    return CompareResult(_command(_core.compare, locals()))


def refit(
    profile: Union[str, "os.PathLike[str]"],
    measured: Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]],
    out: Union[str, "os.PathLike[str]"],
    holdout: Optional[float] = None,
) -> RefitResult:
    """Refits a profile's kernel models (``profile(out=...)``, or a bundled roofline profile) to
    the kernel times of ``run(trace=...)`` files or of PyTorch profiler traces recorded with
    ``record_shapes=True``, and writes the result to ``out``: ``scaleplan refit --json``
    (``models`` says how the written profile times each kernel model and memory-bound curve:
    fitted, the profile's own model (``old``) or the roofline a roofline profile keeps where the
    traces do not support a better fit, and why). ``holdout`` is the fraction of the measured shapes left out of the fit to measure the
    error."""
    if isinstance(measured, (str, os.PathLike)):
        measured = [measured]
    return RefitResult(_command(_core.refit, locals()))


def profile(
    out: Union[str, "os.PathLike[str]"],
    backend: str = "host",
    cluster: Optional[ClusterArg] = None,
    quick: bool = False,
    resume: bool = False,
    force_base: bool = False,
    ranks: Optional[int] = None,
    nccl_log: Optional[Union[str, Iterable[str]]] = None,
    progress: Optional[ProgressCallback] = None,
) -> ProfileResult:
    """Calibrates this machine and writes the profile to ``out``: ``scaleplan profile --json``
    (the fitted calibration). ``backend`` ``host`` measures CPU threads as ranks, ``cuda`` the
    GPUs; ``cluster`` is the profile the result extends; ``quick`` measures fewer shapes;
    ``resume`` continues an interrupted run; ``nccl_log`` fits nccl-tests logs with the collective
    measurements. ``progress`` gets ``{"phase": "measure", "done", "total", "point"}`` after every
    measured point, and the notes (the base chosen, a resumed run)."""
    return ProfileResult(_command(_core.profile, locals()))


def cluster(cluster: ClusterArg) -> Cluster:
    """One cluster profile with every field: ``scaleplan cluster show C --json`` (the same as
    :func:`load_cluster`)."""
    return load_cluster(cluster)


def cluster_list() -> ClusterList:
    """The bundled cluster profiles: ``scaleplan cluster list --json``."""
    return ClusterList(_call(_core.cluster_list))
