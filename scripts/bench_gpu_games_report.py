#!/usr/bin/env python3
"""The table of scripts/bench-gpu-games: one row per game from the files of its folder.

Usage: bench_gpu_games_report.py DIR ROM...

Per game NAME (the ROM's file stem): NAME.report.json (gbx-synth profile --report),
NAME_interp.json, NAME_none.json, NAME_spec.json, NAME_cpu.json (gbx-run bench sweeps) and
NAME.meter.txt (gbx-run divergence). A column whose file is missing prints "-". The meter's
prediction of random / none counts both the lanes lost to divergence and the work itself: a
game left without input (none) often runs other code (an idle loop, more HALT) than with it.
"""

import json
import os
import sys


def best(path):
    """(frames/s, envs) of the sweep's best point, or None."""
    try:
        with open(path) as f:
            s = json.load(f)
        top = max(s["results"], key=lambda r: r["frames_per_sec"])
        return top["frames_per_sec"], top["num_envs"]
    except (OSError, ValueError, KeyError):
        return None


def meter(path):
    """{policy: (efficiency, lanes, dispatches per lane)} from each policy's last traced step
    (schedule simt)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) >= 7 and p[0] in ("random", "none") and p[2] == "simt":
                    out[p[0]] = (float(p[4].rstrip("%")) / 100, float(p[3]), float(p[6]))
    except (OSError, ValueError):
        pass
    return out


def predicted(m):
    """The meter's random / none rate, were the kernel issue-bound: a warp issues about
    dispatches per lane / lanes (ptx-weighted) of each policy's work."""
    if "random" not in m or "none" not in m:
        return None
    (_, lr, dr), (_, ln, dn) = m["random"], m["none"]
    if not (lr and ln and dr):
        return None
    return (dn / ln) / (dr / lr)


def rate(b):
    if b is None:
        return "-"
    v = f"{b[0] / 1e6:.3g}M" if b[0] >= 1e6 else f"{b[0] / 1e3:.3g}k"
    return f"{v}@{b[1]}"


def ratio(x, y):
    return "-" if not x or not y else f"{x / y:.2f}"


def main():
    d, roms = sys.argv[1], sys.argv[2:]
    head = (
        f"{'game':14s} {'instr/frame':>11s} {'halted':>6s} {'cuda random':>14s} "
        f"{'cuda none':>14s} {'rnd/none':>8s} {'meter eff r/n':>13s} {'pred':>5s} "
        f"{'cuda spec':>14s} {'cpu all cores':>14s} {'cuda/cpu':>8s}"
    )
    print(
        "frames/s: best over env counts (k = 1e3, M = 1e6, @envs); rnd/none: measured; meter eff: "
        "active lanes / 32, random and none; pred: the meter's random / none rate (issued "
        "instructions: dispatches per lane / lanes; the two policies also run different code)"
    )
    print(head)
    for rom in roms:
        name = os.path.basename(rom)
        name = name[: -len(".gb")] if name.endswith(".gb") else name
        name = name.removeprefix("builtin:")
        ipf = halted = "-"
        try:
            with open(os.path.join(d, name + ".report.json")) as f:
                r = json.load(f)
            ipf = f"{r['instructions_per_frame']:.0f}"
            halted = f"{100 * r['halted_share']:.1f}%"
        except (OSError, ValueError, KeyError):
            pass
        rnd = best(os.path.join(d, name + "_interp.json"))
        none = best(os.path.join(d, name + "_none.json"))
        spec = best(os.path.join(d, name + "_spec.json"))
        cpu = best(os.path.join(d, name + "_cpu.json"))
        m = meter(os.path.join(d, name + ".meter.txt"))
        eff = "-"
        if "random" in m and "none" in m:
            eff = f"{100 * m['random'][0]:.0f}%/{100 * m['none'][0]:.0f}%"
        p = predicted(m)
        pred = "-" if p is None else f"{p:.2f}"
        top = max((b[0] for b in (rnd, spec) if b), default=None)
        print(
            f"{name:14s} {ipf:>11s} {halted:>6s} {rate(rnd):>14s} {rate(none):>14s} "
            f"{ratio(rnd and rnd[0], none and none[0]):>8s} {eff:>13s} {pred:>5s} "
            f"{rate(spec):>14s} {rate(cpu):>14s} {ratio(top, cpu and cpu[0]):>8s}"
        )


if __name__ == "__main__":
    main()
