"""Reward / done / tracked expressions compiled into the kernel."""

import numpy as np
import pytest
from conftest import ROM


def test_tracked_value_and_prev(gbx):
    # ALU_LOOP counts B up forever; reward = B now - B at the previous step.
    e = gbx.VecEnv(
        ROM,
        num_envs=2,
        obs="vec",
        frames_per_step=1,
        release_after_frames=0,
        track=["b", "ram16(0xFFFE) + 1"],
        reward="val(0) - prev(0)",
        done="val(1) == 0",
    )
    e.reset(seed=0)
    b_prev = [e.cpu_state(i)["b"] for i in range(2)]
    assert b_prev == [0, 0]  # post-boot B
    for _ in range(5):
        _, reward, term, _, _ = e.step(np.zeros(2, dtype=np.int32))
        b_now = [e.cpu_state(i)["b"] for i in range(2)]
        np.testing.assert_array_equal(reward, np.float32(b_now[0] - b_prev[0]))
        assert not term.any()  # ram16(0xFFFE) + 1 is never 0
        b_prev = b_now


def test_reward_reads_registers_and_memory(gbx):
    e = gbx.VecEnv(
        ROM,
        num_envs=2,
        obs="vec",
        frames_per_step=1,
        release_after_frames=0,
        reward="a + (ram(0x10100) << 8)",
    )  # address masked to 0x0100: ROM byte 0x00
    e.reset(seed=0)
    _, reward, *_ = e.step(np.zeros(2, dtype=np.int32))
    a = e.cpu_state(0)["a"]
    assert reward[0] == np.float32(a)
    assert e.backend.read_memory(0, 0x100, 0x101) == b"\x00"


def test_division_by_zero_is_float_not_a_crash(gbx):
    e = gbx.VecEnv(
        ROM, num_envs=1, obs="vec", frames_per_step=1, release_after_frames=0, reward="1 / (a - a)"
    )
    e.reset(seed=0)
    _, reward, *_ = e.step(np.zeros(1, dtype=np.int32))
    assert np.isinf(reward[0])


def test_compile_error_names_the_snippet_line(gbx):
    with pytest.raises(gbx.CompileError, match=r"<reward>:2:"):
        gbx.VecEnv(ROM, num_envs=1, obs="vec", reward="ram(0xC000) +\n (1.5 & a)")


@pytest.mark.parametrize(
    "expr,why",
    [
        ("a = 1", r"<reward>:1:3: '=' is not allowed"),
        ("system(0)", r"<reward>:1:1: unknown name 'system'"),
        ("a++", r"'\+' is not allowed"),
        ("ram(0x10); a", r"';' is not allowed"),
        ("{ a }", r"'\{' is not allowed"),
        ("a % 3", r"'%' is not allowed"),
        ("ram", r"ram must be called"),
        ("a(1)", r"a is a value"),
        ("prev(0)", r"only 0 tracked value"),
        ("prev(a)", r"integer literal"),
        ("p.reward[0]", r"'\.' is not allowed"),
        ("a /* x */", r"comments"),
        ('"s"', r"is not allowed"),
        ("(a", r"unbalanced"),
        ("1x", r"malformed number"),
    ],
)
def test_expressions_are_checked_before_compiling(gbx, expr, why):
    with pytest.raises(ValueError, match=why):
        gbx.VecEnv(ROM, num_envs=1, obs="vec", reward=expr)


def test_track_may_not_use_prev(gbx):
    with pytest.raises(ValueError, match=r"<track\[0\]>.*only available in reward and done"):
        gbx.VecEnv(ROM, num_envs=1, obs="vec", track=["prev(0)"], reward="val(0)")
