// A person the agent never talked with opens their page: it says nothing of them is stored (the profile's
// `known: false`), in both languages, and every tab opens without an error.
import assert from "node:assert/strict";
import { test } from "node:test";

import { inBrowser, url } from "./browser.mjs";

test("a new person's page says nothing of them is stored, and every tab opens", { skip: !url }, async () => {
  await inBrowser("zh-CN", async (page, failed) => {
    await page.goto(url);
    await page.locator("[data-unknown]", { hasText: "助手还不认识你" }).waitFor();
    for (const tab of ["events", "sessions", "reviews", "reads", "privacy", "beliefs"]) {
      await page.locator(`[data-tab='${tab}']`).click();
      await page.locator(`[data-section='${tab}']`).waitFor();
      if (tab === "privacy") await page.locator("input[name='long_term']").waitFor();
    }
    await page.getByRole("combobox", { name: "language" }).selectOption("en");
    await page.locator("[data-unknown]", { hasText: "The assistant does not know you yet" }).waitFor();
    assert.equal(await page.locator(".error").count(), 0);
    assert.deepEqual(failed, []);
  });
});
