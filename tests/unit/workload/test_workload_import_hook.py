"""The script runner's Keras import hook speaks both import protocols: PEP 451 (find_spec, what Python 3 asks) and
PEP 302 (find_module / load_module, all Python 2.7 asks, in the tf1.7-cpu and tf1.13-cpu stacks). Python 3 never
takes the PEP 302 path on its own, so its methods are called here directly, in a fresh interpreter each (the
runner rearranges sys.path and sys.modules when it loads), against the stand-in Keras."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKLOAD = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
FAKE_KERAS = Path(__file__).resolve().parent / "fake_keras"


def _run(body: str) -> str:
    code = f"import sys\nsys.path.insert(0, {str(WORKLOAD)!r})\n" + textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": str(FAKE_KERAS), "KERAS_BACKEND": "fake"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_find_module_and_load_module_import_keras_once_and_call_back() -> None:
    out = _run("""
        import script_runner
        calls = []
        hook = script_runner.KerasImportHook(lambda name, module, s: calls.append((name, module.__name__, s >= 0)))
        assert hook.find_module("numpy") is None and hook.find_module("kerasx") is None
        assert hook.find_module("keras") is hook and hook.find_module("tf_keras") is hook
        assert hook.find_module("tensorflow.python.keras", ["/somewhere"]) is hook
        assert hook.find_module("tensorflow") is hook  # TensorFlow 1's tf.keras waits for its end
        sys.meta_path.insert(0, hook)  # as the runner has it: the import inside load_module must pass it by
        assert "keras" not in sys.modules
        module = hook.load_module("keras")
        assert sys.modules["keras"] is module and module.__name__ == "keras" and hasattr(module, "Model")
        assert calls == [("keras", "keras", True)], calls
        assert not hook.busy
        # A module already there (PEP 302's reload) is returned as it is, and not called back twice.
        assert hook.load_module("keras") is module and len(calls) == 1
        # While the normal finders import a name, the hook stands aside for it.
        hook.busy.add("keras")
        assert hook.find_module("keras") is None and hook.find_spec("keras") is None
        print("ok")
    """)
    assert out.strip() == "ok"


def test_a_failing_import_leaves_the_hook_ready_and_calls_nothing_back() -> None:
    out = _run("""
        import script_runner
        calls = []
        hook = script_runner.KerasImportHook(lambda *a: calls.append(a))
        sys.modules["keras"] = None  # Python 3's way to make an import fail (ImportError), without a search
        try:
            hook.load_module("keras")
        except ImportError:
            pass
        else:
            raise AssertionError("keras should not import")
        assert calls == [] and not hook.busy
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 no longer asks a finder's find_module")
def test_the_pep_302_protocol_alone_hooks_the_scripts_import_as_python_2_7_would() -> None:
    """A finder seen only through find_module, as Python 2.7 sees every finder: `import keras` loads through the
    hook's load_module, and the callback gets the executed module (the runner's precision and patches need it)."""
    out = _run("""
        import warnings
        import script_runner
        calls = []
        hook = script_runner.KerasImportHook(lambda name, module, s: calls.append((name, hasattr(module, "Model"))))

        class Pep302Only(object):
            def find_module(self, fullname, path=None):
                return hook.find_module(fullname, path)

        sys.meta_path.insert(0, Pep302Only())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ImportWarning)  # Python 3.10-3.11: find_module is deprecated
            import keras
        assert calls == [("keras", True)], calls
        assert sys.modules["keras"] is keras
        print("ok")
    """)
    assert out.strip() == "ok"


def test_find_spec_still_wraps_the_loader_on_python_3() -> None:
    out = _run("""
        import script_runner
        calls = []
        sys.meta_path.insert(0, script_runner.KerasImportHook(lambda name, module, s: calls.append(name)))
        import keras
        assert calls == ["keras"], calls
        print("ok")
    """)
    assert out.strip() == "ok"


def test_run_script_keeps_the_scripts_globals_alive_after_its_run_on_python_2(tmp_path: Path) -> None:
    """Python 2.7 clears a module's globals when the module goes away, as runpy's does after its run: the
    runner's own run keeps the module, so a kept fit() call's generator still finds its modules (rounds)."""
    script = tmp_path / "train.py"
    script.write_text("import os\nNAME = __name__\ndef where():\n    return os.path.basename(__file__)\n")
    out = _run(f"""
        import compat
        if sys.version_info >= (3, 12):
            print("ok")  # no imp module to stand in for Python 2.7's
            raise SystemExit(0)
        compat.PY2 = True  # Python 2.7's path, on this Python
        main = sys.modules["__main__"]
        found = compat.run_script({str(script)!r})
        assert found["NAME"] == "__main__" and found["where"]() == "train.py"
        assert sys.modules["__main__"] is main and compat._ran and compat._ran[-1].NAME == "__main__"
        print("ok")
    """)
    assert out.strip() == "ok"
