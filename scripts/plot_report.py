#!/usr/bin/python3
"""Plot GBX bench sweeps: env count vs total env-steps/s, log-log, one line per sweep.

Called by `gbx-run report`; runs with Debian's python3 (python3-matplotlib).
Exit status: 0 plot written, 2 bad input, 3 matplotlib missing.
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, help="PNG file to write")
    ap.add_argument("--baseline", default="mgba", help="backend or label drawn dashed")
    ap.add_argument("sweeps", nargs="+", help="sweep JSON files (gbx-run bench)")
    args = ap.parse_args()

    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError as e:
        print(f"matplotlib is not available: {e}", file=sys.stderr)
        return 3

    fig, ax = plt.subplots(figsize=(8, 5.5))
    roms, stages, env_counts = set(), set(), set()
    for path in args.sweeps:
        try:
            with open(path) as f:
                sweep = json.load(f)
            cfg = sweep["config"]
            points = sorted((r["num_envs"], r["total_sps"]) for r in sweep["results"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"bad sweep {path}: {e}", file=sys.stderr)
            return 2
        label = cfg.get("label") or cfg["backend"]
        roms.add(cfg.get("rom", {}).get("name", "?"))
        stages.add(cfg.get("stage", "?"))
        baseline = args.baseline in (label, cfg["backend"])
        xs, ys = zip(*points)
        env_counts.update(xs)
        ax.plot(xs, ys, "--" if baseline else "-", marker="o", label=label)

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(env_counts))  # the measured counts, not powers of 2 between them
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    # Sweeps often span less than a decade: label 1-2-5 steps, as plain numbers.
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("envs (emulated Game Boys)")
    ax.set_ylabel("total env-steps / s")
    ax.set_title(f"GBX throughput: {', '.join(sorted(roms))} ({', '.join(sorted(stages))})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
