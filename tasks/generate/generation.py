"""Stage 1 work: pattern simulation for a batch of source sentences, one prompt kind at a time.

Each *slot* (source sentence × kind) is tried up to `max_attempts` times: attempt k samples with its own seed and a
temperature raised by k*temperature_step. Every rejected attempt and every failed call is returned as a quarantine
row with its reason; a slot whose attempts all fail is quarantined, never filled with None.
Request seeds depend only on (run seed, sentence, kind, attempt), so results do not depend on batch order or
concurrency, and an interrupted run re-issues exactly the requests it had not finished (they hit the cache
otherwise). With `batch_api` the same attempts run in rounds, one Batch API batch per round (tasks/llm/batch.py).
"""

from __future__ import annotations

import asyncio
import hashlib
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Callable

from tasks.generate.candidates import Chooser
from tasks.generate.combined_verifier import VerifierModel, stage_signals
from tasks.generate.roles import RoleCheck
from tasks.generate.settings import GenerateSettings, SamplingSettings, ValidationSettings, VerifierSettings
from tasks.generate.validation import validate
from tasks.generate.verification import JudgeTemplate, JudgeVerdict, judge_one, judge_rounds
from tasks.llm.batch import BatchRunner
from tasks.llm.client import CallResult, LLMClient
from tasks.llm.prompting import SEED_BASES, PromptTemplate

# Reasons that mean a call failed (after the client's retries), not that a generation was judged: the slot ends there
# and a re-run of the stage retries it.
FAILED_CALL_REASONS = ("llm_error", "judge_llm_error", "role_llm_error")


@dataclass(frozen=True)
class Judge:
    """The verifier of one prompt kind: its question and settings (the endpoint is the caller's business), and the
    combined verifier's model when `verifier.model` names one (tasks/generate/combined_verifier.py)."""

    template: JudgeTemplate
    settings: VerifierSettings
    seed: int  # the run's (GenerateSettings.seed): the judge samples a re-ask with it
    combined: VerifierModel | None = None


@dataclass(frozen=True)
class Slot:
    source_id: str
    kind: str
    anchor: str
    base_text: str
    siblings: tuple[str, ...]  # accepted generations of earlier kinds for this source (duplicate check)


@dataclass
class Generation:
    source_id: str
    kind: str
    text: str
    attempts: int
    seed: int
    temperature: float
    top_p: float
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    rules_passed: list[str]
    judge_p_pass: float | None = None  # the verifier's P(pass); None when the judge is off
    candidate: int = 0  # which of the request's `n` choices was kept
    candidates: int = 1  # how many choices the endpoint returned
    anchor_cosine: float | None = None  # the encoder cosine the choice ranked by (None: nothing to rank)


def request_seed(run_seed: int, source_id: str, kind: str, attempt: int) -> int:
    digest = hashlib.sha256(f"{run_seed}:{source_id}:{kind}:{attempt}".encode()).hexdigest()
    return int(digest[:8], 16)  # 32-bit: accepted by llama.cpp and OpenAI alike


def attempt_params(sampling: SamplingSettings, seed: int, attempt: int) -> dict:
    params = {
        "temperature": round(min(2.0, sampling.temperature + attempt * sampling.temperature_step), 4),
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "seed": seed,
    }
    return params | {"n": sampling.candidates} if sampling.candidates > 1 else params


def _rejection(slot: Slot, attempt: int, seed: int, text: str | None, reason: str, detail: str,
               candidate: int | None = None) -> dict:
    return {
        "stage": "generation", "source_id": slot.source_id, "kind": slot.kind, "attempt": attempt, "seed": seed,
        "candidate": candidate, "anchor": slot.anchor, "base_text": slot.base_text, "text": text, "reason": reason,
        "detail": detail,
    }


