"""What the host spends building one batch of the seed workload with floatx float16: as the user's script does it,
with `float32_batches` as it was (only the batch in float32) and as it is (each image built and rescaled in float32),
and with floatx float32, on this machine's CPU.

    python benchmarks/float32_batches_host.py [--size quick] [--batches 10] [--repeat 3]

Uses the workload's own generator (fp16doctor/workload/model.py make_generator, time_input) on Keras 3's legacy
ImageDataGenerator and the workload's synthetic images on disk. Prints one JSON object: per configuration the median
host time per batch (ms) of each repeat, the dtype of the batch, and the CPU model with its 16-bit flags. The
configurations take turns in every repeat. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

WORKLOAD = Path(__file__).resolve().parents[1] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD))


def _cpu() -> dict[str, Any]:
    model, flags = platform.processor(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = ("avx2", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16")
    return {"model": model, "flags": [f for f in wanted if f in flags]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="quick", choices=("quick", "full", "smoke"))
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import dataset

    # This process plays the workload's part: it imports the framework as the workload's own process does.
    import keras  # noqa: TID251
    import model
    from keras.src.legacy.preprocessing import image as legacy_image  # noqa: TID251
    from protocol import SIZES

    size = SIZES[args.size]
    height, width, batch = size["image_height"], size["image_width"], size["batch_size"]
    api = type("Api", (), {"ImageDataGenerator": legacy_image.ImageDataGenerator})
    original_utils = legacy_image.image_utils
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cache:
        train_dir = dataset.ensure_dataset(cache, height, width, max(batch, 16))

        def timed(floatx: str, batch_dtype: str | None, redirect: bool) -> tuple[float, str]:
            keras.config.set_floatx(floatx)
            legacy_image.image_utils = original_utils
            if batch_dtype is not None and not redirect:
                # As before: only the batch's dtype, each image still built and rescaled in floatx.
                generator = legacy_image.ImageDataGenerator(rescale=1. / 255, horizontal_flip=True,
                                                            vertical_flip=True, dtype=batch_dtype).flow_from_directory(
                    train_dir, target_size=(height, width), batch_size=batch, class_mode="binary")
            else:
                generator = model.make_generator(api, train_dir, height, width, batch, batch_dtype)
            spread, dtype = model.time_input(generator, args.batches)
            return float(spread["median"]), dtype

        configs = {"float16 (as posted)": ("float16", None, False),
                   "float16 + float32_batches, batch only (before)": ("float16", "float32", False),
                   "float16 + float32_batches, images in float32 (now)": ("float16", "float32", True),
                   "float32": ("float32", None, False)}
        for _ in range(args.repeat):
            for name, (floatx, batch_dtype, redirect) in configs.items():
                ms, dtype = timed(floatx, batch_dtype, redirect)
                entry = results.setdefault(name, {"median_ms": [], "batch_dtype": dtype})
                entry["median_ms"].append(round(ms, 1))
        legacy_image.image_utils = original_utils
    print(json.dumps({"size": args.size, "batch": batch, "image": [height, width], "keras": keras.__version__,
                      "cpu": _cpu(), "host_batch_ms": results}, indent=1))


if __name__ == "__main__":
    main()
