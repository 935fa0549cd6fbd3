// What the memory page's browser tests share: Debian's headless Chromium driven by Playwright, started for one test
// and closed after it; what went wrong in the page (a failed request, an error logged) collected; screenshots into
// SHOTS_DIR when it is set; and waiting by polling. PAGE_URL is a memory-page link for a user the calling test
// filled (tests/test_memory_page.py): each test file here is run on its own, with its own user.
import { chromium } from "playwright-core";

export const url = process.env.PAGE_URL;
const shots = process.env.SHOTS_DIR;
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

// `use(page, failed)` on a fresh browser page in `locale` ("zh-CN", "en-GB"); the browser is closed afterwards
export async function inBrowser(locale, use) {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ARGS });
  try {
    const context = await browser.newContext({ locale, viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    const failed = [];
    page.on("requestfailed", (r) => failed.push(r.url()));
    page.on("console", (m) => { if (m.type() === "error") failed.push(m.text()); });
    await use(page, failed);
  } finally {
    await browser.close();
  }
}

export async function shot(page, name) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

// what `check()` answers once it is truthy, asked every 100 ms; an error naming `what` after `timeout` ms
export async function until(check, what, timeout = 30_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const answer = await check();
    if (answer) return answer;
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeout} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
