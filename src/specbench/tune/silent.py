"""Candidates known to draft nothing: answered by the screening without racing them.

llama-server's ``ngram-simple`` lookup (``common_ngram_simple_draft`` in llama.cpp's
common/ngram-map.cpp, stateless: it reads only the context tokens and its two sizes) drafts at a
step only when

1. the context holds more than n + m + 1 tokens (n = ``--spec-ngram-simple-size-n``, m = ``-size-m``);
2. the last n tokens (the sampled one included) occur earlier in the context — the most recent
   such occurrence is taken, whatever m is; and
3. ``min(m, tokens after that occurrence) ≥ n``.

Whether it drafts is therefore the same for every m ≥ n once the context is longer than
n + M + 1 (M the largest m), and it never drafts when m < n. So when the screened candidate of
an ngram-simple group (its largest m, M) drafted nothing in any screening request, and every
prompt already held at least n + M + 2 tokens, then on the same text every candidate of that
group with the same n (and the same other values) and m ≤ M drafts nothing either: with nothing
drafted, each of them generates the baseline's tokens at the baseline's steps and looks up the
same contexts. Such a candidate does the baseline's work plus the lookup: it cannot be faster,
and the answer needs no launch of it. The rule needs *zero* drafts: once a draft is accepted the
steps at which a lookup happens differ between m values, and a smaller m may find more. "The
same text" is exact under greedy decoding (the lab workloads); with sampling, the other launches'
texts differ and the evidence covers the screened ones, as every screening measurement does.

The rule is not extended to ``ngram-mod`` (with its ``n_min`` above n_max — 48 by default, and
tune does not set it — a draft needs n_max hash hits in a row, which a smaller n_max reaches
more often) nor across n (a larger n can find an older, longer match where the most
recent n-match was too close). A group whose screened candidate drafted nothing but which holds
other n values gets one more screening round: the largest m of each other n, alone, with the
baseline; the same rule then answers that n's candidates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from specbench.engines.llamacpp import NGRAM_SIMPLE_N_DEFAULT
from specbench.matrix.tuneblock import Candidate, candidate_name
from specbench.tune.race import Entry, RaceState
from specbench.tune.screen import Request, draft_length, screen_picks

STATELESS_LOOKUP = "ngram-simple"


def _n(c: Candidate) -> int | None:
    value = c.get("ngram_n")
    return int(value) if value is not None else None


def never_drafts(c: Candidate) -> str | None:
    """Why ``c`` can never draft (None: it can): ngram-simple with m < n returns no draft."""
    n, m = _n(c), c.get("ngram_m")
    if c.get("method") != STATELESS_LOOKUP or n is None or m is None or int(m) >= n:
        return None
    return f"never drafts: ngram-simple with m {int(m)} < n {n} (a draft needs m ≥ n)"


def covered(pick: Candidate, c: Candidate) -> bool:
    """Whether ``c`` drafts nothing wherever ``pick`` drafted nothing (module docstring): the same
    ngram-simple n and other values, m at most the pick's."""
    if pick.get("method") != STATELESS_LOOKUP or "ngram_m" not in pick:
        return False
    same = all(c.get(k) == v for k, v in pick.items() if k != "ngram_m") and set(c) == set(pick)
    return same and draft_length(c) <= draft_length(pick)


def silence(pick: Candidate, reqs: Sequence[Request]) -> str | None:
    """The evidence that ``pick``'s covered candidates draft nothing, or None: some request drafted,
    counts or prompt lengths are missing, or a prompt is too short for the rule."""
    if pick.get("method") != STATELESS_LOOKUP or not reqs:
        return None
    if any(not math.isfinite(r.drafted) or r.drafted > 0 for r in reqs):
        return None
    n, m = _n(pick) or NGRAM_SIMPLE_N_DEFAULT, draft_length(pick)
    shortest = min((r.prompt_tokens for r in reqs), default=math.nan)
    if not math.isfinite(shortest) or shortest < n + m + 2:
        return None
    made = sum(r.generated for r in reqs if math.isfinite(r.generated))
    tokens = f" ({made:.0f} generated tokens)" if made else ""
    return (
        f"drafted 0 tokens in {len(reqs)} requests{tokens} at K={m} (n {n}, prompts ≥ {shortest:.0f} tokens)"
    )


