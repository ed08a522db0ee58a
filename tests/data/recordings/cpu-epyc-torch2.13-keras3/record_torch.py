# Records a real torch.profiler window of a tiny Keras 3 (KERAS_BACKEND=torch) conv model's training step on
# CPU and writes it with fp16doctor.workload.profile_export. argv: precision out.json
import json, os, sys, time
os.environ["KERAS_BACKEND"] = "torch"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
import numpy as np, keras, torch
from keras import layers
from torch.profiler import profile, ProfilerActivity, record_function
from fp16doctor.workload.profile_export import LAYER_PREFIX, export_torch_events
prec, out = sys.argv[1], sys.argv[2]
if prec == "float16": keras.config.set_floatx("float16")
elif prec.startswith("mixed"): keras.mixed_precision.set_dtype_policy(prec)
m = keras.Sequential([keras.Input((32, 48, 3)), layers.Conv2D(8, 3, padding="same"), layers.Activation("relu"),
                      layers.MaxPooling2D(2), layers.Conv2D(16, 3, padding="same"), layers.Activation("relu"),
                      layers.GlobalAveragePooling2D(), layers.Dense(1), layers.Activation("sigmoid", dtype="float32")])
m.compile(loss="binary_crossentropy", optimizer=keras.optimizers.RMSprop(1e-4), metrics=["accuracy"])
def labelled(layer):
    call = layer.call
    def wrapped(*args, **kwargs):
        with record_function(LAYER_PREFIX + layer.name):
            return call(*args, **kwargs)
    return wrapped
for layer in m.layers: layer.call = labelled(layer)
x = np.random.rand(8, 32, 48, 3).astype(keras.config.floatx()); y = np.random.randint(0, 2, (8, 1)).astype("float32")
for _ in range(2): m.train_on_batch(x, y)
steps = 2
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    t = time.perf_counter()
    for _ in range(steps): m.train_on_batch(x, y)
    wall = (time.perf_counter() - t) * 1000 / steps
events = export_torch_events(prof)
layers_desc = [{"name": l.name, "type": l.__class__.__name__} for l in m.layers]
json.dump({"window": {"steps": steps, "wall_ms": round(wall, 3), "kind": "after_timing"}, "model_layers": layers_desc,
           "versions": {"torch": torch.__version__, "keras": keras.__version__}, "torch_events": events},
          open(out, "w"), indent=None, separators=(",", ":"))
print(prec, "ms_per_step", round(wall, 1), "events", len(events))
