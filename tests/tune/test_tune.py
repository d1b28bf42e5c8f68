"""The tune race on a fake measurement (FakeMeasure: simulated launches with known true
speedups and launch noise) — drops, budget, refinement, resume; no engine involved."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench.analysis import stats
from specbench.matrix.tuneblock import Candidate, TuneSpec, candidate_name
from specbench.tune.race import RaceState, initial_state, race, tune_answer

PROMPTS = 4


class FakeMeasure:
    """Each arm's decode rate = 100 × its true speedup × launch noise × request noise."""

    def __init__(self, truth: dict[str, float], launch_sd: float = 0.01, seed: int = 0) -> None:
        self.truth, self.launch_sd = truth, launch_sd
        self.rng = np.random.default_rng(seed)
        self.rows: list[dict[str, Any]] = []
        self.launches = 0
        self.rounds: list[list[str]] = []

    def run_round(self, round_no: int, arms: list[str]) -> None:
        self.rounds.append(arms)
        for arm in arms:
            self.launches += 1
            launch = math.exp(self.rng.normal(0, self.launch_sd))
            for p in range(PROMPTS):
                rate = 100 * self.truth[arm] * launch * math.exp(self.rng.normal(0, 0.005))
                self.rows.append({"arm": arm, "repeat": round_no, "prompt_id": f"p{p}", "decode_tok_s": rate})

    def compare(self, arm: str, other: str, confidence: float) -> stats.Comparison | None:
        return stats.speedup(pd.DataFrame(self.rows), arm, other, "decode_tok_s", confidence=confidence)

    def spent(self) -> tuple[int, int]:
        return self.launches, len(self.rows)

    def failed(self, arm: str) -> str | None:
        return "would not start" if self.truth[arm] <= 0 else None


def spec(**kw: Any) -> TuneSpec:
    raw = {"dimensions": {"draft_n_max": [2, 4, 8], "draft_p_min": [0.0, 0.5]}, **kw}
    return TuneSpec.model_validate(raw)


def truth_from(s: TuneSpec, f: Any) -> dict[str, float]:
    out = {"baseline": 1.0}
    for c in s.grid():
        out[candidate_name(c)] = f(c)
    return out


def speed(c: Candidate) -> float:
    """K = 4 and p-min 0.5 best (×1.5), every step away costs."""
    k, p = float(c["draft_n_max"]), float(c["draft_p_min"])
    return 1.5 - 0.15 * abs(math.log2(k) - 2) - 0.2 * abs(p - 0.5)


def test_race_drops_losers_and_finds_the_best() -> None:
    s = spec(refine=False)
    truth = truth_from(s, speed)
    m = FakeMeasure(truth, launch_sd=0.03)
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    ans = tune_answer(state)
    assert ans.best is not None and ans.best.name == "k4-p0_5"
    assert ans.beats_baseline == "yes"
    dropped = [e for e in state.entries if e.status == "dropped"]
    assert len(dropped) == len(state.entries) - 1
    assert all("leader" in e.reason for e in dropped)
    assert state.stop_reason.startswith("one candidate left")
    # dropping saved launches: fewer than every candidate for every round
    assert m.launches < (len(state.entries) + 1) * state.rounds


def test_no_setting_wins_is_an_answer() -> None:
    s = spec(refine=False, dimensions={"draft_n_max": [2, 4]})
    m = FakeMeasure({"baseline": 1.0, "k2": 0.7, "k4": 0.8})
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    ans = tune_answer(state)
    assert ans.beats_baseline == "no"
    assert ans.text.startswith("no setting wins")


def test_budget_stops_before_a_round_it_cannot_pay() -> None:
    s = spec(refine=False, budget={"launches": 10})
    m = FakeMeasure(truth_from(s, lambda c: 1.2))  # all equal: nothing can be dropped quickly
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    assert m.launches <= 10
    assert state.stop_reason.startswith("budget")


