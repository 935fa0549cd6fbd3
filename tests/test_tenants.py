"""Tenants and API keys on a stack that requires them: every read and write is scoped by the key's
tenant, another tenant's ids answer 404 (and are audited), keys are stored hashed and rate-limited."""

import json
import time

import httpx
import pytest
from mneme_client import MnemeClient

from memory.errors import InvalidInput, RateLimited
from memory.mneme import Mneme
from memory.state import keys
from memory.state.tenants import ApiKeys
from memory.userhash import user_hash
from tests.polling import wait_until
from tests.stacks import audit_records, master_key, running_stack


@pytest.fixture(scope="module")
def tstack(tmp_path_factory):
    with running_stack(tmp_path_factory, "tenants", MNEME_AUTH_REQUIRED="true", MNEME_MASTER_KEY=master_key(),
                       MNEME_CONSENT_REQUIRED="false") as s:
        yield s


@pytest.fixture(scope="module")
def trt(tstack) -> Mneme:
    return Mneme(tstack.settings)


def client_for(tstack, trt, tenant, rate_limit=600):
    key_id, secret = trt.state.api_keys.create_key(tenant, name=f"{tenant} agent", rate_limit=rate_limit)
    return MnemeClient(tstack.api_url, api_key=secret), key_id, secret


def test_calls_without_a_valid_key_are_refused(tstack):
    r = httpx.post(f"{tstack.api_url}/v1/recall", json={"user_id": "u", "query": "x"})
    assert r.status_code == 401 and "Authorization: Bearer" in r.json()["message"]
    r = httpx.post(f"{tstack.api_url}/v1/recall", json={"user_id": "u", "query": "x"},
                   headers={"Authorization": "Bearer mn_nope_nope"})
    assert r.status_code == 401 and "unknown or revoked" in r.json()["message"]
    assert httpx.get(f"{tstack.api_url}/healthz").status_code == 200  # health needs no key


def test_a_memory_page_link_opens_its_tenants_user_and_is_read_as_that_user(tstack, trt, uid):
    a, _, _ = client_for(tstack, trt, f"clinic-a-{uid}")
    b, _, _ = client_for(tstack, trt, f"clinic-b-{uid}")
    with a, b:
        a.wait([a.remember(user_id="patient1", session_id=f"p-{uid}", message_id="m1", content="我讨厌打针").job_id])
        b.wait([b.remember(user_id="patient1", session_id=f"q-{uid}", message_id="m1", content="I love hiking").job_id])
        link = a.page_link("patient1")
        with MnemeClient(tstack.api_url) as anonymous, pytest.raises(Exception) as err:
            anonymous.page_link("patient1")  # a link is the tenant's to give: no key, no link
        assert err.value.status == 401
    as_page = {"Authorization": f"Bearer {link.token}"}
    seen = httpx.get(f"{tstack.api_url}/v1/users/patient1/profile", headers=as_page).json()
    assert {(b["relation"], b["object"]) for b in seen["beliefs"]} == {("dislikes", "打针")}  # tenant a's patient1
    for path, status in (("/v1/vocabulary", 200), ("/v1/purposes", 200), ("/metrics", 401)):  # what the page shows
        assert httpx.get(f"{tstack.api_url}{path}", headers=as_page).status_code == status, path
    reads = wait_until(lambda: trt.reads.of_user(f"clinic-a-{uid}", "patient1"), 30, "the page's read recorded")
    # who read: the user, on their own page, by hashed id (no raw id in an audit record)
    assert reads[0]["operator_id"] == f"page:{user_hash(trt.user_hash_key, f'clinic-a-{uid}', 'patient1')}"


def test_an_erasure_revokes_the_users_page_links_and_a_link_cannot_bring_them_back(tstack, trt, uid):
    a, _, secret = client_for(tstack, trt, f"ward-{uid}")
    with a:
        a.wait([a.remember(user_id="patient2", session_id=f"w-{uid}", message_id="m1", content="我讨厌打针").job_id])
        link = a.page_link("patient2")
        as_page = {"Authorization": f"Bearer {link.token}"}
        assert httpx.get(f"{tstack.api_url}/v1/users/patient2/profile", headers=as_page).status_code == 200
        httpx.delete(f"{tstack.api_url}/v1/users/patient2", params={"operator_id": "dpo"},
                     headers={"Authorization": f"Bearer {secret}"}).raise_for_status()
    r = httpx.get(f"{tstack.api_url}/v1/users/patient2/profile", headers=as_page)
    assert r.status_code == 401 and "revoked" in r.json()["message"]
    r = httpx.put(f"{tstack.api_url}/v1/users/patient2/beliefs", headers=as_page,
                  json={"relation": "likes", "object": "散步", "operator_id": "user"})
    assert r.status_code == 401  # a correction through the old link re-creates nothing
    assert not any(trt.privacy.verify(f"ward-{uid}", "patient2").values())


def test_tenants_never_see_each_other(tstack, trt, uid):
    a, _, _ = client_for(tstack, trt, f"school-a-{uid}")
    b, _, secret_b = client_for(tstack, trt, f"school-b-{uid}")
    with a, b:
        job = a.remember(user_id="student1", session_id=f"s-{uid}", message_id="m1", role="user",
                         content="我今年15岁，我喜欢化学").job_id
        a.wait([job])
        assert {f.object for f in a.recall(user_id="student1", query="化学").facts} == {"15", "化学"}
        assert b.recall(user_id="student1", query="化学").facts == []  # same user id, other tenant: nothing
        for call in (lambda: b.messages(f"s-{uid}"), lambda: b.job(job)):
            with pytest.raises(Exception) as err:
                call()
            assert err.value.status == 404
        # the same session id in another tenant is another session
        b.remember(user_id="someone", session_id=f"s-{uid}", message_id="m1", role="user", content="hi")
        assert [m.content for m in a.messages(f"s-{uid}").messages] == ["我今年15岁，我喜欢化学"]
    audit = audit_records(tstack)
    assert any(r["action"] == "access.denied" and r["tenant"] == f"school-b-{uid}" for r in audit)
    assert secret_b not in json.dumps(trt.state.client.hgetall(keys.API_KEYS))  # stored hashed
    assert all(secret_b not in h for h in trt.state.client.hkeys(keys.API_KEY_HASHES))


