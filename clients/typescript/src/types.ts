// Generated from the Mneme API's OpenAPI document by scripts/generate.mjs: do not edit by hand.

export interface Belief {
  rel_id: string;
  subject: string;
  /** A relation of the deployment's vocabulary (GET /v1/vocabulary). */
  relation: string;
  category: string;
  object: string;
  concept_id: string;
  /** Effective: decayed to now. */
  confidence: number;
  stored_confidence: number;
  half_life_days: number;
  source: FactSource;
  status: Status;
  updated_at: number;
  message_ids: Array<string>;
  event_ids: Array<string>;
  devices: Array<string>;
  /** The purposes it serves: those its supporting claims were collected under, while their grants stand. */
  purposes: Array<string>;
  /** How the current value came to be, step by step. */
  why: string;
}

/** How a belief's confidence moved: its steps, oldest first, and what it decays from now on. */
export interface BeliefHistory {
  rel_id: string;
  /** A relation of the deployment's vocabulary (GET /v1/vocabulary). */
  relation: string;
  object: string;
  status: Status;
  /** The confidence at ``base_ts``; decay runs from there. */
  stored_confidence: number;
  /** When the decay clock last restarted. */
  base_ts: number;
  half_life_days: number;
  steps: Array<HistoryStep>;
}

export interface BeliefIn {
  /** A relation of the deployment's vocabulary (GET /v1/vocabulary). */
  relation: string;
  object: string;
  confidence?: number;
  /** Who is making the correction (the user, a teacher, an agent). */
  operator_id?: string;
}

export interface ChildIn {
  /** true: under 13 — no graph writes, content-free events, encrypted window. */
  child: boolean;
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  operator_id?: string;
}

export interface Claim {
  rel_id: string;
  relation: string;
  object: string;
  confidence: number;
  devices: Array<string>;
}

/** The user's consent after a change, and what withdrawing purposes removed, if the change withdrew any. */
export interface ConsentChange {
  user_id: string;
  long_term: boolean;
  consent_required: boolean;
  /** The purposes the user granted. */
  purposes?: Array<string>;
  /** Purposes granted once, withdrawn since. */
  withdrawn_purposes?: Array<string>;
  consent_changed_at?: number | null;
  consent_by?: string | null;
  child?: boolean;
  child_by?: string | null;
  /** What serves no purpose any more was removed: episodic events, archived events, and beliefs removed or re-scored. */
  withdrawal?: DeletionReceipt | null;
}

export interface ConsentIn {
  /** true: keep episodic and semantic memory; false: a pause — working memory only, long-term memory kept but not recalled. */
  long_term: boolean;
  /** The purposes granted (GET /v1/purposes). Omitted: every purpose with long_term true, the purposes as they are with false. A purpose granted before and not named now is withdrawn: what then serves no purpose is removed (the answer's withdrawal lists it). */
  purposes?: Array<string> | null;
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  operator_id?: string;
}

/** What a deletion removed from long-term memory, and what it did to the beliefs those messages stood for. */
export interface DeletionReceipt {
  /** The type deleted, for a deletion by type. */
  event_type?: EventType | null;
  /** The session deleted, for a deletion of a session. */
  session_id?: string | null;
  /** The purposes withdrawn, for a withdrawal. */
  purposes?: Array<string>;
  deleted_events: number;
  /** Archived events removed from cold storage. */
  archived_events?: number;
  /** Messages long-term memory no longer holds anything of. */
  messages: Array<string>;
  /** Beliefs (rel ids) only those messages supported: retired. */
  beliefs_removed: Array<string>;
  /** Beliefs others support too: re-scored from what remains. */
  beliefs_rescored: Array<string>;
  /** Values one of the messages had replaced: active again. */
  beliefs_restored: Array<string>;
}

export interface ErrorBody {
  error: string;
  message: string;
  details?: Array<unknown> | null;
}

