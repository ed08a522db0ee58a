"""One paired ratio interval (fp16doctor/workload/paired.py): the workload's rounds stop on it, the analysis draws
every verdict's interval with it, and its rounds from several processes carry the part that moves between them."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from fp16doctor.workload import paired

PACKAGE = Path(__file__).resolve().parents[3] / "fp16doctor"


def test_the_t_quantile_goes_beyond_thirty_degrees_of_freedom() -> None:
    """A table that stopped at df 30 and then used 1.96 made intervals from 32 or more rounds 1-4 % too narrow.
    Student t quantiles from any table: df 40 gives 2.021, df 60 2.000, df 120 1.980."""
    assert paired.t_quantile(40) == pytest.approx(2.021, abs=5e-4)
    assert paired.t_quantile(60) == pytest.approx(2.000, abs=5e-4)
    assert paired.t_quantile(120) == pytest.approx(1.980, abs=5e-4)
    assert paired.t_quantile(1e9) == pytest.approx(1.959964, abs=1e-6)  # the normal's, beyond 1e8
    assert paired.t_quantile(0) == math.inf and paired.t_quantile(float("nan")) == math.inf


def test_the_t_quantile_matches_scipy_for_any_degrees_of_freedom() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (0.7, 1, 1.5, 2, 2.3, 3, 4.5, 7, 12.25, 29, 30, 31, 32, 45.5, 64, 100, 250, 1000, 12345.6, 1e6):
        assert paired.t_quantile(df) == pytest.approx(float(stats.t.ppf(0.975, df)), abs=1e-6), df
        assert paired.t_quantile(df, 0.9) == pytest.approx(float(stats.t.ppf(0.95, df)), abs=1e-6), df


def test_one_module_holds_a_t_quantile_and_the_minimum_of_rounds() -> None:
    """No other module of the package defines a t quantile, a t table or the minimum of rounds: they import these."""
    owners = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.name] if isinstance(node, ast.FunctionDef) else
                     [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else [])
            for name in names:
                if name in ("t_quantile", "T_975", "MIN_ROUNDS", "PRECISION_MIN_ROUNDS", "_betainc"):
                    owners.setdefault(name, []).append(path.relative_to(PACKAGE).as_posix())
    assert owners == {name: ["workload/paired.py"] for name in
                      ("t_quantile", "MIN_ROUNDS", "PRECISION_MIN_ROUNDS", "_betainc")}


def test_the_module_imports_no_sibling_so_the_host_side_can_import_it() -> None:
    tree = ast.parse((PACKAGE / "workload" / "paired.py").read_text(encoding="utf-8"))
    imported = {alias.name for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names}
    imported |= {str(n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"math", "__future__"}


def test_the_half_width_is_the_t_interval_on_the_log_ratios() -> None:
    fp32, fp16 = [140.1, 140.9, 137.6, 134.9, 129.0, 140.9], [782.0, 793.6, 788.9, 747.7, 770.4, 794.8]
    logs = [math.log(a / b) for a, b in zip(fp32, fp16, strict=True)]
    mean = sum(logs) / 6
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / 5)
    assert paired.paired_interval(logs) == pytest.approx((mean, 2.5706 * sd / math.sqrt(6)), rel=1e-4)
    assert paired.ratio_half_width(fp32, fp16) == pytest.approx(math.exp(2.5706 * sd / math.sqrt(6)) - 1, rel=1e-4)
    assert paired.ratio_half_width(fp32[:1], fp16[:1]) is None


def test_the_between_process_part_is_estimated_from_the_processes_means() -> None:
    """Two processes of six rounds each, the same spread inside each: the further apart their means, the wider the
    interval, and with equal means it is the within-process interval over all twelve rounds (tau^2 = 0)."""
    inside = [0.01, -0.01, 0.005, -0.005, 0.0, 0.008]
    same = paired.between_processes([[v - 0.2 for v in inside], [v - 0.2 for v in inside]])
    apart = paired.between_processes([[v - 0.2 for v in inside], [v - 0.3 for v in inside]])
    assert same is not None and apart is not None
    assert same[3] == 0.0 and apart[3] == pytest.approx(0.05 ** 2 * 2 - paired.Components([inside]).within / 6,
                                                         rel=1e-9)
    assert apart[1] > 5 * same[1]
    assert apart[0] == pytest.approx(-0.25 + sum(inside) / 6)
    # Each process's own mean lies inside the interval on the ratio over both.
    assert apart[0] - apart[1] < -0.3 and -0.2 < apart[0] + apart[1]


def test_one_process_is_the_paired_interval_and_a_pooled_estimate_never_narrows_a_ratios_own() -> None:
    logs = [0.01, -0.01, 0.005, -0.005, 0.0, 0.008]
    mean, half, df, tau2 = paired.between_processes([logs])
    assert (mean, half) == pytest.approx(paired.paired_interval(logs)) and (df, tau2) == (5, 0.0)
    own = paired.between_processes([logs, [v - 0.1 for v in logs]])
    pooled_small = paired.between_processes([logs, [v - 0.1 for v in logs]], pooled=(1e-6, 6))
    pooled_large = paired.between_processes([logs, [v - 0.1 for v in logs]], pooled=(0.05, 6))
    assert own is not None and pooled_small is not None and pooled_large is not None
    # A pool smaller than the ratio's own estimate keeps its own, with the pool's degrees of freedom; a larger one
    # replaces it.
    assert pooled_small[3] == own[3] and pooled_small[2] > own[2] and pooled_large[3] == 0.05
    assert pooled_large[1] > pooled_small[1]


def test_the_pool_weighs_each_ratio_by_its_processes_less_one() -> None:
    a = paired.Components([[0.0, 0.01, -0.01], [0.2, 0.21, 0.19]])
    b = paired.Components([[0.0, 0.01, -0.01], [0.0, 0.01, -0.01], [0.0, 0.01, -0.01]])
    tau2, df = paired.pooled_between([a, b, paired.Components([[0.1, 0.2, 0.3]])])
    assert df == 3 and tau2 == pytest.approx((a.between + 2 * b.between) / 3)
    assert paired.pooled_between([paired.Components([[0.1, 0.2]])]) == (0.0, 0)


def test_a_comparison_the_aa_control_cannot_resolve_is_unsettled_though_its_own_interval_excludes_1() -> None:
    """mixed_bfloat16 1.2x faster, its own interval clear of 1, while float32 and its identical copy moved apart by
    up to about 30 % in the same rounds: the analysis would call the effect not measurable, so the rounds go on for
    it; with a quiet control, or an effect of 2x or more, they do not."""
    reference = [100.0, 102.0, 99.0, 101.0, 100.0]
    faster = [83.0, 85.0, 82.0, 84.0, 84.0]  # about 1.2x
    noisy = [80.0, 125.0, 78.0, 122.0, 100.0]
    quiet = [100.5, 101.0, 99.5, 100.5, 100.0]
    assert not paired.unsettled(reference, faster)  # its own interval alone excludes 1
    noise = paired.aa_noise(reference, noisy)
    assert noise is not None and noise > 0.2
    assert paired.unsettled(reference, faster, noisy)
    assert not paired.unsettled(reference, faster, quiet)
    assert not paired.unsettled(reference, [50.0, 51.0, 49.5, 50.5, 50.0], noisy)  # 2x: always measurable
    assert paired.aa_noise(reference[:1], noisy[:1]) is None
