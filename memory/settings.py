"""The one settings object. Every knob is an environment variable with the prefix ``MNEME_``.

Nothing here is built at import time: call :func:`get_settings` (cached) and pass the result on.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory.errors import ConfigurationError
from memory.purposes import DEFAULT_PURPOSES, NAME


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MNEME_", extra="ignore")

    # --- where things live -------------------------------------------------------------------
    data_dir: Path = Field(Path("var"), description="Embedded stores, AOF and logs live here.")
    redis_url: str | None = Field(
        None, description="Redis for working memory and the broker; unset = start an embedded Valkey. With "
                          "MNEME_REDIS_CLUSTER, any node of the cluster."
    )
    redis_cluster: bool = Field(False, description="MNEME_REDIS_URL names a node of a Redis Cluster, which holds "
                                                   "the state; the broker is then MNEME_BROKER_REDIS_URL.")
    broker_redis_url: str | None = Field(None, description="A Redis of its own for the Celery broker; unset = "
                                                          "MNEME_REDIS_URL (required with MNEME_REDIS_CLUSTER).")
    redis_timeout_s: float = Field(2.0, gt=0, description="A Redis command not answered within this long fails "
                                   "(the API answers 503 with Retry-After, a task retries): a frozen Redis is not "
                                   "waited on.")
    episodic_url: str = Field("", description="Episodic store URL; empty = sqlite file in data_dir.")
    graph_url: str = Field("", description="Graph store URL; empty = sqlite file in data_dir.")
    audit_url: str = Field("", description="Audit sink URL; empty = hash-chained JSON-lines file in data_dir.")
    reads_url: str = Field("", description="Read log (who was shown what about a user) URL: sqlite:///file; "
                                           "empty = sqlite file in data_dir.")
    read_audit: bool = Field(True, description="Record every recall, profile read and export in the audit trail "
                                               "and the read log (memory.services.reads); off only to measure "
                                               "what it costs.")
    archive_url: str = Field("", description="Cold archive URL: file:///dir or s3://bucket/prefix; empty = data_dir.")
    s3_endpoint_url: str = Field("", description="S3-compatible endpoint (MinIO, SeaweedFS); empty = AWS.")
    s3_access_key: str = ""
    s3_secret_key: str = ""
    s3_region: str = "us-east-1"
    elasticsearch_api_key: str = Field("", description="For elasticsearch:// audit URLs that need a key.")
    embedder_url: str = Field(
        "use://multilingual-v3",
        description="use://multilingual-v3, sentence-transformers://<installed model package | local path>, or "
                    "openai+http(s)://<host:port/v1>?model=NAME for any OpenAI-compatible embeddings server "
                    "(memory.embedding_openai: prefix=, batch_size=, timeout=).",
    )
    embedder_api_key: str = Field("", description="Sent as a Bearer token to an openai+http(s):// embedder's server.")
    weaviate_api_key: str = Field("", description="For weaviate:// episodic URLs whose server wants a key.")
    master_key: str = Field("", description="base64 32-byte key wrapping per-user keys; empty = data_dir/master.key.")
    keys_url: str = Field("", description="Per-user key store: sqlite:///file or redis://host/db; empty = data_dir.")
    tenant: str = Field("default", description="The tenant of single-tenant development mode.")
    auth_required: bool = Field(
        False, description="true: every call needs an API key, which picks its tenant; false: single-tenant dev mode."
    )

    # --- working memory ----------------------------------------------------------------------
    window_size: int = Field(50, ge=1, le=1000)
    versions_kept: int = Field(20, ge=2, le=500, description="Snapshots kept per session for rollback.")
    session_ttl_s: int = Field(7 * 24 * 3600, ge=60)
    assistant_max_chars: int = Field(500, ge=20)
    content_max_chars: int = Field(20_000, ge=100)
    max_clock_skew_s: int = Field(300, ge=0, description="client_ts further ahead is clamped to now.")

    # --- pipeline ----------------------------------------------------------------------------
    job_ttl_s: int = Field(7 * 24 * 3600, ge=60, description="How long an unfinished job is kept (and re-sent).")
    job_done_ttl_s: int = Field(24 * 3600, ge=60, description="How long a finished job's status stays readable.")
    redrive_after_s: int = Field(300, ge=1, description="Accepted jobs not done by then are re-sent.")
    embed_batch_size: int = Field(32, ge=1, le=1024, description="The model embeds up to this many messages in "
                                  "one call; the embed worker runs up to four such batches at once when a backlog "
                                  "has them queued, storing one while the model embeds the next.")
    embed_flush_interval_s: float = Field(0.2, gt=0)
    extract_batch_size: int = Field(32, ge=1, le=1024, description="A worker extracts up to this many messages "
                                    "as one batch, declared in one round trip, at once when that many are queued.")
    extract_flush_interval_s: float = Field(0.1, gt=0, description="…or what came within this long.")
    extract_send_interval_s: float = Field(
        0.02, ge=0, description="An API process sends the extraction of the messages it accepted within this long "
        "as one task (up to MNEME_EXTRACT_BATCH_SIZE); 0 sends each message's at once.")
    graph_batch_size: int = Field(32, ge=1, le=1024, description="Graph writes of up to this many messages run "
                                                                  "as one batch, with one audit task.")
    graph_flush_interval_s: float = Field(0.1, gt=0, description="…or what came within this long.")
    tenant_window: int = Field(
        512, ge=0, description="Jobs of one tenant in the pipeline at once; the rest wait in the tenant's own line, "
        "so one tenant's flood does not hold up the others (memory.state.fairness). 0: one line for all.")
    tenant_queue_limit: int = Field(
        50_000, ge=1, description="Messages of one tenant waiting for the pipeline before a new one is answered 429.")
    task_max_retries: int = Field(8, ge=0)
    preload_embedder: bool = Field(False, description="Load the model when a worker process starts.")
    stage_stall_after_s: float = Field(
        30.0, gt=0, description="/healthz reports a stage stalled when its queue holds work and none of it "
                                 "has finished for this long.")
    embedded_beat: bool = Field(False, description="Run beat as a thread of this worker (the local stack's "
                                                   "pipeline worker does). One process of a deployment at most.")
    worker_nice: int = Field(
        10, ge=0, le=19, description="The local stack runs the Celery workers (and beat in one) this much below "
                                     "the API's CPU priority, so a busy pipeline does not slow the API's answers.")
    context_vector_weight: float = Field(0.3, ge=0, le=1, description="A message's vector adds this share of the "
                                                                      "turn before it: a reply means what it answers.")
    context_vector_ttl_s: int = Field(
        900, ge=0, description="How long working memory keeps a session's newest embedded turn's vector (~1.6 KB), so "
                               "the next turn adds a share of it without embedding that turn again, on any embed "
                               "worker; 0: not kept (each embed worker then remembers only the turns it embedded).")
    embed_threads: int = Field(1, ge=1, description="Per process: two threads on a busy 2-core box collapse.")
    visibility_timeout_s: int = Field(3600, ge=10)
    worker_silent_after_s: float = Field(300.0, ge=10, description="The redrive puts back what a worker holds once "
                                         "it has not consumed (beaten) for this long: it died, froze, or lost its "
                                         "broker for good. Longer than any one task runs.")

    # --- optional LLM extraction stage (OpenAI-compatible chat endpoint) -----------------------
    llm_base_url: str = Field("", description="e.g. http://127.0.0.1:8000/v1; empty = rules only.")
    llm_model: str = "qwen2.5-1.5b-instruct"
    llm_api_key: str = ""
    llm_timeout_s: float = Field(20.0, gt=0, description="The time budget of one message's call.")
    llm_max_tokens: int = Field(256, ge=16, description="The token budget of one message's answer.")
    llm_max_input_chars: int = Field(2000, ge=100, description="Of a message, what the model is shown at most.")
    llm_response_format: Literal["json_schema", "llama_cpp", "json_object"] = Field(
        "json_schema", description="How the answer's JSON schema is asked for: json_schema (OpenAI, vLLM, Ollama), "
                                   "llama_cpp (llama-cpp-python's server), json_object (DeepSeek, Qwen: no schema).")
    llm_check_below: float = Field(0.75, ge=0, le=1, description="A rule's claim less sure than this is checked by "
                                   "the LLM stage: kept only if the model makes it too. 0: the stage checks none.")
    llm_confidence: float = Field(0.5, ge=0.1, le=1, description="The confidence of a claim only the model makes: "
                                  "the stage's measured precision (make bench-beliefs --llm) for the model in use.")
    llm_rate_limit: str = Field("60/m", description="Celery rate limit of the llm queue, per worker.")
    llm_daily_token_budget: int = Field(200_000, ge=0, description="Per tenant per UTC day.")
    llm_tenant_calls_per_min: int = Field(
        30, ge=0, description="LLM calls one tenant may queue a minute; its messages beyond keep the rules' "
        "extraction (job note llm=tenant_rate), so one tenant cannot fill the LLM queue ahead of the others. 0: no "
        "limit.")
    llm_backoff_max_s: float = Field(300.0, gt=0, description="The longest a tenant's LLM calls pause after the "
                                     "provider answered 429 or 503 (its Retry-After, else doubling from 2 s).")

    # --- episodic memory ---------------------------------------------------------------------
    merge_threshold: float = Field(0.9, gt=0, le=1, description="Cosine at which same-type events merge.")
    events_cap: int = Field(200, ge=1, description="Live events per user in the event layer; over it, events are "
                                                   "consolidated or moved to the deep tier (never deleted) until a "
                                                   "tenth below it.")
    consolidate_threshold: float = Field(0.8, gt=0, le=1, description="Cosine at which live events of one type "
                                                                      "merge when the layer is over the cap.")

    # --- privacy ---------------------------------------------------------------------------------
    consent_required: bool = Field(True, description="Long-term memory stays off until the user opts in.")
    purposes: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PURPOSES),
        description="The purposes a user consents to one by one (JSON list of names: a-z, 0-9, _); each memory "
                    "serves only the purposes granted when it was collected (memory.purposes).")
    archive_after_days: float = Field(30.0, gt=0, description="Greetings and small talk older move to cold storage.")
    noise_threshold: int = Field(5, ge=2, description="Same event type this often within noise_window_days …")
    noise_window_days: float = Field(7.0, gt=0)
    noise_weight: float = Field(0.3, gt=0, le=1, description="… weighs this much in recall.")
    erasure_sla_hours: float = Field(24.0, gt=0)
    erasure_wait_s: float = Field(10.0, ge=0, description="An erasure waits this long for store writes already "
                                  "under way for the user; longer, its receipt says incomplete and the sweep "
                                  "finishes it.")

    # --- semantic memory (graph) ---------------------------------------------------------------
    vocabulary_file: str = Field("", description="The relations kept about a user, their categories, half-lives "
                                                  "and rules (TOML, memory/vocabulary.py); empty = the default file.")
    retire_below: float = Field(0.12, ge=0.0, le=1.0, description="Nightly decay retires beliefs under this.")

    # --- recall ------------------------------------------------------------------------------
    recall_facts_limit: int = Field(20, ge=1, le=200)
    recall_layer_timeout_s: float = Field(
        2.0, gt=0, description="A long-term layer that has not answered by then is reported in `degraded`."
    )
    recall_depth: int = Field(100, ge=50, le=2000, description="Candidates taken from each signal (each then "
                                                               "scored on every signal); at least recall's largest k.")
    vector_weight: float = Field(0.6, ge=0, description="Weight of the cosine similarity in the fusion.")
    keyword_weight: float = Field(0.4, ge=0, description="Weight of the normalised BM25 score in the fusion.")
    cross_language_keyword_weight: float = Field(
        1.0, ge=0, le=1, description="Keyword evidence counts this much when query and event languages differ."
    )
    context_weight: float = Field(0.25, ge=0, le=1, description="Share of a dialogue query's earlier turns beside "
                                                                "its latest user turn (the main cue).")
    recall_weak_similarity: float = Field(0.2, ge=0, le=1, description="A recalled memory whose similarity (its "
                                          "cosine above the embedder's chance level, 0-1) is below this and whose "
                                          "keyword score is below recall_weak_keyword is flagged weak.")
    recall_weak_keyword: float = Field(0.3, ge=0, description="… (see recall_weak_similarity).")
    type_boost: float = Field(0.15, ge=0, description="Share added when an event's type is one the query asks for.")
    time_boost: float = Field(0.2, ge=0, description="Share added when an event falls in the query's time window.")
    recency_half_life_days: float = Field(30.0, gt=0)
    recency_boost: float = Field(0.05, ge=0, description="Up to this share added to a fresh event's score.")

    # --- HTTP --------------------------------------------------------------------------------
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    flower_port: int = 5555

    @field_validator("purposes")
    @classmethod
    def _purpose_names(cls, purposes: list[str]) -> list[str]:
        bad = [p for p in purposes if not NAME.match(p)]
        if bad or not purposes:
            raise ValueError(f"purposes must be 1-32 characters of a-z, 0-9 and _, starting with a letter; got {bad}"
                             if bad else "name at least one purpose")
        return list(dict.fromkeys(purposes))

    def store_url(self, url: str, default_file: str) -> str:
        return url or f"sqlite:///{(self.data_dir / default_file).resolve()}"

    @property
    def episodic(self) -> str:
        return self.store_url(self.episodic_url, "episodic.db")

    @property
    def graph(self) -> str:
        return self.store_url(self.graph_url, "graph.db")

    @property
    def keys(self) -> str:
        return self.store_url(self.keys_url, "keys.db")

    @property
    def reads(self) -> str:
        return self.store_url(self.reads_url, "reads.db")

    @property
    def audit(self) -> str:
        return self.audit_url or f"file://{(self.data_dir / 'audit.jsonl').resolve()}"

    @property
    def archive(self) -> str:
        return self.archive_url or f"file://{(self.data_dir / 'archive').resolve()}"

    @property
    def state_url(self) -> str:
        """The Redis of working memory, jobs and the other state (a node of it, on a cluster)."""
        if not self.redis_url:
            raise ConfigurationError("MNEME_REDIS_URL is not set; start the stack with `make run`")
        return self.redis_url

    @property
    def broker_url(self) -> str:
        """The Redis of the Celery broker: the state's, unless the state is a cluster (kombu speaks to one
        server)."""
        if self.broker_redis_url:
            return self.broker_redis_url
        if self.redis_cluster:
            raise ConfigurationError("MNEME_REDIS_CLUSTER is set, and a cluster cannot carry the Celery broker: "
                                     "set MNEME_BROKER_REDIS_URL to a Redis of its own")
        return self.state_url


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
