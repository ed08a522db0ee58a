"""float32_batches tests what it names: with floatx float16, the generator builds each image's array and rescales it
in float32 (not only the batch it copies them into), while every other generator of the process keeps floatx's
arrays. Real Keras 3 (its legacy ImageDataGenerator), dtypes only, never timings."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

WORKLOAD_DIR = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD_DIR))  # the workload's modules import each other from beside themselves
import model  # noqa: E402

keras = pytest.importorskip("keras")
Image = pytest.importorskip("PIL.Image")


@pytest.fixture()
def image_dir(tmp_path: Path) -> Path:
    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        for i in range(2):
            Image.new("RGB", (12, 8), (40 * i, 80, 120)).save(tmp_path / label / f"{i}.png")
    return tmp_path


@pytest.fixture()
def legacy(monkeypatch):
    """Keras 3's legacy image module, floatx float16, everything the test touches restored afterwards."""
    from keras.src.legacy.preprocessing import image as legacy_image

    seen: list[tuple[str, str]] = []
    standardize = legacy_image.ImageDataGenerator.standardize

    def spy(self, x):
        seen.append((str(x.dtype), str(self.dtype)))
        return standardize(self, x)

    monkeypatch.setattr(legacy_image, "image_utils", legacy_image.image_utils)  # restored: the redirect is global
    monkeypatch.setattr(legacy_image.ImageDataGenerator, "standardize", spy)
    floatx = keras.config.floatx()
    keras.config.set_floatx("float16")
    yield types.SimpleNamespace(ImageDataGenerator=legacy_image.ImageDataGenerator), seen
    keras.config.set_floatx(floatx)


def test_float32_batches_builds_and_rescales_each_image_in_float32_under_floatx_float16(image_dir, legacy):
    api, seen = legacy
    generator = model.make_generator(api, str(image_dir), 8, 12, 2, "float32")
    x, _ = next(generator)
    assert keras.config.floatx() == "float16"  # the model still builds in float16
    assert str(x.dtype) == "float32"
    assert seen and all(arrays == "float32" for arrays, _ in seen)  # standardize ran on float32 images
    assert model.host_arrays(generator) == "float32"


def test_the_processs_other_generators_keep_floatx_images(image_dir, legacy):
    api, seen = legacy
    model.make_generator(api, str(image_dir), 8, 12, 2, "float32")  # the redirect is in place
    plain = model.make_generator(api, str(image_dir), 8, 12, 2)
    x, _ = next(plain)
    assert str(x.dtype) == "float16" and seen and all(arrays == "float16" for arrays, _ in seen)
    assert model.host_arrays(plain) is None