def _screen(slot: Slot, attempt: int, seed: int, params: dict, result: CallResult, tokens: list,
            validation: ValidationSettings, chooser: Chooser, examples: tuple[str, ...] = ()
            ) -> tuple[list[Generation], list[dict]]:
    """One attempt's candidates (the `n` choices of its request) after the rules, shared by the direct and the
    batched loop: the rule-passing ones ranked best first (tasks/generate/candidates.py), and a quarantine row for
    each that failed (or for the failed call). `tokens` ([prompt, completion, latency] of the slot so far) is
    updated in place."""
    if not result.ok:
        return [], [_rejection(slot, attempt, seed, None, "llm_error", result.error or "")]
    tokens[0] += result.prompt_tokens
    tokens[1] += result.completion_tokens
    tokens[2] += result.latency_s
    texts = [(t or "").strip() for t in (result.texts or [result.text])]
    passing, rows = [], []
    for index, text in enumerate(texts):
        verdict = validate(text, kind=slot.kind, base=slot.base_text, anchor=slot.anchor, siblings=slot.siblings,
                           examples=examples, settings=validation)
        if verdict.ok:
            passing.append((index, text, verdict))
        else:
            rows.append(_rejection(slot, attempt, seed, text, verdict.reason or "invalid", verdict.detail, index))
    order, cosines = chooser.rank(slot.kind, slot.anchor, [text for _, text, _ in passing])
    close = {j: chooser.too_close(slot.kind, cosines[j]) for j in order}  # the negative band (STS pattern)
    rows += [_rejection(slot, attempt, seed, passing[j][1], "negative_too_close", close[j], passing[j][0])
             for j in order if close[j]]
    order = [j for j in order if not close[j]]
    ranked = [Generation(slot.source_id, slot.kind, passing[j][1], attempt + 1, seed, params["temperature"],
                         params["top_p"], tokens[0], tokens[1], round(tokens[2], 4), result.cached,
                         list(passing[j][2].passed), candidate=passing[j][0], candidates=len(texts),
                         anchor_cosine=cosines[j])
              for j in order]
    return ranked, rows


def _not_chosen(slot: Slot, attempt: int, others: list[Generation], kept: Generation) -> list[dict]:
    """Quarantine rows of the rule-passing candidates that ranked below the one kept (nothing generated is lost)."""
    return [_rejection(slot, attempt, g.seed, g.text, "not_chosen",
                       f"ranked below candidate {kept.candidate} (cosine to the anchor {g.anchor_cosine} vs "
                       f"{kept.anchor_cosine})", g.candidate) for g in others]


def _apply_verdict(slot: Slot, attempt: int, generation: Generation, verdict: JudgeVerdict,
                   combined: VerifierModel | None = None) -> tuple[Generation | None, dict | None]:
    """A rule-passing generation after the judge (and the combined verifier, when given): accepted with its
    P(pass), or quarantined with the reason."""
    if verdict.reason is None and combined is not None:
        p_bad = combined.p_bad(slot.kind, stage_signals(slot.anchor, generation.text, verdict.p_pass,
                                                        generation.anchor_cosine))
        if p_bad is not None and p_bad >= combined.kinds[slot.kind].threshold:
            return None, _rejection(slot, attempt, generation.seed, generation.text, "verifier_rejected",
                                    f"combined verifier P(bad) = {p_bad:.3f} (judge P(pass) {verdict.p_pass:.3f})",
                                    generation.candidate)
    if verdict.reason is None:
        generation.judge_p_pass = verdict.p_pass
        return generation, None
    return None, _rejection(slot, attempt, generation.seed, generation.text, verdict.reason, verdict.detail,
                            generation.candidate)


@dataclass(frozen=True)
class Plan:
    """What a run's requests are made of: each kind's prompt template and system message (the run's fixed examples),
    its judge, the best-of-N rule and stage 1's settings (sampling, validation, attempts, seed)."""

    templates: dict[str, PromptTemplate]
    systems: dict[str, str]
    judges: dict[str, Judge]
    chooser: Chooser
    settings: GenerateSettings
    examples: dict[str, tuple[str, ...]] = field(default_factory=dict)  # each kind's example sentences (copy check)
    roles: RoleCheck | None = None  # the role check of positives (None: off)
    bases: dict[str, str] = field(default_factory=lambda: dict(SEED_BASES))  # each kind's base (generation_bases)

    def verified_by_judge_endpoint(self, kind: str) -> bool:
        """Whether a kind's generations are sent to the judge's endpoint (the judge, or the positives' role check)."""
        return kind in self.judges or (self.roles is not None and kind == "positive")

    def kind(self, kind: str) -> tuple[PromptTemplate, str, Judge | None]:
        """One kind's template, system message and judge (None: not judged)."""
        return self.templates[kind], self.systems[kind], self.judges.get(kind)


