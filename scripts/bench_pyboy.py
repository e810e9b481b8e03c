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

Games from a mid-game point (scripts/bench-games.sh): PyBoy cannot load a GBX save state, so
`--schedule FILE` (JSON [[action, frames], ...], the input schedule GBX's state was made with)
is played after the boot ROM (`--skip-boot`: ticks single frames until the boot ROM has
handed over, PC >= 0x100) and before the warm-up, from power-on, untimed. `--actions random`
presses, every step, the action byte GBX's `--actions random --seed S` gives the same env at
the same step (splitmix64, runtime/src/actions/action_policy.cpp; bit 0 A, 1 B, 2 Select, 3 Start,
4 Right, 5 Left, 6 Up, 7 Down), held for `--release-after-frames` frames of the step (-1: all).
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


M64 = (1 << 64) - 1
BUTTONS = ("a", "b", "select", "start", "right", "left", "up", "down")


def mix(z):
    """splitmix64's finalizer, as runtime/src/actions/action_policy.cpp."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def random_action(seed, step, env):
    return mix((mix(seed ^ mix(step)) + env) & M64) & 0xFF


class Pad:
    """Holds an action byte on one PyBoy: presses and releases only what changes."""

    def __init__(self, pb):
        self.pb = pb
        self.held = 0

    def set(self, action):
        changed = action ^ self.held
        if changed:
            for bit, name in enumerate(BUTTONS):
                if changed >> bit & 1:
                    if action >> bit & 1:
                        self.pb.button_press(name)
                    else:
                        self.pb.button_release(name)
        self.held = action


def skip_boot(pb, limit=600):
    """Ticks single frames until the boot ROM has handed over to the cartridge (PC >= 0x100)."""
    for n in range(limit):
        try:
            if pb.register_file.PC >= 0x100 and pb.memory[0xFF50] & 1:
                return n
        except (AttributeError, IndexError, TypeError):
            pass
        pb.tick(1, False)
    return limit


def worker(rom, n_envs, steps, warmup, frames, barrier, results, game=None):
    instances = [make_pyboy(rom) for _ in range(n_envs)]
    ticks = [make_ticker(pb, frames) for pb in instances]
    if game is not None:  # a game from a point: boot, schedule, then random actions per step
        pads = [Pad(pb) for pb in instances]
        for pb, pad in zip(instances, pads):
            if game["skip_boot"]:
                skip_boot(pb)
            for action, n in game["schedule"]:
                pad.set(action)
                pb.tick(n, False)
            pad.set(0)
        seed, release = game["seed"], game["release_after_frames"]
        held = frames if release < 0 or release >= frames else release

        def run_step(step):
            for e, (pb, pad) in enumerate(zip(instances, pads)):
                pad.set(random_action(seed, step, e) if game["random"] else 0)
                if held > 0:
                    pb.tick(held, False)
                if held < frames:
                    pad.set(0)
                    pb.tick(frames - held, False)

        for i in range(warmup):
            run_step(i)
        barrier.wait()
        t0 = time.perf_counter()
        for i in range(warmup, warmup + steps):
            run_step(i)
        results.put(time.perf_counter() - t0)
    else:
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


def run_point(rom, envs, steps, warmup, frames, cores, game=None):
    procs = min(envs, cores)
    share = [envs // procs + (1 if i < envs % procs else 0) for i in range(procs)]
    barrier = mp.Barrier(procs + 1)
    results = mp.Queue()
    ps = [
        mp.Process(
            target=worker, args=(rom, share[i], steps, warmup, frames, barrier, results, game)
        )
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
    ap.add_argument(
        "--warmup-steps",
        type=int,
        default=150,
        help="untimed steps first; PyBoy runs its boot ROM for about 100 frames",
    )
    ap.add_argument("--frames-per-step", type=int, default=1)
    ap.add_argument("--cores", type=int, default=os.cpu_count(), help="worker processes at most")
    ap.add_argument("--json", help="sweep file (default artifacts/bench/<utc>_<rom>_pyboy.json)")
    ap.add_argument(
        "--actions",
        default="none",
        choices=("none", "random"),
        help="random: GBX's --actions random byte per env per step (see above)",
    )
    ap.add_argument("--seed", type=int, default=1, help="seed of --actions random")
    ap.add_argument(
        "--release-after-frames",
        type=int,
        default=-1,
        help="buttons released after N frames of each step (-1: held all step)",
    )
    ap.add_argument("--schedule", help="JSON [[action, frames], ...] played before the warm-up")
    ap.add_argument(
        "--skip-boot",
        action="store_true",
        help="tick until the boot ROM has handed over before the schedule",
    )
    ap.add_argument("--label", default="pyboy")
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

    game = None
    if args.actions != "none" or args.schedule or args.skip_boot or args.release_after_frames >= 0:
        schedule = []
        if args.schedule:
            with open(args.schedule) as f:
                schedule = [(int(a), int(n)) for a, n in json.load(f)]
        game = {
            "random": args.actions == "random",
            "seed": args.seed,
            "release_after_frames": args.release_after_frames,
            "schedule": schedule,
            "skip_boot": args.skip_boot,
        }
    results = []
    for i, n in enumerate(envs):
        r = run_point(rom, n, args.steps, args.warmup_steps, args.frames_per_step, args.cores, game)
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
            "label": args.label,
            "rom": {
                "name": name,
                "spec": rom,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            },
            "envs": envs,
            "steps": args.steps,
            "warmup_steps": args.warmup_steps,
            "frames_per_step": args.frames_per_step,
            "stage": "emulate_only",
            "threads": args.cores,
            "sync_every": 0,
            "actions": (
                {"policy": "random", "seed": args.seed}
                if args.actions == "random"
                else {"policy": "none"}
            ),
            "release_after_frames": args.release_after_frames,
            "schedule": args.schedule,
            "skip_boot": args.skip_boot,
            "pyboy": {"version": version, "window": "null", "render": False},
        },
        "results": results,
    }
    path = args.json or os.path.join(ROOT, "artifacts", "bench", f"{utc}_{name}_pyboy.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(sweep, f, indent=2)
        f.write("\n")
    print(
        f"{'envs':>8} {'steps':>8} {'seconds':>9} {'total_sps':>14} {'per_env_sps':>12} "
        f"{'frames_per_sec':>14} {'procs':>6}"
    )
    for r in results:
        print(
            f"{r['num_envs']:>8} {r['steps']:>8} {r['seconds']:>9.3f} {r['total_sps']:>14.0f} "
            f"{r['per_env_sps']:>12.1f} {r['frames_per_sec']:>14.0f} {r['threads']:>6}"
        )
    print(f"sweep: {path}")
    return 0


if __name__ == "__main__":
    ensure_venv(sys.argv[1:])
    sys.exit(main(sys.argv[1:]))
