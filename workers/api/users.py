"""Privacy: consent to long-term memory per purpose, child mode, erasure, and deleting events of one type.
Audited."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Query, Request
from mneme_client.models import ConsentChange, DeletionReceipt, PageLink, Policy, Purposes, Read, Reads, Receipt

from memory import page_links
from memory.purposes import checked
from workers.api.deps import KEYED, Caller, Memory, OperatorId, PathId, PathPurpose, Tenant, resource_router
from workers.api.requests import ChildIn, ConsentIn, EventType
from workers.api.wire import out

log = logging.getLogger("mneme.api")
router = resource_router()


@router.get("/v1/purposes", response_model=Purposes, tags=["privacy"], dependencies=KEYED)
def purposes(mneme: Memory) -> Purposes:
    """The purposes a user consents to one by one (``MNEME_PURPOSES``)."""
    return Purposes(purposes=mneme.settings.purposes)


@router.post("/v1/users/{user_id}/page-link", response_model=PageLink, tags=["privacy"])
def page_link(request: Request, tenant: Tenant, mneme: Memory, user_id: PathId,
              ttl_s: int = Query(3600, ge=60, le=page_links.MAX_TTL_S, description="How long the link works.")
              ) -> PageLink:
    """A link to the user's memory page (记忆透明度): what the agent believes about them, with why and how sure,
    their events, sessions and reads, consent and child mode, and erasure — to see and correct. Give it to that
    user only: it opens their page and nothing else, until it expires. Needs the tenant's API key."""
    token, expires = page_links.issue(mneme.page_key, tenant, user_id, ttl_s)
    return PageLink(url=f"{str(request.base_url).rstrip('/')}/memory#token={token}", token=token, expires_at=expires)


@router.get("/v1/users/{user_id}/consent", response_model=Policy, tags=["privacy"])
def get_consent(tenant: Tenant, mneme: Memory, user_id: PathId) -> Policy:
    return out(Policy, mneme.state.policies.get(tenant, user_id))


@router.put("/v1/users/{user_id}/consent", response_model=ConsentChange, tags=["privacy"])
def put_consent(tenant: Tenant, mneme: Memory, user_id: PathId, body: ConsentIn) -> ConsentChange:
    """Opt in to (or out of) long-term memory, and say which purposes it may serve. Until the user opts in
    only working memory is kept; opting out is a pause: no new long-term writes, long-term memory hidden from
    recall, kept. A purpose granted before and left out now is withdrawn: nothing collected under it serves it
    again, and what then serves no purpose is removed at once (``withdrawal``, as DELETE
    .../consent/{purpose}). Audited."""
    if body.purposes is not None:
        op, named = "set", checked(body.purposes, mneme.settings.purposes)
    else:  # every purpose, or (a pause) the purposes as they are
        op, named = ("set", mneme.settings.purposes) if body.long_term else ("grant", [])
    policy, withdrawal = mneme.privacy.set_consent(tenant, user_id, body.operator_id, long_term=body.long_term,
                                                   op=op, purposes=named)
    return ConsentChange(**out(Policy, policy).model_dump(),
                         withdrawal=None if withdrawal is None else out(DeletionReceipt, withdrawal))


@router.put("/v1/users/{user_id}/consent/{purpose}", response_model=Policy, tags=["privacy"])
def grant_purpose(tenant: Tenant, mneme: Memory, user_id: PathId, purpose: PathPurpose,
                  operator_id: OperatorId = "user") -> Policy:
    """Grant one purpose (and long-term memory with it). A purpose granted again after a withdrawal is a new
    grant: what was collected before the withdrawal does not serve it. Audited."""
    policy, _ = mneme.privacy.set_consent(tenant, user_id, operator_id, long_term=True, op="grant",
                                          purposes=checked([purpose], mneme.settings.purposes))
    return out(Policy, policy)