async def generate_slot(call, judge_call, slot: Slot, plan: Plan) -> tuple[Generation | None, list[dict]]:
    """One slot: up to `settings.max_attempts` requests of `settings.sampling.candidates` choices each (seeded by the
    run's `settings.seed`, rules `settings.validation`) until one is accepted: the best-ranked rule-passing choice
    (`plan.chooser`), judged when the plan has a judge for the slot's kind. Returns (the accepted generation or None,
    its quarantine rows)."""
    template, system, judge = plan.kind(slot.kind)
    settings, chooser = plan.settings, plan.chooser
    rejected: list[dict] = []
    messages = template.messages(system, slot.base_text)
    tokens = [0, 0, 0.0]
    for attempt in range(settings.max_attempts):
        seed = request_seed(settings.seed, slot.source_id, slot.kind, attempt)
        params = attempt_params(settings.sampling, seed, attempt)
        ranked, rows = _screen(slot, attempt, seed, params, await call(messages, params), tokens, settings.validation,
                               chooser, plan.examples.get(slot.kind, ()))
        rejected.extend(rows)
        if rows and rows[0]["reason"] in FAILED_CALL_REASONS:
            return None, rejected  # the client already retried transport errors: another attempt would fail too
        if not ranked:
            continue
        best, row = ranked[0], None
        if judge is not None:
            verdict = await judge_one(judge_call, judge.template, slot.anchor, best.text, judge.settings, judge.seed)
            best, row = _apply_verdict(slot, attempt, best, verdict, judge.combined)
        if best is not None and plan.roles is not None and slot.kind == "positive":
            roles = await plan.roles.verdict(judge_call, slot.anchor, best.text)
            if roles.reason is not None:
                best, row = None, _rejection(slot, attempt, best.seed, best.text, roles.reason, roles.detail,
                                             best.candidate)
        if row is not None:
            rejected.append(row)
        rejected.extend(_not_chosen(slot, attempt, ranked[1:], ranked[0]))
        if best is not None:
            return best, rejected
        if row["reason"] in FAILED_CALL_REASONS:
            return None, rejected
    return None, rejected


@asynccontextmanager
async def _calls(client: LLMClient, judge_client: LLMClient | None):
    """The generator's call function and the judge's (the same one when the judge shares the endpoint)."""
    async with client.open() as call:
        if judge_client is None or judge_client is client:
            yield call, call
        else:
            async with judge_client.open() as judge_call:
                yield call, judge_call


Ticker = Callable[[int], None]  # told how many slots just finished (the stage's progress)


def no_tick(_: int) -> None:
    pass


async def generate_slots(slots: list[Slot], plan: Plan, client: LLMClient, judge_client: LLMClient | None = None,
                         on_done: Ticker = no_tick) -> tuple[list[Generation], list[dict]]:
    """Generate a batch of slots (one kind: one few-shot prefix). Returns (accepted generations, quarantine rows).
    Where the plan judges a kind, each rule-passing generation is verified (through `judge_client`, default:
    `client`) before it counts. `on_done(1)` as each slot ends, so progress moves within a batch."""

    async def one(call, judge_call, slot: Slot):
        outcome = await generate_slot(call, judge_call, slot, plan)
        on_done(1)
        return outcome

    async with _calls(client, judge_client) as (call, judge_call):
        outcomes = await asyncio.gather(*(one(call, judge_call, s) for s in slots))
    accepted = [g for g, _ in outcomes if g is not None]
    rejected = [row for _, rows in outcomes for row in rows]
    return accepted, rejected


def kind_counts(kinds, accepted: dict[str, dict], rows: list[dict]) -> dict[str, dict[str, int]]:
    """Per kind: slots (sources that had a base to derive it from), accepted, attempts (every generation that was
    a slot's best: accepted or quarantined; failed calls and candidates ranked below the best are not attempts)."""
    counts = {k: {"slots": 0, "accepted": len(accepted[k]), "attempts": len(accepted[k])} for k in kinds}
    tried: dict[str, set] = {k: set(accepted[k]) for k in kinds}
    for row in rows:
        if row.get("stage") == "generation" and row.get("kind") in counts and row["reason"] != "base_rejected":
            tried[row["kind"]].add(row["source_id"])
            counts[row["kind"]]["attempts"] += row["reason"] not in ("llm_error", "not_chosen")
    for k in kinds:
        counts[k]["slots"] = len(tried[k])
    return counts


@dataclass(frozen=True)
class Source:
    source_id: str
    text: str


def next_slot(source: Source, kind: str, kinds: tuple[str, ...], texts: dict[str, str],
              bases: dict[str, str]) -> tuple[Slot | None, dict | None]:
    """The slot of `kind` for a source whose accepted generations so far are `texts` (kind -> text), or, when its
    base (`bases[kind]`: 'anchor' or a kind) was not accepted, the quarantine row saying so. Shared by both request
    orders."""
    base_kind = bases[kind]
    base = source.text if base_kind == "anchor" else texts.get(base_kind)
    # Only complete triples are written: a kind after one that was not accepted would be paid for and thrown away
    # (an intermediate from the anchor when the positive failed: ~10 % of a run's requests, issue 34).
    missing = next((k for k in kinds[: kinds.index(kind)] if k not in texts), None)
    if base is None or missing is not None:
        detail = (f"no accepted {base_kind} to derive the {kind} from" if base is None
                  else f"no accepted {missing}: the triple cannot be complete")
        return None, {"stage": "generation", "source_id": source.source_id, "kind": kind, "anchor": source.text,
                      "reason": "base_rejected", "detail": detail}
    siblings = tuple(texts[k] for k in kinds[: kinds.index(kind)] if k in texts)
    return Slot(source.source_id, kind, source.text, base, siblings), None


