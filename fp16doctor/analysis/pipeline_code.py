"""The seed's input pipeline rewritten as a program that runs as given on the stack that ran: the directory of
images (what ImageDataGenerator.flow_from_directory read, one folder per class) decoded once into a uint8 array,
the rescaling and the flips as layers of the model (on the device, a quarter of float32's bytes copied), and `fit` on
the arrays (through tf.data where TensorFlow runs). A test runs each program this module emits at a small image size
on the CPU, for every Keras flavour it is emitted for (tests/integration/test_pipeline_code.py).

Pure: text out. Which Keras takes which preprocessing layer:
- Keras 3: keras.layers.Rescaling and RandomFlip on every backend (keras.io/api/layers/preprocessing_layers/);
- tf.keras / tf_keras: tf.keras.layers.Rescaling and RandomFlip from TensorFlow 2.6, under
  layers.experimental.preprocessing in 2.3-2.5 (TensorFlow's release notes); tf.data.AUTOTUNE from 2.4;
- Keras 2.1.5 and the other multi-backend Keras 2 releases have no preprocessing layers: nothing is emitted.
"""

from __future__ import annotations

from fp16doctor.analysis.context import Software
from fp16doctor.knowledge.cuda import version_at_least

# The seed's size where a run does not say its own (SEED.md: 336 x 224 images, batches of 128, 32 epochs).
SEED_HEIGHT, SEED_WIDTH, SEED_BATCH, SEED_EPOCHS = 224, 336, 128, 32

# The seed model after its preprocessing, as posted (SEED.md), in Keras' layer calls.
_SEED_LAYERS = (
    "layers.Conv2D(32, (3, 3), padding='same', kernel_initializer='lecun_normal')",
    "layers.Activation('relu')",
    "layers.MaxPooling2D(pool_size=(2, 2))",
    "layers.Conv2D(32, (3, 3), padding='same')",
    "layers.Activation('relu')",
    "layers.MaxPooling2D(pool_size=(2, 2))",
    "layers.Conv2D(64, (3, 3), padding='same')",
    "layers.Activation('relu')",
    "layers.MaxPooling2D(pool_size=(2, 2))",
    "layers.Conv2D(64, (3, 3), padding='same')",
    "layers.Activation('relu')",
    "layers.MaxPooling2D(pool_size=(2, 2))",
    "layers.AveragePooling2D(pool_size=(2, 2))",
    "layers.Flatten()",
    "layers.Dense(1)",
    "layers.Activation('sigmoid', dtype='float32')",
)

# Decoding once, as flow_from_directory does (PIL, RGB, the target size with nearest-neighbour resampling, the
# classes in the sorted order of their folders, the files it takes by their extension).
_LOAD = '''
def load_images(folder):
    """Every image of `folder` (one sub-folder per class) decoded once, resized, as uint8."""
    images, labels = [], []
    for label, name in enumerate(sorted(os.listdir(folder))):
        for file in sorted(os.listdir(os.path.join(folder, name))):
            if file.lower().endswith(('.png', '.jpg', '.jpeg', '.bmp', '.ppm', '.tif', '.tiff')):
                with Image.open(os.path.join(folder, name, file)) as image:
                    image = image.convert('RGB').resize((img_width, img_height), Image.NEAREST)
                    images.append(np.asarray(image, dtype=np.uint8))
                labels.append(label)
    return np.stack(images), np.asarray(labels, dtype=np.float32)


x_train, y_train = load_images(train_data_dir)  # uint8: a quarter of float32's bytes to copy
'''


def _flavour(sw: Software) -> str | None:
    """"keras3", "tf_keras" (tf.keras or tf_keras on TensorFlow >= 2.3), or None where no program runs."""
    fw = sw.framework
    if fw == "keras3":
        return "keras3"
    if fw == "tf.keras" and version_at_least(sw.tensorflow, "2.3") is not False:
        return "tf_keras"
    return None


def _tensorflow_runs(sw: Software, flavour: str) -> bool:
    return flavour == "tf_keras" or (sw.keras_backend or "tensorflow").lower() == "tensorflow"


def input_pipeline_program(sw: Software, height: int | None = None, width: int | None = None,
                           batch_size: int | None = None, train_dir: str = "train", epochs: int = SEED_EPOCHS,
                           ) -> str | None:
    """The seed's training as a program for this stack, images decoded once into uint8 and preprocessed in the
    model; None where the stack's Keras has no preprocessing layers (multi-backend Keras 2, TF < 2.3)."""
    flavour = _flavour(sw)
    if flavour is None:
        return None
    tensorflow = _tensorflow_runs(sw, flavour)
    height, width, batch_size = height or SEED_HEIGHT, width or SEED_WIDTH, batch_size or SEED_BATCH
    if flavour == "keras3":
        imports = ["import keras", "from keras import layers"]
        where = f"Keras {sw.keras or '3'} ({sw.keras_backend or 'tensorflow'} backend)"
    else:
        imports = ["from tensorflow import keras"]
        # tf.keras.layers.Rescaling from TensorFlow 2.6; layers.experimental.preprocessing in 2.3-2.5.
        old = version_at_least(sw.tensorflow, "2.6") is False
        imports.append("from tensorflow.keras.layers.experimental import preprocessing" if old else "")
        imports.append("from tensorflow.keras import layers")
        where = f"tf.keras on TensorFlow {sw.tensorflow or '>= 2.6'}"
    preprocessing = "preprocessing" if flavour == "tf_keras" and version_at_least(sw.tensorflow, "2.6") is False \
        else "layers"
    if tensorflow:
        imports.insert(0, "import tensorflow as tf")
    head = [f"# {where}: the images decoded once into uint8, the rescaling and the flips in the model",
            "import os", "", "import numpy as np", "from PIL import Image", *[i for i in imports if i], "",
            f"train_data_dir = {train_dir!r}",
            f"img_height, img_width, batch_size, nb_epoch = {height}, {width}, {batch_size}, {epochs}"]
    model = ["model = keras.Sequential([",
             "    keras.Input(shape=(img_height, img_width, 3)),",
             f"    {preprocessing}.Rescaling(1. / 255),  # ImageDataGenerator(rescale=1./255), on the device",
             f"    {preprocessing}.RandomFlip('horizontal_and_vertical'),  # its flips, in training only",
             *(f"    {layer}," for layer in _SEED_LAYERS),
             "])",
             "model.compile(loss='binary_crossentropy', optimizer=keras.optimizers.RMSprop(1e-4),",
             "              metrics=['accuracy'])"]
    if tensorflow:
        autotune = "tf.data.AUTOTUNE" if flavour == "keras3" or version_at_least(sw.tensorflow, "2.4") is not False \
            else "tf.data.experimental.AUTOTUNE"
        fit = ["ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))",
               f"ds = ds.shuffle(len(x_train)).batch(batch_size).prefetch({autotune})",
               "model.fit(ds, epochs=nb_epoch)"]
    else:
        fit = ["model.fit(x_train, y_train, batch_size=batch_size, epochs=nb_epoch, shuffle=True)"]
    return "\n".join([*head, _LOAD.rstrip("\n"), "", *model, *fit]) + "\n"
