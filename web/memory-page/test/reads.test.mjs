// "Who saw your memory" lists the agents' and operators' reads; the person's own, on this page, are counted on one
// folded line apart — or every visit to the page would bury what the agents read.
import assert from "node:assert/strict";
import { test } from "node:test";

import { inBrowser, until, url } from "./browser.mjs";

test("the page's own reads are folded into one line apart from the agents' reads", { skip: !url }, async () => {
  await inBrowser("en-GB", async (page, failed) => {
    for (let visit = 0; visit < 3; visit++) {  // three visits: three profile reads by the person themself
      await (visit ? page.reload() : page.goto(url));
      await page.locator(".belief").first().waitFor();
    }
    const own = page.locator("[data-section='reads'] [data-reads='own']");
    // a read is listed once a worker has written its audit record: the tab is opened again until it is (through
    // "Consent and deletion", which reads nothing of the user — another tab would add reads of its own)
    const times = await until(async () => {
      await page.getByRole("tab", { name: "Consent and deletion" }).click();
      await page.getByRole("tab", { name: "Who saw your memory" }).click();
      const line = (await own.count()) ? await own.locator("summary").innerText() : "";
      const n = Number((/^You, on this page: (\d+) times, last at /.exec(line) || [])[1]);
      return n >= 3 && n;
    }, "three visits to the page counted apart", 90_000);  // the shared stack's worker may be busy with others' work
    const others = page.locator("[data-section='reads'] [data-reads='others'] li");
    await others.filter({ hasText: "tutor-bot" }).first().waitFor();  // the agent's recall
    assert.doesNotMatch((await others.allInnerTexts()).join("\n"), /page:/);
    assert.equal(await own.locator("li").count(), times);
    assert.equal(await own.locator("li").first().isVisible(), false);  // folded until opened
    await own.locator("summary").click();
    await own.locator("li", { hasText: "profile read" }).first().waitFor();
    assert.deepEqual(failed, []);
  });
});
