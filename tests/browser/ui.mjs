// Drives the Argos web UI in headless Debian Chromium with playwright-core:
// first-admin setup, the dashboard, running `echo hello`, watching a live stream, killing
// a sleeping command, logging out. Usage: node ui.mjs <setup-url>
// Exits non-zero (with the reason) on the first expectation that fails.
import { createRequire } from "node:module";

// playwright-core lives in the tools dir the test command installs (ARGOS_NODE_TOOLS).
const require = createRequire((process.env.ARGOS_NODE_TOOLS || process.cwd()) + "/");
const { chromium } = require("playwright-core");

const setupUrl = process.argv[2];
if (!setupUrl) throw new Error("usage: node ui.mjs <setup-url>");
const base = new URL(setupUrl).origin;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage();
const problems = [];
page.on("pageerror", (e) => problems.push("page error: " + e.message));
// A 401 while logged out is expected (the page asks who it is talking to).
page.on("console", (m) => {
  if (m.type() === "error" && !m.text().includes("status of 401")) problems.push("console: " + m.text());
});
let unauthorized = 0;
page.on("response", (r) => { if (r.status() === 401) unauthorized += 1; });
page.setDefaultTimeout(15000);

function step(name) { console.log("step: " + name); }

try {
  step("first-admin setup");
  await page.goto(setupUrl);
  await page.fill("input[name=name]", "admin");
  await page.fill("input[name=password]", "a long enough password");
  await page.click("button[type=submit]");
  await page.waitForSelector("#daemons");
  const daemons = await page.locator("#daemons tbody tr").count();
  if (daemons !== 4) throw new Error(`dashboard shows ${daemons} daemons`);
  const serving = await page.locator("#daemons td.ok").count();
  if (serving !== 4) throw new Error(`${serving} of 4 daemons serving`);

  step("run echo hello");
  await page.click("a[href='#/shell']");
  await page.fill("input[name=command]", "echo hello");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent.includes("finished"));
  const out = await page.textContent("#output");
  if (out !== "hello\n") throw new Error(`output was ${JSON.stringify(out)}`);
  if (!(await page.textContent("#state")).includes("succeeded")) throw new Error("not succeeded");

  step("watch a live stream");
  await page.fill("input[name=command]", "for i in 1 2 3; do echo tick$i; sleep 0.4; done");
  await page.click("#run");
  // The first line shows while the command still runs.
  await page.waitForFunction(() => document.querySelector("#output")?.textContent.includes("tick1"));
  const running = await page.textContent("#state");
  if (!running.startsWith("running")) throw new Error(`live output came after the end: ${running}`);
  await page.waitForFunction(() => document.querySelector("#state")?.textContent.includes("finished"));
  if ((await page.textContent("#output")) !== "tick1\ntick2\ntick3\n") throw new Error("stream incomplete");

  step("kill a sleeping command");
  await page.fill("input[name=command]", "sleep 30");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent.startsWith("running"));
  await page.click("#kill");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent.includes("finished"), null, { timeout: 20000 });
  const killed = await page.textContent("#state");
  if (!killed.includes("killed")) throw new Error(`after kill: ${killed}`);

  step("executions list and detail with the containment report");
  await page.click("a[href='#/executions']");
  await page.waitForSelector("#executions tbody tr");
  await page.click("#executions tbody tr:first-child a");
  await page.waitForSelector("#containment");

  step("change the password");
  await page.click("a[href='#/account']");
  await page.fill("input[name=current_password]", "a long enough password");
  await page.fill("input[name=new_password]", "another long password");
  await page.click("button[type=submit]");
  await page.waitForSelector("#done");

  step("log out");
  await page.click("#logout");
  await page.waitForSelector("input[name=password]");
  const me = await page.evaluate(async () => (await fetch("/api/me")).status);
  if (me !== 401) throw new Error(`after logout /api/me answered ${me}`);

  step("log in with the new password");
  await page.fill("input[name=name]", "admin");
  await page.fill("input[name=password]", "another long password");
  await page.click("button[type=submit]");
  await page.waitForSelector("#daemons");
  await page.click("#logout");
  await page.waitForSelector("input[name=password]");

  // Logged out, the page asks once or twice, and does not loop.
  await page.waitForTimeout(500);
  if (unauthorized > 8) throw new Error(`${unauthorized} unauthorized requests: the page loops`);
  if (problems.length) throw new Error(problems.join("\n"));
  console.log("ok: " + base);
} catch (e) {
  console.error("FAILED: " + e.message);
  if (problems.length) console.error(problems.join("\n"));
  await browser.close();
  process.exit(1);
}
await browser.close();