def test_request_budget() -> None:
    s = spec(refine=False, budget={"requests": 60})
    m = FakeMeasure(truth_from(s, speed))
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    assert len(m.rows) <= 60 and "budget" in state.stop_reason


def test_refinement_tries_values_between_the_leader_and_its_neighbours() -> None:
    s = spec(dimensions={"draft_n_max": [2, 8, 16]})
    truth = {"baseline": 1.0, "k2": 1.2, "k8": 1.4, "k16": 1.1, "k5": 1.6, "k12": 1.3}
    m = FakeMeasure(truth)
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    added = [e.name for e in state.entries if e.joined > 0]
    assert added == ["k5", "k12"]
    assert tune_answer(state).best is not None and tune_answer(state).best.name == "k5"  # type: ignore[union-attr]
    assert any(ev["event"] == "refine" for ev in state.events)


def test_theory_orders_candidates_and_says_why() -> None:
    s = spec()
    ordered = initial_state(s, "baseline", lambda c: float(c["draft_n_max"]))
    assert [e.values["draft_n_max"] for e in ordered.entries][:2] == [8, 8]
    assert "theory" in ordered.order_reason
    grid = initial_state(s, "baseline", lambda c: None)
    assert grid.entries[0].name == "k2-p0_0" and grid.order_reason.startswith("grid order")


def test_failed_candidate_is_dropped_with_its_reason() -> None:
    s = spec(refine=False, dimensions={"draft_n_max": [2, 4]})
    m = FakeMeasure({"baseline": 1.0, "k2": 0.0, "k4": 1.3})
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    k2 = next(e for e in state.entries if e.name == "k2")
    assert k2.status == "dropped" and "failed" in k2.reason


def test_resume_continues_from_the_saved_state() -> None:
    """Interrupt after round 2 (the save callback raises), resume from the saved dict: the rounds
    continue at 2 and the result equals an uninterrupted race on the same measurements."""
    s = spec(refine=False)
    truth = truth_from(s, speed)
    saved: list[dict[str, Any]] = []

    def save(state: RaceState) -> None:
        saved.append(state.to_dict())
        if state.rounds == 2:
            raise KeyboardInterrupt

    m = FakeMeasure(truth)
    with pytest.raises(KeyboardInterrupt):
        race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS, save)
    resumed = race(s, RaceState.from_dict(saved[-1]), m, PROMPTS)
    assert [len(r) for r in m.rounds][:2] == [len(resumed.entries) + 1] * 2
    full = race(s, initial_state(s, "baseline", lambda c: None), FakeMeasure(truth), PROMPTS)
    assert resumed.rounds == full.rounds
    assert [e.status for e in resumed.entries] == [e.status for e in full.entries]


def test_spec_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="unknown dimension 'draft_k'"):
        TuneSpec.model_validate({"dimensions": {"draft_k": [1]}})
    with pytest.raises(ValueError, match="numbers only"):
        TuneSpec.model_validate({"dimensions": {"draft_n_max": ["four"]}})
    with pytest.raises(ValueError, match="below 'from'"):
        TuneSpec.model_validate({"dimensions": {"draft_n_max": {"from": 8, "to": 2, "step": 1}}})
    ranged = TuneSpec.model_validate({"dimensions": {"draft_n_max": {"from": 2, "to": 8, "step": 2}}})
    assert ranged.values("draft_n_max") == [2, 4, 6, 8]