export interface EventHit {
  /** This message's event (feedback targets it). */
  event_id: string;
  /** The live event this message was merged into, if any. */
  merged_into?: string | null;
  event_type: EventType;
  /** 'event': in the live event layer (or merged into one of its events); 'deep': let go of by the cap, kept verbatim in the deep tier. */
  tier: string;
  role: Role;
  summary: string;
  keywords: Array<string>;
  /** The full message text, when asked for with include_text. */
  text?: string | null;
  session_id: string;
  ts: number;
  confidence: number;
  count: number;
  /** The message this memory is. */
  message_ids: Array<string>;
  /** The purposes this memory serves: collected under a grant that stands. */
  purposes: Array<string>;
  /** What the hits are ordered by: relevance times the weights in ``why``. */
  score: number;
  /** How well the message matches the query, 0-1 (vector_weight x similarity + keyword_weight x keyword); what min_relevance thresholds. */
  relevance: number;
  /** Neither the similarity nor the keyword score reached the weak line: likely unrelated to the query. */
  weak: boolean;
  /** Score parts: keyword, vector_sim (cosine), similarity (above the embedder's chance level), weight (feedback), noise, type_match, in_time_window, recency. */
  why: Record<string, number>;
}

export interface Events {
  user_id: string;
  events: Array<ListedEvent>;
  /** Pass as cursor for the next page; none: this was the last. */
  next_cursor?: string | null;
}

/** The closed set of episodic event types. Anything else is refused. */
export type EventType = "greeting" | "small_talk" | "question" | "statement" | "age_declaration" | "identity" | "preference" | "dislike" | "concept_confusion" | "request" | "emotion" | "goal" | "operation_failure" | "plan" | "feedback";

export interface FactHit {
  rel_id: string;
  subject: string;
  /** A relation of the deployment's vocabulary (GET /v1/vocabulary). */
  relation: string;
  object: string;
  /** Effective confidence: decayed to now. */
  confidence: number;
  source: FactSource;
  message_ids: Array<string>;
  event_ids: Array<string>;
  devices: Array<string>;
  /** The purposes this belief serves (those of its supporting claims). */
  purposes: Array<string>;
  updated_at: number;
  /** Why recall chose it. */
  why: string;
  /** How its confidence came to be. */
  explanation: string;
}

export type FactSource = "rule" | "llm" | "human" | "counter_evidence";

export interface FeedbackIn {
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  user_id: string;
  useful: boolean;
  event_id?: string | null;
  rel_id?: string | null;
  /** The query that recalled it (for training). */
  query?: string | null;
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  operator_id?: string;
}

export interface FeedbackResult {
  target: string;
  weight?: number | null;
  confidence?: number | null;
}

export interface FullMessage {
  message_id: string;
  session_id: string;
  role: Role;
  /** The full cleaned text, even when working memory holds it cut. */
  content: string;
  truncated: boolean;
  client_ts: number;
  version: number;
}

export interface Health {
  status: string;
  backends: Record<string, string>;
}

/** One step of a belief's confidence: a claim, counter-evidence, a correction, a re-score, a status change. */
export interface HistoryStep {
  /** When it was applied (server time). */
  at: number;
  /** merge:blend | merge:max | merge:human | counter | rescore | delete | retire | supersede | hold | restore | ignored */
  action: string;
  source: FactSource;
  before: number | null;
  after: number | null;
  message_ids: Array<string>;
  explanation: string;
}

export interface JobStatus {
  job_id: string;
  tenant: string;
  state: string;
  user_id: string;
  session_id: string;
  message_id: string;
  accepted_at: number;
  finished_at?: number | null;
  stages: Record<string, number>;
  event_ids: Array<string>;
  /** How many messages shared the model call that embedded it. */
  embed_batch?: number | null;
  /** How many of its events merged into similar earlier events. */
  merged?: number | null;
  /** The LLM stage's outcome (ok, timeout, malformed, …) if it ran. */
  llm?: string | null;
  error?: string | null;
  /** Why the job ended early (consent off, user erased, or its message retracted: state 'retracted' once nothing of it is left). */
  note?: string | null;
}

