// Runs against a real Mneme API: MNEME_API_URL (make test starts a stack and runs this with Node's test runner).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { MnemeAPIError, MnemeClient } from "../dist/index.js";

const url = process.env.MNEME_API_URL;
const mneme = new MnemeClient(url, { agent: "ts-test", retries: { attempts: 2, backoffMs: 50 } });
const user = `ts-${randomUUID().slice(0, 8)}`;
const session = `ts-s-${randomUUID().slice(0, 8)}`;

test("remembers in Chinese and English and recalls across languages", { skip: !url }, async () => {
  const jobs = [];
  for (const [i, content] of ["我今年16岁，我喜欢化学", "I live in Berlin and I work as a nurse"].entries()) {
    const accepted = await mneme.remember({ user_id: user, session_id: session, message_id: `m${i}`, role: "user", content });
    assert.equal(accepted.duplicate, false);
    jobs.push(accepted.job_id);
  }
  assert.deepEqual((await mneme.wait(jobs)).map((job) => job.state), ["done", "done"]);
  const recalled = await mneme.recall({ user_id: user, query: "How old am I? 我几岁？", k: 5 });
  const facts = new Set(recalled.facts.map((fact) => `${fact.relation}:${fact.object}`));
  for (const fact of ["age:16", "likes:化学", "location:Berlin", "occupation:nurse"]) assert.ok(facts.has(fact), fact);
  const window = await mneme.messages(session);
  assert.deepEqual(window.messages.map((m) => m.message_id), ["m0", "m1"]);
  assert.equal((await mneme.sessions(user)).sessions[0].session_id, session);
  assert.ok((await mneme.events(user, { include_text: true })).events.length >= 2);
});

test("remembers a turn in one request, in order, and a batch sent again is all duplicates", { skip: !url }, async () => {
  const turn = `${session}-turn`;
  const batch = [
    { user_id: user, session_id: turn, message_id: "t0", role: "user", content: "我养了一只猫，叫 Mochi" },
    { user_id: user, session_id: turn, message_id: "t1", role: "assistant", content: "Mochi is a lovely name!" },
  ];
  const first = await mneme.rememberMany(batch);
  assert.deepEqual(first.accepted.map((a) => [a.message_id, a.duplicate]), [["t0", false], ["t1", false]]);
  assert.deepEqual((await mneme.messages(turn)).messages.map((m) => m.message_id), ["t0", "t1"]);
  const again = await mneme.rememberMany(batch);
  assert.deepEqual(again.accepted.map((a) => a.duplicate), [true, true]);
});

test("corrects, lists, withdraws a purpose and erases, each answer typed as the API declares", { skip: !url }, async () => {
  const belief = await mneme.correct(user, "age", "17");
  assert.equal(belief.source, "human");
  assert.equal((await mneme.history(user, belief.rel_id)).steps.at(-1).action, "merge:human");
  assert.match((await mneme.pageLink(user)).url, /\/memory#token=mp1\./);
  const profile = await mneme.profile(user);
  assert.ok(profile.known && profile.beliefs.some((b) => b.relation === "age" && b.object === "17"));
  const nobody = await mneme.profile(`ts-new-${randomUUID().slice(0, 8)}`); // never seen: says so, still a 200
  assert.deepEqual([nobody.known, nobody.beliefs, nobody.open_reviews], [false, [], []]);
  assert.ok((await mneme.vocabulary()).relations.some((r) => r.name === "risk_preference"));
  assert.ok((await mneme.purposes()).includes("support"));
  const change = await mneme.consent(user, true, ["tutoring", "support"]);
  assert.deepEqual(change.purposes, ["support", "tutoring"]);
  assert.deepEqual((await mneme.withdraw(user, "support")).purposes, ["support"]);
  const receipt = await mneme.erase(user);
  assert.equal(receipt.complete, true);
  assert.equal((await mneme.profile(user)).known, false);
  assert.equal((await mneme.health()).status.length > 0, true);
});

test("an error says what to change and carries its status", { skip: !url }, async () => {
  await assert.rejects(mneme.recall({ user_id: user, query: "x", purpose: "marketing" }), (error) => {
    assert.ok(error instanceof MnemeAPIError);
    assert.equal(error.status, 400);
    assert.match(error.detail, /marketing/);
    return true;
  });
  await assert.rejects(mneme.messages("no-such-session-" + randomUUID()), (error) => error.status === 404);
});
