// The purposes a person consents to are named in the page's language: in Chinese, no English ids.
import assert from "node:assert/strict";
import { test } from "node:test";

import { inBrowser, url } from "./browser.mjs";

test("purposes are named in Chinese in the Chinese view, and in English in the English one", { skip: !url }, async () => {
  await inBrowser("zh-CN", async (page, failed) => {
    await page.goto(url);
    await page.getByRole("tab", { name: "同意与删除" }).click();
    const purposes = page.locator("[data-section='privacy'] .purposes");
    await purposes.locator("input[name='purpose-analytics']").waitFor();
    assert.deepEqual(await purposes.locator("label").allInnerTexts(), ["个性化", "辅导学习", "客服支持", "统计分析"]);
    await purposes.getByLabel("统计分析").uncheck();
    await page.locator("[data-note]", { hasText: "已撤回用途 统计分析" }).waitFor();
    assert.doesNotMatch(await page.locator("[data-section='privacy']").innerText(),
      /personalisation|tutoring|support|analytics/);

    await page.getByRole("combobox", { name: "language" }).selectOption("en");
    await purposes.getByLabel("analytics").waitFor();
    assert.deepEqual(failed, []);
  });
});
