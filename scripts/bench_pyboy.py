#!/usr/bin/env python3
"""PyBoy baseline for `gbx-run report`: what RL users run today.

Runs PyBoy headless (window "null", no rendering, no sound) over env counts, one worker
process per core, each stepping its share of the envs in turn, and writes a sweep JSON in
the format of `gbx-run bench` (backend "pyboy"), so `gbx-run report` puts GBX beside it:

    scripts/bench_pyboy.py --envs 1,2,8,64
    build/tools/gbx-run report artifacts/bench/*_pyboy.json artifacts/bench/*_cpu.json \
        --baseline pyboy

PyBoy is installed with pip into artifacts/.venv-pyboy the first time (the script re-runs
itself with that venv's python). A benchmark tool, not part of the test suite.

Timing: every worker creates its PyBoy instances and runs the warm-up ticks first, then all
wait on one barrier; the clock runs from the barrier to the last worker's end. One step = one
`tick(frames_per_step)` of one env; PyBoy counts frames by its own VBlank, not GBX's 70224-T
frame rule, which is the same amount of emulated time per frame. PyBoy runs a boot ROM first
(about 100 frames, GBX and mGBA start in the post-boot state): the default warm-up covers it.
"""
import argparse
import datetime
import hashlib
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "artifacts", ".venv-pyboy")


def in_venv():
    return os.path.realpath(sys.prefix) == os.path.realpath(VENV)