async def generate_chains(sources: list[Source], kinds: tuple[str, ...], plan: Plan, client: LLMClient,
                          judge_client: LLMClient | None = None, on_done: Ticker = no_tick
                          ) -> tuple[list[Generation], list[dict]]:
    """Every kind of each source, source by source: a source's next kind is requested as soon as its base is
    accepted, so the endpoint always has `max_concurrency` requests to serve (kind by kind, each kind's last requests
    leave it part idle). Servers that cache prompt prefixes per slot (llama-server, vLLM) keep each kind's few-shot
    prefix; a single-slot server would re-read it on every switch (use order 'by_kind' there). Same slots, seeds,
    requests and rows as kind by kind. `on_done(1)` as each (source, kind) slot ends, skipped ones included."""

    async def chain(call, judge_call, source: Source) -> tuple[list[Generation], list[dict]]:
        accepted: dict[str, Generation] = {}
        rows: list[dict] = []
        for kind in kinds:
            slot, row = next_slot(source, kind, kinds, {k: g.text for k, g in accepted.items()}, plan.bases)
            if slot is None:
                rows.append(row)
                on_done(1)
                continue
            generation, rejected = await generate_slot(call, judge_call, slot, plan)
            on_done(1)
            rows.extend(rejected)
            if generation is not None:
                accepted[kind] = generation
        return list(accepted.values()), rows

    async with _calls(client, judge_client) as (call, judge_call):
        outcomes = await asyncio.gather(*(chain(call, judge_call, s) for s in sources))
    return [g for gens, _ in outcomes for g in gens], [row for _, rows in outcomes for row in rows]


def generate_slots_batched(slots: list[Slot], kind: str, plan: Plan, runner: BatchRunner,
                           judge_runner: BatchRunner | None = None) -> tuple[list[Generation], list[dict]]:
    """`generate_slots` (one `kind`) in rounds for the Batch API: round a is one batch with attempt a of every slot
    still open (a batch takes minutes to hours, so slots cannot each wait for their own retry), then the judge's
    batches for that round's rule-passing generations. Same requests, seeds, verdicts and rows as the direct loop."""
    template, system, judge = plan.kind(kind)
    settings, chooser = plan.settings, plan.chooser
    messages = [template.messages(system, slot.base_text) for slot in slots]
    tokens = [[0, 0, 0.0] for _ in slots]
    accepted: list[Generation | None] = [None] * len(slots)
    rejected: list[list[dict]] = [[] for _ in slots]
    open_slots = list(range(len(slots)))
    for attempt in range(settings.max_attempts):
        if not open_slots:
            break
        seeds = {i: request_seed(settings.seed, slots[i].source_id, slots[i].kind, attempt) for i in open_slots}
        params = {i: attempt_params(settings.sampling, seeds[i], attempt) for i in open_slots}
        results = runner.run([(messages[i], params[i]) for i in open_slots])
        screened = {i: _screen(slots[i], attempt, seeds[i], params[i], result, tokens[i], settings.validation, chooser,
                               plan.examples.get(kind, ())) for i, result in zip(open_slots, results)}
        best: dict[int, Generation | None] = {i: ranked[0] if ranked else None for i, (ranked, _) in screened.items()}
        verdict_rows: dict[int, dict | None] = {i: None for i in open_slots}
        if judge is not None:
            passing = [i for i in open_slots if best[i] is not None]
            verdicts = judge_rounds(judge_runner or runner, [(judge.template, slots[i].anchor, best[i].text)
                                                             for i in passing], judge.settings, judge.seed)
            for i, verdict in zip(passing, verdicts):
                best[i], verdict_rows[i] = _apply_verdict(slots[i], attempt, best[i], verdict, judge.combined)
        still_open = []
        for i in open_slots:
            ranked, rows = screened[i]
            rejected[i].extend(rows)
            if verdict_rows[i] is not None:
                rejected[i].append(verdict_rows[i])
            if ranked:
                rejected[i].extend(_not_chosen(slots[i], attempt, ranked[1:], ranked[0]))
            accepted[i] = best[i]
            failed = (rows and rows[0]["reason"] in FAILED_CALL_REASONS) or \
                (verdict_rows[i] is not None and verdict_rows[i]["reason"] in FAILED_CALL_REASONS)
            if best[i] is None and not failed:  # a failed call ends the slot
                still_open.append(i)
        open_slots = still_open
    return [g for g in accepted if g is not None], [row for rows in rejected for row in rows]