def test_matrix_tune_block_errors_are_one_line_naming_the_field(tmp_path: Any) -> None:
    from specbench.errors import ConfigError
    from specbench.matrix.load import load_matrix

    model = tmp_path / "t.gguf"
    model.write_bytes(b"x")
    path = tmp_path / "m.yaml"
    path.write_text("model: t.gguf\ntune:\n  dimensions:\n    draft_n_max: [2, 4]\n  budget: {launchez: 3}\n")
    with pytest.raises(ConfigError, match=r"m.yaml:5: tune.budget.launchez: unknown field \(known: launches"):
        load_matrix(path)
    path.write_text("model: t.gguf\ntune:\n  dimensions:\n    spec_k: [2, 4]\n")
    with pytest.raises(ConfigError, match=r"m.yaml:3: tune.dimensions: unknown dimension 'spec_k'"):
        load_matrix(path)
    path.write_text("model: t.gguf\ntune:\n  dimensions: {draft_n_max: [2, 4]}\n  max_rounds: 2\n")
    with pytest.raises(ConfigError, match=r"tune.max_rounds: "):
        load_matrix(path)


def test_engine_spells_candidates() -> None:
    from specbench.engines.tuning import candidate_args
    from specbench.errors import ConfigError

    c: Candidate = {"draft_model": "/m/d.gguf", "draft_n_max": 4, "draft_p_min": 0.75}
    assert candidate_args("llamacpp", c) == (
        "--spec-type", "draft-simple", "-md", "/m/d.gguf",
        "--spec-draft-n-max", "4", "--spec-draft-p-min", "0.75",
    )  # fmt: skip
    ngram = candidate_args("llamacpp", {"method": "ngram-mod", "ngram_n": 8, "ngram_m": 16})
    assert ngram[2:] == ("--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-max", "16")
    assert candidate_args("vllm", {"method": "ngram", "draft_n_max": 3}) == (
        "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}',
    )  # fmt: skip
    with pytest.raises(ConfigError, match="method draft needs a draft_model"):
        candidate_args("llamacpp", {"draft_n_max": 4})
    with pytest.raises(ConfigError, match=r"tune\.dimensions\.method: 'medusa'"):
        candidate_args("llamacpp", {"method": "medusa"})


def test_report_section_lists_candidates_and_draws_the_surface(tmp_path: Any) -> None:
    import json
    from dataclasses import asdict

    from specbench.report.page.document import Figure, Table
    from specbench.report.tune import tune_blocks

    s = spec(refine=False)
    state = race(s, initial_state(s, "baseline", lambda c: 1.0), FakeMeasure(truth_from(s, speed)), PROMPTS)
    cands = [asdict(e) for e in state.entries]
    entry = {"state": state.to_dict(), "answer": {"text": tune_answer(state).text}, "candidates": cands}
    (tmp_path / "tune.json").write_text(json.dumps({"workloads": {"chat": entry}}))
    blocks = tune_blocks(tmp_path / "chat")
    table = next(b for b in blocks if isinstance(b, Table))
    assert len(table.frame) == len(cands) and table.frame["why"].str.contains("leader").any()
    figure = next(b for b in blocks if isinstance(b, Figure))
    assert figure.path.stat().st_size > 0
    assert tune_blocks(tmp_path / "other") == []  # not a tuned workload: no section


def test_no_refinement_the_budget_cannot_finish() -> None:
    """A refinement candidate added and never measured would be a hole in the run directory."""
    s = spec(dimensions={"draft_n_max": [2, 8, 16]}, budget={"launches": 14})
    truth = {"baseline": 1.0, "k2": 1.2, "k8": 1.6, "k16": 1.1, "k5": 1.5, "k12": 1.3}
    m = FakeMeasure(truth)
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    assert [e.name for e in state.entries] == ["k2", "k8", "k16"]
    assert any(ev["event"] == "no_refine" for ev in state.events)
    assert m.launches <= 14


def test_a_tight_budget_races_the_theorys_favourites_first() -> None:
    """14 launches pay for three rounds of four arms: the three predicted best race first, the
    others wait for launches that drops free (here none: the budget ends first)."""
    s = spec(refine=False, budget={"launches": 14})
    truth = truth_from(s, speed)
    m = FakeMeasure(truth)
    state = race(s, initial_state(s, "baseline", speed), m, PROMPTS)  # a theory that is right
    first = [a for a in m.rounds[0] if a != "baseline"]
    assert first == ["k4-p0_5", "k4-p0_0", "k2-p0_5"]
    assert m.launches <= 14
    assert "never admitted" in state.stop_reason or state.stop_reason.startswith("budget")
    assert tune_answer(state).best is not None and tune_answer(state).best.name == "k4-p0_5"  # type: ignore[union-attr]