def ensure_venv(argv):
    """Creates the venv with PyBoy if needed and re-executes this script inside it."""
    if in_venv():
        return
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        print(f"bench_pyboy: creating {VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    probe = subprocess.run([py, "-c", "import pyboy"], capture_output=True)
    if probe.returncode != 0:
        print("bench_pyboy: pip install pyboy", file=sys.stderr)
        subprocess.run([py, "-m", "pip", "install", "--quiet", "pyboy"], check=True)
    os.execv(py, [py, os.path.abspath(__file__)] + argv)


def make_pyboy(rom):
    from pyboy import PyBoy

    try:  # PyBoy 2.x
        pb = PyBoy(rom, window="null", sound_emulated=False, log_level="ERROR")
    except TypeError:
        try:
            pb = PyBoy(rom, window="null")
        except TypeError:  # PyBoy 1.x
            pb = PyBoy(rom, window_type="headless")
    if hasattr(pb, "set_emulation_speed"):
        pb.set_emulation_speed(0)  # no real-time limit
    return pb


def make_ticker(pb, frames):
    """A function running `frames` frames without rendering, for the installed PyBoy."""
    try:
        pb.tick(1, False)  # 2.x: tick(count, render)
        return lambda: pb.tick(frames, False)
    except TypeError:
        pass
    def tick():  # 1.x: one frame per tick
        for _ in range(frames):
            pb.tick()

    return tick


def worker(rom, n_envs, steps, warmup, frames, barrier, results):
    instances = [make_pyboy(rom) for _ in range(n_envs)]
    ticks = [make_ticker(pb, frames) for pb in instances]
    for _ in range(warmup):
        for t in ticks:
            t()
    barrier.wait()
    t0 = time.perf_counter()
    for _ in range(steps):
        for t in ticks:
            t()
    results.put(time.perf_counter() - t0)
    for pb in instances:
        try:
            pb.stop(save=False)
        except TypeError:
            pb.stop()


def run_point(rom, envs, steps, warmup, frames, cores):
    procs = min(envs, cores)
    share = [envs // procs + (1 if i < envs % procs else 0) for i in range(procs)]
    barrier = mp.Barrier(procs + 1)
    results = mp.Queue()
    ps = [
        mp.Process(target=worker, args=(rom, share[i], steps, warmup, frames, barrier, results))
        for i in range(procs)
    ]
    for p in ps:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    per_worker = [results.get() for _ in ps]
    seconds = time.perf_counter() - t0
    for p in ps:
        p.join()
    total = envs * steps
    return {
        "num_envs": envs,
        "steps": steps,
        "seconds": seconds,
        "total_env_steps": total,
        "total_sps": total / seconds,
        "per_env_sps": total / seconds / envs,
        "frames_per_sec": total * frames / seconds,
        "sync_every": 0,
        "stage": "emulate_only",
        "threads": procs,
        "worker_seconds": per_worker,
        "warmup_steps": warmup,
    }


def system_info(pyboy_version):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "os": platform.platform(),
        "cpu_model": cpu,
        "cpu_cores": os.cpu_count(),
        "python": platform.python_version(),
        "pyboy_version": pyboy_version,
    }


def default_rom(gbx_run):
    out = os.path.join(ROOT, "artifacts", "roms")
    subprocess.run([gbx_run, "rom", "build", "--out", out], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, "ALU_LOOP.gb")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rom", help="ROM file (default: builtin ALU_LOOP via gbx-run rom build)")
    ap.add_argument("--gbx-run", default=os.path.join(ROOT, "build", "tools", "gbx-run"))
    ap.add_argument("--envs", default="1,2,8,64", help="comma-separated env counts")
    ap.add_argument("--steps", type=int, default=2000, help="timed steps per env")
    ap.add_argument("--warmup-steps", type=int, default=150,
                    help="untimed steps first; PyBoy runs its boot ROM for about 100 frames")
    ap.add_argument("--frames-per-step", type=int, default=1)
    ap.add_argument("--cores", type=int, default=os.cpu_count(), help="worker processes at most")
    ap.add_argument("--json", help="sweep file (default artifacts/bench/<utc>_<rom>_pyboy.json)")
    args = ap.parse_args(argv)
    envs = [int(x) for x in args.envs.split(",")]
    if min(envs) < 1 or args.steps < 1 or args.frames_per_step < 1 or args.cores < 1:
        ap.error("env counts, --steps, --frames-per-step and --cores must be at least 1")

    rom = args.rom or default_rom(args.gbx_run)
    with open(rom, "rb") as f:
        data = f.read()
    import pyboy

    version = getattr(pyboy, "__version__", None)
    if version is None:
        from importlib.metadata import version as pkg_version

        version = pkg_version("pyboy")

    results = []
    for i, n in enumerate(envs):
        r = run_point(rom, n, args.steps, args.warmup_steps, args.frames_per_step, args.cores)
        results.append(r)
        print(
            f"bench pyboy: envs {n} [{i + 1}/{len(envs)}]: {r['total_sps']:.0f} env-steps/s, "
            f"{r['frames_per_sec']:.0f} frames/s ({args.steps} steps in {r['seconds']:.2f} s, "
            f"{r['threads']} processes)",
            file=sys.stderr,
        )

    utc = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = os.path.splitext(os.path.basename(rom))[0]
    sweep = {
        "schema_version": 1,
        "kind": "gbx-bench-sweep",
        "created_utc": utc,
        "system": system_info(version),
        "config": {
            "backend": "pyboy",
            "label": "pyboy",
            "rom": {"name": name, "spec": rom, "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest()},
            "envs": envs,
            "steps": args.steps,
            "warmup_steps": args.warmup_steps,
            "frames_per_step": args.frames_per_step,
            "stage": "emulate_only",
            "threads": args.cores,
            "sync_every": 0,
            "actions": {"policy": "none"},
            "pyboy": {"version": version, "window": "null", "render": False},
        },
        "results": results,
    }
    path = args.json or os.path.join(ROOT, "artifacts", "bench", f"{utc}_{name}_pyboy.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(sweep, f, indent=2)
        f.write("\n")
    print(f"{'envs':>8} {'steps':>8} {'seconds':>9} {'total_sps':>14} {'per_env_sps':>12} "
          f"{'frames_per_sec':>14} {'procs':>6}")
    for r in results:
        print(f"{r['num_envs']:>8} {r['steps']:>8} {r['seconds']:>9.3f} {r['total_sps']:>14.0f} "
              f"{r['per_env_sps']:>12.1f} {r['frames_per_sec']:>14.0f} {r['threads']:>6}")
    print(f"sweep: {path}")
    return 0


if __name__ == "__main__":
    ensure_venv(sys.argv[1:])
    sys.exit(main(sys.argv[1:]))
