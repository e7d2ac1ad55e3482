"""The Python package, installed (scripts/test_python.sh: a fresh venv, `pip install .`).

Each function is called once and compared with the installed `scaleplan` command's --json output
for the same options: the module must give what the command gives, not its own numbers."""

import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import scaleplan

REPO = Path(__file__).resolve().parents[2]
CLI = os.path.join(os.path.dirname(sys.executable), "scaleplan")


def cli_json(*args):
    out = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def cli_error(*args):
    """The message the command prints after 'error: ', and its exit code."""
    out = subprocess.run([CLI, *args], capture_output=True, text=True)
    line = [l for l in out.stderr.splitlines() if ": error: " in l][-1]
    return line.split(": error: ", 1)[1], out.returncode


def quick_start_options():
    """The Quick start's `scaleplan plan ...` line of README.md, as (option, value) pairs."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"scaleplan plan (--[^\n`]*)", text)
    assert m, "README.md has no Quick start `scaleplan plan` line"
    words = shlex.split(m.group(1))
    return [(words[i], words[i + 1]) for i in range(0, len(words), 2)]


def test_installed_command_and_data():
    assert os.access(CLI, os.X_OK), f"{CLI}: the scaleplan command is not installed"
    subprocess.run([CLI, "--version"], check=True, capture_output=True)
    data = Path(sys.prefix) / "share" / "scaleplan"
    for rel in ("models/presets/llama3-8b.json", "hw_profiles/bundled/dgx-h100.json"):
        assert (data / rel).is_file(), f"{rel} not installed under {data}"
    assert list((data / "export" / "frameworks").glob("*.json"))
    # The module reads the installed data unless the user points it elsewhere.
    if "SCALEPLAN_TEST_DATA_DIR_GIVEN" not in os.environ:
        assert os.environ["SCALEPLAN_DATA_DIR"] == str(data)


def test_pip_install_leaves_the_source_tree_unchanged():
    # scripts/test_python.sh writes `git status --porcelain --ignored` of the checkout before and
    # after `pip install .`: a build directory (or anything else) written into the tree shows up.
    before, after = os.environ.get("SCALEPLAN_TREE_BEFORE"), os.environ.get("SCALEPLAN_TREE_AFTER")
    if not (before and after):
        pytest.skip("not run by scripts/test_python.sh from a git checkout")
    assert Path(after).read_text() == Path(before).read_text()


def test_plan_equals_cli_for_the_quick_start():
    opts = quick_start_options()
    kwargs = {o.lstrip("-").replace("-", "_"): v for o, v in opts}
    for k in ("gpus", "seq", "gbs", "top"):
        if k in kwargs:
            kwargs[k] = int(kwargs[k])
    assert kwargs["model"] == "llama3-8b"
    # Both on the same thread count: the result does not depend on it, but `threads` reports it.
    r = scaleplan.plan(**kwargs, threads=2)
    expected = cli_json("plan", *[w for o in opts for w in o], "--threads", "2", "--quiet")
    got = r.to_dict()
    for d in (got, expected):
        d.pop("search_s")  # wall time of the search
    assert got == expected
    assert r.plans and r.plans[0].layout == expected["plans"][0]["layout"]
    assert r.plans[0].tokens_per_s_per_gpu == expected["plans"][0]["tokens_per_s_per_gpu"]
    assert r.best is r.plans[0]
    assert 0 < r.plans[0].mfu < 1


def test_plan_time_and_cost_equal_cli():
    args = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq", "4096",
            "--gbs", "64", "--top", "2", "--no-robustness", "--train-tokens", "1T",
            "--gpu-hour-cost", "2.5", "--threads", "2", "--quiet"]
    expected = cli_json("plan", *args)
    r = scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus=16, seq=4096, gbs=64, top=2,
                       no_robustness=True, train_tokens=1e12, gpu_hour_cost=2.5, threads=2)
    got = r.to_dict()
    for d in (got, expected):
        d.pop("search_s")
    assert got == expected
    best = r.plans[0]
    # seconds = tokens / (tokens/s/GPU * GPUs); GPU-hours = GPUs * hours; cost = GPU-hours * price
    assert best.time_to_train_s == pytest.approx(1e12 / (best.tokens_per_s_per_gpu * 16))
    assert best.days_to_train == pytest.approx(best.time_to_train_s / 86400)
    assert best.gpu_hours == pytest.approx(16 * best.time_to_train_s / 3600)
    assert best.cost == pytest.approx(2.5 * best.gpu_hours)


def test_simulate_equals_cli():
    args = dict(model="llama3-8b", cluster="dgx-h100", seq=4096, layout="tp=2,pp=2,dp=2,gbs=16")
    r = scaleplan.simulate(**args)
    expected = cli_json("simulate", *[w for k, v in args.items() for w in (f"--{k}", str(v))])
    assert r.to_dict() == expected
    assert r.gpus == 8 and len(r.breakdown) == 2  # one simulated rank per pipeline stage
    assert r.breakdown[1].stage == 1
    # tokens/s is gbs * seq / iteration (DESIGN.md), per GPU over the 8 GPUs.
    assert r.tokens_per_s == pytest.approx(16 * 4096 / r.iteration_s)
    assert r.tokens_per_s_per_gpu == pytest.approx(r.tokens_per_s / 8)


def test_model_and_load_model():
    r = scaleplan.model("llama3-8b", seq=8192)
    assert r.to_dict() == cli_json("model", "--model", "llama3-8b", "--seq", "8192")
    m = scaleplan.load_model("llama3-8b")
    assert m.source == "llama3-8b" and m.params_total == r.params_total
    assert [p.name for p in scaleplan.model_list().models] == [
        p["name"] for p in cli_json("model", "list")["models"]
    ]


def test_load_model_from_a_dict():
    # A tiny Llama: hidden 64, 2 layers, 4 heads of 16, SwiGLU 128, vocabulary 100, untied.
    # Parameters: embedding and LM head 2*100*64 = 12,800; per layer q, k, v, o 4*64*64 = 16,384,
    # gate, up, down 3*64*128 = 24,576, two RMSNorms 2*64 = 128; the final norm 64:
    # 12,800 + 2*(16,384 + 24,576 + 128) + 64 = 95,040.
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
    }
    m = scaleplan.load_model(config, name="tiny")
    assert m.model == "tiny"
    assert m.params_total == 95040
    # The loaded model is accepted wherever a model is.
    assert scaleplan.model(m, seq=1024).params_total == 95040


def test_load_cluster_and_parse_layout():
    c = scaleplan.load_cluster("dgx-h100")
    assert c.gpus_per_node == 8 and c.source == "dgx-h100"
    assert c.to_dict() == cli_json("cluster", "show", "dgx-h100")
    assert scaleplan.cluster("dgx-h100").to_dict() == c.to_dict()
    l = scaleplan.parse_layout("tp=8,pp=4,dp=2,zero=1")
    assert (l.tp, l.pp, l.dp, l.zero) == (8, 4, 2, 1)
    assert str(l) == l.text and l.text.startswith("tp=8,")


def test_collective_equals_cli():
    r = scaleplan.collective(cluster="dgx-h100", op="all_reduce", ranks=8, bytes="1GiB")
    expected = cli_json("collective", "--cluster", "dgx-h100", "--op", "all_reduce",
                        "--ranks", "8", "--bytes", "1GiB")
    assert r.to_dict() == expected
    row = r.results[0]
    assert row.bytes == 1 << 30
    # Ring all-reduce bus bandwidth = algbw * 2(n-1)/n (nccl-tests doc/PERFORMANCE.md): 7/4 at 8.
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 2 * 7 / 8)


@pytest.mark.parametrize(
    "call, cli_args, field",
    [
        (lambda: scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus=0, seq=4096, gbs=256),
         ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "0", "--seq",
          "4096", "--gbs", "256"], "gpus"),
        (lambda: scaleplan.simulate(model="no-such-model", cluster="dgx-h100", seq=4096,
                                    layout="tp=8"),
         ["simulate", "--model", "no-such-model", "--cluster", "dgx-h100", "--seq", "4096",
          "--layout", "tp=8"], "model"),
        (lambda: scaleplan.simulate(model="llama3-8b", cluster="dgx-h100", seq=4096,
                                    layout="tp=3"),
         ["simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--seq", "4096",
          "--layout", "tp=3"], "layout"),
        (lambda: scaleplan.plan(model="llama3-8b", cluster="dgx-h100", seq=4096, gbs=256,
                                deadline="60d"),
         ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--seq", "4096", "--gbs",
          "256", "--deadline", "60d"], "deadline"),
        (lambda: scaleplan.sweep(model="llama3-8b", cluster="dgx-h100", gpus="8:32", seq="4q",
                                 gbs=64),
         ["sweep", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8:32", "--seq",
          "4q", "--gbs", "64"], "seq"),
        (lambda: scaleplan.run(model="llama-tiny", cluster="dgx-h100", seq=256, layout="tp=3"),
         ["run", "--model", "llama-tiny", "--cluster", "dgx-h100", "--seq", "256", "--layout",
          "tp=3"], "layout"),
        (lambda: scaleplan.collective(cluster="dgx-h100", ranks=8, op="all_sum"),
         ["collective", "--cluster", "dgx-h100", "--ranks", "8", "--op", "all_sum"], None),
    ],
)
def test_errors_carry_the_clis_message_and_field(call, cli_args, field):
    with pytest.raises(scaleplan.ScaleplanError) as info:
        call()
    message, code = cli_error(*cli_args)
    assert code == 2
    assert info.value.message == message
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)
    if field is not None:
        assert info.value.field == field
    assert info.value.code in ("invalid", "not_found")


def test_wrong_argument_type_names_the_field():
    with pytest.raises(scaleplan.ScaleplanError) as info:
        scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus=64, seq=4096, gbs=256,
                       top="five")
    assert info.value.field == "top"
    assert "integer" in info.value.message
    with pytest.raises(scaleplan.ScaleplanError) as info:
        scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus=[64], seq=4096, gbs=256)
    assert info.value.field == "gpus"
    assert "count" in info.value.message


def test_counts_take_the_clis_suffixes():
    # "4k" is 4096 tokens and "1T" 10^12 tokens (decimal for budgets), as on the command line.
    args = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq", "4k",
            "--gbs", "64", "--top", "2", "--no-robustness", "--train-tokens", "1T",
            "--threads", "2", "--quiet"]
    expected = cli_json("plan", *args)
    r = scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus="16", seq="4k", gbs=64,
                       top=2, no_robustness=True, train_tokens="1T", threads=2)
    got = r.to_dict()
    for d in (got, expected):
        d.pop("search_s")
    assert got == expected
    assert r.seq == 4096
    assert r.plans[0].time_to_train_s == pytest.approx(1e12 / (r.plans[0].tokens_per_s_per_gpu * 16))
    # An integer and its suffixed form are the same request.
    assert scaleplan.model("llama3-8b", seq="8k").to_dict() == scaleplan.model("llama3-8b", seq=8192).to_dict()
    sim = scaleplan.simulate(model="llama3-8b", cluster="dgx-h100", seq="4k", gpus="8",
                             layout="tp=2,pp=2,gbs=16")
    assert sim.to_dict() == cli_json("simulate", "--model", "llama3-8b", "--cluster", "dgx-h100",
                                     "--seq", "4k", "--gpus", "8", "--layout", "tp=2,pp=2,gbs=16")


@pytest.mark.parametrize("value", ["4q", "-1", "1.5"])
def test_a_bad_count_fails_as_on_the_command_line(value):
    with pytest.raises(scaleplan.ScaleplanError) as info:
        scaleplan.model("llama3-8b", seq=value)
    message, code = cli_error("model", "--model", "llama3-8b", "--seq", value)
    assert code == 2
    assert info.value.message == message
    assert info.value.field == "seq"


def test_results_read_the_json_by_key_and_attribute():
    r = scaleplan.simulate(model="llama3-8b", cluster="dgx-h100", seq=4096, layout="tp=8,gbs=8")
    d = r.to_dict()
    assert r.iteration_s == d["iteration_s"] == r["iteration_s"]
    assert r.breakdown[0].total == d["breakdown"][0]["total"]
    assert set(r.keys()) == set(d)
    # A key printed only when asked for reads as None; a misspelt one fails.
    assert r.how_sure is None
    with pytest.raises(AttributeError):
        r.iteration_seconds
    # The result holds the object, not a copy per read: to_dict() is a copy.
    d["iteration_s"] = -1
    assert r.iteration_s != -1


def test_progress_callback_and_its_exception():
    events = []
    scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus=64, seq=4096, gbs=256,
                   no_robustness=True, progress=events.append)
    assert events and events[-1]["phase"] == "done"
    assert {"candidates", "simulated", "best_layout"} <= set(events[-1])

    def fail(event):
        raise KeyError("stop")

    with pytest.raises(KeyError):
        scaleplan.plan(model="llama3-8b", cluster="dgx-h100", gpus=64, seq=4096, gbs=256,
                       no_robustness=True, progress=fail)


def test_gil_is_released_during_a_plan():
    # While the native search runs on another thread, this thread must keep running: with the
    # GIL held for the whole call, no tick could land inside it.
    span = {}

    def work():
        span["start"] = time.monotonic()
        scaleplan.plan(model="llama3-70b", cluster="dgx-h100", gpus=256, seq=4096, gbs=512,
                       threads=1)
        span["end"] = time.monotonic()

    t = threading.Thread(target=work)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.monotonic())
        time.sleep(0.005)
    t.join()
    assert span["end"] - span["start"] > 0.2, "the call was too short to tell"
    inside = [x for x in ticks if span["start"] + 0.05 < x < span["end"] - 0.05]
    assert inside, "no Python code ran while the native call was in flight"


def test_memory_equals_cli():
    args = dict(model="llama3-8b", cluster="dgx-h100", seq=4096, layout="tp=2,pp=2,dp=2,zero=1")
    r = scaleplan.memory(**args)
    assert r.to_dict() == cli_json("memory", *[w for k, v in args.items() for w in (f"--{k}", str(v))])
    assert len(r.stages) == 2  # one per pipeline stage
    assert r.fits == (r.headroom_bytes >= 0)


def test_validate_equals_cli(tmp_path):
    # One record that ran and one that ran out of memory (64 sequences of 4096 tokens per GPU of
    # a 1.5B model do not fit in 80 GB), as tests/cli/simulate_cli_test.cc writes them.
    model = {"model_type": "llama", "hidden_act": "silu", "hidden_size": 2048,
             "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
             "num_key_value_heads": 32, "vocab_size": 131072, "tie_word_embeddings": True}
    records = [
        {"id": "dp64", "framework": "nanotron", "model": model, "cluster": "dgx-h100",
         "gpus": 64, "seq_len": 4096, "layout": "tp=1,pp=1,dp=64,mbs=1,gbs=128",
         "measured": {"status": "ok", "tokens_per_s_per_gpu": 30000}},
        {"id": "oom", "framework": "nanotron", "model": model, "cluster": "dgx-h100",
         "gpus": 8, "seq_len": 4096, "layout": "tp=1,pp=1,dp=8,mbs=64,gbs=512",
         "measured": {"status": "oom"}},
    ]
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    events = []
    r = scaleplan.validate(path, threads=1, progress=events.append)
    assert r.to_dict() == cli_json("validate", str(path), "--threads", "1", "--quiet")
    assert r.records == 2 and r.rows[1].id == "oom" and r.rows[1].predicted_fits is False
    # Throughput = gbs * seq / (gpus * iteration), the iteration being the stage's total.
    row = r.rows[0]
    assert row.predicted == pytest.approx(128 * 4096 / (64 * row.breakdown[0].total), rel=1e-6)


def without(d, *keys):
    """A --json object without its wall-clock keys (at any depth)."""
    if isinstance(d, dict):
        return {k: without(v, *keys) for k, v in d.items() if k not in keys}
    if isinstance(d, list):
        return [without(v, *keys) for v in d]
    return d


def same_shape(a, b):
    """The same keys at every depth (lists: the same length), whatever the measured values."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_shape(x, y) for x, y in zip(a, b))
    return type(a) == type(b) or {type(a), type(b)} <= {int, float}


