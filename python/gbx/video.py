"""``gbx.record_video``: env 0's screen, step by step, as an MP4 file.

Needs imageio and imageio-ffmpeg (``pip install 'gbx[video]'``; imageio-ffmpeg's wheel
carries its own ffmpeg binary, about 68 MB).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

# One DMG frame is 70224 T-cycles at 4194304 Hz.
FRAMES_PER_SECOND = 4194304 / 70224


def record_video(
    env,
    path,
    frames: int,
    policy: Callable | None = None,
    fps: float | None = None,
    scale: int = 2,
    seed: int | None = None,
) -> int:
    """Resets ``env`` (with ``seed``), steps it ``frames`` times and writes env 0's screen
    after the reset and after each step to the MP4 ``path``; returns the number of video
    frames written (``frames + 1``).

    - ``env``: a :class:`gbx.VecEnv` made with ``render_mode="rgb_array"``.
    - ``policy``: ``policy(obs) -> actions`` for all envs; default: random actions from
      ``env.action_space``.
    - ``fps``: video frames per second; default real time, one video frame per step =
      ``frames_per_step`` emulated frames (59.73 / frames_per_step, so 24 frames a step play
      at ~2.5 fps).
    - ``scale``: each Game Boy pixel becomes ``scale`` x ``scale`` pixels (nearest).
    """
    if getattr(env, "render_mode", None) != "rgb_array":
        raise ValueError("record_video needs an env made with render_mode='rgb_array'")
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 0:
        raise ValueError(f"frames must be an int >= 0 (got {frames!r})")
    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)) or scale < 1:
        raise ValueError(f"scale must be an int >= 1 (got {scale!r})")
    if fps is None:
        fps = FRAMES_PER_SECOND / env.frames_per_step
    if not fps > 0:
        raise ValueError(f"fps must be > 0 (got {fps!r})")
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401 (the writer's backend; its absence is the usual cause)
    except ImportError as e:
        raise ImportError(
            "record_video needs imageio and imageio-ffmpeg: pip install 'gbx[video]'"
        ) from e

    path = Path(path)
    if path.suffix.lower() != ".mp4":
        raise ValueError(f"record_video writes MP4: the path must end in .mp4 (got {str(path)!r})")
    obs, _ = env.reset(seed=seed)
    if policy is None:
        policy = lambda _obs: env.action_space.sample()  # noqa: E731

    def frame():
        rgb = env.render()
        if scale > 1:
            rgb = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
        return rgb

    # 160x144 and its multiples are multiples of 16, ffmpeg's macroblock: no resize.
    with imageio.get_writer(
        str(path),
        format="FFMPEG",
        mode="I",
        fps=fps,
        codec="libx264",
        quality=8,
        macro_block_size=16,
    ) as w:
        w.append_data(frame())
        for _ in range(int(frames)):
            obs, *_ = env.step(policy(obs))
            w.append_data(frame())
    return int(frames) + 1
