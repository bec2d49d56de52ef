// Shared set-up of the browser suites (`*.test.mjs` here): one `coinorder serve --env
// sandbox` on a free loopback port, an API key made with the CLI, a tiny merchant site
// (the callback_url target) on another loopback port, and Debian's Chromium driven by
// playwright-core (executablePath; no browser download). Each suite calls setupSuite()
// once; node --test runs each file in a process of its own.
//
// Environment: COINORDER_BIN (default target/debug/coinorder, built here with cargo),
// CHROMIUM_PATH (default /usr/bin/chromium), COINORDER_SKIP_BUILD=1 to skip the build,
// COINORDER_TEST_DB (scripts/test-browser's PostgreSQL pass).

import { before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const BIN = process.env.COINORDER_BIN || path.join(ROOT, "target", "debug", "coinorder");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
export const OUT = path.join(ROOT, "test-output");
export const DOCS_SHOT = path.join(ROOT, "docs", "payment-page.png");
export const STEP_MS = 15_000; // any single browser wait
export const TEST_MS = 60_000; // any single test

export const state = {
  tmp: null,
  server: null,
  serverLog: "",
  base: null,
  key: null,
  keyId: null,
  db: null,
  merchant: null,
  hits: [],
  context: null,
};

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
export function cli(args) {
  const run = spawnSync(BIN, args, { encoding: "utf8", timeout: 20_000 });
  assert.equal(run.status, 0, `coinorder ${args.join(" ")} failed: ${run.error || ""}\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

/** An HTTP call to the service with a bounded time. */
export async function api(method, pathAndQuery, body) {
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

export async function createOrder(fields) {
  const res = await api("POST", "/v1/orders", { currency: "USD", amount: 25, ...fields });
  assert.equal(res.status, 201, `create order: ${res.text}`);
  assert.ok(res.json.payment_url, `payment_url in ${res.text}`);
  return { id: res.json.data.order_id, url: res.json.payment_url };
}

export async function getOrder(id) {
  const res = await api("GET", `/v1/orders/${id}`);
  assert.equal(res.status, 200, `get order: ${res.text}`);
  return res.json;
}

/** A fresh page; every request it makes must stay on the service or the merchant site. */
export async function newPage(viewport) {
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

/** Keeps a screenshot under test-output/. */
export function saveShot(buffer, name) {
  fs.mkdirSync(OUT, { recursive: true });
  fs.writeFileSync(path.join(OUT, name), buffer);
}

// Every test checks the setup first, so a failed setup shows its real cause in each test.
export function ready() {
  if (state.setupError) throw state.setupError;
  assert.ok(state.base && state.key && state.context, "setup did not finish");
}

/** Registers the suite's set-up and tear-down; call once at the top of a test file. */
export function setupSuite() {
  before(async () => {
    try {
      await setUp();
    } catch (error) {
      state.setupError = error;
      throw error;
    }
  }, { timeout: 17 * 60_000 });

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
}

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
  state.keyId = created.id;
  state.db = db;

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
