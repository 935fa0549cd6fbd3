// Mneme's TypeScript client: the memory backend's HTTP API on fetch (Node.js 18+, Deno, Bun, browsers), typed with
// the API's own schemas (./types.ts, generated from its OpenAPI document), retrying 429 and 503 as the API asks.
import type {
  Belief, BeliefHistory, ConsentChange, DeletionReceipt, Events, FeedbackIn, FeedbackResult, FullMessage, Health, JobStatus,
  MessageAccepted, MessageIn, MessagesAccepted, Metrics, PageLink, Policy, Profile, Purposes, Reads, RecallIn, RecallResult, Receipt, Review,
  RolledBack, Sessions, SessionView, VocabularyOut,
} from "./types.js";

export type * from "./types.js";

/** The API answered with an error: its status, error code and message (which says what to change). */
export class MnemeAPIError extends Error {
  constructor(readonly status: number, readonly error: string, message: string, readonly retryAfter?: number) {
    super(`${status} ${error}: ${message}`);
    this.name = "MnemeAPIError";
  }

  /** The API's own message, without the status. */
  get detail(): string {
    return this.message.slice(this.message.indexOf(": ") + 2);
  }
}

export interface Retries {
  /** How many more times a 429, 503 or unreachable API is tried (default 4). */
  attempts?: number;
  /** The first wait when the answer names no Retry-After, doubling each time (default 250 ms). */
  backoffMs?: number;
  /** The longest single wait (default 30 s). */
  maxWaitMs?: number;
}

