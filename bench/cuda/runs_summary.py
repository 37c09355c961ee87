#!/usr/bin/env python3
"""Several gpu-bench runs (--json=FILE each) as one markdown table: for every row, the median over
the runs of its hipxx and baseline medians and of its ratio, the ratio's range, and in how many runs
the row met its target. One run's ratio moves with the state of the machine (the map's between 1.03
and 1.24 on the same library in one hour), so a target is judged by how often it is met.

Usage: runs_summary.py RUN.json [RUN.json ...]   (stdlib only)
"""

import json
import statistics
import sys


def load_runs(paths):
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            runs.append(json.load(handle))
    return runs


def rows_in_order(runs):
    """Benchmark name -> the results of it, one per run that has it, in the first run's order."""
    rows = {}
    for run in runs:
        for result in run["results"]:
            rows.setdefault(result["benchmark"], []).append(result)
    return rows


def number(value, unit):
    if value is None:
        return "n/a"
    digits = 4 - len(str(int(abs(value)))) if abs(value) >= 1 else 3
    return f"{value:.{max(digits, 0)}f} {unit}"


def summary_line(name, results):
    ratios = [r["ratio"] for r in results if r.get("ratio") is not None and r.get("error") is None]
    hipxx = [r["hipxx"]["median"] for r in results if r.get("hipxx")]
    baseline = [r["baseline"]["median"] for r in results if r.get("baseline")]
    unit = results[0].get("unit", "")
    target = results[0].get("target") or {}
    judged = [r["met"] for r in results if r.get("met") is not None]
    met = "report"
    if target.get("kind") == "max_ratio" and judged:
        met = f"{sum(judged)} of {len(judged)} ({target.get('text', '')})"
    if not ratios:
        return f"| {name} | {number(statistics.median(hipxx), unit) if hipxx else 'n/a'} | " \
               f"{number(statistics.median(baseline), unit) if baseline else 'n/a'} | n/a | n/a | {met} |"
    return (f"| {name} | {number(statistics.median(hipxx), unit) if hipxx else 'n/a'} | "
            f"{number(statistics.median(baseline), unit) if baseline else 'n/a'} | "
            f"{statistics.median(ratios):.3f} | {min(ratios):.3f}-{max(ratios):.3f} | "
            f"{met} |")


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = load_runs(argv[1:])
    print(f"{len(runs)} runs, {runs[0].get('date', '?')} to {runs[-1].get('date', '?')}, "
          f"{runs[0].get('device', '?')}")
    print()
    print("| benchmark | hipxx (median of runs) | baseline (median of runs) | ratio (median of runs) "
          "| ratio range | runs meeting the target |")
    print("|---|---|---|---|---|---|")
    for name, results in rows_in_order(runs).items():
        print(summary_line(name, results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