/** One row of a user's episodic memory as a listing shows it (``GET /v1/users/{id}/events``). */
export interface ListedEvent {
  event_id: string;
  event_type: EventType;
  role: Role;
  /** 'event': in the live event layer (or merged into one of it); 'deep': let go of by the cap, still searchable. */
  tier: string;
  /** live, merged (into canonical_id) or evicted. */
  status: string;
  canonical_id?: string | null;
  session_id: string;
  ts: number;
  confidence: number;
  count: number;
  weight: number;
  noise: number;
  message_ids: Array<string>;
  /** The grants it was collected under (purpose#grant; * before purposes were recorded). */
  collected_under: Array<string>;
  /** None once the user's key is destroyed. */
  summary: string | null;
  keywords: Array<string>;
  /** The message's full text, when asked for. */
  text?: string | null;
}

export interface MessageAccepted {
  job_id: string;
  version: number;
  session_id: string;
  message_id: string;
  /** True when this message_id was accepted before (a retry). */
  duplicate: boolean;
  /** False when client_ts is older than the whole working window. */
  in_window: boolean;
  /** The timestamp used for ordering (after clamping). */
  client_ts: number;
  /** With `?window=true`: the session's window at the new head, read in the same step as the append. */
  window?: SessionView | null;
}

export interface MessageIn {
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  user_id: string;
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  session_id: string;
  device_id?: string | null;
  /** The client's id; sending it again is a harmless retry. */
  message_id: string;
  role: Role;
  content: string;
  /** When the message was written: ISO 8601 or unix seconds (milliseconds accepted), from 2000-01-01 to at most a day from now. */
  client_ts: string | number;
}

export interface MessagesAccepted {
  /** One answer a message, in the order they were sent. */
  accepted: Array<MessageAccepted>;
}

export interface MessagesIn {
  /** 1 to 100 messages, of any sessions and users of the tenant, accepted in this order. */
  messages: Array<MessageIn>;
}

export interface Metrics {
  messages: number;
  sessions: number;
  users: number;
  session_depth: number;
  cross_session_retention: number;
  task_success_rate: number;
  memory_interference_rate: number | null;
  feedback: number;
}

export interface PageLink {
  /** The user's memory page: open it in a browser (the token is in the fragment, which no server sees). */
  url: string;
  /** The page's credential: this user's page only, until expires_at. */
  token: string;
  expires_at: number;
}

export interface Policy {
  user_id: string;
  long_term: boolean;
  consent_required: boolean;
  /** The purposes the user granted. */
  purposes?: Array<string>;
  /** Purposes granted once, withdrawn since. */
  withdrawn_purposes?: Array<string>;
  consent_changed_at?: number | null;
  consent_by?: string | null;
  child?: boolean;
  child_by?: string | null;
}

export interface Profile {
  user_id: string;
  beliefs: Array<Belief>;
  open_reviews: Array<Review>;
  /** false: nothing is stored for this user id in this tenant — never was (a new user, or a mistyped id), or all of it was erased; beliefs and open_reviews are then empty. */
  known?: boolean;
}

export interface Purposes {
  /** The purposes a user of this deployment consents to one by one (MNEME_PURPOSES). */
  purposes: Array<string>;
}

export interface Read {
  id: string;
  ts: number;
  /** read.recall, read.profile, read.list (sessions, events) or read.export. */
  action: string;
  /** Who read: the API key's id ('development' with auth off; 'cli'). */
  operator_id: string;
  /** The agent the caller named in X-Mneme-Agent. */
  agent?: string | null;
  /** Through what: api or cli. */
  source: string;
  session_id?: string | null;
  /** The purpose the read named (a recall or a profile read). */
  purpose?: string | null;
  /** The ids of what was shown, with why: a recall's messages, events (score parts) and beliefs; a profile's beliefs and reviews; an export's count per store. Never content. */
  shown: Record<string, unknown>;
}

export interface Reads {
  user_id: string;
  reads: Array<Read>;
  /** Pass as before for the next page; null on the last. */
  next_before: number | null;
}

