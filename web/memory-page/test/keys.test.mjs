// Editing a belief from the keyboard: Enter saves (but not the Enter that ends an IME composition), Escape cancels.
import assert from "node:assert/strict";
import { test } from "node:test";

import { inBrowser, url } from "./browser.mjs";

test("Enter saves an edit, Escape cancels one, and an IME's Enter saves nothing", { skip: !url }, async () => {
  await inBrowser("en-GB", async (page, failed) => {
    const saves = [];
    page.on("request", (r) => { if (r.method() === "PUT") saves.push(r.postDataJSON()); });
    await page.goto(url);
    const likes = page.locator(".belief", { hasText: "likes: 化学" });
    await likes.getByRole("button", { name: "Edit" }).click();
    const box = likes.getByRole("textbox");
    await box.fill("物理");
    // a Pinyin IME commits 物理 with Enter: that keydown is composing, and must not save
    await box.dispatchEvent("keydown", { key: "Enter", isComposing: true, bubbles: true });
    await box.press("Escape");
    await box.waitFor({ state: "detached" });
    assert.match(await likes.locator(".what").innerText(), /likes: 化学/);
    await likes.getByRole("button", { name: "Edit" }).click();
    assert.equal(await box.inputValue(), "化学");  // cancelled: the edit box starts again from the belief
    await box.press("Escape");

    const age = page.locator(".belief", { hasText: "age: 16" });
    await age.getByRole("button", { name: "Edit" }).click();
    await age.getByRole("textbox").fill("17");
    await age.getByRole("textbox").press("Enter");
    await page.locator(".belief", { hasText: "age: 17" }).getByText("Source: you").waitFor();
    assert.deepEqual(saves.map((s) => [s.relation, s.object]), [["age", "17"]]);  // requests are reported in order
    assert.deepEqual(failed, []);
  });
});
