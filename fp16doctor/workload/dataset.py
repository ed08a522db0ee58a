# -*- coding: utf-8 -*-
"""The synthetic image dataset the seed script trains on when the user brings none.

Runs inside the target Python (possibly 3.5 in a 2018 stack): stdlib, numpy and PIL only.
JPEG files at the script's size in two class folders, deterministic, and learnable: the classes
differ in brightness and stripe direction, both of which survive the script's random flips.
"""
from __future__ import division, print_function

import json
import os

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".tif", ".tiff")
CLASS_NAMES = ("class_a", "class_b")
DATASET_VERSION = 1


def _render_image(rng, cls, height, width):
    import numpy as np

    noise = rng.uniform(0.0, 1.0, size=(height, width, 3))
    rows = np.arange(height).reshape(height, 1, 1)
    cols = np.arange(width).reshape(1, width, 1)
    period = 8 + rng.randint(0, 5)
    if cls == 0:
        stripes = (rows // (period // 2)) % 2  # horizontal stripes, darker image
        base = 0.30
    else:
        stripes = (cols // (period // 2)) % 2  # vertical stripes, brighter image
        base = 0.60
    tint = rng.uniform(0.8, 1.0, size=(1, 1, 3))
    image = base * tint + 0.25 * stripes + 0.15 * noise
    return (np.clip(image, 0.0, 1.0) * 255.0).astype("uint8")


def dataset_dir(cache_root, height, width, per_class):
    return os.path.join(cache_root, "seed-v%d-%dx%d-%d" % (DATASET_VERSION, height, width, per_class))


def ensure_dataset(cache_root, height, width, per_class, seed=1234):
    """Create (once) and return the train directory with one folder per class."""
    from PIL import Image
    import numpy as np

    root = dataset_dir(cache_root, height, width, per_class)
    marker = os.path.join(root, "dataset.json")
    if os.path.exists(marker):
        return root
    tmp_root = root + ".partial-%d" % os.getpid()
    for cls, name in enumerate(CLASS_NAMES):
        folder = os.path.join(tmp_root, name)
        if not os.path.isdir(folder):
            os.makedirs(folder)
        rng = np.random.RandomState(seed + cls)
        for i in range(per_class):
            pixels = _render_image(rng, cls, height, width)
            Image.fromarray(pixels, "RGB").save(os.path.join(folder, "%05d.jpg" % i), quality=90)
    with open(os.path.join(tmp_root, "dataset.json"), "w") as fh:
        json.dump({"version": DATASET_VERSION, "height": height, "width": width,
                   "per_class": per_class, "seed": seed, "classes": list(CLASS_NAMES)}, fh)
    try:
        os.rename(tmp_root, root)
    except OSError:
        # Another process finished first; its copy is identical (deterministic), so use it.
        import shutil
        shutil.rmtree(tmp_root, ignore_errors=True)
    return root


def class_folders(directory):
    """Class sub-folders that hold at least one image, as flow_from_directory sees them."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in sorted(os.listdir(directory)):
        sub = os.path.join(directory, name)
        if not os.path.isdir(sub):
            continue
        for _, _, files in os.walk(sub):
            if any(f.lower().endswith(IMAGE_EXTENSIONS) for f in files):
                found.append(name)
                break
    return found
