// End-to-end test of the hosted payment page in a real headless browser (set-up in
// harness.mjs: serve --env sandbox, a merchant site, Debian's Chromium via playwright-core):
//   1. "Simulate payment" ends on the merchant's callback_url with status=PAID;
//   2. "Cancel", confirmed, ends on the callback_url with status=CANCELLED (hostile title
//      shown as text);
//   3. without a callback_url the page shows "Paid ✓" in place (phone viewport, buttons
//      disabled while the request is in flight, no horizontal overflow);
//   4. an error from the server (cancelling an order paid in part elsewhere) is shown in
//      the page, which then catches up (PENDING, amount received, QR code of what is due)
//      and is paid in full;
//   5. an unconfirmed payment shows the wait; the confirmation, made elsewhere, is picked up
//      by the page's polling, which then redirects to the callback_url with status=PAID;
//   6. an unknown order id gets the styled 404 page;
//   7. without JavaScript, Cancel is a form behind a "details" that asks first; its answer
//      (303 to the page) shows "Cancelled" and the link back to the shop.
// trust.test.mjs covers networks, the QR code of what is due, receipts, the Cancel
// confirmation, focus, motion and colour preferences, expired orders and axe-core.
// Screenshots go to test-output/ (gitignored); docs/payment-page.png is written once
// (or again with UPDATE_SCREENSHOT=1).

import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  DOCS_SHOT,
  STEP_MS,
  TEST_MS,
  api,
  createOrder,
  getOrder,
  newPage,
  ready,
  saveShot,
  setupSuite,
  state,
} from "./harness.mjs";

setupSuite();

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

  // Cancel asks first; the confirmation's "Yes" cancels.
  await page.getByTestId("cancel").click();
  await page.getByTestId("cancel-confirm").waitFor({ state: "visible" });
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${state.merchant}/shop/cancelled`), { timeout: STEP_MS }),
    page.getByTestId("cancel-yes").click(),
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
  assert.equal(await page.getByTestId("copy-address").isVisible(), false, "copying needs the script");
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
  await page.getByTestId("cancel-yes").click();
  await page.getByTestId("error").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("error").getAttribute("data-error-code"), "ORDER_STATE_INVALID");
  assert.ok((await page.getByTestId("error").innerText()).length > 0);
  assert.equal(await page.getByTestId("simulate-pay").isDisabled(), false, "buttons come back after the error");

  // Polling resumes: PENDING, with what was received so far; only "Simulate payment" is left.
  await page.unroute("**/pay/status?*");
  await page.waitForFunction(() => document.getElementById("status").dataset.status === "PENDING", null, {
    timeout: STEP_MS,
  });
  assert.equal(await page.getByTestId("error").isVisible(), false, "the refusal is gone once the page caught up");
  assert.equal(await page.getByTestId("status").innerText(), "Partly paid");
  assert.match(await page.getByTestId("received").innerText(), /^Received so far: 2\.50 of 5\.00 USD$/);
  assert.equal(await page.locator("#amount-label").innerText(), "Amount still due");
  assert.equal(await page.getByTestId("crypto-amount").innerText(), "2.5", "half of 5 USDT is still due");
  // The QR code now asks for what is due (2.5 USDT = 2500000 base units), not the invoice.
  await page.waitForFunction(() => /uint256=2500000$/.test(document.getElementById("qr").dataset.paymentUri), null, {
    timeout: STEP_MS,
  });
  assert.equal(await page.getByTestId("qr").isVisible(), true, "the QR code of what is due is shown");
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

test("without JavaScript, Cancel is a form that asks first and leads back to the shop", { timeout: TEST_MS }, async () => {
  ready();
  const order = await createOrder({ amount: 14, title: "No-script shop", callback_url: `${state.merchant}/shop/back` });
  const { page, foreign, errors } = await newPage({ width: 390, height: 844 });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Emulation.setScriptExecutionDisabled", { value: true });
  const violations = [];
  page.on("console", (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
  });
  await page.goto(order.url);
  // The scripted buttons would do nothing: the forms stand in for them.
  assert.equal(await page.getByTestId("cancel").isVisible(), false);
  assert.equal(await page.getByTestId("simulate-pay").isVisible(), false);
  assert.equal(await page.getByTestId("simulate-pay-form").isVisible(), true);
  assert.equal(await page.getByTestId("cancel-form-yes").isVisible(), false, "asks before it cancels");
  await page.getByTestId("cancel-form-open").click();
  await page.getByTestId("cancel-form-yes").waitFor({ state: "visible" });
  saveShot(await page.screenshot({ fullPage: true }), "payment-page-noscript-cancel-mobile.png");
  await Promise.all([
    page.waitForURL((url) => url.pathname === "/pay" && url.searchParams.get("id") === order.id, { timeout: STEP_MS }),
    page.getByTestId("cancel-form-yes").click(),
  ]);
  assert.equal(await page.getByTestId("result-title").innerText(), "Cancelled");
  assert.equal(await page.getByTestId("cancel-form-open").count(), 0, "no form on a cancelled order");
  const back = new URL(await page.getByTestId("back-to-shop").getAttribute("href"));
  assert.equal(back.searchParams.get("status"), "CANCELLED");
  assert.equal(back.searchParams.get("order_id"), order.id);
  assert.equal((await getOrder(order.id)).order.status, "CANCELLED");
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${state.merchant}/shop/back`), { timeout: STEP_MS }),
    page.getByTestId("back-to-shop").click(),
  ]);
  assert.deepEqual(violations, []);
  assert.deepEqual(foreign, []);
  assert.deepEqual(errors, []);
  await page.close();
});
