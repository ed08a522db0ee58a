# -*- coding: utf-8 -*-
"""The seed workload: the user's Keras script, run as written and measured, in its own process.

    python -u run_workload.py --precision P [--variant V] [size options] [--profile-dir DIR]

This file runs inside the target Python: the host's, or a pinned stack's (Python 3.5 with Keras 2.1.5
in the oldest one). So it stays valid Python 3.5, imports only stdlib, numpy, PIL and the framework,
and speaks whichever Keras API is installed: Keras 3 (its legacy ImageDataGenerator), tf_keras, or
Keras 2. It reports to the engine through stdout lines "@@fp16doctor {json}" (events.py).

This is the entry point: its command line and the run, in order. The rest sits beside it, shared with
the script runner: protocol.py (what the engine and the workload agree on), events.py (the events),
frameworks.py (which Keras, the set-up before and after it loads), model.py (the seed model and its
input), timing.py (the step timer), window.py (the profiled window and the hooks that drive both),
rounds.py (interleaved rounds), dataset.py (the synthetic images).
"""
from __future__ import division, print_function

import argparse
import math
import os
import shutil
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# These sit beside this file, inside the image too.
import dataset  # noqa: E402
import rounds  # noqa: E402
from paired import MAX_ROUNDS  # noqa: E402
from compat import perf_counter  # noqa: E402
from events import Skip, emit  # noqa: E402
from frameworks import (  # noqa: E402
    apply_precision, apply_variant, cpu_facts, enable_onednn_verbose, exit_now, load_keras, prepare_keras_home, prime_onednn_verbose,
    set_variant_environment, software_info, user_keras_config)
from model import (  # noqa: E402
    build_seed_model, check_batches, describe_model, finite, host_arrays, in_memory_batches, initial_loss_scale, jit_compile_of, loss_scale, make_generator, time_input, variant_changes)
from window import WindowProfiler, make_callback  # noqa: E402
from protocol import (  # noqa: E402
    PRECISIONS, PROFILE_DIR_ENV, SEED_WORKLOAD, SIZES, VARIANTS, in_memory_batch_count, is_mixed, variant_clash,
    variant_parts)
from timing import STABLE_TOLERANCE, StepTimer, summary  # noqa: E402

FULL = SIZES["full"]  # the defaults: the user's script as posted


def _variant(name):
    clash = variant_clash(name)
    if clash is not None:
        raise argparse.ArgumentTypeError(clash)
    return name


def parse_args(argv):
    p = argparse.ArgumentParser(description="fp16doctor seed workload")
    p.add_argument("--precision", choices=PRECISIONS, required=True)
    p.add_argument("--variant", type=_variant, default="original",
                   help="%s, or several joined by '+' (synthetic_input+xla: both changes)" % ", ".join(VARIANTS))
    p.add_argument("--height", type=int, default=FULL["image_height"])
    p.add_argument("--width", type=int, default=FULL["image_width"])
    p.add_argument("--batch-size", type=int, default=FULL["batch_size"])
    p.add_argument("--warmup-steps", type=int, default=FULL["warmup_steps"])
    p.add_argument("--min-steps", type=int, default=FULL["min_steps"])
    p.add_argument("--max-steps", type=int, default=FULL["max_steps"])
    p.add_argument("--max-measure-s", type=float, default=FULL["max_measure_s"])
    p.add_argument("--input-batches", type=int, default=FULL["input_batches"])
    p.add_argument("--stable-tolerance", type=float, default=STABLE_TOLERANCE)
    p.add_argument("--data", default=None, help="train directory with one folder per class")
    p.add_argument("--cache-dir", default=None, help="where the synthetic dataset is kept")
    p.add_argument("--backend", default=None, help="Keras 3 backend (tensorflow, jax, torch)")
    p.add_argument("--bound-ms", type=float, default=None,
                   help="a steady step (not the first) longer than this ends the run after it (a slow-step bound)")
    p.add_argument("--first-bound-ms", type=float, default=None,
                   help="a first step longer than this ends the run after it (the first-step bound; needs --bound-ms)")
    p.add_argument("--cut-first-step", action="store_true",
                   help="the first step may be ended inside, at its bound, where oneDNN names the running kernel")
    p.add_argument("--profile-dir", default=None, help="record the profiled window here (none: no profile)")
    p.add_argument("--profile-steps", type=int, default=FULL["profile_steps"],
                   help="steps in the window after the timed steps")
    p.add_argument("--rounds-of", default=None,
                   help="time these precisions (comma-separated) in interleaved rounds in this one process; "
                        "'float32+synthetic_input': float32's model with a change to it or its input, beside it")
    p.add_argument("--rounds-budget-s", type=float, default=20.0, help="rounds go on until this long")
    p.add_argument("--rounds-end-s", type=float, default=None,
                   help="instead, rounds go on until this many seconds after this process started")
    p.add_argument("--rounds-min-s", type=float, default=None,
                   help="rounds go on at least this long, whatever the start-up took")
    p.add_argument("--rounds-unsettled-s", type=float, default=None,
                   help="past the budget, rounds go on up to this long with the comparisons still unsettled")
    p.add_argument("--rounds-precision", type=float, default=None,
                   help="rounds stop sooner once every ratio against float32 is known to within this (0.05: 5 %%)")
    p.add_argument("--min-rounds", type=int, default=3)
    p.add_argument("--max-rounds", type=int, default=MAX_ROUNDS)
    p.add_argument("--rounds-seed", type=int, default=None, help="the shuffle's seed (none: a fresh one)")
    p.add_argument("--profile-rounds", default=None,
                   help="precisions of --rounds-of with no run of their own: each gets a profiled block after the "
                        "warm-up (with --profile-dir), and its model and input described")
    return p.parse_args(argv)


