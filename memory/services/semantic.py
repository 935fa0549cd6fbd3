"""The semantic memory service: beliefs — what the agent holds about a user, how sure it is and why.

It is the one owner of the graph store port (``memory.graph``) and of the review queue, and the
``graph_relations`` store of ``memory.userdata``. A human's change (a correction, a deletion, a review
resolved, feedback on a belief) is audited here, through the audit trail; the pipeline's changes (evidence,
retraction, decay) are returned, and their stage audits them.

The graph store does the atomic arithmetic; this service decides what a piece of evidence means:
- new evidence blends into a belief (0.3·old + 0.7·new); evidence for the same belief from another of
  the account's devices takes the higher of the two instead, so a device that heard it less clearly does
  not drag it down;
- a single-valued relation (age, name, grade, school) has one active value. A new value from the same
  device (or with no device) is an update: the old value is ``superseded``, kept with its evidence. A new
  value that may not displace the one held — a human's, another device's, or one less sure than the value held
  and below ``SURE`` (an LLM's guess against a stated age) — is kept ``in_review`` and a review is opened; the
  value held stays the only active one until a human chooses;
- a claim and its opposite on the same concept (likes ↔ dislikes, mastery ↔ learning_obstacle): the
  older one gets counter-evidence; for preferences both are kept and a review is opened;
- a human's correction or deletion wins over later rule and LLM evidence;
- a message taken back (撤回, ``retract``) stops being evidence: a belief it alone held retires (and a value
  it had superseded is restored); a belief other messages hold too stays, without it as provenance,
  re-scored from what remains (its evidence replayed in order without the message's claims and
  counter-evidence, the ratio applied to today's decayed confidence: ``rescore``, shown in its history);
- confidence decays at read time, ``stored × 0.5^(age/half-life)`` by relation category; the nightly
  ``decay`` materialises it and retires beliefs that fell under ``retire_below``;
- a belief serves the purposes its supporting claims were collected under (``memory.purposes``; a human's
  claim under the grants in force when it was made): a read for a purpose sees only the beliefs that serve
  it, and one that serves none once a purpose was withdrawn retires (``retire_unserved``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from memory import ids
from memory.errors import InvalidInput, NotFound
from memory.graph import (
    COUNTER,
    NEW_WEIGHT,
    OLD_WEIGHT,
    Change,
    Evidence,
    EvidenceRow,
    GraphStore,
    MergeMode,
    RelationKey,
    Status,
    StoredRelation,
    clamp,
)
from memory.models import Fact, FactSource, RelationName
from memory.progress import Tick
from memory.provenance import MessageRef, Messages
from memory.purposes import Grants
from memory.services.trail import AuditTrail
from memory.settings import Settings
from memory.state.reviews import Claim, Review, Reviews
from memory.vocabulary import Vocabulary, decayed

HUMAN_CONFIRMED = 0.95
SURE = 0.85  # a single-valued claim at least this sure replaces the value held (``_less_sure``)
RETRACTED = "retract:"  # the evidence id prefix of a message taken back
CLAIMS = (FactSource.rule, FactSource.llm, FactSource.human)


class Belief(BaseModel):
    rel_id: str
    subject: str
    relation: RelationName
    category: str
    object: str
    concept_id: str
    confidence: float = Field(description="Effective: decayed to now.")
    stored_confidence: float
    half_life_days: float
    source: FactSource
    status: Status
    updated_at: float
    message_ids: list[str]
    event_ids: list[str]
    devices: list[str]
    purposes: list[str] = Field(description="The purposes it serves: those its supporting claims were collected "
                                            "under, while their grants stand.")
    why: str = Field(description="How the current value came to be, step by step.")


class HistoryStep(BaseModel):
    """One step of a belief's confidence: a claim, counter-evidence, a correction, a re-score, a status change."""

    at: float = Field(description="When it was applied (server time).")
    action: str = Field(description="merge:blend | merge:max | merge:human | counter | rescore | delete | retire | "
                                    "supersede | hold | restore | ignored")
    source: FactSource
    before: float | None
    after: float | None
    message_ids: list[str]
    explanation: str


