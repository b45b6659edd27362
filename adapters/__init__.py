"""The adapter registry: one folder per framework, listed here explicitly.

Adding a framework is adding its folder and one line below. Adapter modules are imported
lazily; an adapter's host-side module imports no ML framework (its workload scripts do, and
they run inside the framework's own environment).
"""

from __future__ import annotations

import importlib

from dlperf import DlperfError
from dlperf.adapter import Adapter
from dlperf.wording import did_you_mean

ADAPTER_MODULES: dict[str, str] = {
    "calibration": "dlperf.adapters.calibration",
    "jax": "dlperf.adapters.jax",
    "mxnet": "dlperf.adapters.mxnet",
    "oneflow": "dlperf.adapters.oneflow",
    "paddle": "dlperf.adapters.paddle",
    "pytorch": "dlperf.adapters.pytorch",
    "tensorflow": "dlperf.adapters.tensorflow",
}


def adapter_names() -> list[str]:
    return sorted(ADAPTER_MODULES)


def get_adapter(name: str) -> Adapter:
    if name not in ADAPTER_MODULES:
        raise DlperfError(
            f"unknown framework {name!r}{did_you_mean(name, ADAPTER_MODULES)}; known "
            f"frameworks: {', '.join(adapter_names())}"
        )
    return importlib.import_module(ADAPTER_MODULES[name]).ADAPTER
