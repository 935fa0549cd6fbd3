"""A message's pipeline job, as its tenant may see it."""

from __future__ import annotations

from mneme_client.models import JobStatus

from memory.errors import NotFound
from workers.api.deps import Memory, PathId, Tenant, resource_router
from workers.api.wire import out

router = resource_router()


@router.get("/v1/jobs/{job_id}", response_model=JobStatus, tags=["write"])
def get_job(tenant: Tenant, mneme: Memory, job_id: PathId) -> JobStatus:
    status = mneme.state.jobs.get(job_id)
    if status.tenant != tenant:  # job ids are global: another tenant's answers 404, and is audited
        mneme.privacy.access_denied(tenant, "job", job_id, owner_tenant=status.tenant)
        raise NotFound(f"no job {job_id!r} (unknown, or older than the job TTL)")
    return out(JobStatus, status)
