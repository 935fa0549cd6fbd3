// Copies the memory page's libraries from node_modules into the API's static files, so the page needs no CDN and
// no npm at run time: Preact with hooks and htm (one ES module) and Chart.js. `make test` checks the copies are
// these packages' files (tests/test_memory_page.py); run `npm ci && npm run vendor` here after changing a version.
import { copyFile, mkdir } from "node:fs/promises";

export const FILES = {
  "htm/preact/standalone.module.js": "preact-htm.module.js",
  "chart.js/dist/chart.umd.min.js": "chart.umd.min.js",
};
const target = new URL("../../workers/api/static/memory_page/vendor/", import.meta.url);
await mkdir(target, { recursive: true });
for (const [from, to] of Object.entries(FILES)) {
  await copyFile(new URL(`node_modules/${from}`, import.meta.url), new URL(to, target));
}
