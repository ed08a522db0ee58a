# Records real TF1-style RunMetadata.step_stats (RunOptions(trace_level=FULL_TRACE) passed through Keras 2
# compile(), graph mode) of a tiny conv model's training step on CPU, as MessageToDict gives it. argv: out.json
import json, sys, time
import numpy as np, tensorflow as tf
import tf_keras as keras
from google.protobuf.json_format import MessageToDict
tf.compat.v1.disable_eager_execution()
L = keras.layers
m = keras.Sequential([L.Conv2D(8, (3, 3), padding="same", input_shape=(32, 48, 3)), L.Activation("relu"),
                      L.MaxPooling2D((2, 2)), L.Conv2D(16, (3, 3), padding="same"), L.Activation("relu"),
                      L.Flatten(), L.Dense(1), L.Activation("sigmoid")])
options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
metadata = tf.compat.v1.RunMetadata()
m.compile(loss="binary_crossentropy", optimizer=keras.optimizers.legacy.RMSprop(1e-4), options=options, run_metadata=metadata)
x = np.random.rand(8, 32, 48, 3).astype("float32"); y = np.random.randint(0, 2, (8, 1)).astype("float32")
m.train_on_batch(x, y)
t = time.perf_counter(); m.train_on_batch(x, y); wall = (time.perf_counter() - t) * 1000
json.dump({"window": {"steps": 1, "wall_ms": round(wall, 3), "kind": "after_timing"},
           "model_layers": [{"name": l.name, "type": l.__class__.__name__} for l in m.layers],
           "versions": {"tensorflow": tf.__version__, "tf_keras": keras.__version__},
           "tf1_step_stats": MessageToDict(metadata.step_stats)}, open(sys.argv[1], "w"), indent=None)
print("ms", round(wall, 1), [d["device"] for d in MessageToDict(metadata.step_stats)["devStats"]])
