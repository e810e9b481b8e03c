"""Reward builtins (popcount, sum, bcd, seen, seen_count) and hooks (hit, info["hits"]),
docs/guide/rewards.md: compiled results against Python references over the machine's own RAM,
seen() cleared by resets and carried by save states, hooks counted identically by the
interpreter and the ROM-specialized kernel, and by cpu and cuda (the CUDA driver double)."""

import os
import textwrap

import numpy as np
import pytest
from conftest import ROM

GAMES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "games")


def game(name):
    path = os.path.join(GAMES, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is absent")
    return path


def ref_popcount(mem, lo, hi):
    return int(sum(bin(b).count("1") for b in mem[lo : hi + 1]))


def ref_bcd(mem, at, n):
    v = 0
    for b in mem[at : at + n]:
        v = v * 100 + (b >> 4) * 10 + (b & 15)
    return v


def wram(env, i):
    return np.frombuffer(env.backend.read_memory(i, 0xC000, 0xE000), dtype=np.uint8)


@pytest.mark.parametrize(
    "reward,ref",
    [
        # Float32 holds both parts exactly: popcount <= 2400 < 4096, the sum's low 12 bits above.
        (
            "popcount(0xC000, 0xC12B) + 4096 * (sum(0xC000, 0xC0FF) & 0xFFF)",
            lambda m: ref_popcount(m, 0x000, 0x12B) + 4096 * (int(m[0x000:0x100].sum()) & 0xFFF),
        ),
        ("bcd(0xC0A0, 3)", lambda m: ref_bcd(m, 0x0A0, 3)),
    ],
)
def test_popcount_sum_bcd_rewards_on_a_game(reward, ref):
    # 2048: the board and score live in WRAM; random moves change them every few steps.
    import gbx

    rom = game("2048.gb")
    n = 3
    e = gbx.VecEnv(rom, n, obs="vec", frames_per_step=8, seed=1, reward=reward)
    e.reset(seed=1)
    rng = np.random.default_rng(0)
    distinct = set()
    for t in range(40):
        _, r, *_ = e.step(rng.integers(0, 8, n))
        for i in range(n):
            assert r[i] == np.float32(ref(wram(e, i))), (t, i)
            distinct.add(float(r[i]))
    assert len(distinct) > 1  # the RAM changed under the reward


def test_seen_exploration_reward_on_a_game():
    # An exploration bonus: 1 the first time this episode a triple of board cells shows up.
    import gbx

    rom = game("2048.gb")
    n = 2
    key = "ram(0xC054) << 16 | ram(0xC040) << 8 | ram(0xC05A)"
    e = gbx.VecEnv(
        rom, n, obs="vec", frames_per_step=4, seed=2, seen_capacity=64, reward=f"seen({key})"
    )
    e.reset(seed=2)
    sets = []
    for i in range(n):
        m = wram(e, i)
        sets.append({int(m[0x54]) << 16 | int(m[0x40]) << 8 | int(m[0x5A])})  # reset refresh
    rng = np.random.default_rng(5)
    total = 0
    for t in range(60):
        _, reward, *_ = e.step(rng.integers(0, 8, n))
        for i in range(n):
            m = wram(e, i)
            k = int(m[0x54]) << 16 | int(m[0x40]) << 8 | int(m[0x5A])
            fresh = k not in sets[i] and len(sets[i]) < 64
            if fresh:
                sets[i].add(k)
            assert reward[i] == (1.0 if fresh else 0.0), (t, i, hex(k))
            total += int(reward[i])
    assert total > 0


def test_seen_cleared_on_reset_and_autoreset_and_carried_by_save_states():
    import gbx

    # ALU_LOOP: DIV (FF04) and B move every frame, so each step produces a new key for a while.
    kw = dict(
        obs="vec",
        frames_per_step=1,
        release_after_frames=0,
        seen_capacity=1000,
        track=["seen(ram(0xFF04) | b << 8)"],
        reward="seen_count()",
    )
    e = gbx.VecEnv(ROM, 2, **kw)
    e.reset(seed=0)
    counts = []
    for _ in range(12):
        _, r, *_ = e.step(np.zeros(2, dtype=np.int32))
        counts.append(r.copy())
    assert counts[-1][0] > 6, counts  # the set grew
    # A save carries the set: env 1 loaded with env 0's state counts exactly as env 0 from then.
    blob = e.save_state(0)
    assert b"seen" in blob
    e.load_state(1, blob)
    for _ in range(5):
        _, r, *_ = e.step(np.zeros(2, dtype=np.int32))
        assert r[0] == r[1] and r[0] > counts[-1][0] - 1, r
    # A reset empties it (the reset's refresh inserts the reset state's key: count 1 after it).
    e.reset(seed=0)
    _, r, *_ = e.step(np.zeros(2, dtype=np.int32))
    assert (r <= 2).all(), r
    # A reset state saved mid-episode starts an empty set too.
    e.set_reset_state(blob)
    e.reset(seed=0)
    _, r, *_ = e.step(np.zeros(2, dtype=np.int32))
    assert (r <= 2).all(), r
    # Autoreset: episodes end at 5 keys, and the count starts over in the next episode.
    a = gbx.VecEnv(ROM, 1, done="seen_count() >= 5", **kw)
    a.reset(seed=0)
    seq, ends = [], 0
    for _ in range(20):
        _, r, term, *_ = a.step(np.zeros(1, dtype=np.int32))
        seq.append(int(r[0]))
        ends += int(term[0])
    assert ends >= 2, seq
    assert max(seq) <= 5, seq


def test_seen_state_into_a_kernel_without_seen_and_back():
    import gbx

    kw = dict(obs="vec", frames_per_step=1, release_after_frames=0)
    plain = gbx.VecEnv(ROM, 1, reward="b", **kw)
    plain.reset(seed=0)
    plain.step(np.zeros(1, dtype=np.int32))
    s_plain = plain.save_state(0)
    assert b"seen" not in s_plain
    e = gbx.VecEnv(
        ROM, 1, seen_capacity=8, reward="seen_count()", track=["seen(ram(0xFF04))"], **kw
    )
    e.reset(seed=0)
    for _ in range(8):
        _, r, *_ = e.step(np.zeros(1, dtype=np.int32))
    assert r[0] >= 5, r
    # No set in the blob: an empty one (load_state's output refresh inserts the loaded
    # state's key, the step its own).
    e.load_state(0, s_plain)
    _, r, *_ = e.step(np.zeros(1, dtype=np.int32))
    assert 1 <= r[0] <= 2, r
    s_seen = e.save_state(0)
    plain.load_state(0, s_seen)  # the set has nowhere to go there: dropped, the machine loads
    other = gbx.VecEnv(
        ROM, 1, seen_capacity=100, reward="seen_count()", track=["seen(ram(0xFF04))"], **kw
    )
    with pytest.raises(ValueError, match="seen\\(\\) set has"):
        other.load_state(0, s_seen)


@pytest.mark.parametrize(
    "kw,why",
    [
        (dict(seen_capacity=0, reward="seen(a)"), r"seen_capacity must be an int in 1\.\.65536"),
        (
            dict(seen_capacity=65537, reward="seen(a)"),
            r"seen_capacity must be an int in 1\.\.65536",
        ),
        (dict(reward="popcount(0xC010, 0xC000)"), r"lo > hi"),
        (dict(reward="sum(0xC000, 0x10000)"), r"outside the address space"),
        (dict(reward="popcount(0xC000, a)"), r"takes two integer literals"),
        (dict(reward="bcd(0xC000, 0)"), r"byte count 0 is outside 1\.\.8"),
        (dict(reward="bcd(0xC000, 9)"), r"byte count 9 is outside 1\.\.8"),
        (dict(reward="hit(0)"), r"only 0 hook\(s\) given"),
        (dict(reward="hit(1)", hooks=[0x150]), r"only 1 hook\(s\) given"),
        (dict(hooks=[0xFF40]), r"OAM or I/O"),
        (dict(hooks=[0xFFFF]), r"IE register"),
        (dict(hooks=[0x10000]), r"outside 0x0000-0xFFFF"),
        (dict(hooks=["2:4000"]), r"bank 2 is beyond the 2 ROM banks"),
        (dict(hooks=["1:C000"]), r"a bank applies only to the switchable window"),
        (dict(hooks=["x:y"]), r"an address is an int"),
    ],
)
def test_bad_inputs_are_one_clear_value_error(gbx, kw, why):
    with pytest.raises(ValueError, match=why):
        gbx.VecEnv(ROM, 1, obs="vec", **kw)


def hot_pcs(env, steps, n):
    """Addresses the game runs through: PCs at step ends (its idle loops) over a short run."""
    pcs = set()
    rng = np.random.default_rng(9)
    env.reset(seed=9)
    for _ in range(steps):
        env.step(rng.integers(0, 8, n))
        for i in range(n):
            pcs.add(env.cpu_state(i)["pc"])
    return sorted(pcs)


def test_hooks_interpreter_equals_specialized_kernel():
    import gbx

    rom = game("2048.gb")
    n = 3
    probe = gbx.VecEnv(rom, n, obs="vec", frames_per_step=4, seed=9)
    pcs = [p for p in hot_pcs(probe, 20, n) if p < 0x8000][:4]
    assert pcs
    # The VBlank vector, the idle-loop PCs, the entry point, one banked address (bank 1).
    hooks = [0x0040, *pcs, 0x0100, "1:4000"]
    kw = dict(obs="vec", frames_per_step=4, seed=3, hooks=hooks, reward="hit(0) + 2 * hit(1)")
    interp = gbx.VecEnv(rom, n, **kw)
    spec = gbx.VecEnv(rom, n, specialize="auto:8", **kw)
    spec.reset(seed=3)
    for _ in range(3):  # 12 frames profiled, then the specialized kernel compiled and swapped in
        spec.step(np.zeros(n, dtype=np.int32))
    spec.backend.finish_tier_up()
    assert spec.backend.specialize_status == "specialized", spec.backend.specialize_status
    interp.reset(seed=3)
    spec.reset(seed=3)
    rng = np.random.default_rng(4)
    total = np.zeros(len(hooks), dtype=np.int64)
    for t in range(60):
        a = rng.integers(0, 8, n)
        _, r_i, _, _, info_i = interp.step(a)
        _, r_s, _, _, info_s = spec.step(a)
        assert info_i["hits"].shape == (n, len(hooks)) and info_i["hits"].dtype == np.uint32
        np.testing.assert_array_equal(info_i["hits"], info_s["hits"], err_msg=f"step {t}")
        np.testing.assert_array_equal(r_i, r_s)
        np.testing.assert_array_equal(
            r_i, (info_i["hits"][:, 0] + 2 * info_i["hits"][:, 1]).astype(np.float32)
        )
        total += info_i["hits"].sum(axis=0, dtype=np.int64)
    assert total[0] > 0 and total[1] > 0, total  # the hooks were reached


DOUBLE_SCRIPT = textwrap.dedent(
    r"""
    import numpy as np
    import gbx

    N = 3
    # ARROWS: a press scores (C000) and counts rounds (C005); its LFSR (C003) moves every frame.
    probe = gbx.VecEnv("builtin:ARROWS", N, obs="vec", frames_per_step=2, seed=1)
    probe.reset(seed=1)
    pcs = set()
    for _ in range(6):
        probe.step(np.arange(N) % 8)
        pcs |= {probe.cpu_state(i)["pc"] for i in range(N)}
    hooks = [0x0040, *sorted(p for p in pcs if p < 0x8000)[:3]]
    KW = dict(obs="vec", frames_per_step=2, release_after_frames=1, seed=7, hooks=hooks,
              seen_capacity=16, track=["seen(ram(0xC003) << 8 | ram(0xC000))"],
              reward="val(0) + 2 * seen_count() + 64 * hit(0) + popcount(0xC000, 0xC00F)"
                     " + bcd(0xC000, 2) * 4096",
              done="seen_count() >= 12")
    cu = gbx.VecEnv("builtin:ARROWS", N, device="cuda", **KW)
    cpu = gbx.VecEnv("builtin:ARROWS", N, device="cpu", **KW)

    def same(x, y, what):
        if isinstance(x, dict):
            assert set(x) == set(y), what
            for k in x:
                same(x[k], y[k], f"{what}[{k}]")
            return
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=what)

    same(cu.reset(seed=7)[0], cpu.reset(seed=7)[0], "reset")
    rng = np.random.default_rng(3)
    ends = hit = 0
    for t in range(120):
        if t == 60:  # the set travels in save states on both backends
            blob_cu, blob_cpu = cu.save_state(1), cpu.save_state(1)
            assert blob_cu == blob_cpu and b"seen" in blob_cu
            cu.load_state(0, blob_cu)
            cpu.load_state(0, blob_cpu)
        a = rng.integers(0, 8, N)
        r_cu, r_cpu = cu.step(a), cpu.step(a)
        for x, y, what in zip(r_cu, r_cpu, ("obs", "reward", "terminated", "truncated", "info")):
            same(x, y, f"step {t} {what}")
        ends += int(r_cu[2].sum())
        hit += int(r_cu[4]["hits"].sum())
    assert ends > 0 and hit > 0, (ends, hit)
    print("OK", ends, hit)
    """
)


@pytest.mark.cuda_double
def test_builtins_and_hooks_cuda_equal_cpu_on_the_driver_double():
    from test_cuda_arrays import run_on_double

    out = run_on_double(DOUBLE_SCRIPT)
    assert out.strip().splitlines()[-1].startswith("OK"), out