def _result(state: RaceState, command: list[str]) -> Any:
    from pathlib import Path

    from specbench.tune.execute import WorkloadResult

    return WorkloadResult("chat", Path("runs/tune/chat"), state, tune_answer(state), command)


def _measured(ratio: float, low: float, high: float, verdict: str) -> dict[str, Any]:
    return {"ratio": ratio, "ci_low": low, "ci_high": high, "verdict": verdict, "n_launches": 6,
            "confidence": 0.95}  # fmt: skip


@pytest.mark.parametrize(
    ("measured", "says"),
    [
        (
            _measured(0.746, 0.661, 0.842, "slower"),
            "no setting wins: keep speculation off (serve the baseline)",
        ),
        (_measured(1.004, 0.995, 1.008, "equivalent"), "is equivalent to the baseline"),
        (_measured(1.30, 0.90, 1.80, "undetermined"), "no setting is shown faster: keep speculation off"),
    ],
)
def test_a_candidate_not_shown_faster_is_never_served(measured: dict[str, Any], says: str) -> None:
    """Issue 28: "no setting wins: the best … is slower …, ×0.746 (…)", then `serve it: llama-server
    … --spec-draft-n-max 2`."""
    from specbench.tune.execute import answer_lines
    from specbench.tune.race import Entry

    best = Entry("dmdraft-k2-p0_0", {"draft_n_max": 2}, status="racing", measured=measured)
    state = RaceState(baseline="baseline", entries=[best], rounds=6, stop_reason="max_rounds 6 reached")
    ans = tune_answer(state)
    assert ans.serve == "baseline" and ans.serves_baseline and ans.best is best
    assert says in ans.text
    assert (
        f"×{measured['ratio']:.3f} (95.0 % CI {measured['ci_low']:.3f}–{measured['ci_high']:.3f})" in ans.text
    )
    text = "\n".join(answer_lines(_result(state, ["llama-server", "-m", "t.gguf", "--port", "8080"])))
    assert "serve it:" not in text
    assert "  serve the baseline (speculation off): llama-server -m t.gguf --port 8080" in text


def test_only_a_faster_candidate_gets_a_serve_it_line() -> None:
    from specbench.tune.execute import answer_lines
    from specbench.tune.race import Entry

    best = Entry("k4", {"draft_n_max": 4}, status="racing", measured=_measured(1.4, 1.2, 1.6, "faster"))
    state = RaceState(baseline="baseline", entries=[best], rounds=6, stop_reason="one candidate left (k4)")
    ans = tune_answer(state)
    assert (ans.serve, ans.beats_baseline, ans.serves_baseline) == ("k4", "yes", False)
    text = "\n".join(answer_lines(_result(state, ["llama-server", "--spec-draft-n-max", "4"])))
    assert "  serve it: llama-server --spec-draft-n-max 4" in text and "serve the baseline" not in text


def test_the_command_served_is_the_baseline_unless_a_candidate_wins() -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from specbench.engines.llamacpp import LlamaCppEngine
    from specbench.matrix.config import Matrix
    from specbench.tune.execute import served_command

    matrix = Matrix(model="/m/t.gguf", common_args=("-c", "2048"), arms={"baseline": ("--temp", "0")})
    runner: Any = SimpleNamespace(matrix=matrix, engine=LlamaCppEngine(Path("/bin/llama-server")))
    baseline = served_command(runner, None)
    assert baseline[:3] == ["/bin/llama-server", "-m", "/m/t.gguf"]
    assert "--temp" in baseline and not any(a.startswith("--spec") for a in baseline)
    winner = served_command(runner, {"draft_model": "/m/d.gguf", "draft_n_max": 4})
    assert winner[winner.index("--spec-draft-n-max") + 1] == "4" and "--temp" not in winner


