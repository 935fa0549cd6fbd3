"""A message's pipeline job, as its tenant may see it."""

from __future__ import annotations

import time

from memory.audit import record
from memory.errors import NotFound
from memory.userhash import user_hash
from workers.api.deps import PathId, Rt, Tenant, resource_router
from workers.schemas import JobStatus

router = resource_router()


@router.get("/v1/jobs/{job_id}", response_model=JobStatus, tags=["write"])
def get_job(tenant: Tenant, rt: Rt, job_id: PathId) -> JobStatus:
    status = rt.state.jobs.get(job_id)
    if status.tenant != tenant:  # job ids are global: another tenant's answers 404, and is audited
        owner = user_hash(rt.user_hash_key, status.tenant, "-")
        rt.audit.write([record(rt.user_hash_key, tenant, "-", "access.denied",
                               f"denied:{tenant}:{job_id}:{time.time()}", tenant, "api", resource="job",
                               owner_tenant_hash=owner)])
        raise NotFound(f"no job {job_id!r} (unknown, or older than the job TTL)")
    return status
