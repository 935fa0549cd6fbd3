"""The memory page (记忆透明度) end to end: a person opens the link their app gave them, in headless Chromium
(Debian's, driven by Playwright from web/memory-page), sees each belief with its confidence, source, explanation,
the messages it came from and a chart of how its confidence moved, in Chinese and English, corrects and deletes
beliefs in one click, looks at their events, sessions and who read their memory, withdraws a purpose and erases
everything — and the API holds what they did. The link opens that user's page and nothing else. Apart, each with its
own user: text with markup characters shows as written, Chinese is drawn in a CJK font, Enter saves and Escape
cancels an edit, purposes are named in Chinese, the page's own reads are counted apart from the agents', and a
person never seen gets a page that says nothing of them is stored."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
from mneme_client import MnemeClient

from memory.crypto import load_master_key
from memory.userhash import hashing_key, user_hash
from tests.polling import wait_until
from tests.stacks import audit_records

PAGE = Path(__file__).resolve().parents[1] / "web" / "memory-page"
STATIC = Path(__file__).resolve().parents[1] / "workers" / "api" / "static" / "memory_page"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


SAID = ["我今年16岁，我喜欢化学", "我讨厌排队", "我住在哪里？你知道我最喜欢什么吗？"]


def filled(stack, user: str) -> None:
    with MnemeClient(stack.api_url) as mneme:
        jobs = [mneme.remember(user_id=user, session_id=f"s1-{user}", message_id=f"m{i}", content=text,
                               client_ts=time.time() - 100 + i).job_id for i, text in enumerate(SAID)]
        assert [j.state for j in mneme.wait(jobs)] == ["done"] * 3  # the questions state nothing: no belief
        mneme.recall(user_id=user, query="我几岁？")  # someone read it: the page lists who


def link(stack, user: str) -> dict:
    answer = httpx.post(f"{stack.api_url}/v1/users/{user}/page-link")
    assert answer.status_code == 200, answer.text
    return answer.json()


def in_browser(stack, user: str, script: str, shots: Path | None = None) -> None:
    """``web/memory-page/test/<script>`` run in headless Chromium on a fresh memory-page link for ``user``."""
    assert Path(CHROMIUM).exists(), "Debian's chromium is needed (make install-dev installs it)"
    assert (PAGE / "node_modules" / "playwright-core").exists(), "run `make install-dev` (npm ci in web/memory-page)"
    page_link = link(stack, user)
    assert page_link["url"].startswith(f"{stack.api_url}/memory#token=mp1.")
    ran = subprocess.run(["node", "--test", f"test/{script}"], cwd=PAGE, capture_output=True, text=True, timeout=240,
                         env={**os.environ, "PAGE_URL": page_link["url"], "CHROMIUM": CHROMIUM,
                              **({"SHOTS_DIR": str(shots)} if shots else {})})
    assert ran.returncode == 0 and "# pass 1" in ran.stdout, ran.stdout[-5000:] + ran.stderr[-2000:]


def test_a_person_sees_and_corrects_their_memory_in_a_real_browser(stack, uid, tmp_path):
    user = f"u{uid}"
    filled(stack, user)
    shots = Path(os.environ.get("MNEME_PAGE_SHOTS", str(tmp_path)))
    in_browser(stack, user, "page.test.mjs", shots)
    assert {p.name for p in shots.glob("*.png")} >= {"memory-page-zh.png", "memory-page-en.png"}
    with MnemeClient(stack.api_url) as mneme:  # what the person did in the page, as the API holds it
        assert mneme.profile(user, include_inactive=True).beliefs == []  # erased at the end
    hashed = user_hash(hashing_key(load_master_key(stack.settings)), "default", user)
    done = [r for r in audit_records(stack) if r.get("user") == hashed]
    assert {"consent.grant", "user.erase"} <= {r["action"] for r in done}  # the purpose withdrawn, then erasure
    assert {"graph.delete", "graph.merge:human"} <= {r["action"] for r in done if r["operator_id"] == "user"}


def test_a_page_link_opens_its_own_users_page_and_nothing_else(stack, uid):
    user = f"u{uid}"
    filled(stack, user)
    token = link(stack, user)["token"]
    as_page = {"Authorization": f"Bearer {token}"}
    mine = httpx.get(f"{stack.api_url}/v1/users/{user}/profile", headers=as_page)
    assert mine.status_code == 200 and mine.json()["beliefs"]
    assert httpx.get(f"{stack.api_url}/v1/users/someone-else/profile", headers=as_page).status_code == 404
    for method, path, body in [("POST", "/v1/recall", {"user_id": user, "query": "x"}),
                               ("POST", "/v1/messages", {"user_id": user, "session_id": "s", "message_id": "x",
                                                         "role": "user", "content": "hi", "client_ts": time.time()}),
                               ("GET", "/v1/sessions/s1/messages", None),
                               ("POST", f"/v1/users/{user}/page-link", None)]:
        refused = httpx.request(method, f"{stack.api_url}{path}", json=body, headers=as_page)
        assert refused.status_code == 401 and "memory-page link" in refused.json()["message"], (path, refused.text)
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for bad in (forged, "mp1.not-a-token", "mp1."):
        answer = httpx.get(f"{stack.api_url}/v1/users/{user}/profile", headers={"Authorization": f"Bearer {bad}"})
        assert answer.status_code == 401 and "not valid" in answer.json()["message"]
    short = httpx.post(f"{stack.api_url}/v1/users/{user}/page-link", params={"ttl_s": 10})
    assert short.status_code == 422  # at least a minute


def test_the_page_is_served_without_a_cdn_and_its_libraries_are_the_npm_packages(stack):
    page = httpx.get(f"{stack.api_url}/memory")
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    assert "http" not in page.text.replace(f"{stack.api_url}", "")  # every asset from this server
    for name in ("app.js", "style.css", "vendor/preact-htm.module.js", "vendor/chart.umd.min.js"):
        assert httpx.get(f"{stack.api_url}/memory/assets/{name}").content == (STATIC / name).read_bytes()
    assert httpx.get(f"{stack.api_url}/memory/assets/../../deps.py").status_code == 404
    vendored = {"htm/preact/standalone.module.js": "preact-htm.module.js",
                "chart.js/dist/chart.umd.min.js": "chart.umd.min.js"}
    for package_file, copy in vendored.items():
        assert (PAGE / "node_modules" / package_file).read_bytes() == (STATIC / "vendor" / copy).read_bytes(), (
            f"{copy} is not the npm package's file: run `npm ci && npm run vendor` in web/memory-page")


def test_text_with_markup_characters_shows_as_written_and_runs_no_markup(stack, uid):
    user = f"u{uid}"
    with MnemeClient(stack.api_url) as mneme:  # stored escaped once, by cleaning: &lt;b&gt;&amp;…
        job = mneme.remember(user_id=user, session_id="s1", message_id="m0", content="我喜欢<b>&化学</b>",
                             client_ts=time.time()).job_id
        assert [j.state for j in mneme.wait([job])] == ["done"]
        mneme.correct(user, "likes", "<b>&化学</b>")
    in_browser(stack, user, "escaping.test.mjs")


def test_chinese_is_drawn_in_a_cjk_font_not_as_boxes(stack, uid, tmp_path):
    user = f"u{uid}"
    filled(stack, user)
    in_browser(stack, user, "cjk.test.mjs", Path(os.environ.get("MNEME_PAGE_SHOTS", str(tmp_path))))


def test_enter_saves_an_edit_and_escape_cancels_it(stack, uid):
    user = f"u{uid}"
    filled(stack, user)
    in_browser(stack, user, "keys.test.mjs")
    with MnemeClient(stack.api_url) as mneme:
        held = {(b.relation, b.object, b.source) for b in mneme.profile(user).beliefs}
    assert {("age", "17", "human"), ("likes", "化学", "rule")} <= held


def test_purposes_are_named_in_chinese_in_the_chinese_view(stack, uid):
    user = f"u{uid}"
    filled(stack, user)
    in_browser(stack, user, "purposes.test.mjs")


def test_a_new_persons_page_opens_and_says_nothing_of_them_is_stored(stack, uid):
    """A profile of someone never seen answers 200 with ``known: false`` (not a 404, which the page would show as
    an error); opening the page, every tab of it, stores nothing of them."""
    user = f"new{uid}"
    in_browser(stack, user, "new-user.test.mjs")
    with MnemeClient(stack.api_url) as mneme:
        assert mneme.profile(user).known is False


def test_the_pages_own_reads_are_counted_apart_from_the_agents(stack, uid):
    user = f"u{uid}"
    filled(stack, user)
    recall = httpx.post(f"{stack.api_url}/v1/recall", json={"user_id": user, "query": "我喜欢什么？"},
                        headers={"X-Mneme-Agent": "tutor-bot"})
    assert recall.status_code == 200, recall.text
    with MnemeClient(stack.api_url) as mneme:  # a read is listed once a worker has written its audit record
        wait_until(lambda: any(r.agent == "tutor-bot" for r in mneme.reads(user).reads), 60, "the agent's read listed")
    in_browser(stack, user, "reads.test.mjs")
