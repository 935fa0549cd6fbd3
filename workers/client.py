"""A small typed Python client for the HTTP API: httpx and the wire models (:mod:`workers.schemas`) only, so
importing it loads none of the server (no ``memory``, numpy or Redis)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx

from workers.schemas import (
    ConsentChange,
    DeletionReceipt,
    Events,
    EventType,
    FullMessage,
    Health,
    JobStatus,
    MessageAccepted,
    Policy,
    Profile,
    Purposes,
    Reads,
    RecallResult,
    Receipt,
    Role,
    RolledBack,
    Sessions,
    SessionView,
)


class MnemeAPIError(Exception):
    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(f"{status} {error}: {message}")
        self.status, self.error, self.message = status, error, message


class MnemeClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8080", timeout: float = 30.0,
                 api_key: str | None = None, agent: str | None = None) -> None:
        """``agent`` names the agent calling: the read audit records it beside the API key."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if agent:
            headers["X-Mneme-Agent"] = agent
        self._http = httpx.Client(base_url=base_url, timeout=timeout, headers=headers)

    def __enter__(self) -> MnemeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def _call(self, method: str, path: str, *, json: Mapping[str, object] | None = None,
              params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        given = {k: v for k, v in (params or {}).items() if v is not None}  # an absent query parameter, not ""
        response = self._http.request(method, path, json=json, params=given)
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {}
            raise MnemeAPIError(response.status_code, body.get("error", "http_error"),
                                body.get("message", response.text))
        answer: dict[str, Any] = response.json()  # every endpoint answers a JSON object
        return answer

    def remember(self, *, user_id: str, session_id: str, message_id: str, role: Role | str, content: str,
                 client_ts: float | datetime | None = None, device_id: str | None = None,
                 window: bool = False) -> MessageAccepted:
        ts = client_ts if client_ts is not None else time.time()
        body = {"user_id": user_id, "session_id": session_id, "message_id": message_id, "role": str(role),
                "content": content, "client_ts": ts.isoformat() if isinstance(ts, datetime) else ts,
                "device_id": device_id}
        params = {"window": "true"} if window else {}
        return MessageAccepted.model_validate(self._call("POST", "/v1/messages", json=body, params=params))

    def messages(self, session_id: str, version: int | None = None) -> SessionView:
        params = {} if version is None else {"version": version}
        return SessionView.model_validate(self._call("GET", f"/v1/sessions/{session_id}/messages", params=params))

    def message(self, session_id: str, message_id: str) -> FullMessage:
        return FullMessage.model_validate(self._call("GET", f"/v1/sessions/{session_id}/messages/{message_id}"))

    def rollback(self, session_id: str, to_version: int | None = None) -> RolledBack:
        body = {"undo_last": True} if to_version is None else {"to_version": to_version}
        return RolledBack.model_validate(self._call("POST", f"/v1/sessions/{session_id}/rollback", json=body))

    def recall(self, *, user_id: str, query: str, k: int = 5, session_id: str | None = None,
               event_types: list[EventType] | None = None, include_text: bool = False,
               purpose: str | None = None) -> RecallResult:
        """``purpose``: only what was collected under a grant of it (None: any purpose the user granted)."""
        body = {"user_id": user_id, "query": query, "k": k, "session_id": session_id,
                "event_types": [str(t) for t in event_types] if event_types else None,
                "include_text": include_text, "purpose": purpose}
        return RecallResult.model_validate(self._call("POST", "/v1/recall", json=body))

    def policy(self, user_id: str) -> Policy:
        """The user's consent to long-term memory and child mode, as the API keeps them."""
        return Policy.model_validate(self._call("GET", f"/v1/users/{user_id}/consent"))

    def consent(self, user_id: str, long_term: bool = True, operator_id: str = "user",
                purposes: list[str] | None = None) -> ConsentChange:
        """Opt the user in to (or out of) long-term memory, for ``purposes`` (None: every purpose when opting in;
        as they are when pausing). A purpose left out that was granted is withdrawn (``withdrawal``)."""
        return ConsentChange.model_validate(self._call("PUT", f"/v1/users/{user_id}/consent", json={
            "long_term": long_term, "operator_id": operator_id, "purposes": purposes}))

    def grant(self, user_id: str, purpose: str, operator_id: str = "user") -> Policy:
        """Grant one purpose (and long-term memory with it)."""
        return Policy.model_validate(self._call("PUT", f"/v1/users/{user_id}/consent/{purpose}",
                                                params={"operator_id": operator_id}))

    def withdraw(self, user_id: str, purpose: str, operator_id: str = "user") -> DeletionReceipt:
        """Withdraw one purpose: the receipt lists what then served no purpose and was removed."""
        return DeletionReceipt.model_validate(self._call("DELETE", f"/v1/users/{user_id}/consent/{purpose}",
                                                         params={"operator_id": operator_id}))

    def purposes(self) -> list[str]:
        return Purposes.model_validate(self._call("GET", "/v1/purposes")).purposes

    def profile(self, user_id: str, include_inactive: bool = False, purpose: str | None = None) -> Profile:
        return Profile.model_validate(self._call("GET", f"/v1/users/{user_id}/profile",
                                                 params={"include_inactive": include_inactive, "purpose": purpose}))

    def erase(self, user_id: str, operator_id: str = "user") -> Receipt:
        """Erase the user from every layer; returns the receipt."""
        return Receipt.model_validate(self._call("DELETE", f"/v1/users/{user_id}", params={"operator_id": operator_id}))

    def export(self, user_id: str) -> dict[str, Any]:
        """Everything kept about the user (GDPR access), as one JSON document."""
        return self._call("GET", f"/v1/users/{user_id}/export")

    def reads(self, user_id: str, limit: int = 50, before: float | None = None) -> Reads:
        """Who saw what about the user, newest first (``next_before`` pages on)."""
        return Reads.model_validate(self._call("GET", f"/v1/users/{user_id}/reads",
                                               params={"limit": limit, "before": before}))

    def sessions(self, user_id: str, limit: int = 50, cursor: str | None = None) -> Sessions:
        """The user's sessions in working memory, the most recently written first (``next_cursor`` pages on)."""
        return Sessions.model_validate(self._call("GET", f"/v1/users/{user_id}/sessions",
                                                  params={"limit": limit, "cursor": cursor}))

    def events(self, user_id: str, limit: int = 50, cursor: str | None = None,
               event_types: list[str] | None = None, tiers: list[str] | None = None,
               message_ids: list[str] | None = None, include_text: bool = False) -> Events:
        """The user's episodic events, newest first (``next_cursor`` pages on)."""
        params: dict[str, Any] = {"limit": limit, "cursor": cursor, "event_type": event_types, "tier": tiers,
                                  "message_id": message_ids, "include_text": include_text}
        return Events.model_validate(self._call("GET", f"/v1/users/{user_id}/events", params=params))

    def job(self, job_id: str) -> JobStatus:
        return JobStatus.model_validate(self._call("GET", f"/v1/jobs/{job_id}"))

    def wait(self, job_ids: list[str], timeout: float = 60.0) -> list[JobStatus]:
        """Poll until every job has ended: done, failed, dropped (erased, consent off) or retracted (undone)."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = [self.job(j) for j in job_ids]
            if all(j.state in ("done", "failed", "dropped", "retracted") for j in jobs):
                return jobs
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs not finished after {timeout}s: {[(j.job_id, j.state) for j in jobs]}")
            time.sleep(0.1)

    def health(self) -> Health:
        response = self._http.get("/healthz")
        return Health.model_validate(response.json())
