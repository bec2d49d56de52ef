// End-to-end test of the hosted payment page in a real headless browser.
//
// Starts `coinorder serve --env sandbox` on a free loopback port, creates an API key
// with the CLI, runs a tiny merchant site (the callback_url target) on another loopback
// port, creates orders through the HTTP API and drives Debian's Chromium with
// playwright-core (executablePath; no browser download):
//   1. "Simulate payment" ends on the merchant's callback_url with status=PAID;
//   2. "Cancel" ends on the callback_url with status=CANCELLED (hostile title shown as text);
//   3. without a callback_url the page shows "Paid ✓" in place (phone viewport, buttons
//      disabled while the request is in flight, no horizontal overflow);
//   4. an error from the server (cancelling an order paid in part elsewhere) is shown in
//      the page, which then catches up (PENDING, amount received) and is paid in full;
//   5. an unconfirmed payment shows the wait; the confirmation, made elsewhere, is picked up
//      by the page's polling, which then redirects to the callback_url with status=PAID;
//   6. an unknown order id gets the styled 404 page.
// Screenshots go to test-output/ (gitignored); docs/payment-page.png is written once
// (or again with UPDATE_SCREENSHOT=1).
//
// Environment: COINORDER_BIN (default target/debug/coinorder, built here with cargo),
// CHROMIUM_PATH (default /usr/bin/chromium), COINORDER_SKIP_BUILD=1 to skip the build.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const BIN = process.env.COINORDER_BIN || path.join(ROOT, "target", "debug", "coinorder");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const OUT = path.join(ROOT, "test-output");
const DOCS_SHOT = path.join(ROOT, "docs", "payment-page.png");
const STEP_MS = 15_000; // any single browser wait
const TEST_MS = 60_000; // any single test

const state = { tmp: null, server: null, serverLog: "", base: null, key: null, merchant: null, hits: [], context: null };

/** Resolves with the first stdout line matching `pattern`, or rejects after `ms`. */
function waitForLine(child, pattern, ms) {
  return new Promise((resolve, reject) => {
    let buffer = "";
    const timer = setTimeout(() => done(new Error(`no line matching ${pattern} within ${ms} ms; output:\n${state.serverLog}`)), ms);
    const onData = (chunk) => {
      buffer += chunk;
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        const match = pattern.exec(line);
        if (match) return done(null, match);
      }
    };
    const onExit = (code) => done(new Error(`server exited (${code}) before listening; output:\n${state.serverLog}`));
    function done(error, match) {
      clearTimeout(timer);
      child.stdout.off("data", onData);
      child.off("exit", onExit);
      if (error) reject(error);
      else resolve(match);
    }
    child.stdout.on("data", onData);
    child.on("exit", onExit);
  });
}

