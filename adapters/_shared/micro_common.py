"""What the microbenchmark scripts (adapters/<framework>/micro.py) count and report the same
way in every framework: parameters, FLOPs and bytes per sample, the shape line, host facts.
Standard library only."""

from __future__ import annotations

import argparse
import contextlib
import platform

INDEX_BYTES = 8  # int64 indices


def linear_params(args: argparse.Namespace) -> int:
    i, o, n = args.in_features, args.out_features, args.layers
    return (i * o + o) + (n - 1) * (o * o + o)


def linear_forward_flops(args: argparse.Namespace) -> float:
    i, o, n = args.in_features, args.out_features, args.layers
    return 2.0 * (i * o + (n - 1) * o * o)


def element_size(args: argparse.Namespace) -> int:
    """Bytes per table element: 2 when amp stores the embedding table in bf16/fp16."""
    return 2 if args.precision == "amp" else 4


def counts(args: argparse.Namespace) -> dict[str, object]:
    """params, flops_per_sample, bytes_per_sample and unit for the asked configuration."""
    train = args.mode == "train"
    if args.model == "linear":
        return {
            "params": linear_params(args),
            "flops_per_sample": linear_forward_flops(args) * (3 if train else 1),
            "bytes_per_sample": 0,
            "unit": "TF/s",
        }
    rows = args.bag_size * args.embedding_dim * element_size(args)
    return {
        "params": args.num_embeddings * args.embedding_dim,
        "flops_per_sample": 0,
        "bytes_per_sample": rows * (3 if train else 1),
        "index_bytes_per_sample": args.bag_size * INDEX_BYTES,
        "unit": "GB/s",
    }


def shape_text(args: argparse.Namespace) -> str:
    if args.model == "linear":
        return f"{args.in_features} -> {args.out_features} x {args.layers} layers"
    return f"table {args.num_embeddings:,} x {args.embedding_dim}, bags of {args.bag_size} (sum)"


def cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_native_bf16() -> bool | None:
    """Whether the CPU has bf16 matmul instructions; None if /proc/cpuinfo cannot tell."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return None
