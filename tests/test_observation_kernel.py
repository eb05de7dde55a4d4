"""The C screen kernel agrees bit for bit with the numpy reference, which is the fallback."""

from __future__ import annotations

import numpy as np
import pytest

from oakemu_rl.emulator import ZXSpectrum
from oakemu_rl.emulator.screen import PALETTE
from oakemu_rl.envs import OakEmuEnv
from oakemu_rl.envs import observation as observation_module
from oakemu_rl.envs.observation import GRAY_LUT
from oakemu_rl.envs.resample import AreaResampler, area_bins, native_kernel

kernel = native_kernel()
needs_kernel = pytest.mark.skipif(
    kernel is None, reason="the C screen kernel is not built (no C compiler at install time)"
)


def test_area_bins_cover_every_output_evenly() -> None:
    bins = area_bins(184, 84)
    counts = np.bincount(bins)
    assert len(counts) == 84 and counts.min() >= 2 and counts.max() <= 3
    assert np.all(np.diff(bins) >= 0)
    assert area_bins(10, 10).tolist() == list(range(10))


def test_resampler_means_blocks_and_rounds_half_up() -> None:
    image = np.array([[0, 1, 10, 20], [3, 4, 30, 40]], dtype=np.uint8)
    out = AreaResampler(2, 4, 1, 2)(image)
    assert out.tolist() == [[2, 25]]  # (0+1+3+4)/4 = 2.0; (10+20+30+40)/4 = 25.0
    assert AreaResampler(1, 2, 1, 1)(np.array([[1, 2]], dtype=np.uint8)).tolist() == [
        [2]
    ]  # 1.5 -> 2


@needs_kernel
@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("flash", [False, True])
@pytest.mark.parametrize(
    "area,size",
    [
        ((0, 8, 256, 184), (84, 84)),
        ((3, 5, 200, 150), (37, 91)),
        ((17, 9, 100, 60), (60, 33)),
        ((0, 0, 256, 192), (192, 256)),
        ((250, 190, 6, 2), (1, 1)),
    ],
)
def test_kernel_matches_reference(
    channels: int, flash: bool, area: tuple[int, int, int, int], size: tuple[int, int]
) -> None:
    assert kernel is not None
    machine = ZXSpectrum()
    rng = np.random.default_rng(sum(area) + channels)
    machine.write(0x4000, rng.integers(0, 256, 6912, dtype=np.uint8).tobytes())
    machine.frame_count = 16 if flash else 0
    x, y, w, h = area
    out_h, out_w = size
    lut = GRAY_LUT if channels == 1 else PALETTE
    out = np.empty((out_h, out_w, channels), dtype=np.uint8)
    kernel.render_area(
        machine.display_memory(), machine.flash_phase, channels, lut, x, y, w, h, out, out_h, out_w
    )
    pixels = machine.render(lut, slice(y, y + h))[:, x : x + w]
    expected = AreaResampler(h, w, out_h, out_w)(pixels).reshape(out_h, out_w, channels)
    assert np.array_equal(out, expected)


@needs_kernel
def test_kernel_rejects_bad_geometry() -> None:
    assert kernel is not None
    display = np.zeros(6912, dtype=np.uint8)
    out = np.empty((10, 10), dtype=np.uint8)
    with pytest.raises(ValueError, match="bad geometry"):
        kernel.render_area(display, False, 1, GRAY_LUT, 200, 0, 100, 50, out, 10, 10)
    with pytest.raises(ValueError, match="bad geometry"):
        kernel.render_area(display[:100], False, 1, GRAY_LUT, 0, 0, 100, 50, out, 10, 10)


@pytest.mark.parametrize("grayscale", [True, False])
def test_env_observations_are_the_same_with_and_without_the_kernel(
    monkeypatch: pytest.MonkeyPatch, grayscale: bool
) -> None:
    config = {"grayscale": grayscale, "height": 50, "width": 70, "frame_stack": 2}

    def play() -> list[np.ndarray]:
        env = OakEmuEnv("forest_run", config, seed=4)
        observations = [env.reset()[0]]
        observations += [env.step(a)[0] for a in (1, 2, 3, 0, 5, 4) * 3]
        return observations

    native = play()
    monkeypatch.setattr(observation_module, "native_kernel", lambda: None)
    fallback = play()
    for a, b in zip(native, fallback, strict=True):
        assert np.array_equal(a, b)


def test_observation_larger_than_the_play_area_is_refused() -> None:
    with pytest.raises(ValueError, match="larger than the play area"):
        OakEmuEnv("catch", {"height": 192, "width": 256})