class BeliefHistory(BaseModel):
    """How a belief's confidence moved: its steps, oldest first, and what it decays from now on."""

    rel_id: str
    relation: RelationName
    object: str
    status: Status
    stored_confidence: float = Field(description="The confidence at ``base_ts``; decay runs from there.")
    base_ts: float = Field(description="When the decay clock last restarted.")
    half_life_days: float
    steps: list[HistoryStep]


class DecayReport(BaseModel):
    scanned: int = 0
    decayed: int = 0
    retired: int = 0
    dry_run: bool = False
    changes: list[Change] = Field(default_factory=list, exclude=True)


class SemanticMemory:
    name = "graph_relations"

    def __init__(self, store: GraphStore, reviews: Reviews, trail: AuditTrail, settings: Settings,
                 vocabulary: Vocabulary, consent: Callable[[str, str], Grants]) -> None:
        self.store = store
        self.reviews = reviews
        self._trail = trail
        self._settings = settings
        self._vocabulary = vocabulary
        self._consent = consent  # (tenant, user id) → the user's grants now

    # --- evidence from the pipeline ----------------------------------------------------------
    def apply(self, facts: Sequence[Fact]) -> list[Change]:
        changes: list[Change] = []
        for fact in facts:
            changes += self._apply_one(fact)
        return changes

    def _apply_one(self, fact: Fact) -> list[Change]:
        key = RelationKey(tenant=fact.tenant, user_id=fact.user_id, relation=fact.relation,
                          concept_id=ids.concept_id(fact.tenant, fact.object), object=fact.object)
        rel_id = ids.relation_id(fact.tenant, fact.user_id, fact.relation, key.concept_id)
        evidence = Evidence(evidence_id=fact.evidence_id, source=fact.source, confidence=fact.confidence,
                            message_ids=fact.message_ids, device_id=fact.device_id, session_id=fact.session_id,
                            ts=fact.ts, purposes=fact.purposes)
        rows = self.store.evidence([rel_id])
        if any(row.evidence_id == fact.evidence_id for row in rows):
            # a redelivery: the merge is recorded, and so are the counter-evidence and reviews it caused
            # then — running them again now would hit values that appeared since
            return [self.store.merge(key, evidence, MergeMode.blend)]
        devices = _devices_of(rows).get(rel_id, set())
        mode = MergeMode.max if _elsewhere(fact, devices) else MergeMode.blend
        info = self._vocabulary.spec(fact.relation)
        if info.single_valued:
            changes = self._one_value(fact, key, rel_id, evidence, mode)
        else:
            changes = [self.store.merge(key, evidence, mode)]
        if info.opposite is not None:
            opposite_id = ids.relation_id(fact.tenant, fact.user_id, info.opposite, key.concept_id)
            if any(r.rel_id == opposite_id for r in self.store.relations(fact.tenant, fact.user_id, info.opposite)):
                changes.append(self._counter(opposite_id, evidence, f"{fact.relation} {fact.object}"))
                if info.category == "preference":
                    self._review("contradiction", [opposite_id, rel_id], evidence, fact)
        return [c for c in changes if c is not None]

    def _one_value(self, fact: Fact, key: RelationKey, rel_id: str, evidence: Evidence,
                   mode: MergeMode) -> list[Change | None]:
        """Merge a claim for a single-valued relation so that one value stays active. The values it
        replaces are superseded before it is merged: a crash in between leaves no second active value,
        and the redelivery finds them superseded and merges."""
        known = self.store.relations(fact.tenant, fact.user_id, fact.relation, list(Status))
        mine = next((r for r in known if r.rel_id == rel_id), None)
        if mine and mine.source is FactSource.human:  # agrees with a human's value, or a human took it back
            return [self.store.merge(key, evidence, mode)]
        others = [r for r in known if r.rel_id != rel_id and r.status in (Status.active, Status.in_review)]
        devices = self._devices([r.rel_id for r in others])
        replaced = [r for r in others
                    if r.source is not FactSource.human and not _elsewhere(fact, devices.get(r.rel_id, set()))
                    and not _less_sure(fact, r)]
        standing = [r for r in others if r.status is Status.active and r not in replaced]
        changes = [self._supersede(r, evidence, f"replaced by {fact.object} "
                                                f"(said later{_same_device(fact, devices.get(r.rel_id, set()))})")
                   for r in replaced]
        if not standing:
            note = ", ".join(f"{r.object} (said earlier{_same_device(fact, devices.get(r.rel_id, set()))})"
                             for r in replaced)
            held = evidence.model_copy(update={"note": f"replaced {note}" if note else ""})
            return changes + [self.store.merge(key, held, mode, Status.active)]
        human = [r for r in standing if r.source is FactSource.human]
        surer = [r for r in standing if _less_sure(fact, r)]
        because = (f"disagrees with the human value {human[0].object}" if human
                   else f"less sure ({fact.confidence:.2f}) than the value held, " + ", ".join(
                       f"{r.object} ({r.confidence:.2f})" for r in surer) if surer
                   else "another device says " + ", ".join(r.object for r in standing))
        held = evidence.model_copy(update={"note": f"held for review: {because}"})
        changes.append(self.store.merge(key, held, mode, Status.in_review))
        # a human's value does not move; counter-evidence it outweighs records in its explanation why
        changes += [self._counter(r.rel_id, evidence, f"the {fact.source.value} claim {fact.object} is under review")
                    for r in human]
        if mine is None or mine.status is not Status.in_review:  # said again while under review: one review
            kind = "human_correction" if human else "less_sure" if surer else "cross_device"
            self._review(kind, [rel_id] + [r.rel_id for r in standing], evidence, fact)
        return changes

    def _supersede(self, rel: StoredRelation, evidence: Evidence, because: str) -> Change | None:
        replaced = evidence.model_copy(update={"source": FactSource.counter_evidence, "note": because})
        return self.store.set_status(rel.rel_id, Status.superseded, replaced)

    def _counter(self, rel_id: str, evidence: Evidence, because: str) -> Change | None:
        counter = evidence.model_copy(update={"source": FactSource.counter_evidence, "note": because})
        return self.store.scale(rel_id, counter, COUNTER)

    def _review(self, kind: str, rel_ids: list[str], evidence: Evidence, fact: Fact) -> Review:
        relations = {r.rel_id: r for rel in {fact.relation, self._vocabulary.spec(fact.relation).opposite} if rel
                     for r in self.store.relations(fact.tenant, fact.user_id, rel, [Status.active, Status.in_review])}
        devices = self._devices(rel_ids)
        claims = [Claim(rel_id=r, relation=relations[r].relation, object=relations[r].object,
                        confidence=relations[r].confidence, devices=sorted(devices.get(r, set())))
                  for r in rel_ids if r in relations]
        return self.reviews.open(fact.tenant, fact.user_id, kind, claims, evidence.evidence_id)

    def _devices(self, rel_ids: list[str]) -> dict[str, set[str]]:
        return _devices_of(self.store.evidence(rel_ids))

    # --- the user's word ---------------------------------------------------------------------
    def correct(self, tenant: str, user_id: str, relation: str, obj: str, confidence: float,
                operator_id: str) -> Change:
        """Set (or create) a belief as the user states it: source human, wins over later extraction. The
        other active value of a single-valued relation is superseded (first, as in ``apply``). Audited."""
        change = self._correct(tenant, user_id, relation, obj, confidence, operator_id)
        self._audit([change], operator_id)
        return change

    def _correct(self, tenant: str, user_id: str, relation: str, obj: str, confidence: float,
                 operator_id: str) -> Change:
        key = RelationKey(tenant=tenant, user_id=user_id, relation=relation,
                          concept_id=ids.concept_id(tenant, obj), object=obj)
        rel_id = ids.relation_id(tenant, user_id, relation, key.concept_id)
        replaced = [r for r in self.store.relations(tenant, user_id, relation) if r.rel_id != rel_id] \
            if self._vocabulary.spec(relation).single_valued else []
        note = f"set by {operator_id}" + (f"; replaced {', '.join(r.object for r in replaced)}" if replaced else "")
        evidence = Evidence(evidence_id=f"human:{operator_id}:{time.time_ns()}", source=FactSource.human,
                            confidence=confidence, ts=time.time(), note=note,
                            purposes=self._consent(tenant, user_id).collected())
        for rel in replaced:
            self.store.set_status(rel.rel_id, Status.superseded, evidence.model_copy(
                update={"note": f"replaced by {obj}, set by {operator_id}"}))
        return self.store.merge(key, evidence, MergeMode.human)

    def delete(self, tenant: str, user_id: str, rel_id: str, operator_id: str) -> Change | None:
        """Delete a belief (source human), kept with its evidence; None if the user has no such belief. Audited."""
        change = self._delete(tenant, user_id, rel_id, operator_id)
        self._audit([change] if change else [], operator_id)
        return change

    def _delete(self, tenant: str, user_id: str, rel_id: str, operator_id: str) -> Change | None:
        if not any(r.rel_id == rel_id for r in self.store.relations(tenant, user_id, statuses=list(Status))):
            return None
        evidence = Evidence(evidence_id=f"human:{operator_id}:{time.time_ns()}", source=FactSource.human,
                            confidence=0.0, ts=time.time(), note=f"deleted by {operator_id}")
        return self.store.set_status(rel_id, Status.deleted, evidence)

    def resolve(self, tenant: str, user_id: str, review_id: str, keep: list[str], operator_id: str) -> list[Change]:
        """Keep the claims named in ``keep`` (confirmed by a human), delete the others. Audited."""
        review = self.reviews.get(tenant, user_id, review_id)
        known = {c.rel_id: c for c in review.claims}
        unknown = [k for k in keep if k not in known]
        if unknown:
            raise InvalidInput(f"keep names rel_ids not in this review: {unknown}; choose from {sorted(known)}")
        kept = [c for c in review.claims if c.rel_id in keep]
        for rel in {c.relation for c in kept}:
            values = [c.object for c in kept if c.relation == rel]
            if self._vocabulary.spec(rel).single_valued and len(values) > 1:
                raise InvalidInput(f"a user has one {rel} at a time: keep one of {values}")
        changes = [self._delete(tenant, user_id, c.rel_id, operator_id) for c in review.claims if c not in kept]
        changes += [self._correct(tenant, user_id, c.relation, c.object,
                                  max(c.confidence, HUMAN_CONFIRMED), operator_id) for c in kept]
        self.reviews.close(review, keep, operator_id)
        done = [c for c in changes if c is not None]
        self._audit(done, operator_id)
        return done

    def feedback(self, tenant: str, user_id: str, rel_id: str, useful: bool, evidence_id: str,
                 operator_id: str) -> Change | None:
        """Feedback on a recalled belief: "useful" confirms it (source human), "not useful" is counter-evidence
        (×0.5). Audited."""
        belief = next((r for r in self.store.relations(tenant, user_id) if r.rel_id == rel_id), None)
        if belief is None:
            raise NotFound(f"user {user_id!r} has no active belief {rel_id!r}")
        evidence = Evidence(evidence_id=evidence_id, source=FactSource.human if useful else FactSource.counter_evidence,
                            confidence=belief.confidence, ts=time.time(),
                            note="feedback: " + ("useful" if useful else "not useful"),
                            purposes=self._consent(tenant, user_id).collected())
        change: Change | None
        if useful:
            key = RelationKey(tenant=tenant, user_id=user_id, relation=belief.relation,
                              concept_id=belief.concept_id, object=belief.object)
            change = self.store.merge(key, evidence, MergeMode.human)
        else:
            change = self.store.scale(belief.rel_id, evidence, COUNTER)
        self._audit([change] if change else [], operator_id)
        return change

    def _audit(self, changes: Sequence[Change], operator_id: str) -> None:
        self._trail.submit(self._trail.graph_changes(changes, operator_id))

    # --- a message taken back ------------------------------------------------------------------
    def retract(self, tenant: str, user_id: str, messages: Messages, why: str = "taken back (撤回)"
                ) -> list[Change]:
        """The messages are no longer evidence. A belief held only by them retires (a later message saying
        it again brings it back); a value one of them superseded is active again; any other belief they
        supported or contradicted is re-scored from the evidence that remains, and records that they were
        taken back, so they are no longer its provenance. Idempotent. A piece of evidence is of a message by its
        session and id (``memory.provenance``): the same id in another session is another message."""
        relations = self.store.relations(tenant, user_id, statuses=list(Status))
        rows: dict[str, list[EvidenceRow]] = {}
        for row in self.store.evidence([r.rel_id for r in relations]):
            rows.setdefault(row.rel_id, []).append(row)
        changes: list[Change | None] = []
        retired_by: set[str] = set()  # evidence ids of the claims that retire now
        for rel in relations:
            evidence = rows.get(rel.rel_id, [])
            claims = [r for r in evidence if r.source in CLAIMS and r.action != "ignored"]
            counters = [r for r in evidence if r.action == "counter"]  # "I don't like it", taken back too
            mine = Messages(MessageRef(r.session_id, m) for r in [*claims, *counters] for m in r.message_ids
                            if messages.holds(r.session_id, m))
            if not mine or rel.status not in (Status.active, Status.in_review):
                continue
            already = _taken_back(evidence)
            if all(already.holds(*ref) for ref in mine):
                continue
            note, after = f"message {', '.join(mine.ids())} {why}", messages | already
            if all(after.covers(r.session_id, r.message_ids) for r in claims):
                retired_by |= {r.evidence_id for r in claims}
                changes.append(self.store.set_status(rel.rel_id, Status.retired, self._retraction(
                    mine, f"{note}: nothing else supports it")))
            else:
                changes.append(self._rescored(rel, evidence, mine, already, after, note))
        for rel in relations:  # the value a retired claim had replaced is the user's again
            superseded = [r for r in rows.get(rel.rel_id, []) if r.action == "supersede"]
            if rel.status is Status.superseded and superseded and superseded[-1].evidence_id in retired_by:
                last = superseded[-1]
                changes.append(self.store.set_status(rel.rel_id, Status.active, self._retraction(
                    Messages(MessageRef(last.session_id, m) for m in last.message_ids
                             if messages.holds(last.session_id, m)),
                    f"restored: the claim that replaced it (message "
                    f"{', '.join(last.message_ids)}) was {why}")))
        return [c for c in changes if c is not None]

    def _rescored(self, rel: StoredRelation, evidence: Sequence[EvidenceRow], mine: Messages, before: Messages,
                  after: Messages, note: str) -> Change | None:
        """A belief other messages still support, re-scored from what they say: its confidence now (decayed)
        times what the remaining evidence gives over what it gave with the messages just taken back."""
        now = time.time()
        held = decayed(rel.confidence, (now - rel.base_ts) / 86400, self._vocabulary.half_life_days(rel.relation))
        full, rest = _replayed(evidence, before), _replayed(evidence, after)
        score = held * rest / full if full and rest is not None else held
        return self.store.rescore(rel.rel_id, score, self._retraction(
            mine, f"{note}: no longer evidence; re-scored from what other messages say: {held:.2f} → "
                  f"{clamp(score):.2f}"))

    @staticmethod
    def _retraction(messages: Messages, note: str) -> Evidence:
        """The record that ``messages`` are no longer evidence: of their session, if they share one (one
        deletion names one), else of the ids in any session."""
        sessions = messages.sessions()
        session_id = next(iter(sessions)) if len(sessions) == 1 else None
        return Evidence(evidence_id=RETRACTED + (f"{session_id}/" if session_id else "") + "+".join(messages.ids()),
                        source=FactSource.counter_evidence, confidence=0.0, message_ids=messages.ids(),
                        session_id=session_id, ts=time.time(), note=note)

    # --- a purpose withdrawn -------------------------------------------------------------------
    def messages_unserved(self, tenant: str, user_id: str, consent: Grants) -> Messages:
        """The messages whose claims serve none of the purposes ``consent`` grants: no longer evidence."""
        relations = self.store.relations(tenant, user_id, statuses=list(Status))
        rows: dict[str, list[EvidenceRow]] = {}
        for row in self.store.evidence([r.rel_id for r in relations]):
            rows.setdefault(row.rel_id, []).append(row)
        return Messages(MessageRef(claim.session_id, m) for evidence in rows.values()
                        for claim in _supporting(evidence) if not consent.serves(claim.purposes)
                        for m in claim.message_ids)

    def retire_unserved(self, tenant: str, user_id: str, consent: Grants, why: str) -> list[Change]:
        """Retire each belief (active or in review) whose supporting claims serve none of the purposes
        ``consent`` grants — after the messages were retracted (``retract``), what is left is a human's claim
        made under a grant withdrawn since. Idempotent."""
        relations = self.store.relations(tenant, user_id, statuses=[Status.active, Status.in_review])
        rows: dict[str, list[EvidenceRow]] = {}
        for row in self.store.evidence([r.rel_id for r in relations]):
            rows.setdefault(row.rel_id, []).append(row)
        changes = [self.store.set_status(rel.rel_id, Status.retired, Evidence(
            evidence_id=f"unserved:{'+'.join(consent.collected()) or 'none'}", source=FactSource.counter_evidence,
            confidence=0.0, ts=time.time(), note=f"{why}: it serves no purpose the user granted"))
            for rel in relations if not consent.serves(_recorded(rows.get(rel.rel_id, [])))]
        return [c for c in changes if c is not None]

    # --- reading -----------------------------------------------------------------------------
    def history(self, tenant: str, user_id: str, rel_id: str) -> BeliefHistory:
        """The steps of one of the user's beliefs (any status), for a chart of its confidence over time:
        evidence and counter-evidence, corrections, re-scores and status changes, then decay from ``base_ts``."""
        rel = next((r for r in self.store.relations(tenant, user_id, statuses=list(Status)) if r.rel_id == rel_id),
                   None)
        if rel is None:
            raise NotFound(f"user {user_id!r} has no belief {rel_id!r}")
        steps = [HistoryStep(at=row.applied_at, action=row.action, source=row.source, before=row.before,
                             after=row.after, message_ids=row.message_ids, explanation=_step(row))
                 for row in self.store.evidence([rel_id])]
        return BeliefHistory(rel_id=rel.rel_id, relation=rel.relation, object=rel.object, status=rel.status,
                             stored_confidence=rel.confidence, base_ts=rel.base_ts,
                             half_life_days=self._vocabulary.half_life_days(rel.relation), steps=steps)

    def profile(self, tenant: str, user_id: str, include_inactive: bool = False,
                now: float | None = None, purpose: str | None = None) -> list[Belief]:
        """The user's beliefs that serve ``purpose`` (None: any purpose granted), most confident first; with
        ``include_inactive``, every belief of every status, whatever it serves (the user's own view of it)."""
        now = time.time() if now is None else now
        statuses = list(Status) if include_inactive else [Status.active]
        relations = self.store.relations(tenant, user_id, statuses=statuses)
        evidence: dict[str, list[EvidenceRow]] = {}
        for row in self.store.evidence([r.rel_id for r in relations]):
            evidence.setdefault(row.rel_id, []).append(row)
        consent = self._consent(tenant, user_id)
        shown = [(r, evidence.get(r.rel_id, [])) for r in relations]
        if not include_inactive:
            shown = [(r, rows) for r, rows in shown if consent.serves(_recorded(rows), purpose)]
        beliefs = [self._belief(r, rows, now, consent) for r, rows in shown]
        return sorted(beliefs, key=lambda b: (b.status is Status.active, b.confidence), reverse=True)

    def _belief(self, rel: StoredRelation, rows: list[EvidenceRow], now: float, consent: Grants) -> Belief:
        half_life = self._vocabulary.half_life_days(rel.relation)
        age_days = (now - rel.base_ts) / 86400
        effective = decayed(rel.confidence, age_days, half_life) if rel.status is Status.active else 0.0
        steps = [_step(row) for row in rows]
        if rel.status is Status.active and age_days >= 0.01:
            steps.append(f"decayed {age_days:.1f} d at a half-life of {half_life:g} d → {effective:.2f}")
        taken_back = _taken_back(rows)
        supporting = _supporting(rows)
        return Belief(
            rel_id=rel.rel_id, subject=rel.user_id, relation=rel.relation,
            category=self._vocabulary.spec(rel.relation).category, object=rel.object, concept_id=rel.concept_id,
            confidence=round(effective, 4),
            stored_confidence=rel.confidence, half_life_days=half_life, source=rel.source, status=rel.status,
            updated_at=rel.updated_at,
            message_ids=list(dict.fromkeys(m for r in supporting for m in r.message_ids
                                           if not taken_back.holds(r.session_id, m))),
            event_ids=list(dict.fromkeys(r.evidence_id for r in supporting if r.source is not FactSource.human)),
            devices=sorted({r.device_id for r in supporting if r.device_id}),
            purposes=consent.purposes_of(_recorded(rows)), why="; ".join(steps),
        )

    # --- user data (``memory.userdata``) ---------------------------------------------------------
    def count(self, tenant: str, user_id: str) -> int:
        return len(self.store.relations(tenant, user_id, statuses=tuple(Status)))

    def export(self, tenant: str, user_id: str) -> list[dict[str, Any]]:
        return [b.model_dump(mode="json") for b in self.profile(tenant, user_id, include_inactive=True)]

    def erase(self, tenant: str, user_id: str) -> dict[str, int]:
        """Every belief and its evidence (the user node's id stays); also what child mode removes."""
        return {self.name: self.store.erase_user(tenant, user_id)}

    def ping(self) -> None:
        self.store.ping()

    # --- maintenance -------------------------------------------------------------------------
    def decay(self, now: float | None = None, dry_run: bool = False, limit: int = 100_000,
              batch_size: int = 500, tick: Tick | None = None) -> DecayReport:
        """Materialise decayed confidence; retire what fell under ``retire_below``. Safe to run twice or
        concurrently: materialising is conditional on the relation being unchanged, retiring is once.
        ``tick(done, total)`` hears of the progress, a batch at a time."""
        now = time.time() if now is None else now
        total = min(limit, self.store.active_count()) if tick else 0
        report = DecayReport(dry_run=dry_run)
        after = ""
        day = time.strftime("%Y%m%d", time.gmtime(now))
        while report.scanned < limit:
            batch = self.store.scan(after, min(batch_size, limit - report.scanned))
            if not batch:
                break
            for rel in batch:
                report.scanned += 1
                effective = decayed(rel.confidence, (now - rel.base_ts) / 86400,
                                    self._vocabulary.half_life_days(rel.relation))
                if effective < self._settings.retire_below:
                    report.retired += 1
                    if not dry_run:
                        evidence = Evidence(evidence_id=f"decay:{day}", source=FactSource.rule, confidence=effective,
                                            ts=now, note=f"decayed to {effective:.3f}")
                        change = self.store.set_status(rel.rel_id, Status.retired, evidence)
                        if change:
                            report.changes.append(change)
                elif effective < rel.confidence - 1e-6:
                    report.decayed += 1
                    if not dry_run:
                        self.store.materialise(rel.rel_id, effective, now, rel.updated_at)
            after = batch[-1].rel_id
            if tick:
                tick(report.scanned, max(total, report.scanned))
        return report