def test_each_key_has_a_rate_limit(tstack, trt, uid):
    c, _, _ = client_for(tstack, trt, f"tiny-{uid}", rate_limit=3)
    with c:
        statuses = [httpx.post(f"{tstack.api_url}/v1/recall", json={"user_id": "u", "query": "x"},
                               headers=c._http.headers).status_code for _ in range(5)]
    assert statuses[:3] == [200, 200, 200] and statuses[3:] == [429, 429]


def test_no_60_seconds_let_more_than_the_limit_through(trt, uid):
    """A burst on both sides of a minute's end: a count per clock minute let twice the limit through there."""
    now = [1_800_000_000 - 0.5]  # half a second before a minute ends
    api_keys = ApiKeys(trt.state.client, clock=lambda: now[0])
    _, secret = api_keys.create_key(f"burst-{uid}", rate_limit=10)
    let_in: list[float] = []

    def burst(requests: int) -> list[int]:
        waits = []
        for _ in range(requests):
            try:
                api_keys.authenticate(secret)
                let_in.append(now[0])
            except RateLimited as exc:
                waits.append(exc.retry_after_s)
        return waits

    assert burst(15) == [60] * 5 and len(let_in) == 10
    now[0] += 1  # a new minute: nothing more until the burst is a minute old
    assert burst(15) == [59] * 15 and len(let_in) == 10
    now[0] += 59  # as Retry-After said
    assert burst(1) == [] and len(let_in) == 11
    for _ in range(400):  # then two tries every 0.7 s for over four minutes
        now[0] += 0.7
        burst(2)
    most = max(sum(t <= u < t + 60 for u in let_in) for t in let_in)
    assert most == 10 and len(let_in) >= 10 + 4 * 10  # never more than the limit, and the limit all along


def test_metrics_vocabulary_and_purposes_need_a_key_too(tstack, trt, uid):
    _, _, secret = client_for(tstack, trt, f"ops-{uid}")
    for path in ("/metrics", "/v1/vocabulary", "/v1/purposes"):
        anonymous = httpx.get(f"{tstack.api_url}{path}")
        assert anonymous.status_code == 401 and "Authorization: Bearer" in anonymous.json()["message"], path
        assert httpx.get(f"{tstack.api_url}{path}", headers={"X-API-Key": secret}).status_code == 200, path
    scraped = httpx.get(f"{tstack.api_url}/metrics", headers={"Authorization": f"Bearer {secret}"})
    assert "mneme_http_request_seconds_count" in scraped.text  # as Prometheus scrapes it (`authorization:`)


def test_two_different_keys_in_one_request_are_refused(tstack, trt, uid):
    _, _, a = client_for(tstack, trt, f"two-a-{uid}")
    _, _, b = client_for(tstack, trt, f"two-b-{uid}")
    message = {"user_id": "u", "session_id": f"s-{uid}", "message_id": "m1", "role": "user", "content": "我喜欢物理",
               "client_ts": int(time.time())}
    both = httpx.post(f"{tstack.api_url}/v1/messages", json=message, headers={"Authorization": f"Bearer {a}",
                                                                              "X-API-Key": b})
    assert both.status_code == 400 and "send one" in both.json()["message"]
    assert a not in both.text and b not in both.text
    for key in (a, b):  # neither tenant got the message
        held = httpx.get(f"{tstack.api_url}/v1/sessions/s-{uid}/messages", headers={"X-API-Key": key})
        assert held.status_code == 404
    same = httpx.post(f"{tstack.api_url}/v1/messages", json=message, headers={"Authorization": f"Bearer {a}",
                                                                              "X-API-Key": a})
    assert same.status_code == 202


def test_a_revoked_key_stops_working_at_once(tstack, trt, uid):
    c, key_id, _ = client_for(tstack, trt, f"gone-{uid}")
    with c:
        assert c.recall(user_id="u", query="x").events == []
        assert key_id in {k.key_id for k in trt.state.api_keys.list_keys()}
        trt.state.api_keys.revoke_key(key_id)
        with pytest.raises(Exception) as err:
            c.recall(user_id="u", query="x")
        assert err.value.status == 401


@pytest.mark.parametrize("tenant", ["school:a", "学校", "school a", "", "-school", "a" * 129, "a\x1fb", "{a}"])
def test_a_tenant_name_outside_the_pattern_gets_no_key(trt, tenant):
    """A ':' would let tenant "school:a" with user "u" share keys with tenant "school" with user "a:u"."""
    before = {k.key_id for k in trt.state.api_keys.list_keys()}
    with pytest.raises(InvalidInput, match="a tenant name is 1-128 characters: letters, digits and _ . @ -"):
        trt.state.api_keys.create_key(tenant)
    assert {k.key_id for k in trt.state.api_keys.list_keys()} == before


def test_tenant_names_like_ids_without_a_colon_get_keys(tstack, trt, uid):
    for tenant in (f"school-a.{uid}", f"School_B@{uid}", f"7th-grade-{uid}"):
        c, key_id, _ = client_for(tstack, trt, tenant)
        with c:
            assert c.recall(user_id="u", query="化学 chemistry").facts == []
        trt.state.api_keys.revoke_key(key_id)