def test_unmeasured_candidates_are_listed_with_why() -> None:
    """The budget admitted 3 of 6 candidates: the console never said so (only tune.json did)."""
    from specbench.tune.execute import answer_lines
    from specbench.tune.race import unmeasured

    s = spec(refine=False, budget={"launches": 14})
    m = FakeMeasure(truth_from(s, speed))
    state = race(s, initial_state(s, "baseline", speed), m, PROMPTS)
    waiting = [e.name for e in state.entries if e.status == "waiting"]
    assert len(waiting) == 3 and [e.name for e in unmeasured(state)] == waiting
    text = "\n".join(answer_lines(_result(state, [])))
    assert f"  not measured: {', '.join(waiting)}: the budget admitted 3 of 6 candidates" in text


def test_a_failed_candidate_is_listed_as_not_measured() -> None:
    from specbench.tune.execute import answer_lines

    s = spec(refine=False, dimensions={"draft_n_max": [2, 4]})
    state = race(s, initial_state(s, "baseline", lambda c: None), FakeMeasure({"baseline": 1.0, "k2": 0.0,
                 "k4": 1.3}), PROMPTS)  # fmt: skip
    text = "\n".join(answer_lines(_result(state, [])))
    assert "  not measured: k2: its engine failed: would not start" in text


def test_admitted_at_start_is_the_races_first_round() -> None:
    from specbench.tune.race import admitted_at_start

    s = spec(refine=False, budget={"launches": 14})
    m = FakeMeasure(truth_from(s, speed))
    start = initial_state(s, "baseline", speed)
    planned = admitted_at_start(s, start, PROMPTS)
    assert all(e.status == "waiting" for e in start.entries)  # the plan leaves the state alone
    race(s, start, m, PROMPTS)
    assert planned == [a for a in m.rounds[0] if a != "baseline"] == ["k4-p0_5", "k4-p0_0", "k2-p0_5"]
    assert admitted_at_start(spec(refine=False), initial_state(s, "baseline", speed), PROMPTS) == [
        e.name for e in initial_state(s, "baseline", speed).entries
    ]


def test_the_race_says_what_the_budget_leaves_out_before_the_first_launch() -> None:
    s = spec(refine=False, budget={"launches": 14})
    m = FakeMeasure(truth_from(s, speed))
    said: list[str] = []
    race(s, initial_state(s, "baseline", speed), m, PROMPTS, say=said.append)
    assert said[0].startswith("the budget admits 3 of 6 candidates; waiting (measured only if drops")


def test_a_tie_with_the_best_says_ship_either_and_names_the_cheaper() -> None:
    spec = TuneSpec.model_validate(
        {"dimensions": {"draft_model": ["d.gguf"], "draft_n_max": [2, 4]}, "max_rounds": 6, "refine": False}
    )
    state = initial_state(spec, "baseline", lambda c: None)
    k2, k4 = sorted(state.entries, key=lambda e: e.name)
    k4.status, k4.measured = "racing", {"ratio": 1.3, "ci_low": 1.2, "ci_high": 1.4, "verdict": "faster",
                                        "n_launches": 6, "confidence": 0.98}  # fmt: skip
    k2.status, k2.reason = "dropped", f"equivalent to the leader {k4.name}: ×0.998 (98.0 % CI 0.992–1.004)"
    ans = tune_answer(state)
    assert ans.serve == k4.name  # the one shown faster is served; the text names the cheaper tie
    assert f"equivalent within ±1 %: {k2.name} — ship either, the cheaper one ({k2.name}: K 2)" in ans.text