export interface RecallIn {
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  user_id: string;
  session_id?: string | null;
  /** The purpose this recall serves: only memories collected under a grant of it are returned. Omitted: any purpose the user granted. */
  purpose?: string | null;
  /** A question, or a few turns of dialogue (`user: …` lines): the latest user turn leads. */
  query: string;
  k?: number;
  event_types?: Array<EventType> | null;
  /** Return each event's full (decrypted) message text. */
  include_text?: boolean;
  /** Leave out events whose relevance is below this (0: the best k whenever the user has memories; each event carries its relevance and a weak flag). */
  min_relevance?: number;
}

export interface RecallResult {
  user_id: string;
  query: string;
  /** The purpose the recall serves (none named: any purpose granted). */
  purpose?: string | null;
  inferred_types?: Array<EventType>;
  working: Array<StoredMessage>;
  events: Array<EventHit>;
  facts: Array<FactHit>;
  /** Layers that could not answer, and why. */
  degraded?: Record<string, string>;
  /** What the caller should know, e.g. that nothing in memory matched well enough. */
  notes?: Array<string>;
  took_ms: number;
}

export interface Receipt {
  /** The hashed user id: the receipt itself holds no personal data. */
  user: string;
  erased_at: number;
  removed: Record<string, number>;
  /** Anything still found after the erasure (should be all 0). */
  remaining: Record<string, number>;
  complete: boolean;
}

export interface ResolveIn {
  /** rel_ids of the claims that are true; the others are deleted. */
  keep: Array<string>;
  /** 1-128 characters: letters, digits and _ . : @ -, starting with a letter or digit */
  operator_id?: string;
}

export interface Review {
  review_id: string;
  tenant: string;
  user_id: string;
  kind: string;
  claims: Array<Claim>;
  evidence_id: string;
  created_at: number;
  status?: string;
  kept?: Array<string> | null;
  resolved_by?: string | null;
}

/** Who wrote a message: the user, the assistant, the agent's instructions (system) or a tool's output (tool).
 * Only the user's and the assistant's words become long-term memory; system and tool messages stay in the
 * session's working memory. */
export type Role = "user" | "assistant" | "system" | "tool";

export interface RollbackIn {
  to_version?: number | null;
  undo_last?: boolean;
}

export interface RolledBack {
  session_id: string;
  version: number;
  /** The version whose snapshot was restored (``to_version``); None for an undo, which takes one message out of the head's. */
  restored: number | null;
  /** The messages the new version no longer holds: retracted, with what long-term memory made of them. */
  removed: Array<StoredMessage>;
}

export interface Sessions {
  user_id: string;
  sessions: Array<SessionSummary>;
  /** Pass as cursor for the next page; none: this was the last. */
  next_cursor?: string | null;
}

/** One of a user's sessions still in working memory, as a listing shows it. */
export interface SessionSummary {
  session_id: string;
  /** The head version (rollback goes back from it). */
  version: number;
  /** Messages in the window at head. */
  messages: number;
  /** client_ts of the window's oldest message. */
  first_ts: number | null;
  /** client_ts of its newest message. */
  last_ts: number | null;
}

export interface SessionView {
  session_id: string;
  head: number;
  version: number;
  messages: Array<StoredMessage>;
}

export type Status = "active" | "retired" | "deleted" | "superseded" | "in_review";

export interface StoredMessage {
  message_id: string;
  session_id: string;
  role: Role;
  content: string;
  client_ts: number;
  received_at: number;
  device_id?: string | null;
  truncated?: boolean;
  version: number;
  seq: number;
}

export interface VocabularyOut {
  relations: Array<VocabularyRelation>;
  /** The file it was read from (MNEME_VOCABULARY_FILE, or the default). */
  source: string;
}

export interface VocabularyRelation {
  name: string;
  category: string;
  /** The belief's confidence halves this often without new evidence. */
  half_life_days: number;
  /** A user holds one value at a time: a new one supersedes the old. */
  single_valued: boolean;
  /** The relation a claim of this one is counter-evidence to. */
  opposite?: string | null;
  description: string;
}
