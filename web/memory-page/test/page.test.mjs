// The memory page end to end in headless Chromium (Debian's, driven by Playwright), against a real Mneme stack:
// PAGE_URL is a memory-page link for a user the calling test filled (tests/test_memory_page.py); SHOTS_DIR, when
// set, receives screenshots (the README's come from here).
import assert from "node:assert/strict";
import { test } from "node:test";

import { inBrowser, shot, url } from "./browser.mjs";

test("a person sees, understands and corrects what the agent believes about them", { skip: !url }, async () => {
  await inBrowser("zh-CN", async (page, failed) => {
    await page.goto(url);
    await page.getByRole("heading", { name: "记忆透明度" }).waitFor();
    const likes = page.locator(".belief", { hasText: "喜欢: 化学" });
    await likes.waitFor();
    // three beliefs, none made from the user's questions ("我住在哪里？你知道我最喜欢什么吗？")
    assert.equal(await page.locator(".belief").count(), 3);
    for (const belief of await page.locator(".belief").allTextContents()) assert.doesNotMatch(belief, /哪里|什么/);
    assert.match(await likes.textContent(), /\d+%/);
    assert.match(await likes.textContent(), /来源: 规则/);
    await likes.getByRole("button", { name: "查看依据" }).click();
    const details = likes.locator(".details");
    await details.locator("canvas[data-points='1']").waitFor();  // one claim so far: its step, then decay
    assert.match(await details.locator(".why").textContent(), /规则的证据（消息 m0）[\s\S]*半衰期 90 天/);
    assert.match(await details.locator(".said").textContent(), /我喜欢化学/);  // the message it came from
    await shot(page, "memory-page-zh");

    await page.getByRole("combobox", { name: "language" }).selectOption("en");
    await page.getByRole("heading", { name: "Your memory" }).waitFor();
    const age = page.locator(".belief", { hasText: "age: 16" });
    await age.getByRole("button", { name: "Edit" }).click();
    await age.getByRole("textbox").fill("17");
    await age.getByRole("button", { name: "Save" }).click();
    await page.locator(".belief", { hasText: "age: 17" }).getByText("Source: you").waitFor();
    await page.locator(".belief", { hasText: "dislikes: 排队" }).getByRole("button", { name: "Delete" }).click();
    await page.locator(".belief", { hasText: "dislikes" }).waitFor({ state: "detached" });
    await shot(page, "memory-page-en");

    await page.getByRole("tab", { name: "What it remembers" }).click();
    await page.locator("[data-section='events'] li").first().waitFor();
    await page.getByRole("tab", { name: "Conversations" }).click();
    await page.locator("[data-section='sessions'] li", { hasText: "s1" }).waitFor();
    await page.getByRole("tab", { name: "Who saw your memory" }).click();
    await page.locator("[data-section='reads'] [data-reads='others'] li").first().waitFor();  // the agent's recall

    await page.getByRole("tab", { name: "Consent and deletion" }).click();
    await page.locator("input[name='purpose-analytics']").uncheck();
    await page.locator("[data-note]", { hasText: "Withdrew analytics" }).waitFor();  // the withdrawal's receipt
    assert.equal(await page.locator("input[name='purpose-analytics']").isChecked(), false);
    await shot(page, "memory-page-privacy");
    await page.getByRole("button", { name: "Delete all my memory" }).click();
    await page.getByRole("button", { name: "Yes, delete it for good" }).click();
    const receipt = page.locator("[data-receipt]");
    await receipt.getByText("Everything was deleted").waitFor();
    assert.equal(await receipt.getAttribute("data-complete"), "true");
    assert.deepEqual(failed, []);  // no request failed, nothing logged an error, nothing came from elsewhere
  });
});
