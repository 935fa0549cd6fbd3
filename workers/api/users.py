"""Privacy: consent to long-term memory, child mode, erasure, and deleting events of one type. Audited."""

from __future__ import annotations

import logging
import time

from memory import childmode
from memory.audit import record
from memory.episodic import ALL_STATUSES
from memory.erasure import erase_user
from memory.userhash import user_hash
from workers.api.deps import OperatorId, PathId, Rt, Tenant, resource_router
from workers.api.requests import ChildIn, ConsentIn, EventType
from workers.schemas import Policy, Receipt

log = logging.getLogger("mneme.api")
router = resource_router()


@router.get("/v1/users/{user_id}/consent", response_model=Policy, tags=["privacy"])
def get_consent(tenant: Tenant, rt: Rt, user_id: PathId) -> Policy:
    return rt.state.policies.get(tenant, user_id)


@router.put("/v1/users/{user_id}/consent", response_model=Policy, tags=["privacy"])
def put_consent(tenant: Tenant, rt: Rt, user_id: PathId, body: ConsentIn) -> Policy:
    """Opt in to (or out of) long-term memory. Until the user opts in only working memory is kept;
    opting out stops new long-term writes and hides long-term memory from recall. Audited."""
    policy = rt.state.policies.set_consent(tenant, user_id, body.long_term, body.operator_id)
    action = "consent.grant" if body.long_term else "consent.revoke"
    hashed = user_hash(rt.user_hash_key, tenant, user_id)
    rt.audit.write([record(rt.user_hash_key, tenant, user_id, action, f"{action}:{hashed}:{time.time()}",
                           body.operator_id, "human")])
    return policy


@router.put("/v1/users/{user_id}/child", response_model=Policy, tags=["privacy"])
def put_child(tenant: Tenant, rt: Rt, user_id: PathId, body: ChildIn) -> Policy:
    """Child mode (under 13): no graph writes, episodic events without content, working memory
    encrypted at rest. Also switched on when a user declares an age under 13. Switching it on brings what
    is already held under these rules at once (``memory.childmode``): messages sealed, events made type
    only, beliefs and reviews removed."""
    policy = rt.state.policies.set_child(tenant, user_id, body.child, body.operator_id)
    hashed = user_hash(rt.user_hash_key, tenant, user_id)
    rt.audit.write([record(rt.user_hash_key, tenant, user_id, "child_mode.set", f"child:{hashed}:{time.time()}",
                           body.operator_id, "human", child=body.child)])
    if body.child:  # after the flag: what arrives from now on is already kept under child rules
        converted = childmode.bring_under_child_rules(rt, tenant, user_id, body.operator_id)
        log.info("child mode: converted what was held (audited as child_mode.convert): %s", converted)
    return policy


@router.delete("/v1/users/{user_id}", response_model=Receipt, tags=["privacy"])
def erase(tenant: Tenant, rt: Rt, user_id: PathId, operator_id: OperatorId = "user") -> Receipt:
    """Erase the user from every layer now; queued work for them is dropped; a sweeper re-checks
    within 24 h. The receipt lists what was removed where."""
    return erase_user(rt, tenant, user_id, operator_id)


@router.delete("/v1/users/{user_id}/events", tags=["privacy"])
def delete_events(tenant: Tenant, rt: Rt, user_id: PathId, event_type: EventType,
                  operator_id: OperatorId = "user") -> dict:
    """Delete every stored event of one type (e.g. all small talk)."""
    removed = 0
    while batch := rt.episodic_store.dump(tenant, user_id, types={event_type}, statuses=ALL_STATUSES, limit=1000):
        removed += rt.episodic_store.delete(tenant, user_id, [e.event_id for e, _ in batch])
    hashed = user_hash(rt.user_hash_key, tenant, user_id)
    rt.audit.write([record(rt.user_hash_key, tenant, user_id, "episodic.delete_type",
                           f"delete:{hashed}:{event_type.value}:{time.time()}",
                           operator_id, "human", event_type=event_type.value, removed=removed)])
    return {"deleted": removed, "event_type": event_type.value}