def run(args):
    started = perf_counter()
    backend = args.backend or os.environ.get("KERAS_BACKEND") or user_keras_config().get("backend") \
        or "tensorflow"
    cache_root = args.cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "fp16doctor")
    keras_dir, keras_config = prepare_keras_home(args.precision, backend)
    # In a container the engine names the folder by environment (it copies it out afterwards).
    profile_dir = args.profile_dir or os.environ.get(PROFILE_DIR_ENV)
    env = set_variant_environment(args.variant, backend)

    emit("phase", phase="data")
    if args.data:
        train_dir = args.data
    else:
        # Eight batches an epoch at the quick size (batch 32), four at the script's own (512 images of 128): an
        # epoch's first step (a new iterator) then falls on every eighth step of the timing, not every fourth.
        per_class = max(2 * args.batch_size, 128)
        train_dir = dataset.ensure_dataset(cache_root, args.height, args.width, per_class)

    # Everything the framework reads from the environment is set before it loads (see enable_onednn_verbose).
    onednn_env = enable_onednn_verbose(backend, args.variant) if profile_dir else {}
    if profile_dir and backend == "torch":
        os.environ.setdefault("ONEDNN_VERBOSE_TIMESTAMP", "1")  # read when the window first turns verbose on

    emit("phase", phase="import")
    t0 = perf_counter()
    api = load_keras(backend)
    import_s = perf_counter() - t0
    if onednn_env:
        try:
            prime_onednn_verbose()
        except Exception as exc:  # noqa: BLE001  (then the names are at risk, the run is not)
            emit("log", message="oneDNN was not primed: %s: %s" % (exc.__class__.__name__, exc))
    software, device = software_info(api)
    emit("phase", phase="build", device=device, software=software)
    applied = apply_variant(api, args.variant, device, env)
    if args.rounds_of:
        profiler = None
        if profile_dir and args.profile_rounds:
            try:
                profiler = WindowProfiler(api, profile_dir, bool(onednn_env))
            except Exception as exc:  # noqa: BLE001  (no profile is no reason to lose the rounds)
                emit("log", message="profiling is off: %s: %s" % (exc.__class__.__name__, exc))
        if profiler is not None and profiler.run_options is not None:
            emit("log", message="profiling is off: TensorFlow 1's step stats need options compiled into the model")
            profiler = None
        result = rounds.run_rounds(args, api, train_dir, build_seed_model, make_generator, emit, profiler=profiler,
                                   process_started=started, device=device)
        result.update(device=device, software=software)
        if applied:
            result["variant_applied"] = applied
        cpu = cpu_facts()
        if cpu is not None:
            result["cpu"] = cpu
        emit("result", run=result)
        return

    apply_precision(api, args.precision)
    mixed = is_mixed(args.precision)

    batches_in, model_changes = variant_changes(args.variant)
    generator = make_generator(api, train_dir, args.height, args.width, args.batch_size, batches_in)
    if host_arrays(generator) is not None:
        applied["host_arrays"] = host_arrays(generator)
    input_ms, batch_dtype = time_input(generator, args.input_batches)
    check_batches(args.variant, batch_dtype)
    emit("phase", phase="input_timed", input_time_ms=input_ms, batch_dtype=batch_dtype)

    profiler = None
    if profile_dir:
        try:
            profiler = WindowProfiler(api, profile_dir, bool(onednn_env))
        except Exception as exc:  # noqa: BLE001  (no profile is no reason to lose the measurement)
            emit("log", message="profiling is off: %s: %s" % (exc.__class__.__name__, exc))
    model = build_seed_model(api, args.height, args.width, mixed,
                             run_options=profiler.run_options if profiler is not None else None, **model_changes)
    timer = StepTimer(args.warmup_steps, args.min_steps, args.max_steps, args.max_measure_s,
                      args.stable_tolerance, bound_ms=args.bound_ms, first_bound_ms=args.first_bound_ms,
                      window_steps=args.profile_steps if profiler is not None else 0)
    callback, hooks = make_callback(api, timer, profiler)
    streamed = "synthetic_input" not in variant_parts(args.variant)
    facts = {"device": device, "software": software, "import_s": import_s, "generator": generator,
             "keras_dir": keras_dir, "keras_config": keras_config, "batch_dtype": batch_dtype, "applied": applied,
             "streamed": streamed, "input_ms": input_ms}

    def snapshot():
        facts.update(model=describe_model(model), scale_first=initial_loss_scale(model), scale_last=loss_scale(model))

    def report_cut():
        emit("result", run=run_result(args, api, timer, hooks, model, started, facts))
        shutil.rmtree(os.path.dirname(keras_dir), True)  # the process exits next: its exit handlers do not run

    if args.bound_ms is not None and device == "cpu":
        # oneDNN's lines name only CPU kernels: a step on a GPU is judged after it ends. Where the engine allows a
        # cut inside the first step, what the model computes in (its first layer's compute dtype) decides it.
        dtype = str(getattr(model.layers[0], "compute_dtype", "") or "") if args.cut_first_step else None
        hooks.cut_inside_steps(snapshot, report_cut, dtype)
    # Room for the window to wait past an epoch's first step (window_placement); training stops by itself.
    total_steps = args.warmup_steps + args.max_steps + (2 * timer.window_steps + 1 if timer.window_steps else 0)
    emit("phase", phase="train")
    if streamed:
        steps_per_epoch = max(1, int(math.ceil(generator.samples / float(args.batch_size))))
        epochs = int(math.ceil(total_steps / float(steps_per_epoch)))
        api.fit_stream(model, generator, steps_per_epoch, epochs, [callback])
    else:
        # Same model, batches already in memory: isolates device compute from the input pipeline.
        n_batches = in_memory_batch_count(args.batch_size, args.height, args.width, total_steps)
        x, y = in_memory_batches(generator, n_batches)
        epochs = int(math.ceil(total_steps / float(n_batches)))
        model.fit(x, y, batch_size=args.batch_size, epochs=epochs, shuffle=False, verbose=0,
                  callbacks=[callback])

    if not timer.step_ms:
        raise RuntimeError("training stopped before any step was measured")
    snapshot()
    emit("result", run=run_result(args, api, timer, hooks, model, started, facts))


