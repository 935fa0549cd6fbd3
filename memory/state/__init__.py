"""Everything Mneme keeps in Redis, and the only code that talks to it.

One owner for Redis state: the client and the one translation of its errors (``client``), every key
(``keys``), every Lua step as a file (``lua/``), and a repository per kind of record — sessions and their
messages (``working``), jobs, tenants' places in the pipeline (``fairness``), policies, reviews, devices,
dead letters, the audit outbox, feedback pairs and counters, API keys (``tenants``), stage progress, LLM
usage, the published query adapter, and what the broker holds. Nothing outside this package touches a raw
Redis client; the repositories that hold a user's data count, export and erase it for ``memory.userdata``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from memory.settings import Settings
from memory.state.adapters import PublishedAdapter
from memory.state.broker import Broker
from memory.state.client import StateClient, connect
from memory.state.counters import Counters
from memory.state.deadletters import DeadLetters
from memory.state.devices import Devices
from memory.state.dispatch import Dispatch
from memory.state.fairness import FairShare
from memory.state.feedback_pairs import FeedbackPairs
from memory.state.jobs import Jobs
from memory.state.llm_usage import LLMUsage
from memory.state.outbox import AuditOutbox
from memory.state.policy import Policies
from memory.state.reviews import Reviews
from memory.state.stages import StageProgress
from memory.state.tenants import ApiKeys
from memory.state.working import WorkingMemory

KeyOf = Callable[[str, str], bytes | None]  # (tenant, user id) → the user's key


class RedisState:
    """The client and every repository on it, built once per process (``Mneme.state``). ``seal_key`` gives
    a user's key, made if need be; ``open_key`` the key if it still exists (None once the user is erased)."""

    def __init__(self, settings: Settings, user_hash_key: bytes, seal_key: KeyOf, open_key: KeyOf) -> None:
        self._settings, self._user_hash_key = settings, user_hash_key
        self._seal_key, self._open_key = seal_key, open_key

    @cached_property
    def client(self) -> StateClient:
        """The raw client: for this package's repositories, and for tests that look at what Redis holds."""
        return connect(self._settings.state_url, cluster=self._settings.redis_cluster,
                       timeout_s=self._settings.redis_timeout_s)

    @cached_property
    def broker_client(self) -> StateClient:
        """The Celery broker's Redis: the state's own client, unless the state is a cluster."""
        if self._settings.broker_url == self._settings.state_url and not self._settings.redis_cluster:
            return self.client
        return connect(self._settings.broker_url, timeout_s=self._settings.redis_timeout_s)

    @cached_property
    def dispatch(self) -> Dispatch:
        return Dispatch(self.broker_client)

    @cached_property
    def working(self) -> WorkingMemory:
        return WorkingMemory(self.client, self._settings, self.jobs, self.fair, self.dispatch, self.policies,
                             self.counters, open_key=self._open_key)

    @cached_property
    def jobs(self) -> Jobs:
        return Jobs(self.client, self.dispatch, done_ttl_s=self._settings.job_done_ttl_s)

    @cached_property
    def fair(self) -> FairShare:
        return FairShare(self.client, self._settings.tenant_window, self.jobs.unfinished)

    @cached_property
    def policies(self) -> Policies:
        return Policies(self.client, self._settings, self._user_hash_key)

    @cached_property
    def reviews(self) -> Reviews:
        return Reviews(self.client)

    @cached_property
    def devices(self) -> Devices:
        return Devices(self.client)

    @cached_property
    def dead_letters(self) -> DeadLetters:
        return DeadLetters(self.client)

    @cached_property
    def outbox(self) -> AuditOutbox:
        return AuditOutbox(self.client, self.dispatch)

    @cached_property
    def feedback_pairs(self) -> FeedbackPairs:
        return FeedbackPairs(self.client, self._seal_key, self._open_key)

    @cached_property
    def counters(self) -> Counters:
        return Counters(self.client, self._settings.session_ttl_s)

    @cached_property
    def api_keys(self) -> ApiKeys:
        return ApiKeys(self.client)

    @cached_property
    def stages(self) -> StageProgress:
        return StageProgress(self.client)

    @cached_property
    def llm_usage(self) -> LLMUsage:
        return LLMUsage(self.client)

    @cached_property
    def adapter(self) -> PublishedAdapter:
        return PublishedAdapter(self.client)

    @cached_property
    def broker(self) -> Broker:
        return Broker(self.broker_client, self.client)

    def close(self) -> None:
        for name in ("client", "broker_client"):
            if name in self.__dict__:
                self.__dict__[name].close()

    def ping(self) -> None:
        self.client.ping()

    def rewrite_append_only_file(self) -> None:
        """Redis's append-only file keeps erased commands (and broker messages) until it is rewritten."""
        try:
            self.client.bgrewriteaof()
        except Exception:  # noqa: BLE001 - a rewrite already running, or AOF off: the next sweep rewrites
            pass
