"""Candidates known to draft nothing (specbench.tune.silent): an ngram-simple lookup that drafted
nothing at its largest m answers its smaller m (same n) without launching them. No engine."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from specbench.matrix.tuneblock import Candidate, TuneSpec, candidate_name
from specbench.tune.race import initial_state, race, tune_answer
from specbench.tune.screen import SCREEN_ROUNDS, Request, predict_all, screen_picks
from specbench.tune.screenrun import apply_screen, screen_lines, screen_requests, start_screening
from specbench.tune.silent import covered, never_drafts, silence, silent_step
from tests.support.tunemeasure import RowsMeasure

PROMPTS = 3


def _spec(method: str = "ngram-simple", n: tuple[int, ...] = (2,)) -> TuneSpec:
    dims = {"method": [method], "ngram_m": [2, 4, 8, 16], "ngram_n": list(n)}
    return TuneSpec.model_validate({"dimensions": dims, "max_rounds": 6, "refine": False})


class Silent(RowsMeasure):
    """Launches of a lookup that never matches: every candidate drafts nothing, ×0.98 of the baseline."""

    def __init__(self, prompt_tokens: float = 30.0) -> None:
        super().__init__()
        self.prompt_tokens = prompt_tokens

    def run_round(self, round_no: int, arms: list[str]) -> None:
        self.rounds.append(arms)
        for arm in arms:
            for p in range(PROMPTS):
                rate = 100.0 * (1.0 if arm == "baseline" else 0.98) * (1 + 0.01 * ((p + round_no) % 3))
                row = {"arm": arm, "repeat": round_no, "prompt_id": f"p{p}", "decode_tok_s": rate}
                if arm != "baseline":
                    row |= {"draft_n": 0.0, "draft_accepted": 0.0, "prompt_tokens": self.prompt_tokens}
                    row |= {"output_tokens": 32.0}
                self.rows.append(row)


def _tune(spec: TuneSpec, m: Silent) -> Any:
    grid = spec.grid()
    state = initial_state(spec, "baseline", lambda c: None)

    def screen(s: Any) -> None:
        if s.rounds < SCREEN_ROUNDS:
            return
        df = pd.DataFrame(m.rows)
        if silent_step(s, grid, lambda arm, a, b: screen_requests(df, arm, "baseline", b, a), lambda x: None):
            return
        data = {
            candidate_name(c): screen_requests(df, candidate_name(c), "baseline") for c in screen_picks(grid)
        }
        apply_screen(s, predict_all(grid, data, lambda c: 0.0, lambda t: 1.0), lambda x: None)

    start_screening(state, grid)
    return race(spec, state, m, PROMPTS, screen=screen)


def test_a_lookup_that_drafted_nothing_at_its_largest_m_answers_the_smaller_m_unlaunched() -> None:
    m = Silent()
    state = _tune(_spec(), m)
    launched = {a for r in m.rounds for a in r}
    assert launched == {"baseline", "ngram_simple-m16-n2"} and len(m.rounds) == SCREEN_ROUNDS
    reasons = {e.name: e.reason for e in state.entries}
    assert reasons["ngram_simple-m4-n2"].startswith(
        "skipped before launch: ngram_simple-m16-n2 drafted 0 tokens"
    )
    assert "at K=16 (n 2, prompts ≥ 30 tokens)" in reasons["ngram_simple-m4-n2"]
    assert reasons["ngram_simple-m16-n2"].startswith("dropped after the screening")
    ans = tune_answer(state)
    assert ans.serve == "baseline" and ans.beats_baseline == "no"
    assert "every candidate drafts nothing on this workload" in ans.text


def test_other_n_values_get_one_more_screening_round_of_their_largest_m() -> None:
    m = Silent()
    state = _tune(_spec(n=(2, 4)), m)
    assert m.rounds[SCREEN_ROUNDS:] == [["baseline", "ngram_simple-m16-n4"]]  # alone with the baseline
    assert all(e.status == "dropped" for e in state.entries)
    reasons = {e.name: e.reason for e in state.entries}
    assert "m 2 < n 4" in reasons["ngram_simple-m2-n4"]  # never drafts: not even launched
    assert reasons["ngram_simple-m8-n4"].startswith("skipped before launch: ngram_simple-m16-n4 drafted 0")
    assert sum(map(len, m.rounds)) * 3 <= 9 * 6  # ≤ ⅓ of the grid's 9 arms × 6 launches
    text = "\n".join(screen_lines(state))
    assert "predicted 0 more and skipped 0 of them before launch; 6 more known to draft nothing" in text
    assert "screening round 3: ngram_simple-m16-n4 with the baseline" in text


def test_prompts_too_short_for_the_lookup_leave_the_candidates_racing() -> None:
    m = Silent(prompt_tokens=19)  # n 2 + M 16 + 2 = 20: a shorter context drafts at m < 16 first
    _tune(_spec(), m)
    assert "ngram_simple-m4-n2" in {a for r in m.rounds for a in r}


def _req(drafted: float = 0.0, prompt: float = 30.0) -> Request:
    return Request(drafted, 0.0, 0.98, 0, prompt, 32.0)


def test_the_rule_needs_zero_drafts_known_prompt_lengths_and_the_same_n() -> None:
    pick: Candidate = {"method": "ngram-simple", "ngram_m": 16, "ngram_n": 2}
    assert silence(pick, [_req(), _req()]) is not None
    assert silence(pick, [_req(), _req(drafted=1)]) is None  # one draft: the steps differ after it
    assert silence(pick, [_req(prompt=math.nan)]) is None  # the server did not say
    assert silence({**pick, "method": "ngram-mod"}, [_req()]) is None  # n_min 48: smaller n_max drafts more
    assert covered(pick, {**pick, "ngram_m": 4}) and not covered(pick, {**pick, "ngram_n": 4, "ngram_m": 4})
    assert not covered({**pick, "method": "ngram-mod"}, {**pick, "method": "ngram-mod", "ngram_m": 4})
    assert never_drafts({**pick, "ngram_m": 2, "ngram_n": 4}) and never_drafts(pick) is None
