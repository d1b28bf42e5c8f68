"""The theory on run directories: arm parsing, models and device from a run, calibration, per-arm
predictions. Every run here is SYNTHETIC (tests/support/synth.py); the CPU is a fixed fake device
(FAKE, in place of the machine probe a real run stores) so the numbers are reproducible."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from specbench.analysis.predicted.arms import calibrate_from_run, predict_arms, run_theory, theory_or_reason
from specbench.analysis.predicted.models import (
    arm_method,
    device_from_run,
    gpu_preset,
    lab_weights,
    model_from_run,
)
from specbench.analysis.predicted.setup import calibrate_setup, run_setup
from specbench.analysis.predicted.text import format_arm_predictions
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.vllm import VllmEngine
from specbench.errors import ConfigError
from specbench.theory.arch import Architecture, kv_cache_bytes, linear_conv_channels, recurrent_state_bytes
from specbench.theory.cost import forward_cost, head_share, sampling_time
from specbench.theory.formulas import tokens_per_round
from specbench.theory.hardware import Gpu
from specbench.theory.speedup import predict_architecture
from tests.support.records import write_cells, write_records
from tests.support.synth import SPEC_ARGS, Arm, Plan, lab_truth, make_run, spec, use_lab_model

FAKE_CPU = Gpu("cpu", bandwidth_gbs=20.0, tflops=1.0, memory_gb=32.0, unified=True, host_link_gbs=20.0)
NGRAM = ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "16")


@pytest.fixture(autouse=True)
def fake_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specbench.analysis.predicted.models.stored_cpu", lambda run_dir: FAKE_CPU)


def small_plan(**arms: Arm) -> Plan:
    return Plan(arms=dict(arms), prompts_per_category=2, repeats=2)


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CPU run of the dense ``membound`` lab pair: baseline 20 tok/s, draft K=8 at A=0.6 (α≈0.88)
    34 tok/s, ngram-mod K=16, an unknown --spec-type, and an arm that never drafts."""
    plan = small_plan(
        baseline=Arm(decode_tok_s=20),
        draft8=spec(34, acceptance=0.6),
        ngram=Arm(args=NGRAM, decode_tok_s=24, acceptance=0.5),
        mystery=Arm(args=("--spec-type", "suffix-tree"), decode_tok_s=21),
        silent=spec(20, drafts=False),
    )
    run = make_run(tmp_path_factory.mktemp("lab") / "run", plan)
    return use_lab_model(run, lab_truth("membound", "dense"))