/** Runs the CLI to completion (bounded) and returns its stdout. */
function cli(args) {
  const run = spawnSync(BIN, args, { encoding: "utf8", timeout: 20_000 });
  assert.equal(run.status, 0, `coinorder ${args.join(" ")} failed: ${run.error || ""}\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

/** An HTTP call to the service with a bounded time. */
async function api(method, pathAndQuery, body) {
  const headers = { "x-api-key": state.key };
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(state.base + pathAndQuery, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON; the assertions below show the text */
  }
  return { status: response.status, json, text };
}

async function createOrder(fields) {
  const res = await api("POST", "/v1/orders", { currency: "USD", amount: 25, ...fields });
  assert.equal(res.status, 201, `create order: ${res.text}`);
  assert.ok(res.json.payment_url, `payment_url in ${res.text}`);
  return { id: res.json.data.order_id, url: res.json.payment_url };
}

async function getOrder(id) {
  const res = await api("GET", `/v1/orders/${id}`);
  assert.equal(res.status, 200, `get order: ${res.text}`);
  return res.json;
}

/** A fresh page; every request it makes must stay on the service or the merchant site. */
async function newPage(viewport) {
  const page = await state.context.newPage();
  page.setDefaultTimeout(STEP_MS);
  page.setDefaultNavigationTimeout(STEP_MS);
  await page.setViewportSize(viewport);
  const foreign = [];
  const errors = [];
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith(state.base) && !url.startsWith(state.merchant) && !url.startsWith("data:")) foreign.push(url);
  });
  page.on("pageerror", (error) => errors.push(String(error)));
  page.on("console", (message) => {
    if (message.type() === "error" && !/Failed to load resource|ERR_FAILED/.test(message.text())) errors.push(message.text());
  });
  return { page, foreign, errors };
}

function saveShot(buffer, name) {
  fs.mkdirSync(OUT, { recursive: true });
  fs.writeFileSync(path.join(OUT, name), buffer);
}

// Every test checks the setup first, so a failed setup shows its real cause in each test.
function ready() {
  if (state.setupError) throw state.setupError;
  assert.ok(state.base && state.key && state.context, "setup did not finish");
}

before(async () => {
  try {
    await setUp();
  } catch (error) {
    state.setupError = error;
    throw error;
  }
}, { timeout: 17 * 60_000 });

async function setUp() {
  if (process.env.COINORDER_SKIP_BUILD !== "1" && !process.env.COINORDER_BIN) {
    const build = spawnSync("cargo", ["build", "--quiet", "--bin", "coinorder"], {
      cwd: ROOT,
      stdio: ["ignore", "inherit", "inherit"],
      timeout: 15 * 60_000,
    });
    assert.equal(build.status, 0, `cargo build failed: ${build.error || ""}`);
  }
  assert.ok(fs.existsSync(BIN), `no coinorder binary at ${BIN}`);
  assert.ok(fs.existsSync(CHROMIUM), `no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);

  state.tmp = fs.mkdtempSync(path.join(os.tmpdir(), "coinorder-browser-"));
  // scripts/test-browser's second pass names a PostgreSQL database here instead.
  const db = process.env.COINORDER_TEST_DB || path.join(state.tmp, "t.db");

  state.server = spawn(BIN, ["--db", db, "serve", "--env", "sandbox", "--addr", "127.0.0.1:0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  state.server.stdout.setEncoding("utf8");
  state.server.stderr.setEncoding("utf8");
  state.server.stdout.on("data", (chunk) => (state.serverLog += chunk));
  state.server.stderr.on("data", (chunk) => (state.serverLog += chunk));
  const match = await waitForLine(state.server, /^coinorder listening on (http:\/\/\S+) \(sandbox\)$/, 20_000);
  state.base = match[1];

  const created = JSON.parse(cli(["--db", db, "keys", "create", "--user-id", "1", "--env", "sandbox"]));
  assert.match(created.key, /^test_/);
  state.key = created.key;

  // The merchant's site: the callback_url the payment page sends the customer back to.
  state.merchantServer = http.createServer((request, response) => {
    state.hits.push(request.url);
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end("<!doctype html><title>Merchant shop</title><h1>Thanks for shopping with us</h1>");
  });
  await new Promise((resolve, reject) => {
    state.merchantServer.once("error", reject);
    state.merchantServer.listen(0, "127.0.0.1", resolve);
  });
  state.merchant = `http://127.0.0.1:${state.merchantServer.address().port}`;

  state.context = await chromium.launchPersistentContext(path.join(state.tmp, "chromium-profile"), {
    executablePath: CHROMIUM,
    headless: true,
    timeout: 30_000,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

after(async () => {
  // Each step is bounded so that a wedged browser or server cannot keep the run alive.
  const bounded = (promise, ms) => Promise.race([promise, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
  if (state.context) await bounded(state.context.close().catch(() => {}), 10_000);
  if (state.merchantServer) {
    state.merchantServer.closeAllConnections?.();
    await bounded(new Promise((resolve) => state.merchantServer.close(resolve)), 5_000);
  }
  const server = state.server;
  if (server && server.exitCode === null && server.signalCode === null) {
    const exited = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGTERM");
    await bounded(exited, 12_000);
    if (server.exitCode === null && server.signalCode === null) {
      server.kill("SIGKILL");
      await bounded(exited, 5_000);
    }
  }
  if (state.tmp) fs.rmSync(state.tmp, { recursive: true, force: true });
}, { timeout: 60_000 });

test("Simulate payment ends on the callback_url with status=PAID", { timeout: TEST_MS }, async () => {
  ready();
  const callback = `${state.merchant}/shop/return?ref=A-1042`;
  const order = await createOrder({
    amount: "48.50",
    title: "Northwind Coffee Roasters",
    description: "2 × Ethiopia Yirgacheffe, 250 g whole bean",
    merchant_order_id: "A-1042",
    pay_currency: "BTC",
    callback_url: callback,
  });
  const { page, foreign, errors } = await newPage({ width: 1280, height: 860 });
  const response = await page.goto(order.url);
  assert.equal(response.status(), 200);
  assert.match(response.headers()["content-type"], /^text\/html/);

  // What the page shows matches the order and the public status.
  const status = (await api("GET", `/pay/status?id=${order.id}`)).json;
  const detail = await getOrder(order.id);
  await page.getByTestId("sandbox-banner").waitFor({ state: "visible" });
  assert.match(await page.getByTestId("sandbox-banner").innerText(), /SANDBOX/);
  assert.equal(await page.getByTestId("merchant-title").innerText(), "Northwind Coffee Roasters");
  assert.equal(await page.getByTestId("description").innerText(), "2 × Ethiopia Yirgacheffe, 250 g whole bean");
  assert.equal(await page.getByTestId("fiat-amount").innerText(), "48.50 USD");
  assert.equal(await page.getByTestId("crypto-amount").innerText(), String(detail.invoice.amount));
  assert.equal(await page.getByTestId("pay-currency").innerText(), "BTC");
  assert.equal(detail.invoice.currency, "BTC");
  assert.equal(await page.getByTestId("address").innerText(), status.address);
  assert.ok(status.address.length > 20, `sandbox address ${status.address}`);
  assert.equal(await page.getByTestId("status").getAttribute("data-status"), "NEW");
  assert.equal(await page.getByTestId("status").innerText(), "Awaiting payment");
  assert.ok((await page.locator("#qr svg path").count()) === 1, "the QR code is an inline SVG path");
  const qrBox = await page.getByTestId("qr-svg").boundingBox();
  assert.ok(qrBox && qrBox.width >= 150 && Math.abs(qrBox.width - qrBox.height) < 2, `QR box ${JSON.stringify(qrBox)}`);
  assert.equal(await page.getByTestId("simulate-pay").isVisible(), true);
  assert.equal(await page.getByTestId("cancel").isVisible(), true);

  // The countdown runs from the server's clock: about 30 minutes, and it ticks.
  const first = await page.getByTestId("countdown").innerText();
  assert.match(first, /^(29:[0-5]\d|30:00)$/, `countdown ${first}`);
  await page.waitForFunction(
    (before) => document.getElementById("countdown").textContent !== before,
    first,
    { timeout: 5_000 },
  );

  const shot = await page.screenshot({ fullPage: true });
  saveShot(shot, "payment-page.png");
  if (!fs.existsSync(DOCS_SHOT) || process.env.UPDATE_SCREENSHOT === "1") {
    fs.mkdirSync(path.dirname(DOCS_SHOT), { recursive: true });
    fs.writeFileSync(DOCS_SHOT, shot);
  }

  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${state.merchant}/shop/return`), { timeout: STEP_MS }),
    page.getByTestId("simulate-pay").click(),
  ]);
  const landed = new URL(page.url());
  assert.equal(landed.searchParams.get("ref"), "A-1042", "the callback_url's own query is kept");
  assert.equal(landed.searchParams.get("order_id"), order.id);
  assert.equal(landed.searchParams.get("status"), "PAID");
  assert.equal(await page.title(), "Merchant shop");
  assert.ok(state.hits.some((hit) => hit.includes(`order_id=${order.id}`) && hit.includes("status=PAID")), state.hits.join("\n"));

  const paid = await getOrder(order.id);
  assert.equal(paid.order.status, "PAID");
  assert.equal(paid.invoice.status, "PAID");
  assert.equal(paid.order.receive_currency, "USD");
  assert.deepEqual(foreign, [], "the page loads nothing from elsewhere");
  assert.deepEqual(errors, [], "no script errors");
  await page.close();
});

test("Cancel ends on the callback_url with status=CANCELLED; the title is shown as text", { timeout: TEST_MS }, async () => {
  ready();
  const hostile = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> & "Co"`;
  const order = await createOrder({ amount: 12, title: hostile, callback_url: `${state.merchant}/shop/cancelled` });
  const { page, foreign, errors } = await newPage({ width: 1024, height: 800 });
  await page.goto(order.url);
  assert.equal(await page.getByTestId("merchant-title").innerText(), hostile);
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "the title's markup did not run");
  assert.equal(await page.locator("h1 script, h1 img").count(), 0);
  assert.equal(await page.getByTestId("fiat-amount").innerText(), "12.00 USD");

  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${state.merchant}/shop/cancelled`), { timeout: STEP_MS }),
    page.getByTestId("cancel").click(),
  ]);
  const landed = new URL(page.url());
  assert.equal(landed.searchParams.get("order_id"), order.id);
  assert.equal(landed.searchParams.get("status"), "CANCELLED");

  const cancelled = await getOrder(order.id);
  assert.equal(cancelled.order.status, "CANCELLED");
  assert.equal(cancelled.invoice.status, "CANCELLED");
  assert.deepEqual(foreign, []);
  assert.deepEqual(errors, []);
  await page.close();
});

test("without a callback_url the page shows the result itself (phone viewport)", { timeout: TEST_MS }, async () => {
  ready();
  const order = await createOrder({ amount: "1299.99", title: "Atlas Outdoor Gear — order 5521", pay_currency: "USDT" });
  const { page, foreign, errors } = await newPage({ width: 390, height: 844 });
  await page.goto(order.url);
  await page.getByTestId("qr-svg").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("fiat-amount").innerText(), "1,299.99 USD");
  assert.equal(await page.getByTestId("pay-currency").innerText(), "USDT");
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling at 390 px (overflow ${overflow} px)`);
  saveShot(await page.screenshot({ fullPage: true }), "payment-page-mobile.png");

  // Hold the simulate request so the in-flight state can be seen.
  let release;
  const held = new Promise((resolve) => (release = resolve));
  await page.route("**/pay/simulate?*", async (route) => {
    await Promise.race([held, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    await route.continue();
  });
  await page.getByTestId("simulate-pay").click();
  await page.waitForFunction(() => document.getElementById("simulate-pay").disabled, null, { timeout: 5_000 });
  assert.equal(await page.getByTestId("cancel").isDisabled(), true, "both buttons are disabled while in flight");
  release();

  await page.getByTestId("result").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("result-title").innerText(), "Paid ✓");
  assert.equal(await page.getByTestId("status").getAttribute("data-status"), "PAID");
  assert.equal(await page.getByTestId("pay-panel").isVisible(), false);
  assert.equal(await page.getByTestId("simulate-pay").isVisible(), false);
  assert.equal(await page.getByTestId("cancel").isVisible(), false);
  assert.equal(new URL(page.url()).pathname, "/pay", "no redirect without a callback_url");
  saveShot(await page.screenshot({ fullPage: true }), "payment-page-paid-mobile.png");
  assert.equal((await getOrder(order.id)).order.status, "PAID");
  assert.deepEqual(foreign, []);
  assert.deepEqual(errors, []);
  await page.close();
});

test("a refused action shows the server's error; the page catches up with a partial payment", { timeout: TEST_MS }, async () => {
  ready();
  const order = await createOrder({ amount: 5, title: "Corner Bakery" });
  const { page, errors } = await newPage({ width: 1280, height: 860 });
  await page.goto(order.url);
  // Keep the page stale: its status polls fail while half the invoice is paid elsewhere,
  // so the order is PENDING (which cannot be cancelled) while the page still shows NEW.
  await page.route("**/pay/status?*", (route) => route.abort());
  const partial = await api("POST", `/v1/orders/${order.id}/simulate`, { action: "partial" });
  assert.equal(partial.status, 200, partial.text);
  assert.equal(partial.json.order.status, "PENDING");
  assert.equal(await page.getByTestId("status").getAttribute("data-status"), "NEW");

  await page.getByTestId("cancel").click();
  await page.getByTestId("error").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("error").getAttribute("data-error-code"), "ORDER_STATE_INVALID");
  assert.ok((await page.getByTestId("error").innerText()).length > 0);
  assert.equal(await page.getByTestId("simulate-pay").isDisabled(), false, "buttons come back after the error");

  // Polling resumes: PENDING, with what was received so far; only "Simulate payment" is left.
  await page.unroute("**/pay/status?*");
  await page.waitForFunction(() => document.getElementById("status").dataset.status === "PENDING", null, {
    timeout: STEP_MS,
  });
  assert.equal(await page.getByTestId("status").innerText(), "Partly paid");
  assert.match(await page.getByTestId("received").innerText(), /^Received so far: 2\.50 of 5\.00 USD$/);
  assert.equal(await page.locator("#amount-label").innerText(), "Amount still due");
  assert.equal(await page.getByTestId("crypto-amount").innerText(), "2.5", "half of 5 USDT is still due");
  assert.equal(await page.getByTestId("qr").isVisible(), false, "the full-amount QR code is hidden once part is paid");
  assert.equal(await page.getByTestId("cancel").isVisible(), false);
  saveShot(await page.screenshot({ fullPage: true }), "payment-page-pending.png");

  // Paying the rest from the page completes the order, shown in place (no callback_url).
  await page.getByTestId("simulate-pay").click();
  await page.getByTestId("result").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("result-title").innerText(), "Paid ✓");
  const paid = await getOrder(order.id);
  assert.equal(paid.order.status, "PAID");
  assert.equal(paid.invoice.receive_amount, 5);
  assert.deepEqual(errors, []);
  await page.close();
});

test("an unconfirmed payment waits on the page, which follows the confirmation to the callback_url", { timeout: TEST_MS }, async () => {
  ready();
  const order = await createOrder({ amount: 30, title: "Harbor Books", callback_url: `${state.merchant}/shop/done` });
  const { page, errors } = await newPage({ width: 390, height: 844 });
  await page.goto(order.url);
  const seen = await api("POST", `/v1/orders/${order.id}/simulate`, { action: "pay", confirmed: false });
  assert.equal(seen.status, 200, seen.text);
  assert.equal(seen.json.order.status, "PENDING");

  // Everything due was sent: no amount, QR or "Simulate payment" left, just the wait.
  await page.waitForFunction(() => document.getElementById("status").dataset.status === "PENDING", null, {
    timeout: STEP_MS,
  });
  await page.getByTestId("result").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("result-title").innerText(), "Payment detected");
  assert.equal(await page.getByTestId("pay-panel").isVisible(), false);
  assert.equal(await page.getByTestId("simulate-pay").isVisible(), false);
  assert.equal(await page.getByTestId("cancel").isVisible(), false);
  saveShot(await page.screenshot({ fullPage: true }), "payment-page-waiting-mobile.png");

  // The confirmation arrives elsewhere; the page's own polling takes the customer back.
  const navigated = page.waitForURL((url) => url.href.startsWith(`${state.merchant}/shop/done`), { timeout: STEP_MS });
  const confirmed = await api("POST", `/v1/orders/${order.id}/simulate`, { action: "confirm" });
  assert.equal(confirmed.status, 200, confirmed.text);
  await navigated;
  const landed = new URL(page.url());
  assert.equal(landed.searchParams.get("order_id"), order.id);
  assert.equal(landed.searchParams.get("status"), "PAID");
  assert.deepEqual(errors, []);
  await page.close();
});

test("an unknown order id gets the styled not-found page", { timeout: TEST_MS }, async () => {
  ready();
  const { page } = await newPage({ width: 390, height: 844 });
  const response = await page.goto(`${state.base}/pay?id=00000000-0000-4000-8000-000000000000`);
  assert.equal(response.status(), 404);
  await page.getByTestId("not-found").waitFor({ state: "visible" });
  assert.match(await page.locator("h1").innerText(), /Payment not found/);
  saveShot(await page.screenshot({ fullPage: true }), "payment-page-not-found-mobile.png");
  await page.close();
});