def _less_sure(fact: Fact, held: StoredRelation) -> bool:
    """A new value of a single-valued relation does not replace one held with more confidence than it has, when
    it is itself below ``SURE``: a guess (an LLM's, a weak rule's) does not take over a stated fact; it waits for
    review beside it."""
    return fact.confidence < SURE and fact.confidence < held.confidence


def _elsewhere(fact: Fact, devices: set[str]) -> bool:
    """The fact comes from another device than the one(s) these claims came from."""
    return bool(fact.device_id and devices and fact.device_id not in devices)


def _same_device(fact: Fact, devices: set[str]) -> str:
    return ", same device" if fact.device_id and fact.device_id in devices else ""


def _devices_of(rows: list[EvidenceRow]) -> dict[str, set[str]]:
    """The devices each relation was claimed from (counter-evidence does not count as a claim)."""
    out: dict[str, set[str]] = {}
    for row in rows:
        if row.device_id and row.source in (FactSource.rule, FactSource.llm, FactSource.human):
            out.setdefault(row.rel_id, set()).add(row.device_id)
    return out


def _taken_back(rows: Sequence[EvidenceRow]) -> Messages:
    return Messages(MessageRef(r.session_id, m) for r in rows if r.evidence_id.startswith(RETRACTED)
                    for m in r.message_ids)


