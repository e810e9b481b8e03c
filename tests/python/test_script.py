"""gbx.script: scripted input (button holds, waits, until-conditions) on the ARROWS game, and
the host evaluator of the reward language it uses (gbx.expressions.compile_host)."""

import numpy as np
import pytest

ARROWS = "builtin:ARROWS"
# ARROWS' WRAM (README): C000 score (u16), C002 arrow, C003 LFSR (advances every frame, never
# 0), C004 d-pad bits held at the last frame (bit 0 right), C005 rounds (u16).
RAM = list(range(0xC000, 0xC007))


def arrows(gbx, n=4, **kw):
    kw.setdefault("release_after_frames", 1)  # a hold must outlast it (several calls)
    return gbx.VecEnv(ARROWS, n, obs={"ram": RAM}, frames_per_step=4, **kw)


def test_until_reaches_a_ram_condition_in_every_env(gbx):
    env = arrows(gbx, noop_max=40, seed=3, copy=False)
    obs, _ = env.reset(seed=3)
    lfsr = env.read_memory(0xC003, 0xC004)[:, 0]
    assert len(set(lfsr.tolist())) > 1  # the no-op frames put the envs at different phases
    ran = gbx.script(env, [("wait", 2), ("until", "ram(0xC003) == 0x42", 300)])
    assert (env.read_memory(0xC003, 0xC004)[:, 0] == 0x42).all()
    # Each env stopped at its own frame: as many frames as its phase needed, at least the wait.
    assert ran.shape == (4,) and (ran >= 2).all() and len(set(ran.tolist())) > 1
    # The env's observation (a copy=False view) was refreshed from the scripted state.
    assert (obs[:, RAM.index(0xC003)] == 0x42).all()
    # An until already true takes no frame.
    assert gbx.script(env, [("until", "ram(0xC003) == 0x42", 5)]).tolist() == [0, 0, 0, 0]


def test_a_hold_is_one_press_and_lasts_its_frames(gbx):
    env = arrows(gbx, n=1)
    env.reset()
    # 20 frames of RIGHT with release_after_frames=1: 20 backend calls, one press for the game.
    assert gbx.script(env, [("right", 20)]).tolist() == [20]
    mem = env.read_memory(0xC000, 0xC007)[0]
    assert mem[5] == 1  # one round
    assert mem[4] == 1  # RIGHT still held at the last frame of the step
    gbx.script(env, [("wait", 2), ("left+a", 3), ("wait", 1)])
    mem = env.read_memory(0xC000, 0xC007)[0]
    assert mem[5] == 2 and mem[4] == 0  # a second press, released by the wait


def test_until_holding_buttons(gbx):
    env = arrows(gbx, n=1)
    env.reset()
    # Holding UP: one press (round 1) at the first frame; the condition waits for it.
    ran = gbx.script(env, [("until", "ram16(0xC005) == 1", 30, "up")])
    assert 1 <= ran[0] <= 3
    assert env.read_memory(0xC004, 0xC005)[0, 0] == 4  # UP (P1 order: right, left, up)


def test_timeout_raises_naming_the_step_and_envs(gbx):
    env = arrows(gbx, n=3)
    env.reset()
    steps = [("wait", 5), ("until", "ram(0xC003) == 0", 50)]  # the LFSR is never 0
    with pytest.raises(
        gbx.ScriptTimeout,
        match=r"step 1 \('until', 'ram\(0xC003\) == 0', 50\)"
        r".*within 50 frames in 3 of 3 env\(s\) \(env 0, 1, 2\)",
    ) as err:
        gbx.script(env, steps)
    assert err.value.step == 1 and err.value.envs == [0, 1, 2]
    assert err.value.frames.tolist() == [55, 55, 55]
    # Only in the envs it was run on.
    with pytest.raises(gbx.ScriptTimeout, match=r"1 of 1 env\(s\) \(env 2\)"):
        gbx.script(env, steps, envs=2)


def test_deterministic_and_only_the_chosen_envs(gbx):
    steps = gbx.Script(
        [
            ("start", 4),
            ("wait", 7),
            ("until", "ram(0xC003) < 0x20", 300),
            ("right", 2),
            ("wait", 3),
            ("until", "(ram(0xC003) & 3) == 1", 100),
            ("down+b", 5),
        ]
    )
    states = []
    for _ in range(2):
        env = arrows(gbx, n=3)
        env.reset()
        before = env.save_states()
        ran = steps.run(env, envs=[0, 2])
        after = env.save_states()
        assert ran[1] == 0 and ran[0] == ran[2] > 0
        assert after[1] == before[1]  # env 1 untouched
        assert after[0] == after[2] != before[0]
        states.append(after[0])
        env.close()
    assert states[0] == states[1]