def split(
    grid: Sequence[Candidate], pick: Candidate, done: set[str]
) -> tuple[list[Candidate], list[Candidate]]:
    """(covered by ``pick``, the group's other candidates not yet answered): same method as the
    pick, not in ``done``."""
    mine = [c for c in grid if candidate_name(c) not in done and c.get("method") == pick.get("method")]
    inside = [c for c in mine if covered(pick, c)]
    return inside, [c for c in mine if c not in inside]


def sub_picks(rest: Sequence[Candidate]) -> list[Candidate]:
    """Per other value set (n, …), its largest m: what the extra screening round launches."""
    by: dict[tuple[tuple[str, str], ...], Candidate] = {}
    for c in rest:
        key = tuple(sorted((k, str(v)) for k, v in c.items() if k != "ngram_m"))
        if key not in by or draft_length(c) > draft_length(by[key]):
            by[key] = c
    return [c for c in by.values() if never_drafts(c) is None]


#: The requests of an arm in rounds first … last − 1 (its screening rounds).
Reader = Callable[[str, int, int], Sequence[Request]]


def silent_step(
    state: RaceState, grid: Sequence[Candidate], reqs: Reader, say: Callable[[str], None]
) -> bool:
    """Drop the candidates known to draft nothing (module docstring), before they are launched.
    True while the screening needs one more round: the largest m of each other n of a group
    whose screened candidate drafted nothing races alone with the baseline (event
    ``silent_screen``); the call after that round answers their n values the same way."""
    pending = next((ev for ev in state.events if ev.get("event") == "silent_screen"), None)
    if pending is not None and (pending.get("settled") or state.rounds <= int(pending["round"])):
        return not pending.get("settled")
    by_name = {candidate_name(c): c for c in grid}
    entries = {e.name: e for e in state.entries}
    if pending is None:
        for e in state.entries:
            why = never_drafts(e.values)
            if why and e.status != "dropped":
                _drop(state, e, why, say)
        picks = screen_picks(grid)
    else:
        picks = [by_name[n] for n in pending["picks"]]
    extra: list[Candidate] = []
    for pick in picks:
        name = candidate_name(pick)
        why = silence(pick, reqs(name, entries[name].joined, state.rounds))
        if why is None:
            continue
        done = {e.name for e in state.entries if e.status == "dropped"}
        inside, rest = split(grid, pick, done)
        for c in inside:
            n = candidate_name(c)
            what = "drafts nothing either on the same text" if n != name else "it cannot be faster"
            _drop(state, entries[n], f"{name} {why}: {what} (the baseline's work plus the lookup)", say)
        if pending is None:
            extra += [c for c in sub_picks(rest) if entries[candidate_name(c)].status == "waiting"]
    if pending is not None:
        pending["settled"] = True
        return False
    if not extra:
        return False
    for c in extra:
        e = entries[candidate_name(c)]
        e.status, e.joined = "racing", state.rounds
    names = [candidate_name(c) for c in extra]
    state.events.append({"round": state.rounds, "event": "silent_screen", "picks": names})
    say(f"screening one more round: {', '.join(names)} (the other n values of a group that drafted nothing)")
    return True


def _drop(state: RaceState, e: Entry, why: str, say: Callable[[str], None]) -> None:
    how = "skipped before launch" if e.status == "waiting" else "dropped after the screening"
    e.status, e.dropped_round, e.reason = "dropped", state.rounds, f"{how}: {why}"
    state.events.append({"round": state.rounds, "event": "silent", "candidate": e.name, "why": why})
    say(f"{how} {e.name}: {why}")