def test_sweep_equals_cli():
    args = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8:32", "--seq", "4k",
            "--gbs", "64", "--train-tokens", "1T", "--threads", "2", "--quiet"]
    expected = cli_json("sweep", *args)
    r = scaleplan.sweep(model="llama3-8b", cluster="dgx-h100", gpus="8:32", seq="4k", gbs=64,
                        train_tokens="1T", threads=2)
    assert without(r.to_dict(), "search_s", "sweep_s") == without(expected, "search_s", "sweep_s")
    # Doubling from 8 to 32: three points, each the best plan at its count.
    assert [p.gpus for p in r.points] == [8, 16, 32]
    events = []
    again = scaleplan.sweep(model="llama3-8b", cluster="dgx-h100", gpus=[8, 16, 32], seq=4096,
                            gbs=64, train_tokens=10**12, threads=2, progress=events.append)
    assert again.points[2].layout == r.points[2].layout
    # One event per point, in order, each with the point the result holds.
    points = [e for e in events if e["phase"] == "point"]
    assert [(e["done"], e["total"]) for e in points] == [(1, 3), (2, 3), (3, 3)]
    assert [e["point"]["layout"] for e in points] == [p.layout for p in again.points]


def fields(command):
    return [f["name"] for f in json.loads(scaleplan._core.fields(command))]