# -- arm argv ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "method", "k"),
    [
        (SPEC_ARGS, "draft", 8),
        (("-md", "d.gguf", "--spec-type", "draft-simple"), "draft", 3),
        (("--spec-type", "ngram-mod"), "ngram", 64),
        (NGRAM, "ngram", 16),
        (("--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "12"), "ngram", 12),
        (("--spec-type", "draft-mtp", "--spec-draft-n-max", "2"), "mtp", 2),
        (
            ("--speculative-config", json.dumps({"method": "eagle3", "num_speculative_tokens": 5})),
            "eagle3",
            5,
        ),
    ],
)
def test_arm_method_reads_llamacpp_and_vllm_argv(argv: tuple[str, ...], method: str, k: int) -> None:
    engine = VllmEngine() if argv[0].startswith("--speculative") else LlamaCppEngine()
    got = arm_method(list(argv), engine)
    assert got is not None and (got.method, got.draft_max) == (method, k)
    assert (got.draft_path is not None) == (method == "draft")


@pytest.mark.parametrize("argv", [(), ("-c", "4096"), ("--spec-type", "none")])
def test_arm_method_is_none_without_speculation(argv: tuple[str, ...]) -> None:
    assert arm_method(list(argv), LlamaCppEngine()) is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--spec-type", "suffix-tree"), "no model for this method"),
        (("--spec-type", "draft-simple"), "without a draft model"),
        (("--spec-type", "draft-simple", "-md", "d.gguf", "--spec-draft-n-max", "x"), "not an integer"),
    ],
)
def test_arm_method_refuses_what_it_cannot_model(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        arm_method(list(argv), LlamaCppEngine())


# -- models and device ------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["dense", "moe", "hybrid"])
def test_lab_shapes_read_the_bytes_truth_json_counts(arch: str) -> None:
    """A decode step reads exactly truth's bytes_per_token (layers, router, k experts and the f16 LM
    head): the lab and the theory count the same weights."""
    truth = lab_truth("membound", arch)
    target = lab_weights(truth, "target")
    step = forward_cost(target.arch, target.bytes_per_weight, 1, 1, 1)
    assert target.bytes_per_weight == 2.0 and target.arch.is_moe == (arch == "moe")
    # The hybrid's short-convolution weights (channels x kernel per DeltaNet layer, f32 in the file)
    # are left out of the lab's count; the theory reads them at the model's bytes per weight.
    a = target.arch
    conv = a.linear_layers * linear_conv_channels(a) * a.conv_kernel * target.bytes_per_weight
    assert step.weight_bytes - conv == pytest.approx(truth["target"]["bytes_per_token"], rel=1e-9)
    assert (conv > 0) == (arch == "hybrid")


@pytest.mark.parametrize("size", ["tiny", "small", "membound"])
def test_hybrid_lab_state_is_the_checkpoint_llama_server_logs(size: str) -> None:
    """The theory's recurrent state per sequence equals the lab's count, which equals the
    ``created speculative checkpoint (size = ...)`` llama-server logs (tests/lab engine test)."""
    truth = lab_truth(size, "hybrid")["target"]
    arch = lab_weights(lab_truth(size, "hybrid"), "target").arch
    assert (arch.linear_layers, arch.attention_layers) == (
        truth["recurrent_layers"],
        truth["attention_layers"],
    )
    assert recurrent_state_bytes(arch) == truth["recurrent_state_bytes"]
    assert kv_cache_bytes(arch, 1) == truth["kv_bytes_per_token"]


def test_model_from_a_lab_run_has_target_and_draft(lab_run: Path) -> None:
    models = model_from_run(lab_run)
    assert models is not None and models.draft is not None
    assert models.target.arch.name == "lab target dense 1024x16" and models.target.quant == "f16"
    assert models.draft.arch.layers == 2 and "truth.json" in models.source


def test_model_from_config_json_next_to_the_model(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", small_plan(baseline=Arm()))
    model_dir = tmp_path / "hf"
    model_dir.mkdir()
    config = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "vocab_size": 1000}
    (model_dir / "config.json").write_text(json.dumps({**config, "intermediate_size": 512}))
    _set_model(run, str(model_dir / "tiny-Q8_0.gguf"))
    models = model_from_run(run)
    assert models is not None and models.target.arch.layers == 4
    assert models.target.quant == "Q8_0" and models.draft is None


def test_model_from_a_preset_named_in_the_file_name(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", small_plan(baseline=Arm()))
    _set_model(run, "/nowhere/Qwen3.6-27B-UD-Q4_K_XL.gguf")
    models = model_from_run(run)
    assert models is not None
    assert (models.target.arch.name, models.target.quant) == ("Qwen3.6-27B", "UD-Q4_K_XL")


def test_unknown_model_gives_none_and_the_report_reason(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", small_plan(baseline=Arm(), fast=spec(40)))
    assert model_from_run(run) is None
    reason = theory_or_reason(run)
    assert isinstance(reason, str) and "no lab truth.json, config.json or preset" in reason


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce RTX 3090 Ti", "RTX 3090 Ti"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
    ],
)
def test_gpu_names_match_presets(name: str, preset: str) -> None:
    assert gpu_preset(name).name == preset


def test_unknown_gpu_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no preset"):
        gpu_preset("Voodoo 5 6000")


def test_cpu_runs_use_the_cpu_device(lab_run: Path, tmp_path: Path) -> None:
    assert device_from_run(lab_run) is FAKE_CPU
    gpu_run = make_run(tmp_path / "run", small_plan(baseline=Arm()))
    assert device_from_run(gpu_run).name == "RTX 3090"


# -- calibration and predictions --------------------------------------------------------------
def test_calibration_reproduces_the_measured_baseline(lab_run: Path) -> None:
    setup = run_setup(lab_run)
    eff = calibrate_setup(setup)
    assert eff == calibrate_from_run(lab_run)
    target, ctx = setup.models.target, setup.context
    p = predict_architecture(target, setup.gpu, "ngram", 1, alpha=0.5, context=ctx, efficiency=eff)
    measured = setup.run.df.loc[setup.run.df["arm"] == "baseline", "decode_tok_s"].median()
    assert p.baseline_tok_s == pytest.approx(measured, rel=1e-6)
    assert p.breakdown.bound == "bandwidth" and 0 < eff.bandwidth < 1


def test_high_acceptance_on_a_memory_bound_dense_target_predicts_a_faster_draft_arm(lab_run: Path) -> None:
    arms = {p.arm: p for p in predict_arms(lab_run)}
    draft = arms["draft8"]
    assert (draft.method, draft.draft_max, draft.acceptance) == ("draft", 8, pytest.approx(0.6, abs=0.01))
    assert 0.85 < draft.alpha < 0.9
    assert draft.predicted_speedup > 1.5 and draft.measured_speedup > 1.5
    # two launch pairs are LOW_N: no interval is printed for a comparison that can reach no verdict
    assert math.isnan(draft.ci_low) or draft.ci_low <= draft.measured_speedup <= draft.ci_high
    assert draft.error == pytest.approx(draft.measured_speedup / draft.predicted_speedup - 1)


def test_arms_without_a_model_or_acceptance_are_skipped_with_a_reason(lab_run: Path) -> None:
    arms = {p.arm: p for p in predict_arms(lab_run)}
    assert set(arms) == {"draft8", "ngram", "mystery", "silent"}
    assert arms["ngram"].method == "ngram" and not arms["ngram"].skipped
    assert arms["mystery"].reason is not None and "suffix-tree" in arms["mystery"].reason
    assert arms["silent"].reason is not None and "no drafted tokens" in arms["silent"].reason
    assert math.isnan(arms["silent"].predicted_speedup) and math.isfinite(arms["silent"].measured_speedup)


def test_fitting_the_round_overhead_to_an_arm_makes_its_replayed_speedup_the_measured_one(
    lab_run: Path,
) -> None:
    theory = run_theory(lab_run, fit_arm="draft8")
    draft = next(p for p in theory.arms if p.arm == "draft8")
    assert draft.fitted and draft.replayed_speedup == pytest.approx(draft.measured_speedup, rel=1e-9)
    assert theory.efficiency.round_s > 0
    assert theory.efficiency.bandwidth == calibrate_from_run(lab_run).bandwidth


def test_format_arm_predictions_lists_every_arm(lab_run: Path) -> None:
    text = format_arm_predictions(run_theory(lab_run))
    assert text.startswith("Calibrated on baseline")
    for arm in ("draft8", "ngram"):
        assert any(line.startswith(arm) and "x" in line for line in text.splitlines())
    assert "mystery: not predicted" in text and "silent: not predicted" in text


def test_a_baseline_above_the_bandwidth_roofline_is_said_with_its_numbers_and_still_predicted(
    tmp_path: Path,
) -> None:
    # 471 MB per step at the fake CPU's 20 GB/s allows ~40 tok/s; 200 tok/s needs ~5x that bandwidth
    run = make_run(tmp_path / "run", small_plan(baseline=Arm(decode_tok_s=200), fast=spec(300)))
    use_lab_model(run, lab_truth("membound", "dense"))
    theory = theory_or_reason(run)
    assert not isinstance(theory, str)
    text = theory.describe()
    assert "above the roofline of cpu" in text and "20.0 GB/s" in text and "drops the fixed latencies" in text
    assert theory.efficiency.bandwidth == pytest.approx(1.0, abs=1e-3)
    assert theory.efficiency.kernel_s == 0.0 and theory.efficiency.forward_s == 0.0
    assert theory.setup.gpu.bandwidth_gbs > 20.0 * 4  # the bandwidth the measured 200 tok/s needs
    (fast,) = theory.arms
    assert fast.predicted_speedup > 0 and math.isfinite(fast.error)


def test_a_baseline_faster_than_the_default_latencies_scales_them_down_and_says_so(tmp_path: Path) -> None:
    # the tiny lab model steps in well under the 0.3 ms of default (GPU) launch latency
    run = make_run(tmp_path / "run", small_plan(baseline=Arm(decode_tok_s=5000), fast=spec(6000)))
    use_lab_model(run, lab_truth("tiny", "dense"))
    theory = theory_or_reason(run)
    assert not isinstance(theory, str)
    assert "scales the fixed latencies by" in theory.describe()
    assert 0 < theory.efficiency.kernel_s < 2e-6 and theory.setup.gpu.bandwidth_gbs == 20.0
    assert theory.efficiency.bandwidth == pytest.approx(1.0, abs=1e-3)
    setup = theory.setup
    p = predict_architecture(
        setup.models.target,
        setup.gpu,
        "ngram",
        1,
        alpha=0.5,
        context=setup.context,
        efficiency=theory.efficiency,
    )
    assert p.baseline_tok_s == pytest.approx(setup.baseline_tok_s, rel=1e-5)  # still reproduced


def _set_model(run: Path, model: str) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["matrix"]["model"] = model
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_lab_architecture_is_an_architecture() -> None:
    assert isinstance(lab_weights(lab_truth("tiny", "moe"), "draft").arch, Architecture)


def test_run_theory_to_dict_is_strict_json(lab_run: Path) -> None:
    data = json.loads(json.dumps(run_theory(lab_run).to_dict(), allow_nan=False))
    assert data["device"]["name"] == "cpu" and data["baseline_arm"] == "baseline"
    arms = {a["arm"]: a for a in data["arms"]}
    assert arms["silent"]["predicted_speedup"] is None and arms["silent"]["reason"]
    assert arms["draft8"]["error"] == pytest.approx(
        arms["draft8"]["measured_speedup"] / arms["draft8"]["predicted_speedup"] - 1
    )


# -- the forward probe ----------------------------------------------------------------------------
PROBE_MS = {1: 30.0, 2: 31.0, 5: 33.0, 9: 90.0, 17: 150.0}  # flat to 5 tokens, then a jump


def _with_probe(run: Path, dest: Path, probe_ms: dict[int, float] | None = None) -> Path:
    """A copy of ``run`` whose baseline cells carry a forward probe with ``probe_ms`` (default
    PROBE_MS; 2 launches)."""
    probe_ms = probe_ms or PROBE_MS
    shutil.copytree(run, dest)
    cells = [json.loads(line) for line in (dest / "cells.jsonl").read_text().splitlines()]
    samples = [{"tokens": t, "rep": 0, "prompt_ms": ms, "prompt_n": t} for t, ms in probe_ms.items()]
    for c in cells:
        if c["arm"] == "baseline":
            c["forward_probe"] = {"version": 1, "sizes": list(probe_ms), "reps": 1, "samples": samples}
    write_cells(dest / "cells.jsonl", cells)
    return dest


def test_a_forward_probe_replaces_the_roofline_for_target_passes(lab_run: Path, tmp_path: Path) -> None:
    probed = _with_probe(lab_run, tmp_path / "probed")
    theory = run_theory(probed)
    curve = theory.setup.curve
    step = 1 / theory.setup.baseline_tok_s
    assert curve is not None and curve(9) == pytest.approx(step + 0.060)  # + (90 − 30) ms
    draft = next(p for p in theory.arms if p.arm == "draft8")
    p = predict_architecture(
        theory.setup.models.target,
        theory.setup.gpu,
        "draft",
        8,
        acceptance=draft.acceptance,
        draft=lab_weights(lab_truth("membound", "dense"), "draft"),
        context=theory.setup.context,
        efficiency=theory.efficiency,
        target_pass=curve,
    )
    b = p.breakdown
    assert (b.bound, b.verify_bound) == ("measured", "measured")
    assert b.target_step_s == pytest.approx(1 / theory.setup.baseline_tok_s)  # the measured step
    # + the host sampling of the verify's extra positions (8 logit rows, τ − 1 candidate arrays)
    tau = tokens_per_round(b.alpha, 8)
    extra = sampling_time(
        p_target := theory.setup.models.target.arch, 9, theory.setup.gpu, theory.efficiency, tau
    )
    extra -= sampling_time(p_target, 1, theory.setup.gpu, theory.efficiency)
    # + the 8 LM-head rows the probe's prefill did not compute (cost.head_share)
    head = 0.060 * head_share(p_target, theory.setup.context)
    assert b.verify_s == pytest.approx(b.target_step_s + 0.060 + head + extra)
    assert draft.predicted_speedup == pytest.approx(p.speedup)
    # the same run without the probe: a memory-bound roofline verify, so a bigger predicted gain
    assert next(a for a in run_theory(lab_run).arms if a.arm == "draft8").predicted_speedup > p.speedup


def test_the_probe_is_in_the_theory_text_and_json(lab_run: Path, tmp_path: Path) -> None:
    theory = run_theory(_with_probe(lab_run, tmp_path / "probed"))
    assert f"v(9)={1 + 0.060 * theory.setup.baseline_tok_s:.2f}" in theory.describe()
    curve = json.loads(json.dumps(theory.to_dict()))["verify_curve"]
    assert curve["prefill_ms"]["9"] == 90.0 and curve["anchor"] == 1
    assert "roofline" in run_theory(lab_run).describe()


CLIFF_MS = {1: 30.0, 2: 31.0, 5: 31.5, 13: 32.0, 15: 32.0, 16: 32.0, 17: 150.0}  # a kernel switch at 17


def _rounds_at_n_max(run: Path) -> int:
    """Rewrite the n-gram arm (n_max 16): every request drafts 52 tokens in 4 rounds (3 × 16 + 4,
    all accepted), its cells' /metrics counting 4 rounds a request. Returns the requests."""
    records = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    for rec in records:
        t = rec.get("timings") or {}
        if rec["arm"] == "ngram" and "draft_n" in t:
            t["draft_n"] = t["draft_n_accepted"] = 52
    write_records(run / "records.jsonl", records)
    cells = [json.loads(x) for x in (run / "cells.jsonl").read_text().splitlines()]
    n = 0
    for cell in cells:
        mine = [r for r in records if r["arm"] == cell["arm"] == "ngram" and r["repeat"] == cell["repeat"]]
        measured = [r for r in mine if not r.get("warmup")]
        if not mine:
            continue
        n += len(measured)
        cell["metrics_before"]["spec"] = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        cell["metrics_after"]["spec"] = {"drafts": 4 * len(measured), "draft_tokens": 52 * len(measured),
                                         "accepted": 52 * len(measured)}  # fmt: skip
    write_cells(run / "cells.jsonl", cells)
    return n


def test_rounds_are_costed_over_their_lengths_across_a_verify_cliff(lab_run: Path, tmp_path: Path) -> None:
    # llama.cpp's CUDA f16 matmul leaves its small-batch kernel above 16 tokens: the H200 probe
    # read 1.4 steps at 13 tokens and 3.9 at 17. An n-gram arm at n_max 16 drafting 3 rounds of 16
    # and one of 4 averages 13 drafted tokens: a 14-token verify at the mean is a quarter up the
    # cliff, while three rounds in four verify 17 tokens.
    run = _with_probe(lab_run, tmp_path / "cliff", CLIFF_MS)
    assert _rounds_at_n_max(run) > 0
    theory = run_theory(run)
    arm = next(p for p in theory.arms if p.arm == "ngram")
    assert arm.mean_draft == pytest.approx(13.0)
    s = theory.setup

    def round_ms(k: int) -> float:
        p = predict_architecture(
            s.models.target,
            s.gpu,
            "ngram",
            k,
            acceptance=arm.acceptance,
            concurrency=s.concurrency,
            context=s.context,
            efficiency=theory.efficiency,
            target_pass=s.curve,
            replay=s.replays,
            step_context_slope_s=s.context_slope_s,
        )
        return p.breakdown.round_s * 1e3

    assert arm.round_ms_model == pytest.approx(0.75 * round_ms(16) + 0.25 * round_ms(4), rel=1e-6)
    assert arm.round_ms_model > 1.5 * round_ms(13)  # the round at the mean misses most of the cliff
    assert "costed over their draft lengths" in theory.describe()


def test_every_predicted_arm_is_also_replayed_on_its_counts(lab_run: Path) -> None:
    arms = {p.arm: p for p in predict_arms(lab_run)}
    for name in ("draft8", "ngram"):
        assert math.isfinite(arms[name].replayed_speedup) and arms[name].mean_draft > 0
    assert 0 < arms["draft8"].drafting_share <= 1
    assert arms["draft8"].round_ms_measured > 0 and arms["draft8"].round_ms_model > 0


def test_an_arm_faster_than_any_overhead_allows_fits_zero_overhead(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "run", small_plan(baseline=Arm(decode_tok_s=20), draft8=spec(150, acceptance=0.6))
    )
    use_lab_model(run, lab_truth("membound", "dense"))
    theory = run_theory(run, fit_arm="draft8")
    (draft,) = theory.arms
    assert theory.efficiency.round_s == 0.0
    assert draft.fitted and draft.error > 0.3  # the miss stays visible
    assert draft.measured_speedup / draft.replayed_speedup - 1 > 0.3


def _seldom_drafting(run: Path) -> None:
    """Rewrite draft8's counts: one round of 8 drafted tokens per ~96 generated, cells to match."""
    records = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    for rec in records:
        t = rec.get("timings") or {}
        if rec["arm"] == "draft8" and "draft_n" in t:
            t["draft_n"] = 8 * max(1, t["predicted_n"] // 96)
            t["draft_n_accepted"] = round(0.8 * t["draft_n"])
    write_records(run / "records.jsonl", records)
    cells = [json.loads(x) for x in (run / "cells.jsonl").read_text().splitlines()]
    for cell in cells:
        mine = [
            r["timings"]
            for r in records
            if r["arm"] == cell["arm"] == "draft8" and r["repeat"] == cell["repeat"] and not r.get("warmup")
        ]
        if not mine:
            continue
        drafted = sum(t["draft_n"] for t in mine)
        before = cell["metrics_before"]["spec"]
        cell["metrics_after"]["spec"] = {
            "drafts": before["drafts"] + drafted / 8,
            "draft_tokens": before["draft_tokens"] + drafted,
            "accepted": before["accepted"] + sum(t["draft_n_accepted"] for t in mine),
        }
    write_cells(run / "cells.jsonl", cells)


def test_the_fit_charges_an_arm_that_seldom_drafts_only_for_its_drafted_rounds(tmp_path: Path) -> None:
    # An n-gram arm drafting on a few passes in a hundred: fitting the every-pass α-prediction
    # put many rounds' cost into each round (94 ms on a 12 ms step in a real gemma3-270m run).
    run = make_run(
        tmp_path / "run", small_plan(baseline=Arm(decode_tok_s=20), draft8=spec(20, acceptance=0.8))
    )
    use_lab_model(run, lab_truth("membound", "dense"))
    _seldom_drafting(run)
    theory = run_theory(run, fit_arm="draft8")
    (draft,) = theory.arms
    assert draft.drafting_share < 0.5
    assert draft.replayed_speedup == pytest.approx(draft.measured_speedup, rel=1e-9)
    assert "predicted assumes a draft on every pass" in format_arm_predictions(theory)


def test_llamacpp_runs_cost_the_replay_after_a_restore_others_do_not(lab_run: Path, tmp_path: Path) -> None:
    assert run_setup(lab_run).replays
    other = tmp_path / "vllm"
    shutil.copytree(lab_run, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["matrix"]["engine"] = "vllm"
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert not run_setup(other).replays


def test_a_round_not_measurable_is_printed_as_such_with_its_reason() -> None:
    from specbench.analysis.predicted.arms import ArmPrediction
    from specbench.analysis.predicted.text import prediction_rows, skipped_lines

    arm = ArmPrediction(
        "draft4", method="draft", draft_max=4, predicted_speedup=1.2, round_ms_model=8.1, round_note="why"
    )
    (row,) = prediction_rows([arm])
    assert row["round ms measured / model"] == "not measurable / 8.1"
    assert skipped_lines([arm]) == ["draft4: round time not measurable: why"]


@pytest.mark.parametrize("recorded", ["matrix_path", "cwd", "nothing"])
def test_a_relative_model_path_renders_the_same_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: str
) -> None:
    # vLLM reads `model: models/lab/target` against the folder specbench ran in; a report rendered
    # from another folder said "No prediction" for the same run (issue 15).
    project = tmp_path / "project"
    run = make_run(project / "runs" / "vllm", small_plan(baseline=Arm()))
    run = use_lab_model(run, lab_truth("membound", "dense"))
    (project / "models" / "lab").mkdir(parents=True)
    shutil.move(run / "lab" / "truth.json", project / "models" / "lab" / "truth.json")
    (project / "models" / "lab" / "target.gguf").touch()  # the file the engine served
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["matrix"]["model"] = "models/lab/target.gguf"
    kept = {"matrix_path": str(project / "m.yaml"), "cwd": str(project)}
    # older runs recorded no cwd: then the folders holding the run directory stand in
    manifest.update({k: v for k, v in kept.items() if k == recorded})
    (run / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.chdir(tmp_path)
    models = model_from_run(run)
    assert models is not None and str(project / "models" / "lab") in models.source