def test_same_game_on_mgba(gbx):
    """Any backend: the reference emulator (no kernel) ends in the cpu kernel's WRAM."""
    steps = [
        ("wait", 3),
        ("until", "ram(0xC003) == 0x42 && pc >= 0x100", 300),
        ("up", 2),
        ("wait", 9),
    ]
    mems = []
    for device, obs in (("cpu", {"ram": RAM}), ("mgba", "vec")):
        env = gbx.VecEnv(ARROWS, 1, device=device, obs=obs, release_after_frames=1)
        env.reset()
        ran = gbx.script(env, steps)
        mems.append((ran.tolist(), env.read_memory(0xC000, 0xC007).tolist()))
        env.close()
    assert mems[0] == mems[1]
    assert mems[0][1][0][5] == 1  # the UP press was a round


def test_bad_steps_raise_before_any_frame(gbx):
    bad = [
        ([("jump", 4)], r"step 0 \('jump', 4\): unknown button 'jump'"),
        ([("a", 0)], r"frames must be an int >= 1, got 0"),
        ([("wait", -1)], r"frames must be an int >= 0"),
        ([("wait", 2), ("a+a", 2)], r"step 1 .*named twice"),
        ([("up+UP", 2)], r"button 'up' named twice in 'up\+UP'"),
        # "noop" is an action set's label (gbx.actions.button_mask), not a button to hold
        (
            [("noop", 2)],
            r"unknown button 'noop' in 'noop' \(buttons: a, b, select, start, right, left, "
            r"up, down; join several with '\+'\)",
        ),
        ([("a+noop", 2)], r"unknown button 'noop' in 'a\+noop'"),
        ([("a+", 2)], r"unknown button '' in 'a\+'"),
        ([("until", "ram(0xC003 == 1", 10)], r"<script step 0>:1:\d+: unbalanced '\('"),
        ([("until", "prev(0) > 1", 10)], r"only available in reward and done"),
        ([("until", "ram(0xC003) == 1", 0)], r"max_frames must be an int >= 1"),
        ([("until", "ram(0xC003) == 1")], r"takes 2 or 3 arguments"),
        ([("until", "1", 5, "fly")], r"unknown button 'fly'"),
        (["a"], r"step 0 'a': a step is a tuple"),
        ("a", r"a script is a list of steps"),
    ]
    for steps, match in bad:
        with pytest.raises(gbx.ScriptError, match=match):
            gbx.Script(steps)
    env = arrows(gbx, n=1)
    with pytest.raises(RuntimeError, match=r"call env.reset\(\)"):
        gbx.script(env, [("wait", 1)])
    env.reset()
    for envs, match in (
        (5, r"out of range"),
        (np.zeros(1, bool), r"selects no env"),
        ("x", r"envs must be"),
    ):
        with pytest.raises(ValueError, match=match):
            gbx.script(env, [("wait", 1)], envs=envs)
    env0 = arrows(gbx, n=1, release_after_frames=0)
    env0.reset()
    with pytest.raises(ValueError, match=r"release_after_frames=0"):
        gbx.script(env0, [("a", 1)])


def test_json_steps(gbx):
    """A script stored as JSON (lists) is the same script."""
    import json

    steps = [("wait", 3), ("until", "ram(0xC003) == 0x42", 300)]
    assert gbx.Script(json.loads(json.dumps(steps))).steps == tuple(steps)


def _literal(v) -> str:
    """A C++ literal of the host's value, of a type the comparison keeps exact."""
    if v.dtype == np.bool_:
        return "1" if v else "0"
    if v.dtype == np.float32:
        return f"{float(v)!r}f"
    if v.dtype == np.float64:
        return repr(float(v))
    if v.dtype == np.uint32:
        return f"{int(v)}u"
    if int(v) == -(2**31):
        return "(-2147483647 - 1)"
    return f"({int(v)})"