@pytest.mark.parametrize(
    "kw",
    [
        {"dimensions": {"draft_n_max": [2, 8, 16]}},  # with a refinement stage (k5, k12)
        {"refine": False, "budget": {"launches": 20}},
        {"refine": False, "budget": {"requests": 60}},
    ],
)
def test_every_round_says_what_is_spent_and_the_most_its_stage_can_still_cost(kw: dict[str, Any]) -> None:
    s = spec(**kw)
    truth = truth_from(s, speed) if "dimensions" not in kw else {
        "baseline": 1.0, "k2": 1.2, "k8": 1.4, "k16": 1.1, "k5": 1.6, "k12": 1.3,
    }  # fmt: skip
    m = FakeMeasure(truth, launch_sd=0.03)
    lines: list[str] = []
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS, say=lines.append)
    rounds = [x for x in lines if x.startswith("round ")]
    assert len(rounds) == state.rounds == len(m.rounds)
    stages = [re.match(r"round \d+ \((\w+),", x).group(1) for x in rounds]  # type: ignore[union-attr]
    for i, line in enumerate(rounds):
        assert line.startswith(f"round {i + 1} (")
        assert f"so far {sum(map(len, m.rounds[:i]))} launches" in line
        assert f"{len(m.rounds[i])} launches;" in line
        most = int(re.search(r"at most (\d+) more launches", line).group(1))  # type: ignore[union-attr]
        rest = sum(len(r) for r, st in zip(m.rounds[i:], stages[i:], strict=True) if st == stages[i])
        assert rest <= most  # a bound, kept: what the stage then spent never exceeds it


def test_a_refinement_starts_only_if_the_budget_finishes_it_with_everything_still_racing() -> None:
    """Three candidates nobody can tell apart are all still racing when max_rounds ends the race:
    the refinement stage races them with its new values, so its verdict must pay for all of them
    (the baseline, the three, the new), not only the leader and the new values."""
    s = spec(dimensions={"draft_n_max": [2, 8, 16]}, max_rounds=3, budget={"launches": 24})
    truth = {"baseline": 1.0, "k2": 1.2, "k8": 1.2, "k16": 1.2, "k5": 1.2, "k12": 1.2}
    m = FakeMeasure(truth, launch_sd=0.08)  # three launches cannot tell them apart
    state = race(s, initial_state(s, "baseline", lambda c: None), m, PROMPTS)
    assert len(state.racing()) == 3 and m.launches == 12  # max_rounds 3 reached, nothing dropped
    assert any(ev["event"] == "no_refine" for ev in state.events)
    assert [e.name for e in state.entries] == ["k2", "k8", "k16"]


class LevelsSeen(FakeMeasure):
    """Records the confidence every look asked for."""

    def __init__(self, truth: dict[str, float]) -> None:
        super().__init__(truth)
        self.levels: set[float] = set()

    def compare(self, arm: str, other: str, confidence: float) -> stats.Comparison | None:
        self.levels.add(confidence)
        return super().compare(arm, other, confidence)


def test_the_race_looks_at_the_matrix_alpha() -> None:
    """The matrix's ``alpha`` sets the race's per-look level as it sets the report's (a tune run's
    report reads 1 − alpha): at 0.001 every look is stricter than at the default 0.05."""
    from specbench.analysis.sequential import nominal_alpha
    from specbench.tune.race import look_confidence

    s = spec(refine=False)
    strict, default = LevelsSeen(truth_from(s, speed)), LevelsSeen(truth_from(s, speed))
    race(s, initial_state(s, "baseline", lambda c: None), strict, PROMPTS, alpha=0.001)
    race(s, initial_state(s, "baseline", lambda c: None), default, PROMPTS)
    assert strict.levels == {look_confidence(s, 0.001)} == {1 - nominal_alpha(s.max_rounds, 0.001)}
    assert default.levels == {look_confidence(s)} and look_confidence(s, 0.001) > look_confidence(s)
