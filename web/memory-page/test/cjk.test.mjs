// Chinese is drawn in a Chinese font, not as boxes (tofu): Chromium names the fonts it drew each node's text with,
// and two different characters drawn alike are the same box. Fails on a machine without a CJK font (`make
// install-dev` installs fonts-noto-cjk).
import assert from "node:assert/strict";
import { test } from "node:test";

import { inBrowser, shot, url } from "./browser.mjs";

const CJK_FONT = /CJK|Noto Sans SC|Source Han Sans|PingFang|YaHei/;
const HAN = /\p{Script=Han}/gu;

test("Chinese on the page is drawn in a CJK font of its font stack", { skip: !url }, async () => {
  await inBrowser("zh-CN", async (page) => {
    await page.goto(url);
    await page.locator(".belief", { hasText: "喜欢: 化学" }).waitFor();
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("DOM.enable");
    await cdp.send("CSS.enable");
    const { root } = await cdp.send("DOM.getDocument", { depth: -1 });
    // the heading, a belief, a tab and a button: text, and the controls (which do not inherit fonts by default)
    for (const selector of ["h1", ".belief .what", "nav.tabs button", ".belief .actions button"]) {
      const { nodeId } = await cdp.send("DOM.querySelector", { nodeId: root.nodeId, selector });
      const { fonts } = await cdp.send("CSS.getPlatformFontsForNode", { nodeId });
      const text = await page.locator(selector).first().evaluate((node) => [...node.childNodes]
        .filter((child) => child.nodeType === Node.TEXT_NODE).map((child) => child.textContent).join(""));
      const drawnInCjk = fonts.filter((f) => CJK_FONT.test(f.familyName)).reduce((n, f) => n + f.glyphCount, 0);
      assert.ok(drawnInCjk >= text.match(HAN).length, `${selector} "${text}" was drawn in ${JSON.stringify(fonts)}`);
    }
    const same = await page.evaluate(() => {
      const family = getComputedStyle(document.body).fontFamily;
      const drawn = (char) => {
        const canvas = Object.assign(document.createElement("canvas"), { width: 40, height: 40 });
        const pen = canvas.getContext("2d");
        pen.font = `32px ${family}`;
        pen.fillText(char, 2, 32);
        return canvas.toDataURL();
      };
      return drawn("中") === drawn("文");
    });
    assert.equal(same, false, "中 and 文 are drawn alike: boxes, not characters");
    await shot(page, "memory-page-cjk");
  });
});