@router.delete("/v1/users/{user_id}/consent/{purpose}", response_model=DeletionReceipt, tags=["privacy"])
def withdraw_purpose(tenant: Tenant, mneme: Memory, user_id: PathId, purpose: PathPurpose,
                     operator_id: OperatorId = "user") -> DeletionReceipt:
    """Withdraw one purpose: nothing collected under it serves it again, and what then serves no purpose the
    user still grants is removed at once, following provenance — the messages only it covered stop being
    memory (their events, of every tier, go; a belief only they supported is removed, one others support is
    re-scored), beliefs only a human's claim under it held retire, archived events of no purpose leave cold
    storage. Memories also collected under another purpose stay, serving only that. The receipt lists what
    went (empty if the purpose was not granted). Audited; a sweep repeats it within the erasure SLA."""
    named = checked([purpose], mneme.settings.purposes)
    _, withdrawal = mneme.privacy.set_consent(tenant, user_id, operator_id, op="withdraw", purposes=named)
    return out(DeletionReceipt, withdrawal or DeletionReceipt(purposes=[], deleted_events=0, messages=[],
                                                              beliefs_removed=[], beliefs_rescored=[],
                                                              beliefs_restored=[]))


@router.put("/v1/users/{user_id}/child", response_model=Policy, tags=["privacy"])
def put_child(tenant: Tenant, mneme: Memory, user_id: PathId, body: ChildIn) -> Policy:
    """Child mode (under 13): no graph writes, episodic events without content, working memory
    encrypted at rest. Also switched on when a user declares an age under 13. Switching it on brings what
    is already held under these rules at once (``Privacy.bring_under_child_rules``): messages sealed, events made type
    only, beliefs and reviews removed."""
    policy, converted = mneme.privacy.set_child(tenant, user_id, body.child, body.operator_id)
    if converted:
        log.info("child mode: converted what was held (audited as child_mode.convert): %s", converted)
    return out(Policy, policy)


@router.delete("/v1/users/{user_id}", response_model=Receipt, tags=["privacy"])
def erase(tenant: Tenant, mneme: Memory, user_id: PathId, operator_id: OperatorId = "user") -> Receipt:
    """Erase the user from every layer now; queued work for them is dropped; a sweeper re-checks
    within 24 h. The receipt lists what was removed where."""
    return out(Receipt, mneme.privacy.erase(tenant, user_id, operator_id))


@router.delete("/v1/users/{user_id}/events", response_model=DeletionReceipt, tags=["privacy"])
def delete_events(tenant: Tenant, mneme: Memory, user_id: PathId, event_type: EventType,
                  operator_id: OperatorId = "user") -> DeletionReceipt:
    """Delete every stored event of one type (e.g. all small talk), and what the messages they came from
    stood for: a belief only they supported is removed, one others support too is re-scored from what
    remains (its history shows the step). The receipt lists both. Audited."""
    return out(DeletionReceipt, mneme.privacy.delete_type(tenant, user_id, event_type, operator_id))


@router.get("/v1/users/{user_id}/export", tags=["privacy"])
def export(caller: Caller, mneme: Memory, user_id: PathId) -> dict[str, Any]:
    """Everything kept about the user as one JSON document (GDPR access), opened where their key still
    exists — what ``mneme export`` writes. Recorded as read by the caller."""
    document = mneme.privacy.export(caller.tenant, user_id)
    mneme.reads.exported(caller, user_id, mneme.privacy.verify(caller.tenant, user_id))
    return document


@router.get("/v1/users/{user_id}/reads", response_model=Reads, tags=["privacy"])
def reads(tenant: Tenant, mneme: Memory, user_id: PathId, limit: int = Query(50, ge=1, le=500),
          before: float | None = Query(None, description="Only reads older than this (the previous page's "
                                                         "next_before).")) -> Reads:
    """Who saw what about the user: each recall, profile read and export, newest first — the caller (API key
    id), the agent it named, and the ids of what it was shown with why (score parts, "profile", "export").
    A read appears once a worker has written its audit record (normally well within a second)."""
    found = mneme.reads.of_user(tenant, user_id, limit, before)
    return Reads(user_id=user_id, reads=[Read.model_validate(r) for r in found],
                 next_before=found[-1]["ts"] if len(found) == limit else None)
