"""The privacy service: consent per purpose, child mode, erasure with its proof, deletions that follow
provenance (a session, the events of one type, what a withdrawn purpose alone covered). Audited.

Consent (``set_consent``): long-term memory on or off (off is a pause: nothing new kept, nothing recalled,
what is held stays) and the purposes granted (``memory.purposes``). Withdrawing a purpose ends its grant, so
nothing collected under it serves it again, and removes at once what now serves no purpose at all
(``forget_unserved``): the messages only withdrawn grants covered stop being memory — their episodic rows of
every tier go and the beliefs they supported are re-scored or removed, as a deletion of those messages would
(``forget_messages``) — then beliefs only a human's claim under a withdrawn grant held retire, and archived
events of no purpose leave the cold store. The receipt lists it; the sweep runs it again for a day, for work
that raced the withdrawal.

Erasure (``erase``) first writes a tombstone (work received before it is dropped by every stage, and a store
write under way undoes itself once it sees it: ``Policies.writing``), then erases every store of user data
``Mneme.user_data`` names — working memory and the user's jobs, policy, reviews, devices, dead letters,
feedback pairs, episodic events of every tier, the graph user (id kept, everything else cleared), archive
objects — and last destroys the user's key (anything sealed under it, anywhere, is unreadable from then on);
then it waits for the store writes that were under way (``erasure_wait_s``) and erases again, so its receipt
says complete only when no write raced it. Every step is idempotent; ``sweep`` (beat, hourly) runs it again
for users erased in the last ``erasure_sla_hours`` and verifies every store is empty, so a write that raced
the erasure is caught within the SLA. The receipt lists what was removed where and what, if anything, remains.

Child mode for what is already held (``bring_under_child_rules``): a user who becomes a child (``PUT
…/child``, or an age under 13 declared in conversation) is brought under child rules at once, not only for
what they say next. The rules (``memory.state.policy``): working memory sealed at rest, episodic events
type only (no summary, keywords, text, index tokens or vector), no beliefs. The pass covers every session's
message records, cut-reply full texts and queued job payloads (sealed as ``WorkingMemory.append`` seals a
child's, still readable through the API); every episodic row of every status and every archived one (type
only, as a child's are stored); the user's beliefs with their evidence and their reviews, which hold the
claims' text. Then Redis rewrites its append-only file, which still holds the plaintext commands. It runs
after the child flag is set (from then on the write path itself seals and strips), each step idempotent:
a failure midway is completed by calling it again. Its report and audit record hold counts only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from memory import page_links
from memory.crypto import UserKeys, seal
from memory.errors import Conflict
from memory.graph import Change
from memory.models import EventType
from memory.progress import Tick
from memory.provenance import Messages
from memory.services.episodic import EpisodicMemory, Revealed
from memory.services.maintenance import Maintenance
from memory.services.semantic import SemanticMemory
from memory.services.trail import AuditTrail
from memory.settings import Settings
from memory.state import RedisState
from memory.state.policy import Policy
from memory.state.working import Retraction, RetractTask
from memory.text import language
from memory.userdata import UserData
from memory.userhash import user_hash

#: What a child's event reveals: nothing of its message (``memory.pipeline.rule_stage``).
EMPTY = Revealed(summary="", keywords=[], text="").model_dump_json().encode()
TYPE_ONLY_LANG = language("")  # a child's event is stored with the language of its (empty) text
#: The stores of user data whose records do not make a user known (``Privacy.knows``): the read log (reading an
#: unknown user's profile records a read), and two whose count reads a whole list (dead letters, the tenant's
#: devices) for what working memory holds anyway (a message that failed, a device's messages).
NOT_KNOWING = frozenset({"reads", "dead_letters", "devices"})


class Receipt(BaseModel):
    user: str = Field(description="The hashed user id: the receipt itself holds no personal data.")
    erased_at: float
    removed: dict[str, int]
    remaining: dict[str, int] = Field(description="Anything still found after the erasure (should be all 0).")
    complete: bool


class DeletionReceipt(BaseModel):
    """What a deletion removed from long-term memory, and what it did to the beliefs those messages stood for."""

    event_type: EventType | None = Field(None, description="The type deleted, for a deletion by type.")
    session_id: str | None = Field(None, description="The session deleted, for a deletion of a session.")
    purposes: list[str] = Field(default_factory=list, description="The purposes withdrawn, for a withdrawal.")
    deleted_events: int
    archived_events: int = Field(0, description="Archived events removed from cold storage.")
    messages: list[str] = Field(description="Messages long-term memory no longer holds anything of.")
    beliefs_removed: list[str] = Field(description="Beliefs (rel ids) only those messages supported: retired.")
    beliefs_rescored: list[str] = Field(description="Beliefs others support too: re-scored from what remains.")
    beliefs_restored: list[str] = Field(description="Values one of the messages had replaced: active again.")

    @classmethod
    def of(cls, event_type: EventType | None, deleted: int, messages: list[str], changes: Sequence[Change],
           session_id: str | None = None, purposes: Sequence[str] = (), archived: int = 0) -> DeletionReceipt:
        def by(action: str) -> list[str]:
            return sorted({c.rel_id for c in changes if c.action == action})

        return cls(event_type=event_type, session_id=session_id, purposes=list(purposes), deleted_events=deleted,
                   archived_events=archived, messages=messages, beliefs_removed=by("retire"),
                   beliefs_rescored=by("rescore"), beliefs_restored=by("restore"))

    @property
    def audited(self) -> dict[str, Any]:
        """What the audit record of the deletion holds: ids and counts, no content."""
        return {"events_removed": self.deleted_events, "messages": len(self.messages),
                "archived_removed": self.archived_events, "beliefs_removed": self.beliefs_removed,
                "beliefs_rescored": self.beliefs_rescored, "beliefs_restored": self.beliefs_restored}


class Privacy:
    def __init__(self, state: RedisState, episodic: EpisodicMemory, semantic: SemanticMemory,
                 maintenance: Maintenance, user_keys: UserKeys, trail: AuditTrail,
                 stores: Callable[[], tuple[UserData, ...]], settings: Settings, user_hash_key: bytes) -> None:
        self._state = state
        self._episodic = episodic
        self._semantic = semantic
        self._maintenance = maintenance
        self._user_keys = user_keys
        self._trail = trail
        self._stores = stores
        self._settings = settings
        self._hash_key = user_hash_key

    # --- consent and child mode ------------------------------------------------------------------------
    def set_consent(self, tenant: str, user_id: str, operator_id: str, *, long_term: bool | None = None,
                    op: str = "set", purposes: Sequence[str] = ()) -> tuple[Policy, DeletionReceipt | None]:
        """Long-term memory on or off (None: as it is) and the purposes granted: ``op`` "set" (exactly
        ``purposes``), "grant" (these too) or "withdraw" (these no longer). A purpose this withdraws removes
        what then serves no purpose (``forget_unserved``): its receipt, or None if nothing was withdrawn.
        Audited."""
        policy, withdrawn = self._state.policies.set_consent(tenant, user_id, operator_id, long_term=long_term,
                                                             op=op, purposes=purposes)
        action = {True: "consent.grant", False: "consent.revoke", None: "consent.purposes"}[long_term]
        self._trail.submit([self._trail.record(tenant, user_id, action, operator_id, "human", fields={
            "purposes": policy.purposes, "withdrawn": withdrawn})])
        if not withdrawn:
            return policy, None
        self._state.policies.withdrew(tenant, user_id, time.time())
        return policy, self.forget_unserved(tenant, user_id, operator_id, withdrawn)

    def forget_unserved(self, tenant: str, user_id: str, operator_id: str, withdrawn: Sequence[str]
                        ) -> DeletionReceipt:
        """Remove what serves none of the purposes the user grants now (after ``withdrawn`` were withdrawn):
        see the module's text. What it removes is audited; running it again changes nothing."""
        consent = self._state.policies.get(tenant, user_id).consent
        why = f"its purposes were withdrawn ({', '.join(withdrawn)})"
        messages = self._episodic.messages_unserved(tenant, user_id, consent) | self._semantic.messages_unserved(
            tenant, user_id, consent)
        removed, changes = self.forget_messages(tenant, user_id, messages, why=why)
        changes += self._semantic.retire_unserved(tenant, user_id, consent, why)
        archived = self._maintenance.forget_unserved(tenant, user_id, consent)
        receipt = DeletionReceipt.of(None, removed, messages.ids(), changes, purposes=withdrawn, archived=archived)
        if messages or changes or archived:  # the consent change has its own record
            self._trail.submit([self._trail.record(tenant, user_id, "consent.withdraw", operator_id, "human",
                                                   fields={"purposes": list(withdrawn), **receipt.audited}),
                                *self._trail.graph_changes(changes, operator_id)])
        return receipt

    def set_child(self, tenant: str, user_id: str, child: bool, operator_id: str,
                  source: str = "human") -> tuple[Policy, dict[str, int]]:
        """Child mode on or off, audited; on brings what is already held under child rules (its counts)."""
        policy = self._state.policies.set_child(tenant, user_id, child, operator_id)
        self._trail.submit([self._trail.record(tenant, user_id, "child_mode.set", operator_id, source,
                                               fields={"child": child})])
        if child:
            converted = self.bring_under_child_rules(tenant, user_id, operator_id, source)
        else:  # what their sessions hold stays sealed; what they say from now on is kept as said
            self._state.working.mark_child(tenant, user_id, False)
            converted = {}
        return policy, converted

    def bring_under_child_rules(self, tenant: str, user_id: str, operator_id: str,
                                source: str = "human") -> dict[str, int]:
        """Convert what is held for a user now in child mode; returns what was converted, counts only.
        ``source`` is the audit record's: "human" when someone set child mode, "pipeline" when the user
        declared an age."""
        if not self._state.policies.get(tenant, user_id).child:
            raise Conflict(f"user {user_id!r} is not in child mode: set it first (PUT .../child)")
        key = self._user_keys.get(tenant, user_id)

        def sealed(event_id: str) -> bytes:
            return seal(key, EMPTY, event_id)  # as the episodic service seals a payload: under the event id

        working = self._state.working.seal_held(tenant, user_id, key)
        report = {
            "sessions": working["sessions"], "messages_sealed": working["messages"],
            "full_texts_sealed": working["full_texts"], "job_payloads_sealed": working["jobs"],
            "events_stripped": self._episodic.strip_content(tenant, user_id, sealed, TYPE_ONLY_LANG),
            "archived_events_stripped": self._maintenance.strip_archive(tenant, user_id, sealed, TYPE_ONLY_LANG),
            "beliefs_removed": self._semantic.erase(tenant, user_id)[self._semantic.name],
            "reviews_removed": self._state.reviews.erase(tenant, user_id)["reviews"],  # they hold the claims' text
        }
        self._state.rewrite_append_only_file()
        self._trail.submit([self._trail.record(tenant, user_id, "child_mode.convert", operator_id, source,
                                               fields=report)])
        return report

    # --- deleting ---------------------------------------------------------------------------------------
    def forget_messages(self, tenant: str, user_id: str, messages: Messages, why: str
                        ) -> tuple[int, list[Change]]:
        """What long-term memory made of these messages goes: their episodic rows (what other messages said
        stays), their graph evidence (beliefs re-scored or removed, ``SemanticMemory.retract``). Returns how
        many rows went and the graph changes. Running it again changes nothing."""
        return (self._episodic.retract(tenant, user_id, messages),
                self._semantic.retract(tenant, user_id, messages, why=why))

    def _forget(self, tenant: str, retraction: Retraction, task: RetractTask | None, why: str
                ) -> tuple[int, list[Change]]:
        """``forget_messages`` for a retraction a deletion recorded, then ``task`` (``memory.retract``) to the
        workers, for work in flight that writes later. Sent before, a worker could remove a belief before this
        request did, and the receipt would not list it; sent all the same if this fails midway, for the workers
        to finish (and if the process dies first, the redrive sends it: the retraction stands recorded)."""
        try:
            return self.forget_messages(tenant, retraction.user_id,
                                        Messages.of_session(retraction.session_id, retraction.message_ids), why=why)
        finally:
            if task is not None:
                self._state.working.send_retraction(retraction, task)

    def delete_session(self, tenant: str, session_id: str, operator_id: str, task: RetractTask | None = None
                       ) -> DeletionReceipt:
        """Delete a session: its working memory (every kept version) in one step that records the retraction
        of every message it took (``WorkingMemory.drop``), and now what long-term memory made of them,
        following provenance as a deletion by type does; then ``task`` (``memory.retract``: it ends their
        jobs and removes whatever work still in flight wrote). Audited; the receipt lists it."""
        retraction = self._state.working.drop(tenant, session_id)
        if retraction is None:
            return DeletionReceipt.of(None, 0, [], [], session_id=session_id)
        removed, changes = self._forget(tenant, retraction, task, f"deleted with session {session_id}")
        receipt = DeletionReceipt.of(None, removed, sorted(retraction.message_ids), changes, session_id=session_id)
        self._trail.submit([self._trail.record(tenant, retraction.user_id, "session.delete", operator_id, "human",
                                               fields={"session_id": session_id, **receipt.audited}),
                            *self._trail.graph_changes(changes, operator_id)])
        return receipt

    def delete_message(self, tenant: str, session_id: str, message_id: str, operator_id: str,
                       task: RetractTask | None = None) -> DeletionReceipt:
        """Take one message back (撤回 that message, not only the latest): out of working memory
        (``WorkingMemory.take_back``) and now what long-term memory made of it, following provenance — its
        events go, a belief only it supported is removed, one others support is re-scored; then ``task``, as
        for an undo. Audited; the receipt lists it (empty if it was taken back before)."""
        retraction = self._state.working.take_back(tenant, session_id, message_id)
        if retraction is None:
            return DeletionReceipt.of(None, 0, [], [], session_id=session_id)
        removed, changes = self._forget(tenant, retraction, task, "taken back (撤回)")
        receipt = DeletionReceipt.of(None, removed, [message_id], changes, session_id=session_id)
        self._trail.submit([self._trail.record(tenant, retraction.user_id, "message.delete", operator_id, "human",
                                               fields={"session_id": session_id, **receipt.audited}),
                            *self._trail.graph_changes(changes, operator_id)])
        return receipt

    def delete_type(self, tenant: str, user_id: str, event_type: EventType, operator_id: str) -> DeletionReceipt:
        """Delete every stored event of one type (e.g. all small talk), and what the messages they were made
        from stood for in the graph: a belief only they supported is removed (retired), one others support
        too is re-scored from what remains (``SemanticMemory.retract``). Audited; the receipt lists both."""
        removed, messages = self._episodic.delete_type(tenant, user_id, event_type)
        changes = self._semantic.retract(tenant, user_id, messages, why=f"deleted with the {event_type.value} events")
        receipt = DeletionReceipt.of(event_type, removed, messages.ids(), changes)
        self._trail.submit([self._trail.record(tenant, user_id, "episodic.delete_type", operator_id, "human",
                                               fields={"event_type": event_type.value, "removed": removed,
                                                       "beliefs_removed": receipt.beliefs_removed,
                                                       "beliefs_rescored": receipt.beliefs_rescored,
                                                       "beliefs_restored": receipt.beliefs_restored}),
                            *self._trail.graph_changes(changes, operator_id)])
        return receipt

    def erase(self, tenant: str, user_id: str, operator_id: str, at: float | None = None) -> Receipt:
        at = time.time() if at is None else at
        policies = self._state.policies
        policies.tombstone(tenant, user_id, at)
        removed: dict[str, int] = {}
        for store in self._stores():
            removed.update(store.erase(tenant, user_id))
        # a write under way when the tombstone landed checks it once written and undoes itself; one that had not
        # begun sees it first: once those are done, erase again and verify
        settled = policies.wait_for_writers(tenant, user_id, self._settings.erasure_wait_s)
        for store in self._stores():
            for name, n in store.erase(tenant, user_id).items():
                removed[name] = removed.get(name, 0) + n
        self._state.rewrite_append_only_file()
        remaining = self.verify(tenant, user_id)
        receipt = Receipt(user=user_hash(self._hash_key, tenant, user_id), erased_at=at, removed=removed,
                          remaining=remaining, complete=settled and not any(remaining.values()))
        # the erasure's time is its identity: the sweep re-running it writes the same record again
        self._trail.submit([self._trail.record(tenant, user_id, "user.erase", operator_id, "human", identity=str(at),
                                               fields={"removed": removed, "complete": receipt.complete})])
        return receipt

    def verify(self, tenant: str, user_id: str) -> dict[str, int]:
        """What is still stored for this user, store by store (``Mneme.user_data``)."""
        return {store.name: int(store.count(tenant, user_id)) for store in self._stores()}

    def knows(self, tenant: str, user_id: str) -> bool:
        """Whether anything is stored for this user id in this tenant — a message, an event, a belief, a review,
        consent, a key… (``NOT_KNOWING`` aside) — stopping at the first store that holds something. False for an
        id never seen, or erased."""
        return any(store.count(tenant, user_id) for store in self._stores() if store.name not in NOT_KNOWING)

    def export(self, tenant: str, user_id: str, tick: Tick | None = None) -> dict[str, Any]:
        """Everything kept about the user as one document (GDPR access), store by store, opened where their
        key still exists; ``tick(done, total)`` after each store."""
        document: dict[str, Any] = {"tenant": tenant, "user_id": user_id, "exported_at": time.time()}
        stores = self._stores()
        for done, store in enumerate(stores, 1):
            document[store.name] = store.export(tenant, user_id)
            if tick:
                tick(done, len(stores))
        return document

    def sweep(self, dry_run: bool = False, limit: int = 1000, batch_size: int = 1000,
              tick: Tick | None = None) -> dict[str, Any]:
        """Re-run and verify erasures younger than the SLA; forget a user's raw id once verified after it. Then
        the same for withdrawn purposes (``_sweep_withdrawals``). ``tick(done, total)`` after each erasure."""
        sla = self._settings.erasure_sla_hours * 3600
        now = time.time()
        report: dict[str, Any] = {"checked": 0, "completed": 0, "verified": 0, "incomplete": 0, "dry_run": dry_run}
        policies = self._state.policies
        erasing = {tenant: policies.erasing(tenant, limit, batch_size) for tenant in policies.tenants_erasing()}
        total = sum(len(users) for users in erasing.values())
        for tenant, users in erasing.items():
            for user_id, at in users:
                report["checked"] += 1
                if tick:
                    tick(report["checked"], total)
                remaining = self.verify(tenant, user_id)
                if any(remaining.values()):
                    report["incomplete"] += 1
                    if not dry_run:
                        self.erase(tenant, user_id, operator_id="erasure-sweeper", at=at)
                        report["completed"] += 1
                elif now - at > sla and not dry_run:
                    policies.verified(tenant, user_id)
                    report["verified"] += 1
            if not dry_run:
                # no queued write, nor a memory-page link it revokes, outlives these
                policies.forget_tombstones(tenant, now - max(self._settings.job_ttl_s, page_links.MAX_TTL_S))
        if report["checked"] and not dry_run:
            self._state.rewrite_append_only_file()  # queued work for erased users has drained: drop its traces too
        report["withdrawals"] = self._sweep_withdrawals(now - sla, dry_run, limit, batch_size)
        return report

    def _sweep_withdrawals(self, since: float, dry_run: bool, limit: int, batch_size: int) -> dict[str, int]:
        """Remove again what serves no purpose for users who withdrew one within the SLA (work in flight then
        may have written after the first pass; nothing of it served a purpose meanwhile); forget older ones."""
        report = {"checked": 0, "messages_removed": 0}
        policies = self._state.policies
        for tenant in policies.tenants_withdrawing():
            for user_id, at in policies.withdrawing(tenant, limit, batch_size):
                if at < since:
                    if not dry_run:
                        policies.withdrawal_checked(tenant, user_id)
                    continue
                report["checked"] += 1
                if not dry_run:
                    withdrawn = policies.get(tenant, user_id).withdrawn_purposes
                    receipt = self.forget_unserved(tenant, user_id, "privacy-sweeper", withdrawn)
                    report["messages_removed"] += len(receipt.messages)
        return report

    def access_denied(self, tenant: str, resource: str, resource_id: str, owner_tenant: str) -> None:
        """Audit a tenant asking for another tenant's resource (it was answered 404)."""
        owner = user_hash(self._hash_key, owner_tenant, "-")
        self._trail.submit([self._trail.record(tenant, "-", "access.denied", tenant, "api", fields={
            "resource": resource, "resource_id": resource_id, "owner_tenant_hash": owner})])