def run_result(args, api, timer, hooks, model, started, facts):
    """The run's `result`: after training, or on the watchdog's thread when a step was cut inside (then `facts`
    holds what was read between steps, and nothing here touches the framework while its step runs)."""
    losses = timer.losses
    bad = [v for v in losses if not finite(v)]
    keras_dir, streamed = facts["keras_dir"], facts["streamed"]
    result = {
        "status": "ok",
        "device": facts["device"],
        "software": facts["software"],
        "workload": {
            "name": SEED_WORKLOAD, "image_height": args.height, "image_width": args.width, "channels": 3,
            "batch_size": args.batch_size, "steps_measured": len(timer.step_ms),
            "warmup_steps": len(timer.warmup_ms), "stop_reason": timer.stop_reason,
            "data": "user" if args.data else "synthetic", "images": facts["generator"].samples,
            "api": "fit_generator" if api.name == "keras2" and streamed else "fit",
            "jit_compile": jit_compile_of(model),
        },
        "stop_reason": timer.stop_reason,
        "step_time_ms": summary(timer.step_ms),
        "first_step_ms": round(timer.first_step_ms, 3),
        "warmup_step_ms": [round(v, 3) for v in timer.warmup_ms],
        "step_ms_all": [round(v, 3) for v in timer.step_ms],
        # Non-finite values are null in JSON (nan_or_inf says so); every step's loss, for the numerics rule.
        "loss": {"first": finite(losses[0]) if losses else None, "last": finite(losses[-1]) if losses else None,
                 "nan_or_inf": bool(bad), "scale_first": facts["scale_first"], "scale_last": facts["scale_last"]},
        "losses": [None if finite(v) is None else round(v, 6) for v in losses],
        "model": facts["model"],
        "keras_config": {"floatx": api.floatx(), "epsilon": facts["keras_config"]["epsilon"],
                         "config_path": os.path.join(keras_dir, "keras.json")},
        "batch_dtype": facts["batch_dtype"],
        "timing": {"import_s": round(facts["import_s"], 3), "total_s": round(perf_counter() - started, 3)},
    }
    if timer.cut:
        # Censored: the step was ended at the bound, so it lasted at least this long.
        result["step_time_ms"]["censored"] = True
    if facts["applied"]:
        result["variant_applied"] = facts["applied"]
    result.update(hooks.result_fields())
    cpu = cpu_facts()
    if cpu is not None:
        result["cpu"] = cpu
    if streamed:
        result["input_time_ms"] = facts["input_ms"]
    return result


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args)
    except Skip as exc:
        emit("error", status="skipped", error=str(exc))
        return 0
    except KeyboardInterrupt:
        emit("error", status="failed", error="interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001  (reported to the engine, which classifies it)
        emit("error", status="failed", error="%s: %s" % (exc.__class__.__name__, exc),
             traceback=traceback.format_exc()[-4000:])
        return 1
    return 0


if __name__ == "__main__":
    exit_now(main())
