"""render() (Gymnasium rgb_array) and gbx.record_video (MP4 through imageio-ffmpeg)."""

import numpy as np
import pytest
from conftest import ROM

GREYS = np.array([0xFF, 0xAA, 0x55, 0x00], dtype=np.uint8)


@pytest.fixture(scope="module")
def env(gbx):
    e = gbx.VecEnv(
        ROM,
        num_envs=2,
        obs="vec",
        frames_per_step=2,
        release_after_frames=0,
        seed=0,
        render_mode="rgb_array",
    )
    yield e
    e.close()


def test_render_is_env0_screen_as_rgb(env, gbx):
    assert env.metadata["render_modes"] == ["rgb_array"]
    assert env.render_mode == "rgb_array"
    env.reset(seed=0)
    env.step(np.zeros(2, dtype=np.int64))
    rgb = env.render()
    assert rgb.shape == (144, 160, 3) and rgb.dtype == np.uint8
    shades = env.backend.screen(0)
    np.testing.assert_array_equal(rgb, np.repeat(GREYS[shades][..., None], 3, axis=2))
    # Post-boot: the logo (shade 3, black) on a white screen.
    assert set(np.unique(rgb)) == {0x00, 0xFF}
    assert (rgb == 0).any()


def test_render_matches_the_pixels_observation(gbx, env):
    px = gbx.VecEnv(ROM, num_envs=2, frames_per_step=2, release_after_frames=0, obs="pixels")
    px.reset(seed=0)
    env.reset(seed=0)
    obs, *_ = px.step(np.zeros(2, dtype=np.int64))
    env.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(env.render()[..., 0], GREYS[obs[0]])
    px.close()


def test_bad_render_mode(gbx):
    with pytest.raises(ValueError, match="render_mode"):
        gbx.VecEnv(ROM, num_envs=1, obs="vec", render_mode="human")


def test_record_video_writes_an_mp4(gbx, env, tmp_path):
    imageio = pytest.importorskip("imageio.v2")  # the [video] extra; the test extra has it
    path = tmp_path / "run.mp4"
    n = gbx.record_video(env, path, 5, seed=0, scale=2)
    assert n == 6 and path.stat().st_size > 0
    frames = imageio.mimread(str(path), format="FFMPEG")
    assert len(frames) == 6
    f = np.asarray(frames[-1])
    assert f.shape == (288, 320, 3)
    # Lossy, but the picture is the screen: compare with the last rendered frame, scaled.
    want = np.repeat(np.repeat(env.render(), 2, axis=0), 2, axis=1).astype(int)
    assert np.abs(f.astype(int) - want).mean() < 8


def test_record_video_errors(gbx, tmp_path):
    e = gbx.VecEnv(ROM, num_envs=1, obs="vec", frames_per_step=1)
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        gbx.record_video(e, tmp_path / "x.mp4", 3)
    e.close()


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"frames": -1}, "frames"),
        ({"frames": 2, "scale": 0}, "scale"),
        ({"frames": 2, "path": "x.avi"}, "MP4"),
    ],
)
def test_record_video_bad_arguments(gbx, env, tmp_path, kw, msg):
    kw = dict(kw)
    path = tmp_path / kw.pop("path", "x.mp4")
    with pytest.raises(ValueError, match=msg):
        gbx.record_video(env, path, **kw)


def test_native_screen_and_output_errors(gbx):
    e = gbx.VecEnv(ROM, num_envs=2, obs="vec", frames_per_step=1)
    with pytest.raises(ValueError, match="does not render"):
        e.backend.screen(0)
    with pytest.raises(IndexError, match="out of range"):
        e.backend.screen(2)
    with pytest.raises(ValueError, match="no 'pixels' output"):
        e.backend.output("pixels")
    e.close()
