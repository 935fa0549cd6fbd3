// Text the person wrote with markup characters shows as they wrote it: stored text is HTML-escaped once, by cleaning
// (memory/text.py), and the page shows it as text, so `<b>&` reads `<b>&` — not `&lt;b&gt;&amp;`, and not bold.
import assert from "node:assert/strict";
import { test } from "node:test";

import { inBrowser, url } from "./browser.mjs";

const ESCAPED = /&lt;|&gt;|&amp;/;

test("a belief and an event holding <b>& show it as written and run no markup", { skip: !url }, async () => {
  await inBrowser("en-GB", async (page, failed) => {
    await page.goto(url);
    const belief = page.locator(".belief", { hasText: "likes: <b>&化学</b>" });
    await belief.waitFor();
    assert.doesNotMatch(await page.locator("main").innerText(), ESCAPED);
    await belief.getByRole("button", { name: "Edit" }).click();
    assert.equal(await belief.getByRole("textbox").inputValue(), "<b>&化学</b>");  // what a save would send back

    await page.getByRole("tab", { name: "What it remembers" }).click();
    const event = page.locator("[data-section='events'] li", { hasText: "我喜欢<b>&化学</b>" });
    await event.waitFor();
    assert.doesNotMatch(await page.locator("main").innerText(), ESCAPED);
    assert.equal(await page.locator("main b").count(), 0);  // the text made no element
    assert.deepEqual(failed, []);
  });
});
