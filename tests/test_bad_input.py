"""Nonsense at every door of the command line: refused with exit 1 and a message naming the
valid choices, before anything runs or is written (issue 11, point 8).

Each case runs the real CLI entry point (`dlperf.cli.main`, argv and all) in this process, in
an empty folder with its own DLPERF_HOME, and checks: exit code 1, the expected words, and
that no file or folder appeared (no results folder, no result, no env, no report).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dlperf.assemble import build_result
from dlperf.schema import BenchmarkSpec, Environment, Repeat, RepeatStatus, Window
from dlperf.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"

CAL = ["run", "calibration", "pace", "--preset", "smoke"]
TORCH = ["run", "pytorch", "resnet50", "--preset", "smoke", "--dry-run"]
JAX = ["run", "jax", "resnet50", "--preset", "smoke", "--dry-run"]
INFER = [*CAL, "--mode", "infer", "--scenario", "offline"]
LONG = "1" * 300
SWEEP = '[sweep]\npreset = "smoke"\nframeworks = ["calibration"]\nmodels = ["pace"]\n'
A_FILE = {"afile": "not a folder"}
A_DIR = {"adir/x": "a folder"}
STORED = {"stored": None}  # a results folder holding one ok result (made by the fixture)


def sweep(extra: str = "", base: str = SWEEP) -> dict[str, str | None]:
    return {"m.toml": base + extra}


def bad(name: str, args: list[str], message: str, files: dict | None = None):
    return pytest.param(args, files or {}, message, id=name)


RUN = [
    # names: framework, model, preset, device, impl, mode, scenario, launcher
    bad("unknown framework", ["run", "caffe", "resnet50"], "known frameworks: calibration, "),
    bad("empty framework", ["run", "", "pace"], "known frameworks: calibration, "),
    bad("unknown model", ["run", "calibration", "nosuch"], "its models: pace"),
    bad("unknown preset", [*CAL, "--preset", "fast"],
        "--preset takes dlperf or smoke, not 'fast'; give one of them"),
    bad("empty preset", [*CAL, "--preset", ""], "--preset takes dlperf or smoke, not ''"),
    bad("unknown device", [*CAL, "--device", "tpu"], "--device takes cpu or cuda, not 'tpu'"),
    bad("unknown impl", [*CAL, "--impl", "nosuch"],
        "--impl takes ootb, official or micro, not 'nosuch'"),
    bad("official calibration", [*CAL, "--impl", "official"], "no official implementation"),
    bad("micro resnet", [*TORCH, "--impl", "micro"], "--impl micro runs microbenchmarks"),
    bad("ootb micro model", ["run", "pytorch", "linear", "--impl", "ootb"], "--impl micro only"),
    bad("source without official", [*TORCH, "--source", "x"], "add --impl official"),
    bad("profile without official", [*TORCH, "--profile", "current"],
        "--profile picks an official implementation; add --impl official"),
    bad("source of another profile", [*TORCH, "--impl", "official", "--source",
                                      "pytorch-examples-resnet50", "--profile", "current"],
        "is in profile dlperf-2020, not current"),
    bad("unknown source", [*TORCH, "--impl", "official", "--source", "nosuch"], "known: "),
    bad("unknown mode", [*CAL, "--mode", "predict"], "--mode takes train or infer, not 'predict'"),
    bad("unknown scenario", [*CAL, "--mode", "infer", "--scenario", "x"],
        "--scenario takes offline, server, singlestream or multistream, not 'x'"),
    bad("unknown launcher", [*CAL, "--launcher", "pbs"],
        "--launcher takes local, ssh, slurm or mpirun, not 'pbs'"),
    bad("unknown flag", [*CAL, "--no-such-flag"], "No such option"),
    bad("missing model", ["run", "calibration"], "Missing argument"),
    # numbers: types, ranges, non-finite, huge
    bad("batch 0", [*CAL, "--batch-size", "0"],
        "--batch-size 0 is below 1: give --batch-size 1 or more"),
    bad("batch -1", [*CAL, "--batch-size", "-1"], "--batch-size -1 is below 1"),
    bad("batch abc", [*CAL, "--batch-size", "abc"],
        "--batch-size 'abc' is not a whole number: give --batch-size a whole"),
    bad("batch huge", [*CAL, "--batch-size", "9" * 20],
        "--batch-size 99999999999999999999 is above 2147483647, the most dlperf takes"),
    bad("image size 0", [*TORCH, "--image-size", "0"], "--image-size 0 is below 1"),
    bad("seq len -1", ["run", "pytorch", "bert", "--seq-len", "-1"], "--seq-len -1 is below 1"),
    bad("image size for bert", ["run", "pytorch", "bert", "--image-size", "64"],
        "bert has no image size: --image-size applies to resnet101"),
    bad("seq len for resnet", [*TORCH, "--seq-len", "64"], "resnet50 has no sequence length"),
    bad("image size for pace", [*CAL, "--image-size", "64"], "pace has no image size"),
    bad("skip -1", [*CAL, "--skip", "-1"], "--skip -1 is below 0: give --skip 0 or more"),
    bad("measure 0", [*CAL, "--measure", "0"], "--measure 0 is below 1"),
    bad("measure huge", [*CAL, "--measure", "99999999999999"],
        "--measure 99999999999999 is above 1000000"),
    bad("repeats 0", [*CAL, "--repeats", "0"], "--repeats 0 is below 1"),
    bad("repeats huge", [*CAL, "--repeats", "100000000"], "--repeats 100000000 is above 1000,"),
    bad("nodes 0", [*CAL, "--nodes", "0"], "--nodes 0 is below 1"),
    bad("nodes huge", [*CAL, "--nodes", "100000", "--dry-run"], "--nodes 100000 is above 65536"),
    bad("devices per node -1", [*CAL, "--devices-per-node", "-1"],
        "--devices-per-node -1 is below 1"),
    bad("timeout 0", [*CAL, "--timeout", "0"],
        "--timeout 0 is too small: give --timeout a number above 0"),
    bad("timeout nan", [*CAL, "--timeout", "nan"], "--timeout nan is not a finite number"),
    bad("timeout inf", [*CAL, "--timeout", "inf"], "--timeout inf is not a finite number"),
    bad("timeout abc", [*CAL, "--timeout", "abc"],
        "--timeout 'abc' is not a number: give --timeout a number"),
    bad("no-output timeout -1", [*CAL, "--no-output-timeout", "-1"],
        "--no-output-timeout -1 is too small"),
    # inference and LoadGen settings
    bad("latency target, training", [*CAL, "--latency-target-ms", "5"], "add --mode infer"),
    bad("latency target -1", [*CAL, "--mode", "infer", "--latency-target-ms", "-1"],
        "--latency-target-ms -1 is too small: give --latency-target-ms a number above 0"),
    bad("latency target nan", [*CAL, "--mode", "infer", "--latency-target-ms", "nan"],
        "--latency-target-ms nan is not a finite number"),
    bad("scenario, training", [*CAL, "--scenario", "offline"], "add --mode infer"),
    bad("target qps -1", [*INFER, "--target-qps", "-1"], "must be finite numbers > 0"),
    bad("target qps 0", [*INFER, "--target-qps", "0"], "must be finite numbers > 0"),
    bad("target qps nan", [*INFER, "--target-qps", "nan"], "must be finite numbers > 0"),
    bad("target qps, no scenario", [*CAL, "--mode", "infer", "--target-qps", "5"],
        "need --scenario"),
    bad("min duration -1", [*INFER, "--min-duration-s", "-1"], "must be finite numbers > 0"),
    bad("max duration < min", [*INFER, "--min-duration-s", "5", "--max-duration-s", "1"],
        "--min-duration-s 5 > --max-duration-s 1: the minimum must not exceed the maximum"),
    bad("min query count 0", [*INFER, "--min-query-count", "0"], "must be finite numbers > 0"),
    bad("max query < min", [*INFER, "--min-query-count", "10", "--max-query-count", "2"],
        "the minimum must not exceed the maximum"),
    bad("samples per query 0", [*INFER, "--samples-per-query", "0"], "finite numbers > 0"),
    # --set: syntax, names, and each workload's declared types and ranges
    bad("set without =", [*CAL, "--set", "nope"], "--set expects KEY=VALUE"),
    bad("set empty key", [*CAL, "--set", "=5"], "--set expects KEY=VALUE"),
    bad("set unknown key", [*CAL, "--set", "nope=1"], "valid keys: clock_scale, crash_at_step"),
    bad("set typo", [*CAL, "--set", "stepms=5"], "unknown --set key(s) for calibration pace"),
    bad("set 300-char key", [*CAL, "--set", f"{'k' * 300}=1"], "valid keys: "),
    bad("set twice", [*CAL, "--set", "step_ms=5", "--set", "step_ms=10"],
        "--set step_ms is given twice (5, 10); give it once"),
    bad("step_ms -5", [*CAL, "--set", "step_ms=-5"], "step_ms takes a number > 0 and <="),
    bad("step_ms 0", [*CAL, "--set", "step_ms=0"], "step_ms takes a number > 0"),
    bad("step_ms abc", [*CAL, "--set", "step_ms=abc"], "step_ms takes a number > 0"),
    bad("step_ms nan", [*CAL, "--set", "step_ms=nan"], "step_ms takes a number > 0"),
    bad("step_ms inf", [*CAL, "--set", "step_ms=inf"], "step_ms takes a number > 0"),
    bad("step_ms empty", [*CAL, "--set", "step_ms="], "step_ms takes a number > 0"),
    bad("step_ms 300 chars", [*CAL, "--set", f"step_ms={LONG}"], "step_ms takes a number > 0"),
    bad("crash_at_step 0", [*CAL, "--set", "crash_at_step=0"], "an integer >= 1"),
    bad("crash_at_step 1.5", [*CAL, "--set", "crash_at_step=1.5"], "an integer >= 1"),
    bad("garbage_every 0", [*CAL, "--set", "garbage_every=0"], "an integer >= 1"),
    bad("clock_scale -1", [*CAL, "--set", "clock_scale=-1"], "clock_scale takes a number >= 0"),
    bad("flops_per_sample -1", [*CAL, "--set", "flops_per_sample=-1"], "a number >= 0"),
    bad("fault_rank -1", [*CAL, "--set", "fault_rank=-1"], "fault_rank takes an integer >= 0"),
    bad("fault_rank 5 of 1 rank", [*CAL, "--set", "fault_rank=5"],
        "--set fault_rank=5: the run has 1 rank, numbered from 0 (--nodes 1 x --devices-per-node "
        "1); give a rank below 1"),
    bad("slow_rank 2 of 2 ranks", [*CAL, "--devices-per-node", "2", "--set", "slow_rank=2",
                                   "--dry-run"], "the run has 2 ranks"),
    bad("pytorch threads 0", [*TORCH, "--set", "threads=0"], "threads takes an integer >= 1"),
    bad("pytorch threads two", [*TORCH, "--set", "threads=two"], "threads takes an integer"),
    bad("pytorch channels_last yes", [*TORCH, "--set", "channels_last=yes"],
        "channels_last takes one of 0, 1"),
    bad("pytorch sdpa on resnet", [*TORCH, "--set", "sdpa=1"], "valid keys: channels_last"),
    bad("pytorch seed -1", [*TORCH, "--set", "seed=-1"], "seed takes an integer >= 0"),
    bad("tensorflow data_format NHWC",
        ["run", "tensorflow", "resnet50", "--dry-run", "--set", "data_format=NHWC"],
        "data_format takes one of channels_last, channels_first"),
    bad("tensorflow gpu_thread_mode",
        ["run", "tensorflow", "bert", "--dry-run", "--set", "gpu_thread_mode=x"],
        "gpu_thread_mode takes one of global, gpu_private, gpu_shared"),
    bad("paddle amp_level O3", ["run", "paddle", "bert", "--dry-run", "--set", "amp_level=O3"],
        "amp_level takes one of O1, O2"),
    bad("paddle data_format nchw",
        ["run", "paddle", "resnet50", "--dry-run", "--set", "data_format=nchw"],
        "data_format takes one of NCHW, NHWC"),
    bad("paddle workspace -1",
        ["run", "paddle", "resnet50", "--dry-run", "--set", "conv_workspace_size_limit=-1"],
        "conv_workspace_size_limit takes an integer >= 1"),
    bad("mxnet cudnn_autotune 3",
        ["run", "mxnet", "resnet50", "--dry-run", "--set", "cudnn_autotune=3"],
        "cudnn_autotune takes one of 0, 1, 2"),
    bad("mxnet optimizer_aggregation 0",
        ["run", "mxnet", "resnet50", "--dry-run", "--set", "optimizer_aggregation=0"],
        "optimizer_aggregation takes an integer >= 1 and <= 60"),
    bad("mxnet conv_layout NWHC",
        ["run", "mxnet", "resnet50", "--dry-run", "--set", "conv_layout=NWHC"],
        "conv_layout takes one of NCHW, NHWC"),
    bad("oneflow cudnn_conv_algo",
        ["run", "oneflow", "resnet50", "--dry-run", "--set", "cudnn_conv_algo=fast"],
        "cudnn_conv_algo takes one of heuristic, search"),
    bad("oneflow fuse_bn_relu 2",
        ["run", "oneflow", "resnet50", "--dry-run", "--set", "fuse_bn_relu=2"],
        "fuse_bn_relu takes one of 0, 1"),
    bad("jax unknown key", [*JAX, "--set", "nope=1"],
        "unknown --set key(s) for jax resnet50: nope; valid keys: amp_dtype, donate, "
        "latency_hiding_scheduler, seed, threads"),
    bad("jax amp_dtype fp8", [*JAX, "--amp", "--set", "amp_dtype=fp8"],
        "--set amp_dtype='fp8' is not valid for jax resnet50: amp_dtype takes one of bfloat16, "
        "float16"),
    bad("jax donate yes", ["run", "jax", "bert", "--dry-run", "--set", "donate=yes"],
        "donate takes one of 0, 1"),
    bad("jax micro donate", ["run", "jax", "linear", "--dry-run", "--set", "donate=1"],
        "valid keys: in_features, layers, out_features, seed, threads"),
    bad("micro layers 0", ["run", "pytorch", "linear", "--dry-run", "--set", "layers=0"],
        "layers takes an integer >= 1"),
    bad("micro bag_size on linear",
        ["run", "pytorch", "linear", "--dry-run", "--set", "bag_size=3"], "valid keys: in_feat"),
    bad("micro num_embeddings x",
        ["run", "pytorch", "embeddingbag", "--dry-run", "--set", "num_embeddings=x"],
        "num_embeddings takes an integer >= 1"),
    bad("set on official", [*TORCH, "--impl", "official", "--profile", "dlperf-2020", "--set",
                            "threads=1"],
        "an official implementation takes its settings from its manifest"),
    # paths: empty, missing, a file for a folder and the reverse, unwritable
    bad("results dir empty", [*CAL, "--results-dir", ""], "an empty path; give a folder"),
    bad("results dir is a file", [*CAL, "--results-dir", "afile"], "afile is a file; give a",
        A_FILE),
    bad("results dir under a file", [*CAL, "--results-dir", "afile/sub"], "cannot be written",
        A_FILE),
    bad("results dir unwritable", [*CAL, "--results-dir", "/proc/dlperf-results"],
        "cannot be written"),
    bad("sources dir missing", [*TORCH, "--impl", "official", "--sources-dir", "nosuch"],
        "nosuch does not exist; give an existing folder"),
    bad("sources dir is a file", [*TORCH, "--impl", "official", "--sources-dir", "afile"],
        "afile is a file; give a folder", A_FILE),
    bad("sources dir, ootb", [*CAL, "--sources-dir", "adir"],
        "--sources-dir applies to --impl official", A_DIR),
    bad("data dir, ootb", [*CAL, "--data-dir", "adir"], "--data-dir applies to --impl official",
        A_DIR),
    bad("data dir, ootb, dry run", [*TORCH, "--data-dir", "adir"], "add --impl official", A_DIR),
    bad("sbatch is a folder", [*CAL, "--sbatch", "adir"], "adir is a folder; give a file", A_DIR),
    bad("sbatch empty", [*CAL, "--sbatch", ""], "an empty path; give a file"),
    bad("python missing", [*CAL, "--python", "/nonexistent/python"], "does not exist"),
    bad("python is a folder", [*CAL, "--python", "adir"], "adir is a folder; give a file",
        A_DIR),
    bad("python not executable", [*CAL, "--python", "afile"], "is not executable", A_FILE),
    bad("python empty", [*CAL, "--python", ""], "an empty path; give a file"),
    # hosts and devices
    bad("hosts, local launcher", [*CAL, "--hosts", "a,b"], "--launcher local runs every node"),
    bad("hosts not host names",
        [*CAL, "--nodes", "2", "--launcher", "ssh", "--hosts", "-oProxy=x,b", "--dry-run"],
        "is not a host name"),
    bad("hosts only commas", [*CAL, "--nodes", "2", "--launcher", "ssh", "--hosts", ",,"],
        "needs the nodes' addresses"),
    bad("hosts fewer than nodes",
        [*CAL, "--nodes", "3", "--launcher", "ssh", "--hosts", "a,b", "--dry-run"],
        "--nodes 3 but --hosts lists 2"),
]  # fmt: skip

SWEEPS = [
    bad("file missing", ["sweep", "nosuch.toml"], "nosuch.toml does not exist"),
    bad("file is a folder", ["sweep", "adir"], "adir is a folder; give a file", A_DIR),
    bad("not TOML", ["sweep", "m.toml"], "cannot read the sweep file", {"m.toml": "x ["}),
    bad("no [sweep] table", ["sweep", "m.toml"], "needs a [sweep] table",
        {"m.toml": "[sweeps]\nframeworks = ['calibration']\n"}),
    bad("top-level key", ["sweep", "m.toml"], "unknown top-level key(s) frameworks",
        sweep(base="frameworks = ['x']\n" + SWEEP)),
    bad("top-level table", ["sweep", "m.toml"], "unknown top-level key(s) other",
        sweep("[other]\nx = 1\n")),
    bad("unknown key", ["sweep", "m.toml"], "unknown key(s) framework; known: batch_sizes",
        sweep("framework = ['calibration']\n")),
    bad("frameworks empty", ["sweep", "m.toml"], "frameworks is an empty list",
        sweep(base=SWEEP.replace('["calibration"]', "[]"))),
    bad("models empty", ["sweep", "m.toml"], "models is an empty list",
        sweep(base=SWEEP.replace('["pace"]', "[]"))),
    bad("models missing", ["sweep", "m.toml"], "models is missing",
        sweep(base=SWEEP.replace('models = ["pace"]\n', ""))),
    bad("unknown model", ["sweep", "m.toml"], "unknown model 'nosuch'; known models: bert",
        sweep(base=SWEEP.replace('["pace"]', '["nosuch"]'))),
    bad("nothing to run", ["sweep", "m.toml"], "no configuration to run: calibration has no "
        "resnet50", sweep(base=SWEEP.replace('["pace"]', '["resnet50"]'))),
    bad("unknown framework", ["sweep", "m.toml"], "known frameworks: calibration",
        sweep(base=SWEEP.replace('["calibration"]', '["caffe"]'))),
    bad("framework a number", ["sweep", "m.toml"], "frameworks = 5: Input should be a valid "
        "string", sweep(base=SWEEP.replace('["calibration"]', "5"))),
    bad('xla = "no"', ["sweep", "m.toml"], 'xla = "no": Input should be a valid boolean: write '
        "true or false, without quotes", sweep('xla = "no"\n')),
    bad('xla = ["false"]', ["sweep", "m.toml"], "valid boolean", sweep('xla = ["false"]\n')),
    bad("xla = 1", ["sweep", "m.toml"], "xla = 1: Input should be a valid boolean",
        sweep("xla = 1\n")),
    bad("xla = []", ["sweep", "m.toml"], "xla is an empty list", sweep("xla = []\n")),
    bad("precision fp16", ["sweep", "m.toml"], "Input should be 'fp32' or 'amp'",
        sweep('precisions = ["fp16"]\n')),
    bad("precisions empty", ["sweep", "m.toml"], "precisions is an empty list",
        sweep("precisions = []\n")),
    bad("batch 0", ["sweep", "m.toml"], "batch_sizes 0 is below 1: give batch_sizes 1 or more",
        sweep("batch_sizes = [0]\n")),
    bad('batch "8"', ["sweep", "m.toml"], "write a whole number, without quotes",
        sweep('batch_sizes = ["8"]\n')),
    bad("batch 2.5", ["sweep", "m.toml"], "batch_sizes = 2.5: Input should be a valid integer",
        sweep("batch_sizes = [2.5]\n")),
    bad("batch true", ["sweep", "m.toml"], "batch_sizes = true: Input should be a valid integer",
        sweep("batch_sizes = [true]\n")),
    bad('node shape "2"', ["sweep", "m.toml"], "must look like 1x1 (nodes x devices)",
        sweep('node_shapes = ["2"]\n')),
    bad('node shape "0x1"', ["sweep", "m.toml"], "node_shapes' nodes 0 is below 1",
        sweep('node_shapes = ["0x1"]\n')),
    bad("node shape 11", ["sweep", "m.toml"], "node_shapes = 11: Input should be a valid string",
        sweep("node_shapes = [11]\n")),
    bad("repeats 0", ["sweep", "m.toml"], "repeats 0 is below 1: give repeats 1 or more",
        sweep("repeats = 0\n")),
    bad('repeats "3"', ["sweep", "m.toml"], 'repeats = "3": Input should be a valid integer',
        sweep('repeats = "3"\n')),
    bad("repeats list", ["sweep", "m.toml"], "repeats = [1, 2]: Input should be a valid integer",
        sweep("repeats = [1, 2]\n")),
    bad("skip -1", ["sweep", "m.toml"], "skip -1 is below 0: give skip 0 or more",
        sweep("skip = -1\n")),
    bad("measure 2.5", ["sweep", "m.toml"], "measure = 2.5: Input should be a valid integer",
        sweep("measure = 2.5\n")),
    bad("device tpu", ["sweep", "m.toml"], "Input should be 'cpu' or 'cuda'",
        sweep('device = "tpu"\n')),
    bad("device list", ["sweep", "m.toml"], "Input should be 'cpu' or 'cuda'",
        sweep('device = ["cpu"]\n')),
    bad("preset fast", ["sweep", "m.toml"], "Input should be 'dlperf' or 'smoke'",
        sweep(base=SWEEP.replace('"smoke"', '"fast"'))),
    bad("timeout -1", ["sweep", "m.toml"],
        "timeout_s -1 is too small: give timeout_s a number above 0",
        sweep("timeout_s = -1\n")),
    bad("timeout nan", ["sweep", "m.toml"], "timeout_s nan is not a finite number",
        sweep("timeout_s = nan\n")),
    bad('timeout "10"', ["sweep", "m.toml"], 'timeout_s = "10": Input should be a valid number',
        sweep('timeout_s = "10"\n')),
    bad("no-output timeout 0", ["sweep", "m.toml"], "no_output_timeout_s 0 is too small",
        sweep("no_output_timeout_s = 0\n")),
    bad("set not a table", ["sweep", "m.toml"], "write it as a table, such as [sweep.set]",
        sweep('set = "step_ms=5"\n')),
    bad("set typo", ["sweep", "m.toml"], "[sweep.set] key(s) stepms are taken by none of the "
        "sweep's workloads; their keys: clock_scale", sweep('[sweep.set]\nstepms = ["5"]\n')),
    bad("set step_ms -5", ["sweep", "m.toml"], "step_ms takes a number > 0",
        sweep('[sweep.set]\nstep_ms = ["-5"]\n')),
    bad("set step_ms 0", ["sweep", "m.toml"], "step_ms takes a number > 0",
        sweep("[sweep.set]\nstep_ms = 0\n")),
    bad("set empty list", ["sweep", "m.toml"], "set.step_ms is an empty list",
        sweep("[sweep.set]\nstep_ms = []\n")),
    bad("set table value", ["sweep", "m.toml"], "a workload option is text or a number",
        sweep("[sweep.set]\nstep_ms = {a = 1}\n")),
    bad("set boolean", ["sweep", "m.toml"], "a workload option is text or a number",
        sweep("[sweep.set]\nstep_ms = true\n")),
    bad("set 300 chars", ["sweep", "m.toml"], "step_ms takes a number > 0",
        sweep(f'[sweep.set]\nstep_ms = "{LONG}"\n')),
    bad("python not in frameworks", ["sweep", "m.toml"], "names pytorch, not in the frameworks",
        sweep(f'[sweep.python]\npytorch = "{sys.executable}"\n')),
    bad("python a number", ["sweep", "m.toml"], "python.calibration = 3",
        sweep("[sweep.python]\ncalibration = 3\n")),
    bad("python missing", ["sweep", "m.toml"], "give the path of an existing Python interpreter",
        sweep('[sweep.python]\ncalibration = "/nonexistent/python"\n')),
    bad("same config twice", ["sweep", "m.toml"], "the same configuration twice",
        sweep('precisions = ["fp32", "fp32"]\n')),
    bad("set 5 and 5.0", ["sweep", "m.toml"], "[sweep.set] step_ms lists 5 and 5.0: one number "
        "to calibration pace, so the sweep would run the same configuration twice",
        sweep("[sweep.set]\nstep_ms = [5, 5.0]\n")),
    bad("set 3 and 03", ["sweep", "m.toml"], "crash_at_step lists 3 and 03: one integer",
        sweep('[sweep.set]\ncrash_at_step = ["3", "03"]\n')),
    bad("fault_rank past the ranks", ["sweep", "m.toml"], "--set fault_rank=1: the run has 1 "
        "rank", sweep('[sweep.set]\nfault_rank = ["0", "1"]\n')),
    bad("results dir empty", ["sweep", "m.toml", "--results-dir", ""], "an empty path",
        sweep()),
    bad("results dir is a file", ["sweep", "m.toml", "--results-dir", "afile"],
        "afile is a file; give a folder", {**sweep(), **A_FILE}),
]  # fmt: skip

OTHERS = [
    # report, export, score, compare: choices and paths, with a real result to work on
    bad("report style", ["report", "--results-dir", "stored", "--style", "x"],
        "--style takes dlperf or fambench, not 'x'; give one of them", STORED),
    bad("report results dir missing", ["report", "--results-dir", "nosuch"],
        "no such folder: nosuch; give the folder your results are in"),
    bad("report results dir empty", ["report", "--results-dir", ""], "an empty path"),
    bad("report reports dir empty", ["report", "--results-dir", "stored", "--reports-dir", ""],
        "an empty path; give a folder", STORED),
    bad("report reports dir a file",
        ["report", "--results-dir", "stored", "--reports-dir", "afile"],
        "afile is a file; give a folder", {**STORED, **A_FILE}),
    bad("export format", ["export", "--format", "xml", "--results-dir", "stored"],
        "--format takes superbench, csv, parquet or json, not 'xml'", STORED),
    bad("export no format", ["export"], "Missing option '--format'"),
    bad("export parquet to stdout", ["export", "--format", "parquet", "--results-dir", "stored"],
        "--format parquet is binary: give --out FILE", STORED),
    bad("export results dir missing", ["export", "--format", "superbench", "--results-dir",
        "nosuch"], "no such folder: nosuch"),
    bad("export out a folder", ["export", "--format", "superbench", "--results-dir", "stored",
        "--out", "adir"], "adir is a folder; give a file", {**STORED, **A_DIR}),
    bad("export out empty", ["export", "--format", "superbench", "--results-dir", "stored",
        "--out", ""], "an empty path; give a file", STORED),
    bad("score neither", ["score", "--results-dir", "stored"], "give one of --freeze", STORED),
    bad("score both", ["score", "--freeze", "r.json", "--reference", "afile"], "give one of",
        A_FILE),
    bad("score reference missing", ["score", "--reference", "nosuch.json"], "does not exist"),
    bad("score reference not JSON", ["score", "--reference", "afile"], "not a reference made "
        "by `dlperf score --freeze`", A_FILE),
    bad("score reference a folder", ["score", "--reference", "adir"], "adir is a folder", A_DIR),
    bad("score freeze a folder", ["score", "--results-dir", "stored", "--freeze", "adir"],
        "adir is a folder; give a file", {**STORED, **A_DIR}),
    bad("score freeze empty", ["score", "--freeze", ""], "an empty path; give a file"),
    bad("score nothing to freeze", ["score", "--freeze", "r.json", "--results-dir", "nosuch"],
        "no results in nosuch to freeze"),
    bad("compare A missing", ["compare", "nosuch", "stored"], "nosuch does not exist", STORED),
    bad("compare A not a result", ["compare", "afile", "stored"], "cannot read result",
        {**STORED, **A_FILE}),
    bad("compare threshold nan", ["compare", "stored", "stored", "--threshold", "nan"],
        "must be a fraction in [0, 1)", STORED),
    bad("compare threshold -0.1", ["compare", "stored", "stored", "--threshold", "-0.1"],
        "must be a fraction in [0, 1)", STORED),
    bad("compare threshold 5", ["compare", "stored", "stored", "--threshold", "5"],
        "such as 0.05 for 5 %", STORED),
    bad("compare threshold abc", ["compare", "stored", "stored", "--threshold", "abc"],
        "--threshold 'abc' is not a number", STORED),
    bad("compare out a folder", ["compare", "stored", "stored", "--out", "adir"],
        "adir is a folder; give a file", {**STORED, **A_DIR}),
    bad("compare out empty", ["compare", "stored", "stored", "--out", ""], "an empty path",
        STORED),
    # parse: sources, models, options that do not apply, values, paths
    bad("parse unknown source", ["parse", "caffe", "resnet50", "x.log"],
        "unknown log source 'caffe': give a framework (calibration, ", {"x.log": "x"}),
    bad("parse no path", ["parse", "pytorch", "resnet50"], "MODEL PATH..."),
    bad("parse unknown model", ["parse", "pytorch", "nosuch", "x.log"], "its models: resnet50",
        {"x.log": "x"}),
    bad("parse path missing", ["parse", "pytorch", "resnet50", "nosuch.log", "--batch-size",
        "4"], "nosuch.log: no such file or folder"),
    bad("parse impl", ["parse", "pytorch", "resnet50", "x.log", "--impl", "x"],
        "--impl takes ootb, official or micro, not 'x'", {"x.log": "x"}),
    bad("parse batch 0", ["parse", "pytorch", "resnet50", "x.log", "--batch-size", "0"],
        "--batch-size 0 is below 1", {"x.log": "x"}),
    bad("parse device", ["parse", "pytorch", "resnet50", "x.log", "--device", "tpu"],
        "--device takes cpu or cuda, not 'tpu'", {"x.log": "x"}),
    bad("parse skip -1", ["parse", "pytorch", "resnet50", "x.log", "--batch-size", "4",
        "--device", "cpu", "--skip", "-1"], "--skip -1 is below 0",
        {"x.log": "x"}),
    bad("parse --model for a framework", ["parse", "pytorch", "resnet50", "x.log", "--model",
        "bert"], "--model not used by `dlperf parse pytorch`: it takes --impl", {"x.log": "x"}),
    bad("parse results dir empty", ["parse", "pytorch", "resnet50", "x.log", "--results-dir",
        ""], "an empty path", {"x.log": "x"}),
    bad("parse mlperf no path", ["parse", "mlperf"], "Missing argument"),
    bad("parse mlperf path missing", ["parse", "mlperf", "nosuch"], "nosuch: no such file"),
    bad("parse mlperf --nodes", ["parse", "mlperf", "adir", "--nodes", "2"],
        "--nodes not used by `dlperf parse mlperf`: it takes --framework, --model", A_DIR),
    bad("parse mlperf device", ["parse", "mlperf", "adir", "--device", "tpu"],
        "--device takes cpu or cuda, not 'tpu'", A_DIR),
    bad("parse fambench --batch-size", ["parse", "fambench", "adir", "--batch-size", "2"],
        "--batch-size not used by `dlperf parse fambench`", A_DIR),
    bad("parse fambench missing", ["parse", "fambench", "nosuch"], "nosuch: no such file"),
    # history: empty filters (an empty text would match everything, unsaid)
    bad("history config empty", ["history", "--results-dir", "stored", "--config", ""],
        "--config '': give a name or some text, or leave --config out", STORED),
    bad("history framework empty", ["history", "--results-dir", "stored", "--framework", ""],
        "--framework '': give a name", STORED),
    bad("history machine empty", ["history", "--results-dir", "stored", "--machine", " "],
        "--machine '': give a name", STORED),
    bad("history until empty", ["history", "--results-dir", "stored", "--until", ""],
        "--until '' is not a date or time; give ISO 8601", STORED),
    bad("history since empty", ["history", "--results-dir", "stored", "--since", ""],
        "--since '' is not a date or time", STORED),
    # check-models, env, sources, the app itself
    bad("check-models unknown model", ["check-models", "--model", "nosuch"],
        "unknown model 'nosuch'; known models: bert"),
    bad("check-models unknown framework", ["check-models", "--framework", "caffe"],
        "known frameworks: calibration"),
    bad("check-models calibration", ["check-models", "--framework", "calibration"],
        "nothing to check: calibration build(s) only test doubles; frameworks to check: jax, "
        "mxnet"),
    bad("check-models micro", ["check-models", "--model", "linear"],
        "linear has no catalog parameter count"),
    bad("check-models model the framework lacks",
        ["check-models", "--framework", "tensorflow", "--model", "gpt2-small"],
        "tensorflow build(s) none of gpt2-small; the model(s) to check there: bert, resnet50"),
    bad("env create unknown framework", ["env", "create", "caffe"], "known frameworks"),
    bad("env create device", ["env", "create", "pytorch", "--device", "tpu"],
        "--device takes cpu or cuda, not 'tpu'"),
    bad("env remove unknown", ["env", "remove", "nosuch", "--yes"], "no env named 'nosuch'"),
    bad("env remove empty", ["env", "remove", "", "--yes"], "is not an env name or prefix"),
    bad("sources fetch unknown", ["sources", "fetch", "nosuch"], "unknown manifest(s) nosuch"),
    bad("sources fetch dir missing", ["sources", "fetch", "--sources-dir", "nosuch"],
        "nosuch does not exist; give an existing folder"),
    bad("sources fetch dir a file", ["sources", "fetch", "--sources-dir", "afile"],
        "afile is a file; give a folder", A_FILE),
    bad("sources verify unknown", ["sources", "verify", "nosuch"], "unknown manifest(s)"),
    bad("unknown command", ["frobnicate"], "No such command 'frobnicate'"),
    bad("doctor flag value", ["doctor", "--measure-peak=maybe"], "does not take a value"),
]  # fmt: skip

# A near miss is named, through one helper (`dlperf.wording.did_you_mean`), wherever a name is
# refused; a value pydantic refused is said in dlperf's words: the option, the value, what it
# takes and the fix (issue 32, point 11).
NEAR_MISSES = [
    bad("framework typo", ["run", "pytorh", "resnet50"],
        "unknown framework 'pytorh' (did you mean pytorch?); known frameworks: calibration"),
    bad("framework letter case", ["run", "PyTorch", "resnet50"], "(did you mean pytorch?)"),
    bad("model typo", ["run", "pytorch", "resnet5"],
        "pytorch has no model 'resnet5' (did you mean resnet50?); its models: resnet50"),
    bad("catalog model typo", ["check-models", "--model", "bret"],
        "unknown model 'bret' (did you mean bert?); known models: bert"),
    bad("set key typo", [*TORCH, "--set", "channel_last=1"],
        "unknown --set key(s) for pytorch resnet50: channel_last (did you mean channels_last?); "
        "valid keys: channels_last"),
    bad("preset typo", [*CAL, "--preset", "smok"],
        "--preset takes dlperf or smoke, not 'smok'; did you mean --preset smoke?"),
    bad("format typo", ["export", "--format", "cvs"],
        "--format takes superbench, csv, parquet or json, not 'cvs'; did you mean --format csv?"),
    bad("style typo", ["report", "--style", "fambenc"], "did you mean --style fambench?"),
    bad("device typo", [*CAL, "--device", "cdua"], "did you mean --device cuda?"),
    bad("framework far off", ["run", "caffe", "resnet50"], "unknown framework 'caffe'; known"),
    bad("log source typo", ["parse", "pytoch", "resnet50", "x.log"],
        "unknown log source 'pytoch' (did you mean pytorch?): give a framework", {"x.log": "x"}),
    bad("manifest typo", ["sources", "fetch", "pytorch-examples-resnet5"],
        "pytorch-examples-resnet5 (did you mean pytorch-examples-resnet50?); known: "),
    bad("report results dir missing", ["report", "--results-dir", "/no/such"],
        "no such folder: /no/such; give the folder your results are in with --results-dir"),
    bad("publish results dir missing", ["publish", "--results-dir", "/no/such"],
        "no such folder: /no/such"),
    bad("report out a file", ["report", "--results-dir", "stored", "--out", "afile"],
        "--out: afile is a file; give a folder", {**STORED, **A_FILE}),
    bad("report both spellings", ["report", "--results-dir", "stored", "--out", "a",
                                  "--reports-dir", "b"],
        "--reports-dir is the older spelling of --out: give --out once", STORED),
]  # fmt: skip


@pytest.mark.parametrize("args, files, message", NEAR_MISSES)
def test_refusals_name_the_near_miss_and_speak_dlperfs_words(
    cli, tmp_path: Path, args: list[str], files: dict, message: str
) -> None:
    _write(tmp_path, files)
    code, text = cli(*args)
    assert code == 1, text
    assert message in text, text
    for theirs in ("Value error", "Input should", "Invalid value for", "Usage:"):
        assert theirs not in text, text
    assert "did you mean" not in message or text.count("did you mean") == 1


def test_no_refusal_of_a_typed_value_speaks_pydantic() -> None:
    """Every refusal of a `dlperf run` value above (a choice, a number, a range) is worded by
    dlperf: none of the expected messages is pydantic's or click's."""
    for case in [*RUN, *OTHERS]:
        message = case.values[2]
        for theirs in ("Value error", "Input should", "Invalid value for"):
            assert theirs not in message, case.id


MLPERF = FIXTURES / "mlperf_real" / "v30-krai-firefly-tflite-resnet50-singlestream"
FAMBENCH = FIXTURES / "fambench"
WITH_LOGS = [
    bad("parse mlperf batch 0", ["parse", "mlperf", str(MLPERF), "--batch-size", "0"],
        "--batch-size 0 is below 1"),
    bad("parse mlperf batch huge", ["parse", "mlperf", str(MLPERF), "--batch-size", "9" * 12],
        "--batch-size 999999999999 is above 2147483647"),
    bad("parse fambench --model", ["parse", "fambench", str(FAMBENCH), "--model", "x"],
        "--model not used by `dlperf parse fambench`: it takes --framework, --device"),
]  # fmt: skip


def _stored_results(folder: Path) -> None:
    spec = BenchmarkSpec(framework="calibration", model="pace", batch_size=10, repeats=3)
    window = Window(start_step=1, end_step=11, samples=100, elapsed_s=0.2)
    repeats = [
        Repeat(index=i, status=RepeatStatus.ok, throughput=500.0 + i, window=window)
        for i in (1, 2, 3)
    ]
    ResultStore(folder).write(
        build_result(
            spec,
            "stored-result",
            repeats,
            environment=Environment(dlperf_version="test", host="test-host", os="linux"),
        ),
    )


def _write(folder: Path, files: dict) -> None:
    """The files a case needs: text, or (None) a results folder with one stored result."""
    for name, text in files.items():
        path = folder / name
        if text is None:
            _stored_results(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("args, files, message", [*RUN, *SWEEPS, *OTHERS])
def test_nonsense_is_refused_before_anything_runs_or_is_written(
    cli, tmp_path: Path, args: list[str], files: dict, message: str
) -> None:
    _write(tmp_path, files)
    before = _tree(tmp_path)
    code, text = cli(*args)
    assert code == 1, text
    assert message in text, text
    assert "Traceback" not in text
    assert _tree(tmp_path) == before, "a refused command wrote something"


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="no ../shared/fixtures beside the project")
@pytest.mark.parametrize("args, files, message", WITH_LOGS)
def test_nonsense_about_real_logs_is_refused_before_any_result_is_written(
    cli, tmp_path: Path, args: list[str], files: dict, message: str
) -> None:
    code, text = cli(*args)
    assert code == 1, text
    assert message in text, text
    assert not (tmp_path / "results").exists()


def test_every_practice_setting_is_a_valid_value_of_its_declared_option() -> None:
    """The adapters' best-practice values pass their own --set declarations, on every device,
    precision, compiler and mode (a declaration too strict would refuse a default run)."""
    import itertools

    from dlperf.adapters import adapter_names, get_adapter
    from dlperf.spec import resolve_spec

    for name in adapter_names():
        adapter = get_adapter(name)
        for model in [*adapter.models, *adapter.micro_models]:
            for device, precision, xla, mode in itertools.product(
                ("cpu", "cuda"), ("fp32", "amp"), (False, True), ("train", "infer")
            ):
                overrides = {"device": device, "precision": precision, "xla": xla, "mode": mode}
                resolve_spec(name, model, preset="smoke", overrides=overrides)


def test_a_refused_run_with_an_unusable_interpreter_leaves_no_results_folder(cli, tmp_path):
    """--python that exists and is executable but is no Python is found only by running it,
    after the results folder was checked: the folders made for the run are removed again."""
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    code, text = cli(*CAL, "--python", str(fake))
    assert code == 1 and "did not run as a Python interpreter" in text, text
    assert not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def jax_cpu_python() -> Path:
    """The interpreter of the jax env dlperf builds for the CPU, in the usual DLPERF_HOME (a
    module fixture: set up before `cli` points DLPERF_HOME at the test's empty folder)."""
    from dlperf.adapters import get_adapter
    from dlperf.envs import ensure_env

    return ensure_env(get_adapter("jax").env_spec("cpu")).python


@pytest.mark.framework
def test_device_cuda_with_a_cpu_only_jax_is_refused_with_jaxs_reason(
    jax_cpu_python, cli, tmp_path, monkeypatch
):
    """`--python` at jax's CPU env, on a host that has an NVIDIA GPU (this one is said to have
    one, so the host's own check passes): the adapter's cuda_check asks jax, which finds no
    CUDA backend; refused with jax's reason, nothing stored or built."""
    python = jax_cpu_python
    monkeypatch.setattr("dlperf.spec.nvidia_gpu_found", lambda: True)
    code, text = cli("run", "jax", "resnet50", "--preset", "smoke", "--device", "cuda",
                     "--python", str(python))  # fmt: skip
    assert code == 1, text
    assert f"--python {python}: jax 0." in text and "cannot use a GPU there (jax 0." in text
    assert "sees no GPU: jax.devices('gpu') finds no CUDA backend" in text, text
    assert "run with --device cpu" in text
    assert _tree(tmp_path) == set(), "a refused run wrote something"


def test_history_names_the_frameworks_models_and_machines_there_are(cli, tmp_path) -> None:
    _stored_results(tmp_path / "stored")
    history = ["history", "--results-dir", "stored"]
    code, text = cli(*history, "--framework", "nosuch")
    assert code == 1, text
    assert "--framework 'nosuch': dlperf knows no such framework (calibration, jax, mxnet," in text
    assert text.endswith("frameworks in stored: calibration"), text
    code, text = cli(*history, "--framework", "pytorch")
    assert code == 1, text
    assert "--framework 'pytorch': no results of pytorch; frameworks in stored: calibration" in text
    code, text = cli(*history, "--model", "nosuch")
    assert code == 1 and "dlperf knows no such model (resnet50, bert," in text, text
    assert text.endswith("models in stored: pace"), text
    code, text = cli(*history, "--machine", "nosuch")
    assert code == 1, text
    assert (
        "--machine 'nosuch' is no machine id and no piece of a machine's name in stored; "
        "machines there: " in text
    )
    code, text = cli(*history, "--framework", "calibration", "--model", "pace")
    assert code == 0, text


def test_a_missing_manifests_folder_is_named(cli, tmp_path, monkeypatch) -> None:
    for folder, why in (("/nonexistent", "does not exist"), ("afile", "is not a folder")):
        (tmp_path / "afile").write_text("x")
        monkeypatch.setenv("DLPERF_MANIFESTS", folder)
        for command in (["sources", "list"], ["sources", "fetch"], ["sources", "verify"],
                        [*TORCH, "--impl", "official"]):  # fmt: skip
            code, text = cli(*command)
            assert code == 1, text
            assert f"the manifests folder {folder} (DLPERF_MANIFESTS) {why}" in text, text


def test_valid_values_still_pass(cli, tmp_path: Path) -> None:
    """The declarations refuse nonsense, not the values people use."""
    code, text = cli(*TORCH, "--set", "threads=2", "--set", "channels_last=1", "--set", "seed=0")
    assert code == 0, text
    code, text = cli("run", "mxnet", "resnet50", "--dry-run", "--set", "conv_layout=NHWC")
    assert code == 0, text
    code, text = cli(*CAL, "--dry-run", "--set", "step_ms=2.5", "--set", "flops_per_sample=0")
    assert code == 0, text
    assert not (tmp_path / "results").exists()
