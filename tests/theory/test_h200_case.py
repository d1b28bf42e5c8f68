"""Issue #43's H200 table as data: does the blind prediction's interval cover what the H200
measured (draft4 ×1.17, draft8 ×1.15, baseline 454 tok/s)? The pair's shapes are the lab ``gpu``
preset (src/specbench/lab/make.py); ``predict --engine llamacpp`` said ×1.84 / ×1.80 without a
curve or an interval."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from specbench.engines import theory_priors
from specbench.theory import predict
from specbench.theory.speedup import Prediction
from tests.theory.labpair import H200_ARMS, H200_BASELINE_TOK_S, H200_CONTEXT, lab_config

PRIORS = theory_priors()
RUNS = Path("/work/shared/gpu-runs/2026-12-04-h200/kit-dense-gpu-pair.tar.gz")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("lab")
    return lab_config(folder, "gpu", "dense"), lab_config(folder, "gpu", "draft")


def _blind(pair: tuple[str, str], k: int, **kw: object) -> Prediction:
    target, draft = pair
    kw = {"priors": PRIORS, **kw}
    return predict(target, "H200", "F16", "draft", k, draft_model=draft, context=H200_CONTEXT, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("arm", sorted(H200_ARMS))
def test_the_blind_interval_covers_the_h200_speedup_at_the_measured_acceptance(
    pair: tuple[str, str], arm: str
) -> None:
    k, acceptance, measured, _, _ = H200_ARMS[arm]
    p = _blind(pair, k, acceptance=acceptance, engine="llamacpp")
    assert p.interval is not None
    assert p.interval.speedup.covers(measured), p.interval.speedup.text()
    assert p.interval.baseline_tok_s.covers(H200_BASELINE_TOK_S)  # 342 [203–459] against 454
    # without the engine's curve the verify is the optimistic roofline: the centre is further off
    blind = _blind(pair, k, acceptance=acceptance)
    assert blind.speedup > p.speedup > measured


@pytest.mark.parametrize("arm", sorted(H200_ARMS))
def test_it_covers_them_without_the_runs_own_verify_curve(pair: tuple[str, str], arm: str) -> None:
    # the 2026-12-04 curve came from this very run; the first lease's 471 MB curve alone
    held_out = PRIORS.keeping(lambda c: "2026-12-04" not in c.where)
    k, acceptance, measured, _, _ = H200_ARMS[arm]
    p = _blind(pair, k, acceptance=acceptance, engine="llamacpp", priors=held_out)
    assert p.interval is not None and p.interval.speedup.covers(measured)


@pytest.mark.parametrize("arm", sorted(H200_ARMS))
def test_the_designed_alpha_covers_it_and_taken_as_exact_it_does_not(pair: tuple[str, str], arm: str) -> None:
    # The lab designs α 0.8 per position, the server measured 0.754 (A 0.518 at K 4). A designed
    # α is a target: what it realises is a term of its own (terms.DESIGNED_MISS, from the CPU
    # demo's arms, not these), and with it the blind interval covers. Taken as exact it does not:
    # the truth sits at two edges at once (η_bw 0.944, α below 0.8).
    k, _, measured, _, _ = H200_ARMS[arm]
    designed = _blind(pair, k, alpha=0.8, engine="llamacpp")
    assert designed.interval is not None and designed.interval.speedup.covers(measured)
    exact = _blind(pair, k, alpha=0.8, alpha_range=(0.8, 0.8), engine="llamacpp")
    assert exact.interval is not None and exact.interval.speedup.low > measured


@pytest.mark.parametrize("arm", sorted(H200_ARMS))
def test_a_measured_baseline_narrows_it_and_it_still_covers(pair: tuple[str, str], arm: str) -> None:
    k, acceptance, measured, _, _ = H200_ARMS[arm]
    blind = _blind(pair, k, acceptance=acceptance, engine="llamacpp")
    fitted = _blind(pair, k, acceptance=acceptance, engine="llamacpp", baseline_tok_s=H200_BASELINE_TOK_S)
    assert blind.interval is not None and fitted.interval is not None
    b, f = blind.interval.speedup, fitted.interval.speedup
    assert f.covers(measured) and f.high / f.low < b.high / b.low


@pytest.mark.skipif(not RUNS.exists(), reason="the H200 run directory is kept outside the repository")
def test_the_calibrated_run_narrows_the_interval_and_names_its_widest_term(
    pair: tuple[str, str], tmp_path: Path
) -> None:
    from specbench.analysis.predicted import run_theory

    with tarfile.open(RUNS) as tar:
        tar.extractall(tmp_path, filter="data")
    theory = run_theory(tmp_path / "runs" / "dense-a0.8")
    for arm in theory.arms:
        if arm.arm not in H200_ARMS:
            continue
        k, acceptance, measured, _, _ = H200_ARMS[arm.arm]
        blind = _blind(pair, k, acceptance=acceptance, engine="llamacpp").interval
        assert blind is not None and arm.widest
        assert arm.predicted_low <= measured <= arm.predicted_high
        assert arm.predicted_high / arm.predicted_low < blind.speedup.high / blind.speedup.low


@pytest.mark.skipif(not RUNS.exists(), reason="the H200 run directory is kept outside the repository")
def test_the_calibrated_ngram_arm_replays_within_15_percent_and_inside_its_interval(tmp_path: Path) -> None:
    # issue #43: the replay over pooled counts said 3.78x for a measured 4.67x (-19 %); replayed
    # request by request and averaged as the measurement is (analysis/predicted/replay.py)
    from specbench.analysis.predicted import run_theory

    with tarfile.open(RUNS) as tar:
        tar.extractall(tmp_path, filter="data")
    (ngram,) = [a for a in run_theory(tmp_path / "runs" / "dense-a0.8").arms if a.arm == "ngram-mod"]
    assert abs(ngram.measured_speedup / ngram.replayed_speedup - 1) < 0.15
    assert ngram.replayed_low <= ngram.measured_speedup <= ngram.replayed_high