def _supporting(rows: Sequence[EvidenceRow]) -> list[EvidenceRow]:
    """A belief's claims (rule, LLM, human) whose messages were not all taken back."""
    taken_back = _taken_back(rows)
    return [r for r in rows if r.source in CLAIMS and not taken_back.covers(r.session_id, r.message_ids)]


def _recorded(rows: Sequence[EvidenceRow]) -> set[str]:
    """The grants a belief's supporting claims were collected under (``memory.purposes``)."""
    return {p for r in _supporting(rows) for p in r.purposes}


def _replayed(rows: Sequence[EvidenceRow], gone: Messages) -> float | None:
    """The stored confidence the evidence gives, in the order it came, without what the ``gone`` messages
    said (their claims and their counter-evidence); None if nothing is left to give one."""
    confidence: float | None = None
    for row in sorted(rows, key=lambda r: r.applied_at):
        if gone.covers(row.session_id, row.message_ids):
            continue
        if row.action == "merge:blend":
            confidence = clamp(row.confidence if confidence is None
                               else OLD_WEIGHT * confidence + NEW_WEIGHT * row.confidence)
        elif row.action == "merge:max":
            confidence = clamp(max(confidence or 0.0, row.confidence))
        elif row.action == "merge:human":
            confidence = clamp(row.confidence)
        elif row.action == "counter" and confidence is not None:
            confidence = clamp(confidence * COUNTER)
    return confidence