def test_keyword_arguments_are_the_commands_fields():
    # simulate and sweep read their requests with the command line's field table (api/fields.h):
    # simulate's keyword arguments are its fields, sweep's named ones are fields and the rest
    # (**job) is checked by the table.
    params = lambda fn: [p for p in inspect.signature(fn).parameters if p != "progress"]
    assert sorted(params(scaleplan.simulate)) == sorted(fields("simulate"))
    named = [p for p in params(scaleplan.sweep) if p != "job"]
    assert set(named) <= set(fields("sweep"))
    with pytest.raises(scaleplan.ScaleplanError) as info:
        scaleplan.sweep(model="llama3-8b", cluster="dgx-h100", gpus="8", seq=4096, gbs=64,
                        max_simulation=10)
    assert "max_simulation" in info.value.message and "max_simulations" in info.value.message
    # A number for a value the command line reads as text with a unit is that text.
    job = dict(model="mixtral-tiny", cluster="dgx-h100", seq=256, layout="tp=1,gbs=8", gpus=8)
    assert (scaleplan.simulate(**job, moe_imbalance=1.5).to_dict()
            == scaleplan.simulate(**job, moe_imbalance="1.5").to_dict())


def test_cluster_list_equals_cli():
    assert scaleplan.cluster_list().to_dict() == cli_json("cluster", "list")


