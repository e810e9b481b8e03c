#!/usr/bin/python3
"""Summary of a scripts/bench-games.sh run folder: table, ratios per round, summary.json, plot.

    scripts/bench_games_report.py artifacts/bench-games/<utc> --rounds 3 interp spec mgba pyboy
    scripts/bench_games_report.py --sum-sweeps OUT.json A.json B.json   (bench-games' procs2)

Reads <game>_<column>_r<round>.json (gbx-run bench / bench_pyboy.py sweeps, one env count
each), <game>_spec-cold.json and <game>.report.json (gbx-synth profile --report: the state's
instructions per frame and halted share, printed above the game's ratios). Rates are per core (frames/s over the threads or processes
used). A ratio is taken round by round (both arms of one round ran minutes apart at most) and
summarised as the median over rounds with its min-max. The two-thread scaling (column
threads2: the interpreter on two threads with twice the envs) is the ratio of total rates,
threads2 over interp. Goals (issue 23, min over the games of the median): interpreter >= 4x
PyBoy and specialized >= 10x PyBoy on one thread; two threads >= 1.9x one.
"""

import argparse
import glob
import json
import os
import statistics
import sys

GOALS = {("interp", "pyboy"): 4.0, ("spec", "pyboy"): 10.0, ("threads2", "interp"): 1.9}
RATIOS = [
    ("interp", "pyboy"),
    ("spec", "pyboy"),
    ("spec", "interp"),
    ("interp", "mgba"),
    ("spec", "mgba"),
    ("mgba", "pyboy"),
    ("threads2", "interp"),
    ("procs2", "interp"),
    ("threads2", "procs2"),
]
# Ratios of total rates (all threads or processes), not per core: the scaling with cores.
# procs2 (two one-thread processes at once, summed) is the control for threads2: procs2 /
# interp is what the two cores gave at that moment, threads2 / procs2 the pool's own share.
TOTAL_RATIOS = {("threads2", "interp"), ("procs2", "interp"), ("threads2", "procs2")}


def load(path):
    try:
        with open(path) as f:
            s = json.load(f)
        r = s["results"][0]
        threads = max(1, int(r.get("threads") or 1))
        return {
            "frames_per_sec": r["frames_per_sec"],
            "frames_per_sec_per_core": r["frames_per_sec"] / threads,
            "env_steps_per_sec_per_core": r["total_sps"] / threads,
            "seconds": r["seconds"],
            "steps": r["steps"],
            "envs": r["num_envs"],
            "tier_up_seconds": r.get("tier_up_seconds", 0.0),
            "tier_up_steps": r.get("tier_up_steps", 0),
            "retiers": r.get("retiers", 0),
            "retiers_tier_up": r.get("retiers_tier_up"),  # absent from older sweeps
            "system": s.get("system", {}),
            "config": s.get("config", {}),
        }
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def spread(values):
    if not values:
        return None
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def fmt(sp, unit=""):
    if not sp:
        return "-"
    return f"{sp['median']:.2f}{unit} [{sp['min']:.2f}-{sp['max']:.2f}]"