def _step(row: EvidenceRow) -> str:
    if row.evidence_id.startswith(RETRACTED):
        return row.note
    arrow = f"{row.before:.2f} → {row.after:.2f}" if row.before is not None and row.after is not None \
        else f"new at {row.after:.2f}" if row.after is not None else ""
    kept = f"kept the human value; {row.note}" if row.note else "a human's correction outweighs it: unchanged"
    what = {"merge:blend": f"claimed {row.confidence:.2f}, blended 0.3·old + 0.7·new: {arrow}",
            "merge:max": f"claimed {row.confidence:.2f} from another device, kept the higher: {arrow}",
            "merge:human": f"set by the user: {arrow}",
            "counter": f"counter-evidence ({row.note}) ×0.5: {arrow}", "ignored": kept,
            "delete": "deleted by the user", "retire": f"retired by decay ({row.note})",
            "supersede": row.note, "hold": row.note, "restore": row.note}.get(row.action, row.action)
    if row.action == "merge:blend" and row.before is None:
        what = f"claimed {row.confidence:.2f}: {arrow}"
    merged = row.action.startswith("merge:")
    if merged and row.note and row.message_ids:
        what += f"; {row.note}"
    # the evidence is named by its messages; without any, by its note unless the step already says it
    named = ", ".join(row.message_ids) or (row.note if merged or row.action == "delete" else "")
    where = f" on {row.device_id}" if row.device_id else ""
    return f"{row.source.value} evidence{f' {named}' if named else ''}{where}: {what}"