def test_host_expressions_agree_with_the_kernel(gbx):
    """The host evaluator gives the kernel's values, C++ types included: one kernel whose
    reward has bit i set where expression i equals the host's value of it (same state)."""
    exprs = [
        "ram(0xC003) - 200 < 5",  # uint32 wraps
        "-1 < 0u",  # int converted to unsigned
        "ram16(0xFFFE) + sp",
        "ram(0xC003) / 3",  # a / (float) b
        "~ram(0xC003)",
        "a ? pc : 2.5",
        "(sp >> 4) ^ 0x5",
        "1 << 31",
        "010 + 0x10u",
        "!ram(0xC003) + 3 * ram(0xC000 + (a & 3))",
        "ram(0xC003) > 100 ? ram(0xC003) : -ram(0xC003)",
        "(ram(0xFF44) * 1.5f - 7 / 2 >= ram(0xC003)) || (pc & 0xF) == 3",
    ]
    host = [gbx.expressions.compile_host(e) for e in exprs]
    # The state after one frame from power-on, on the cpu kernel (the tests' cached ARROWS one).
    probe = arrows(gbx, n=1)
    probe.reset()
    gbx.script(probe, [("wait", 1)])
    values = [h.evaluate(probe)[0] for h in host]
    probe.close()
    reward = " + ".join(
        f"(({e}) == {_literal(v)}) * {1 << i}" for i, (e, v) in enumerate(zip(exprs, values))
    )
    env = gbx.VecEnv(
        ARROWS, 1, obs={"ram": RAM}, frames_per_step=1, release_after_frames=1, reward=reward
    )
    env.reset()
    _, r, *_ = env.step(np.zeros(1, dtype=np.int64))
    assert int(r[0]) == (1 << len(exprs)) - 1, [
        exprs[i] for i in range(len(exprs)) if not int(r[0]) >> i & 1
    ]


def test_host_expression_errors(gbx):
    compile_host = gbx.expressions.compile_host
    for text, match in (
        ("", "empty expression"),
        ("x + 1", "unknown name 'x'"),
        ("a = 1", "'=' is not allowed"),
        ("1 % 2", "'%' is not allowed"),
        ("1.5 & 1", "needs integer operands"),
        ("~1.0", "needs integer"),
        ("ram", "must be called"),
        ("pc(1)", "is a value"),
        ("1 2", "unexpected '2'"),
        ("0x", "hex literal without digits"),
        ("08", "malformed number"),
        ("1 /* c */", "comments"),
    ):
        with pytest.raises(ValueError, match=match):
            compile_host(text, "t")


def test_state_equals_stepping_frame_by_frame(gbx):
    """A script's end state is byte-equal to env.step one frame at a time with the same
    buttons (screen buffers included: gbx.play's F5 state of the same input is the script's),
    even from an env whose frames_per_step runs several frames a call."""
    steps = [("wait", 37), ("right+a", 12), ("until", "ram(0xC003) == 0x42", 300), ("wait", 5)]
    env = gbx.VecEnv(
        ARROWS, 1, frames_per_step=24, release_after_frames=8, actions="multibinary", obs="pixels"
    )
    env.reset()
    total = int(gbx.script(env, steps)[0])
    scripted = env.save_state(0)
    env.close()
    until = total - 37 - 12 - 5
    assert 0 < until <= 300
    # The same release_after_frames: a state holds the pending release of the last press.
    ref = gbx.VecEnv(
        ARROWS, 1, frames_per_step=1, release_after_frames=8, actions="multibinary", obs="pixels"
    )
    ref.reset()
    right_a = np.array([[1, 0, 0, 0, 1, 0, 0, 0]], dtype=np.int8)
    for k in range(total):
        ref.step(right_a if 37 <= k < 49 else np.zeros((1, 8), dtype=np.int8))
        if k + 1 == total - 5:  # where the until stopped
            assert ref.read_memory(0xC003, 0xC004)[0, 0] == 0x42
    assert ref.save_state(0) == scripted


CUDA_SCRIPT = r"""
import numpy as np
import gbx
RAM = list(range(0xC000, 0xC007))
steps = [("wait", 3), ("until", "ram(0xC003) == 0x42 && pc >= 0x100", 300), ("up+b", 11),
         ("wait", 4), ("until", "ram(0xC003) < 0x10", 300, "left")]
out = {}
for device in ("cuda", "cpu"):
    env = gbx.VecEnv("builtin:ARROWS", 3, device=device, obs={"ram": RAM}, frames_per_step=4,
                     release_after_frames=2, noop_max=30, seed=5, copy=False)
    obs, _ = env.reset(seed=5)
    ran = gbx.script(env, steps, envs=[0, 2])
    out[device] = (ran.tolist(), env.read_memory(0xC000, 0xC007).tolist(), env.save_states(),
                   obs.copy())
    env.close()
cu, cpu = out["cuda"], out["cpu"]
assert cu[0] == cpu[0] and cu[0][1] == 0 and cu[0][0] > 0, (cu[0], cpu[0])
assert cu[1] == cpu[1], (cu[1], cpu[1])
assert cu[2] == cpu[2]  # the same kernel state, byte for byte
np.testing.assert_array_equal(cu[3], cpu[3])  # the observations refreshed from it
print("OK", cu[0])
"""


@pytest.mark.cuda_double
def test_script_on_cuda_equals_cpu():
    """The cuda backend (on the CUDA driver double, tests/cuda_double) ends a script in the
    cpu kernel's state, byte for byte."""
    from test_cuda_arrays import run_on_double

    out = run_on_double(CUDA_SCRIPT)
    assert out.strip().splitlines()[-1].startswith("OK"), out