def sum_sweeps(out, paths):
    """Writes one sweep whose rates are the sum of `paths`' (processes run at the same time)."""
    sweeps = []
    for p in paths:
        with open(p) as f:
            sweeps.append(json.load(f))
    rs = [s["results"][0] for s in sweeps]
    total = dict(rs[0])
    total["frames_per_sec"] = sum(r["frames_per_sec"] for r in rs)
    total["total_sps"] = sum(r["total_sps"] for r in rs)
    total["num_envs"] = sum(r["num_envs"] for r in rs)
    total["threads"] = sum(max(1, int(r.get("threads") or 1)) for r in rs)
    total["seconds"] = max(r["seconds"] for r in rs)
    merged = dict(sweeps[0])
    merged["results"] = [total]
    merged["summed_from"] = [os.path.basename(p) for p in paths]
    with open(out, "w") as f:
        json.dump(merged, f, indent=2)
        f.write("\n")
    return 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--sum-sweeps":
        return sum_sweeps(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("columns", nargs="+")
    a = ap.parse_args()
    games = sorted(
        {
            os.path.basename(p)[: -len(f"_{c}_r1.json")]
            for c in a.columns
            for p in glob.glob(os.path.join(a.folder, f"*_{c}_r1.json"))
        }
    )
    summary = {"folder": a.folder, "rounds": a.rounds, "columns": a.columns, "games": {}}
    for g in games:
        per_round = {
            c: [load(os.path.join(a.folder, f"{g}_{c}_r{r}.json")) for r in range(1, a.rounds + 1)]
            for c in a.columns
        }
        cold = load(os.path.join(a.folder, f"{g}_spec-cold.json"))
        entry = {"columns": {}, "ratios": {}}
        for c, runs in per_round.items():
            ok = [x for x in runs if x]
            entry["columns"][c] = {
                "frames_per_sec_per_core": spread([x["frames_per_sec_per_core"] for x in ok]),
                "env_steps_per_sec_per_core": spread([x["env_steps_per_sec_per_core"] for x in ok]),
                "per_round_frames_per_sec": [x and x["frames_per_sec_per_core"] for x in runs],
            }
            if c == "spec":
                entry["columns"][c]["tier_up_seconds_cached"] = spread(
                    [x["tier_up_seconds"] for x in ok]
                )
                entry["columns"][c]["tier_up_steps"] = ok[0]["tier_up_steps"] if ok else None
                entry["columns"][c]["tier_up_seconds_cold"] = cold and cold["tier_up_seconds"]
                # Re-profiles inside the timed window (--specialize auto, cpu backend).
                entry["columns"][c]["retiers_per_round"] = [x and x["retiers"] for x in runs]
                entry["columns"][c]["retiers_tier_up_per_round"] = [
                    x and x["retiers_tier_up"] for x in runs
                ]
        for num, den in RATIOS:
            if num not in per_round or den not in per_round:
                continue
            rate = "frames_per_sec" if (num, den) in TOTAL_RATIOS else "frames_per_sec_per_core"
            vals = [n[rate] / d[rate] for n, d in zip(per_round[num], per_round[den]) if n and d]
            entry["ratios"][f"{num}/{den}"] = spread(vals)
        # What the state's code does (gbx-synth profile --report, written by bench-games.sh).
        try:
            with open(os.path.join(a.folder, f"{g}.report.json")) as f:
                rep = json.load(f)
            entry["state"] = {
                "instructions_per_frame": rep["instructions_per_frame"],
                "halted_share": rep["halted_share"],
                "frames": rep["frames"],
            }
        except (OSError, ValueError, KeyError):
            entry["state"] = None
        summary["games"][g] = entry

    print(
        f"frames/s per core, median over {a.rounds} interleaved rounds [min-max]; "
        "env-steps/s = frames/s / frames per step"
    )
    for g, e in summary["games"].items():
        print(f"\n{g}")
        st = e.get("state")
        if st:
            print(
                f"  state: {st['instructions_per_frame']:.0f} instructions/frame, halted "
                f"{100 * st['halted_share']:.1f}% of cycles ({st['frames']} frames traced)"
            )
        print(f"  {'column':<8}{'frames/s/core':>30}{'env-steps/s/core':>30}")
        for c in a.columns:
            col = e["columns"][c]
            f, s = col["frames_per_sec_per_core"], col["env_steps_per_sec_per_core"]
            fs = f"{f['median']:.0f} [{f['min']:.0f}-{f['max']:.0f}]" if f else "-"
            ss = f"{s['median']:.0f} [{s['min']:.0f}-{s['max']:.0f}]" if s else "-"
            print(f"  {c:<8}{fs:>30}{ss:>30}")
        if "spec" in e["columns"]:
            col = e["columns"]["spec"]
            cold = col.get("tier_up_seconds_cold")
            print(
                f"  spec tier-up ({col.get('tier_up_steps')} steps of profiles and settling windows "
                f"+ compiles): "
                f"cold cache {cold:.2f} s"
                if cold
                else "  spec tier-up: cold not measured",
                end="",
            )
            print(
                f"; in the rounds (the kernel cache's, compiled in round 1 if absent) "
                f"{fmt(col.get('tier_up_seconds_cached'), ' s')}"
            )
            # retiers counts them all; retiers_tier_up those before the timed window.
            retiers = col.get("retiers_per_round") or []
            settling = col.get("retiers_tier_up_per_round") or [None] * len(retiers)
            if any(retiers):
                split = all(t is not None for t in settling)
                print(
                    "  spec re-profiles per round"
                    + (", settling + in the timed window: " if split else ": ")
                    + " ".join(
                        "-" if r is None else str(r) if t is None else f"{t}+{r - t}"
                        for r, t in zip(retiers, settling)
                    )
                )
        for k, v in e["ratios"].items():
            print(f"  {k:<17}{fmt(v, 'x')}")

    summary["goals"] = {}
    if summary["games"]:
        print("\ngoals (min over the games of the per-game median ratio; threads2/interp: totals):")
        for (num, den), goal in GOALS.items():
            key = f"{num}/{den}"
            vals = {
                g: e["ratios"][key]["median"]
                for g, e in summary["games"].items()
                if e["ratios"].get(key)
            }
            if not vals:
                continue
            worst = min(vals, key=vals.get)
            met = vals[worst] >= goal
            summary["goals"][key] = {"goal": goal, "min": vals[worst], "game": worst, "met": met}
            print(
                f"  {key:<17} >= {goal:g}x: min {vals[worst]:.2f}x ({worst}) "
                f"{'MET' if met else 'MISSED'}"
            )
    with open(os.path.join(a.folder, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot", file=sys.stderr)
        return 0
    fig, ax = plt.subplots(figsize=(9, 5))
    width = 0.8 / max(1, len(a.columns))
    for k, c in enumerate(a.columns):
        xs, ys, lo, hi = [], [], [], []
        for i, e in enumerate(summary["games"].values()):
            f = e["columns"][c]["frames_per_sec_per_core"]
            if not f:
                continue
            xs.append(i + (k - (len(a.columns) - 1) / 2) * width)
            ys.append(f["median"])
            lo.append(f["median"] - f["min"])
            hi.append(f["max"] - f["median"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=c)
    ax.set_xticks(range(len(summary["games"])))
    ax.set_xticklabels(list(summary["games"]))
    ax.set_yscale("log")
    ax.set_ylabel("frames/s per core (median, min-max over rounds)")
    ax.set_title("bench-games: from a mid-game state, random actions, one thread")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.folder, "games.png"), dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
