// A line-oriented driver of headless Debian Chromium for the Go UI tests: each line on stdin
// is one JSON command, each answer one JSON line on stdout ({ok: true, ...} or {ok: false,
// error}). The Go test decides what to check; this only does what it is told. The browser
// reaches nothing but the server under test (and the origins UI_ALLOW lists, comma-separated:
// an identity provider's): every other request is aborted and reported.
import { chromium } from "playwright-core";
import readline from "node:readline";

const base = process.env.UI_BASE;
const browser = await chromium.launch({
  executablePath: process.env.UI_CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync"],
});
const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
const offsite = [];
const allow = (process.env.UI_ALLOW || "").split(",").filter(Boolean);
// failing: requests to base+path answered with status instead (failNext), times each.
const failing = [];
await context.route("**/*", (route) => {
  const u = route.request().url();
  const f = failing.find((x) => x.times > 0 && u.startsWith(base + x.path));
  if (f) {
    f.times--;
    f.served++;
    return route.fulfill({ status: f.status, headers: { "Retry-After": "1" }, contentType: "text/plain", body: "busy: try again\n" });
  }
  if (u.startsWith(base + "/") || allow.some((a) => u.startsWith(a + "/"))) return route.continue();
  offsite.push(u);
  return route.abort();
});
const consoleErrors = [];
let page = await context.newPage();
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => consoleErrors.push(String(e)));

const ops = {
  async goto({ path }) {
    const t0 = Date.now();
    const resp = await page.goto(base + path, { waitUntil: "load" });
    return { status: resp.status(), ms: Date.now() - t0, url: page.url() };
  },
  async fill({ selector, value }) { await page.fill(selector, value); return {}; },
  async click({ selector, nav }) {
    if (nav) {
      await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click(selector)]);
    } else {
      await page.click(selector);
    }
    return { url: page.url() };
  },
  async text({ selector }) { return { text: await page.textContent(selector) }; },
  async count({ selector }) { return { n: await page.locator(selector).count() }; },
  async attr({ selector, name }) { return { text: await page.getAttribute(selector, name) }; },
  // cells reads the rows selector matches: each row's data-task, and each cell's text and
  // the classes of the state badges in it (each class list sorted).
  async cells({ selector }) {
    const rows = await page.$$eval(selector, (trs) => trs.map((tr) => ({
      task: tr.getAttribute("data-task"),
      cells: Array.from(tr.children).map((td) => ({
        text: td.textContent.trim(),
        badges: Array.from(td.querySelectorAll("span.state")).map((s) => Array.from(s.classList).sort().join(" ")),
      })),
    })));
    return { rows };
  },
  // scroll sets an element's scroll position, as a person dragging its scroll bars would.
  async scroll({ selector, x, y }) {
    await page.$eval(selector, (el, [x, y]) => { el.scrollLeft = x; el.scrollTop = y; }, [x, y]);
    return {};
  },
  async waitSelector({ selector, timeout }) {
    const t0 = Date.now();
    await page.waitForSelector(selector, { state: "attached", timeout });
    return { ms: Date.now() - t0 };
  },
  // waitClass waits for the element to hold cls, or any of cls when it is a list.
  async waitClass({ selector, cls, timeout }) {
    const t0 = Date.now();
    const any = Array.isArray(cls) ? cls : [cls];
    await page.waitForFunction(([s, cs]) => {
      const el = document.querySelector(s);
      return el && cs.some((c) => el.classList.contains(c));
    }, [selector, any], { timeout, polling: 20 });
    return { ms: Date.now() - t0 };
  },
  async waitText({ selector, contains, timeout }) {
    const t0 = Date.now();
    await page.waitForFunction(([s, c]) => {
      const el = document.querySelector(s);
      return el && el.textContent.includes(c);
    }, [selector, contains], { timeout, polling: 50 });
    return { ms: Date.now() - t0 };
  },
  // render measures a page's load: navigation start to the load event, the selector in the
  // DOM, and the next two animation frames, so the first frame with it is laid out and
  // painted (the load event alone can come before Chromium has laid anything out).
  async render({ path, selector }) {
    const t0 = Date.now();
    await page.goto(base + path, { waitUntil: "load" });
    await page.waitForSelector(selector, { state: "attached" });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const nav = await page.evaluate(() => {
      const e = performance.getEntriesByType("navigation")[0];
      return { load: e.loadEventEnd, dom: e.domContentLoadedEventEnd };
    });
    return { ms: Date.now() - t0, load_ms: nav.load, dom_ms: nav.dom };
  },
  async screenshot({ path }) { await page.screenshot({ path, fullPage: true }); return {}; },
  // failNext answers the next `times` requests whose URL starts with base+path with status,
  // as a busy server (or a proxy in front of it) would; failed reports how many it answered.
  async failNext({ path, status, times }) { failing.push({ path, status, times, served: 0 }); return {}; },
  async failed({ path }) { return { n: failing.filter((x) => x.path === path).reduce((n, x) => n + x.served, 0) }; },
  async cookies() { return { cookies: await context.cookies() }; },
  async report() { return { offsite, console_errors: consoleErrors }; },
  async close() { await browser.close(); return {}; },
};

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  let out;
  try {
    const cmd = JSON.parse(line);
    out = { ok: true, ...(await ops[cmd.op](cmd)) };
  } catch (e) {
    out = { ok: false, error: String(e && e.message || e).split("\n")[0] };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  if (out.ok && line.includes('"op":"close"')) break;
}
process.exit(0);