export interface ClientOptions {
  /** Sent as `Authorization: Bearer` (not needed against a server without auth). */
  apiKey?: string;
  /** The agent calling, named in the read audit beside the key. */
  agent?: string;
  retries?: Retries;
  /** Per request (default 30 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | string[] | undefined | null>;
const RETRIED = new Set([429, 503]);
const ENDED = new Set(["done", "failed", "dropped", "retracted"]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const path = (...parts: string[]) => "/" + parts.map(encodeURIComponent).join("/");

export class MnemeClient {
  readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly retries: Required<Retries>;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(baseUrl = "http://127.0.0.1:8080", options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.headers = { "content-type": "application/json" };
    if (options.apiKey) this.headers.authorization = `Bearer ${options.apiKey}`;
    if (options.agent) this.headers["x-mneme-agent"] = options.agent;
    this.retries = { attempts: 4, backoffMs: 250, maxWaitMs: 30_000, ...options.retries };
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** One request, retried on 429, 503 and an unreachable API; its JSON answer, or the MnemeAPIError it ended with. */
  async request<T>(method: string, route: string, options: { body?: unknown; query?: Query; answers?: number[] } = {},
  ): Promise<T> {
    const url = new URL(this.baseUrl + route);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value === undefined || value === null) continue;
      for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(item));
    }
    for (let attempt = 0; ; attempt++) {
      let failure: MnemeAPIError | Error;
      try {
        const response = await this.fetch(url, {
          method, headers: this.headers, signal: AbortSignal.timeout(this.timeoutMs),
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
        });
        if (response.ok || options.answers?.includes(response.status)) return (await response.json()) as T;
        const body = await response.json().catch(() => ({})) as { error?: string; message?: string };
        const retryAfter = Number(response.headers.get("retry-after") ?? NaN);
        failure = new MnemeAPIError(response.status, body.error ?? "http_error", body.message ?? response.statusText,
          Number.isFinite(retryAfter) ? retryAfter : undefined);
        if (!RETRIED.has(response.status)) throw failure;
      } catch (error) {
        if (error instanceof MnemeAPIError && !RETRIED.has(error.status)) throw error;
        failure = error as Error;
      }
      if (attempt >= this.retries.attempts) throw failure;
      const retryAfter = failure instanceof MnemeAPIError ? failure.retryAfter : undefined;
      await sleep(retryAfter !== undefined ? Math.min(retryAfter * 1000, this.retries.maxWaitMs)
        : Math.min(this.retries.maxWaitMs, this.retries.backoffMs * 2 ** attempt) * (0.5 + Math.random() / 2));
    }
  }

  // --- working memory ---------------------------------------------------------------------------------------
  /** Append a message to the session's working memory and queue it for long-term memory (a harmless retry with the
   * same message_id). `window`: the answer carries the session's window. */
  remember(message: Omit<MessageIn, "client_ts"> & { client_ts?: MessageIn["client_ts"] }, window = false) {
    const body = { client_ts: Date.now() / 1000, ...message };
    return this.request<MessageAccepted>("POST", "/v1/messages", { body, query: { window: window || undefined } });
  }
  /** Many messages in one request (a turn, a history imported; up to 100), each as `remember` takes it, answered in
   * the order sent. All are checked before any is accepted; sent again, those accepted before answer `duplicate`. */
  rememberMany(messages: Array<Omit<MessageIn, "client_ts"> & { client_ts?: MessageIn["client_ts"] }>) {
    const now = Date.now() / 1000;
    const body = { messages: messages.map((message) => ({ client_ts: now, ...message })) };
    return this.request<MessagesAccepted>("POST", "/v1/messages/batch", { body });
  }
  messages(sessionId: string, version?: number) {
    return this.request<SessionView>("GET", path("v1", "sessions", sessionId, "messages"), { query: { version } });
  }
  message(sessionId: string, messageId: string) {
    return this.request<FullMessage>("GET", path("v1", "sessions", sessionId, "messages", messageId));
  }
  /** Undo the latest message (撤回上一条), or restore the kept version `toVersion`. */
  rollback(sessionId: string, toVersion?: number) {
    const body = toVersion === undefined ? { undo_last: true } : { to_version: toVersion };
    return this.request<RolledBack>("POST", path("v1", "sessions", sessionId, "rollback"), { body });
  }
  /** Take one message back, wherever it is: out of the window and long-term memory. */
  deleteMessage(sessionId: string, messageId: string, operatorId = "user") {
    return this.request<DeletionReceipt>("DELETE", path("v1", "sessions", sessionId, "messages", messageId),
      { query: { operator_id: operatorId } });
  }
  deleteSession(sessionId: string, operatorId = "user") {
    return this.request<DeletionReceipt>("DELETE", path("v1", "sessions", sessionId), { query: { operator_id: operatorId } });
  }
  sessions(userId: string, options: { limit?: number; cursor?: string } = {}) {
    return this.request<Sessions>("GET", path("v1", "users", userId, "sessions"), { query: options });
  }

  // --- recall and episodic memory ---------------------------------------------------------------------------
  recall(query: RecallIn) {
    return this.request<RecallResult>("POST", "/v1/recall", { body: query });
  }
  events(userId: string, options: { limit?: number; cursor?: string; event_type?: string[]; tier?: string[];
    message_id?: string[]; session_id?: string; include_text?: boolean } = {}) {
    return this.request<Events>("GET", path("v1", "users", userId, "events"), { query: options });
  }
  deleteEvents(userId: string, eventType: string, operatorId = "user") {
    return this.request<DeletionReceipt>("DELETE", path("v1", "users", userId, "events"),
      { query: { event_type: eventType, operator_id: operatorId } });
  }

  // --- semantic memory --------------------------------------------------------------------------------------
  profile(userId: string, options: { include_inactive?: boolean; purpose?: string } = {}) {
    return this.request<Profile>("GET", path("v1", "users", userId, "profile"), { query: options });
  }
  /** Set a belief as the user states it: source human, wins over later extraction. */
  correct(userId: string, relation: string, object: string, confidence = 0.95, operatorId = "user") {
    return this.request<Belief>("PUT", path("v1", "users", userId, "beliefs"),
      { body: { relation, object, confidence, operator_id: operatorId } });
  }
  async deleteBelief(userId: string, relId: string, operatorId = "user"): Promise<string> {
    const answer = await this.request<{ deleted: string }>("DELETE", path("v1", "users", userId, "beliefs", relId),
      { query: { operator_id: operatorId } });
    return answer.deleted;
  }
  /** How one belief's confidence moved over time (its steps), and what it decays from. */
  history(userId: string, relId: string) {
    return this.request<BeliefHistory>("GET", path("v1", "users", userId, "beliefs", relId, "history"));
  }
  reviews(userId: string) {
    return this.request<Review[]>("GET", path("v1", "users", userId, "reviews"));
  }
  resolve(userId: string, reviewId: string, keep: string[], operatorId = "user") {
    return this.request<Belief[]>("POST", path("v1", "users", userId, "reviews", reviewId, "resolve"),
      { body: { keep, operator_id: operatorId } });
  }
  vocabulary() {
    return this.request<VocabularyOut>("GET", "/v1/vocabulary");
  }

  // --- privacy ----------------------------------------------------------------------------------------------
  async purposes(): Promise<string[]> {
    return (await this.request<Purposes>("GET", "/v1/purposes")).purposes;
  }
  policy(userId: string) {
    return this.request<Policy>("GET", path("v1", "users", userId, "consent"));
  }
  /** Opt in to (or pause) long-term memory for `purposes` (every purpose when opting in without naming any). */
  consent(userId: string, longTerm = true, purposes?: string[], operatorId = "user") {
    return this.request<ConsentChange>("PUT", path("v1", "users", userId, "consent"),
      { body: { long_term: longTerm, purposes: purposes ?? null, operator_id: operatorId } });
  }
  grant(userId: string, purpose: string, operatorId = "user") {
    return this.request<Policy>("PUT", path("v1", "users", userId, "consent", purpose), { query: { operator_id: operatorId } });
  }
  withdraw(userId: string, purpose: string, operatorId = "user") {
    return this.request<DeletionReceipt>("DELETE", path("v1", "users", userId, "consent", purpose),
      { query: { operator_id: operatorId } });
  }
  setChild(userId: string, child = true, operatorId = "user") {
    return this.request<Policy>("PUT", path("v1", "users", userId, "child"), { body: { child, operator_id: operatorId } });
  }
  erase(userId: string, operatorId = "user") {
    return this.request<Receipt>("DELETE", path("v1", "users", userId), { query: { operator_id: operatorId } });
  }
  /** A link to the user's memory page (记忆透明度): give it to that user only. */
  pageLink(userId: string, ttlS = 3600) {
    return this.request<PageLink>("POST", path("v1", "users", userId, "page-link"), { query: { ttl_s: ttlS } });
  }
  export(userId: string) {
    return this.request<Record<string, unknown>>("GET", path("v1", "users", userId, "export"));
  }
  reads(userId: string, options: { limit?: number; before?: number } = {}) {
    return this.request<Reads>("GET", path("v1", "users", userId, "reads"), { query: options });
  }

  // --- feedback, jobs, health -------------------------------------------------------------------------------
  feedback(feedback: FeedbackIn) {
    return this.request<FeedbackResult>("POST", "/v1/feedback", { body: feedback });
  }
  metrics() {
    return this.request<Metrics>("GET", "/v1/metrics/product");
  }
  job(jobId: string) {
    return this.request<JobStatus>("GET", path("v1", "jobs", jobId));
  }
  health() {
    return this.request<Health>("GET", "/healthz", { answers: [503] });
  }
  /** Poll until every job has ended (done, failed, dropped, retracted). */
  async wait(jobIds: string[], timeoutMs = 60_000, intervalMs = 100): Promise<JobStatus[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const jobs = await Promise.all(jobIds.map((id) => this.job(id)));
      if (jobs.every((job) => ENDED.has(job.state))) return jobs;
      if (Date.now() > deadline) throw new Error(`jobs not finished after ${timeoutMs} ms`);
      await sleep(intervalMs);
    }
  }
}
