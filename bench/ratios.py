#!/usr/bin/env python3
"""Ratios from Google Benchmark JSON output (--benchmark_format=json or --benchmark_out=FILE).

Benchmarks are named BM_<Op>/<variant>[/<args>...]. Runs that share everything but the variant form a
group, and each group is compared against its baseline:

  * a group with a `raw` variant (bench/vmm_ops): time of every hipxx variant / time of raw,
    checked against the target (default 1.15: at most 15% over the system calls it wraps);
  * a group with a `hipxx` variant and no `raw` (bench/growable_array): speed-up of hipxx over each
    other variant (other time / hipxx time), checked against the target (default 1.5), with the
    peak-memory counters of every variant.

Where runs were repeated, the median aggregate is used if present, else the mean of the runs.
VMM operations compare CPU time by default (--op-time real_time for wall-clock time).
Usage: ratios.py [FILE.json ...]   (stdin when no file is given). Exit status 1 when a target is missed
and --strict is given; stdlib only.
"""

import argparse
import json
import statistics
import sys
from collections import OrderedDict


def load(paths):
    docs = []
    if not paths:
        docs.append(json.load(sys.stdin))
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            docs.append(json.load(handle))
    return docs


def split_name(name):
    """('BM_Map', 'hipxx', 'BM_Map/<args>') from 'BM_Map/hipxx/<args>'."""
    parts = name.split("/")
    if len(parts) < 2:
        return None
    variant = parts[1]
    # Options Google Benchmark appends (iterations:1, manual_time, ...) say nothing about the group.
    rest = [readable_arg(p) for p in parts[2:] if ":" not in p and not p.endswith("_time")]
    key = "/".join([parts[0]] + rest)
    return parts[0], variant, key


def readable_arg(text):
    """Byte counts as whole MiB or GiB (BM_Grow's target), everything else as it is."""
    if text.isdigit() and int(text) >= 2**20 and int(text) % 2**20 == 0:
        value = int(text)
        return f"{value // 2**30}GiB" if value % 2**30 == 0 else f"{value // 2**20}MiB"
    return text


def collect(docs, op_time):
    """{group key: {variant: {"time": ns, "counters": {...}}}}, in first-seen order.

    Groups with a raw variant are timed by `op_time` (cpu_time or real_time); the growth benchmark
    always by real_time, which there is the child's own measured time (UseManualTime)."""
    samples = OrderedDict()
    medians = {}
    for doc in docs:
        for bench in doc.get("benchmarks", []):
            if bench.get("error_occurred"):
                continue
            name = bench.get("run_name") or bench["name"]
            parsed = split_name(name)
            if parsed is None:
                continue
            _, variant, key = parsed
            field = op_time if not name.startswith("BM_Grow/") else "real_time"
            time = to_ns(bench.get(field, 0.0), bench.get("time_unit", "ns"))
            counters = {k: v for k, v in bench.items()
                        if k in ("peak_rss", "peak_growth", "peak_over", "child_cpu_s")}
            runs = samples.setdefault(key, OrderedDict()).setdefault(variant, [])
            if bench.get("run_type") == "aggregate":
                if bench.get("aggregate_name") == "median":
                    medians[(key, variant)] = {"time": time, "counters": counters}
                continue
            runs.append({"time": time, "counters": counters})
    groups = OrderedDict()
    for key, variants in samples.items():
        for variant, runs in variants.items():
            if (key, variant) in medians:
                groups.setdefault(key, OrderedDict())[variant] = medians[(key, variant)]
                continue
            if not runs:
                continue  # only aggregates other than the median were reported
            counters = {}
            for name in runs[0]["counters"]:
                counters[name] = statistics.mean(run["counters"][name] for run in runs)
            groups.setdefault(key, OrderedDict())[variant] = {
                "time": statistics.mean(run["time"] for run in runs),
                "counters": counters,
            }
    return groups


def to_ns(value, unit):
    return value * {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]


def human_time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def human_bytes(value):
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{sign}{value / scale:.2f} {unit}"
    return f"{sign}{value:.0f} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="JSON files from --benchmark_out (stdin if none)")
    parser.add_argument("--op-target", type=float, default=1.15, help="largest acceptable hipxx/raw ratio")
    parser.add_argument("--growth-target", type=float, default=1.5, help="smallest acceptable speed-up of hipxx")
    parser.add_argument("--op-time", choices=("cpu_time", "real_time"), default="cpu_time",
                        help="which time of the VMM operations to compare (default cpu_time: the process's "
                             "own CPU time, user and kernel, which other load on the machine disturbs least)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    groups = collect(load(args.files), args.op_time)
    missed = 0
    op_rows = []
    growth_rows = []
    for key, variants in groups.items():
        if "raw" in variants:
            raw = variants["raw"]["time"]
            for variant, run in variants.items():
                if variant == "raw":
                    continue
                ratio = run["time"] / raw if raw else float("inf")
                ok = ratio <= args.op_target
                missed += 0 if ok else 1
                op_rows.append((key, variant, human_time(run["time"]), human_time(raw), ratio, ok))
        elif "hipxx" in variants:
            mine = variants["hipxx"]
            for variant, run in variants.items():
                if variant == "hipxx":
                    continue
                speedup = run["time"] / mine["time"] if mine["time"] else float("inf")
                ok = speedup >= args.growth_target
                missed += 0 if ok else 1
                growth_rows.append((key, variant, mine, run, speedup, ok))

    op_rows.sort(key=lambda row: (row[0], row[1]))
    if op_rows:
        print(f"VMM operations: hipxx {args.op_time} / raw system calls' {args.op_time}"
              f" (target <= {args.op_target:g}x)")
        print(f"  {'operation':<18} {'variant':<10} {'hipxx':>10} {'raw':>10} {'ratio':>7}")
        for key, variant, mine, raw, ratio, ok in op_rows:
            print(f"  {key:<18} {variant:<10} {mine:>10} {raw:>10} {ratio:>6.2f}x {'ok' if ok else 'MISSED'}")
    if growth_rows:
        if op_rows:
            print()
        print(f"Growth: speed-up of hipxx over each alternative (target >= {args.growth_target:g}x)")
        print("  (wall: the child's elapsed time; cpu: its user + system time, steadier on a busy machine;"
              " peak over size: peak RSS growth beyond the data itself)")
        print(f"  {'benchmark':<16} {'vs':<12} {'hipxx wall':>10} {'other wall':>10} {'speed-up':>8}"
              f" {'cpu speed-up':>12}   {'hipxx peak over':>15} {'other peak over':>15}")
        for key, variant, mine, other, speedup, ok in growth_rows:
            mine_over = mine["counters"].get("peak_over")
            other_over = other["counters"].get("peak_over")
            mine_cpu = mine["counters"].get("child_cpu_s")
            other_cpu = other["counters"].get("child_cpu_s")
            cpu = f"{other_cpu / mine_cpu:.2f}x" if mine_cpu and other_cpu is not None else "-"
            print(f"  {key:<16} {variant:<12} {human_time(mine['time']):>10} {human_time(other['time']):>10}"
                  f" {speedup:>7.2f}x {cpu:>12}   {human_bytes(mine_over) if mine_over is not None else '-':>15}"
                  f" {human_bytes(other_over) if other_over is not None else '-':>15}  {'ok' if ok else 'MISSED'}")
    if not op_rows and not growth_rows:
        print("no benchmark pairs found (names must look like BM_<Op>/raw and BM_<Op>/hipxx)", file=sys.stderr)
        return 1
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