@pytest.fixture(scope="module")
def host_run(tmp_path_factory):
    """A host calibration (quick), a host run of a tiny model on it with its trace, and the
    prediction's trace: what profile, run, compare and refit are tested with."""
    d = tmp_path_factory.mktemp("host")
    prof = d / "host.json"
    profiled = scaleplan.profile(out=prof, backend="host", quick=True)
    job = dict(model="llama-tiny", cluster=str(prof), seq=256, layout="tp=2,pp=2,gbs=4")
    events = []
    ran = scaleplan.run(**job, steps=2, warmup=1, trace=str(d / "run.json"), progress=events.append)
    scaleplan.simulate(**job, trace=str(d / "predicted.json"))
    return d, prof, profiled, job, ran, events


def test_profile_host_returns_what_it_wrote_and_the_clis_keys(host_run):
    d, prof, r = host_run[:3]
    written = json.loads(prof.read_text())["calibration"]
    for key in ("gemm", "memory_bound", "collectives", "backend", "device"):
        assert r[key] == written[key]
    assert r.backend == "host"
    # Measured again by the command: other times, the same keys.
    expected = cli_json("profile", "--backend", "host", "--quick", "--out", str(d / "cli.json"))
    assert r.keys() == list(expected)


def test_run_host_equals_cli_but_for_what_it_measures(host_run):
    d, _, _, job, r, events = host_run
    # "executing" once, then one "step" per step, warm-up included.
    phases = [e["phase"] for e in events if e["phase"] != "note"]
    assert phases == ["executing", "step", "step", "step"]
    assert [e["done"] for e in events if e["phase"] == "step"] == [1, 2, 3]
    expected = cli_json("run", *[w for k, v in job.items() for w in (f"--{k}", str(v))],
                        "--steps", "2", "--warmup", "1", "--quiet")
    got = r.to_dict()
    assert same_shape(got, expected)
    # The prediction and the job are not measured: equal to the command's.
    for key in ("predicted", "layout", "model", "seq", "gpus", "backend", "steps", "warmup"):
        assert got[key] == expected[key], key
    assert r.iteration_error == pytest.approx(r.predicted["iteration_s"] / r.measured["iteration_s"] - 1)


def test_compare_equals_cli(host_run):
    d = host_run[0]
    pred, meas = d / "predicted.json", d / "run.json"
    r = scaleplan.compare(predicted=pred, measured=meas)
    assert r.to_dict() == cli_json("compare", "--predicted", str(pred), "--measured", str(meas))


def test_refit_equals_cli(host_run):
    d, prof = host_run[0], host_run[1]
    r = scaleplan.refit(profile=prof, measured=d / "run.json", out=d / "refit.json")
    expected = cli_json("refit", "--profile", str(prof), "--measured", str(d / "run.json"),
                        "--out", str(d / "refit-cli.json"))
    assert without(r.to_dict(), "out") == without(expected, "out")
    assert json.loads((d / "refit.json").read_text()) == json.loads((d / "refit-cli.json").read_text())
