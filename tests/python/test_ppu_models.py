"""The two pixel models from Python (``gbx.VecEnv(ppu=...)``, docs/machine/ppu-fifo.md): the
fifo kernel draws Mealybug Tearoom's m3_bgp_change (BGP written during every line's mode 3)
as its expected DMG screen, pixel for pixel, where the line kernel does not; cuda (on the CUDA
driver double) returns the same pixel observations as cpu under both models."""

import os
import textwrap

import numpy as np
import pytest
from test_cuda_arrays import run_on_double

MEALYBUG = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "testroms", "mealybug"
)
ROM = os.path.join(MEALYBUG, "m3_bgp_change.gb")
EXPECTED = os.path.join(MEALYBUG, "expected-dmg", "m3_bgp_change.png")


def mealybug_rom():
    if not (os.path.exists(ROM) and os.path.exists(EXPECTED)):
        pytest.skip(f"{ROM} or its expected screen not present (../shared/testroms)")
    return ROM


def expected_shades():
    import imageio.v3 as iio

    grey = iio.imread(EXPECTED).astype(np.int64)  # 255, 170, 85, 0 for shades 0..3
    assert grey.shape == (144, 160)
    return (255 - grey) // 85


def screens(gbx, rom, ppu, device="cpu", n=2):
    env = gbx.VecEnv(rom, n, obs="pixels", ppu=ppu, device=device, frames_per_step=8, seed=0)
    env.reset(seed=0)
    for _ in range(4):
        obs, *_ = env.step(np.zeros(n, dtype=np.int64))
    env.close()
    return obs


def test_fifo_draws_the_mealybug_screen_line_does_not(gbx):
    rom = mealybug_rom()
    want = expected_shades()
    fifo = screens(gbx, rom, "fifo")
    line = screens(gbx, rom, "line")
    for env in range(2):
        np.testing.assert_array_equal(fifo[env], want, err_msg=f"fifo, env {env}")
        # The line model draws each line in one palette: most of the screen differs.
        assert (line[env] != want).sum() > 10000, (line[env] != want).sum()


def test_unknown_ppu_is_a_value_error(gbx):
    with pytest.raises(ValueError, match="unknown ppu 'dot'"):
        gbx.VecEnv("builtin:ALU_LOOP", 1, ppu="dot")


SCRIPT = textwrap.dedent(
    r"""
    import os
    import numpy as np
    import gbx

    rom, N = os.environ["GBX_TEST_PPU_ROM"], 2
    for ppu in ("line", "fifo"):
        out = {}
        for device in ("cuda", "cpu"):
            env = gbx.VecEnv(rom, N, obs="pixels", ppu=ppu, device=device, frames_per_step=8,
                             seed=0)
            frames = [env.reset(seed=0)[0]]
            for _ in range(4):
                frames.append(env.step(np.zeros(N, dtype=np.int64))[0])
            out[device] = np.stack(frames)
            env.close()
        np.testing.assert_array_equal(out["cuda"], out["cpu"], err_msg=ppu)
        # Something was drawn: more than one shade on the last screen.
        assert len(np.unique(out["cpu"][-1])) > 1, ppu
    print("OK")
    """
)


@pytest.mark.cuda_double
def test_pixels_cuda_equal_cpu_under_both_models_on_the_driver_double():
    # Mealybug's ROM where present (the models differ on it); else a built-in scene.
    rom = ROM if os.path.exists(ROM) else "builtin:PPU_BENCH"
    out = run_on_double(SCRIPT, GBX_TEST_PPU_ROM=rom)
    assert out.strip().splitlines()[-1] == "OK", out
