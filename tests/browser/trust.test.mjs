// What makes a customer trust the hosted payment page, in a real headless browser (set-up
// in harness.mjs), each on a desktop and a phone viewport:
//   - the network to send on is named for every coin (sandbox: the test networks);
//   - after a partial payment the QR code, wallet link and copied amount ask for what is
//     still due, and the page swaps the QR code in as soon as its polling sees the payment;
//   - a PAID order shows a receipt (amount, txids, time) and "Back to the shop";
//   - Cancel asks for confirmation in the page before it cancels;
//   - a visible focus ring (3:1 against its background) on every interactive element,
//     no animation under prefers-reduced-motion, a dark theme under prefers-color-scheme;
//   - an EXPIRED order tells a customer who already sent coins what to do;
//   - axe-core finds no serious or critical violation in the NEW, PENDING, PAID and
//     EXPIRED states, light and dark.
// Screenshots go to test-output/.

import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import {
  ROOT,
  STEP_MS,
  TEST_MS,
  api,
  cli,
  createOrder,
  getOrder,
  newPage,
  ready,
  saveShot,
  setupSuite,
  state,
} from "./harness.mjs";

setupSuite();

const VIEWPORTS = [
  { name: "desktop", width: 1280, height: 800 },
  { name: "phone", width: 390, height: 844 },
];
const AXE = path.join(ROOT, "node_modules", "axe-core", "axe.min.js");

/** `/pay/status` of an order: the parsed body and its raw text (for exact amounts). */
async function publicStatus(id) {
  const res = await api("GET", `/pay/status?id=${id}`);
  assert.equal(res.status, 200, res.text);
  return { json: res.json, raw: res.text };
}

/** An amount member of a JSON text, as written (JSON.parse would round it to a double). */
function rawAmount(raw, name) {
  const match = new RegExp(`[{,]"${name}":(-?[0-9][0-9.]*)`).exec(raw);
  assert.ok(match, `no ${name} in ${raw}`);
  return match[1];
}

/** `amount` × 10^decimals as an integer string, exactly (string and BigInt arithmetic). */
function baseUnits(amount, decimals) {
  const [whole, fraction = ""] = amount.split(".");
  assert.ok(fraction.length <= decimals, `${amount} has more than ${decimals} places`);
  return BigInt(whole + fraction.padEnd(decimals, "0")).toString();
}

async function simulate(id, body) {
  const res = await api("POST", `/v1/orders/${id}/simulate`, body);
  assert.equal(res.status, 200, res.text);
  return res.json;
}

async function waitForStatus(page, status) {
  await page.waitForFunction((want) => document.getElementById("status").dataset.status === want, status, {
    timeout: STEP_MS,
  });
}

/** Serves the page with a PAID page's redirect put off, so its receipt can be looked at. */
async function holdPaidRedirect(page) {
  await page.route("**/pay?id=*", async (route) => {
    const response = await route.fetch();
    const html = await response.text();
    const delay = /"paid_redirect_delay_ms":\d+/;
    // A page without the setting fails the load, and so the test, rather than redirect.
    if (response.status() === 200 && !delay.test(html)) return route.abort("failed");
    await route.fulfill({ response, body: html.replace(delay, '"paid_redirect_delay_ms":600000') });
  });
}

/** Serious and critical axe-core violations of the page as it is now. */
async function axeViolations(page) {
  // The page's CSP allows inline scripts only, which is what addScriptTag adds.
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(" ")}: ${n.failureSummary}`),
    }));
  });
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}

/**
 * Tabs once around the page and describes each element that takes focus: its outline
 * and the colour around the outline (the element's own background when the ring is
 * drawn inside it).
 */
async function tabThrough(page) {
  const seen = [];
  let outside = 0; // Tab passes through the browser itself between the last and first element
  for (let i = 0; i < 40 && outside < 2; i += 1) {
    await page.keyboard.press("Tab");
    const info = await page.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body || el === document.documentElement) return null;
      const rgba = (text) => {
        const m = /rgba?\(([^)]+)\)/.exec(text);
        if (!m) return [0, 0, 0, 0];
        const parts = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
        return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
      };
      const style = getComputedStyle(el);
      const inside = parseFloat(style.outlineOffset) < 0;
      let node = inside ? el : el.parentElement;
      let background = [255, 255, 255, 1];
      while (node) {
        const color = rgba(getComputedStyle(node).backgroundColor);
        if (color[3] > 0) {
          background = color;
          break;
        }
        node = node.parentElement;
      }
      const luminance = ([r, g, b]) =>
        [r, g, b]
          .map((c) => c / 255)
          .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4))
          .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
      const ring = rgba(style.outlineColor);
      const [hi, lo] = [luminance(ring), luminance(background)].sort((a, b) => b - a);
      return {
        id: el.id || el.tagName.toLowerCase(),
        focusVisible: el.matches(":focus-visible"),
        outlineStyle: style.outlineStyle,
        outlineWidth: parseFloat(style.outlineWidth),
        outlineColor: style.outlineColor,
        background: `rgb(${background.slice(0, 3).join(", ")})`,
        contrast: (hi + 0.05) / (lo + 0.05),
      };
    });
    if (!info) {
      outside += 1;
      continue;
    }
    if (seen.some((s) => s.id === info.id)) break;
    seen.push(info);
  }
  return seen;
}

function assertRings(rings, expected, where) {
  assert.deepEqual(
    rings.map((r) => r.id).sort(),
    [...expected].sort(),
    `${where}: the interactive elements reached with Tab`,
  );
  for (const ring of rings) {
    const what = `${where}: #${ring.id} (${ring.outlineWidth}px ${ring.outlineStyle} ${ring.outlineColor} on ${ring.background})`;
    assert.ok(ring.focusVisible, `${what} matches :focus-visible`);
    assert.notEqual(ring.outlineStyle, "none", `${what} has a focus outline`);
    assert.ok(ring.outlineWidth >= 2, `${what} is at least 2px wide`);
    assert.ok(ring.contrast >= 3, `${what}: contrast ${ring.contrast.toFixed(2)} is at least 3:1`);
  }
}

/** Relative-luminance contrast of two CSS colours, computed in the page. */
async function contrastOf(page, selector, pseudo) {
  return page.evaluate(
    ([selector, pseudo]) => {
      const rgb = (text) => (/rgba?\(([^)]+)\)/.exec(text)?.[1] ?? "0,0,0").split(/[ ,/]+/).filter(Boolean).map(Number);
      const luminance = ([r, g, b]) =>
        [r, g, b]
          .map((c) => c / 255)
          .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4))
          .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
      const el = document.querySelector(selector);
      let node = el;
      let background = null;
      while (node && !background) {
        const color = rgb(getComputedStyle(node).backgroundColor);
        if (color.length < 4 || color[3] > 0) background = color;
        node = node.parentElement;
      }
      const text = rgb(getComputedStyle(el, pseudo).color);
      const [hi, lo] = [luminance(text), luminance(background ?? [255, 255, 255])].sort((a, b) => b - a);
      return { contrast: (hi + 0.05) / (lo + 0.05), background: luminance(background ?? [255, 255, 255]) };
    },
    [selector, pseudo ?? null],
  );
}

for (const vp of VIEWPORTS) {
  const viewport = { width: vp.width, height: vp.height };

  test(`the merchant's name stands above the order's title (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const name = vp.name === "desktop" ? "Acme Coffee Roasters" : "Lighthouse <Prints> & Co";
    cli(["--db", state.db, "keys", "set-name", state.keyId, name]);
    try {
      const order = await createOrder({ amount: "7.50", title: "Espresso beans" });
      const { page, foreign, errors } = await newPage(viewport);
      await page.goto(order.url);
      const shown = page.getByTestId("merchant-name");
      await shown.waitFor({ state: "visible" });
      // textContent: the eyebrow is shown in capitals by CSS.
      assert.ok((await shown.textContent()).startsWith(name), await shown.textContent());
      const nameBox = await shown.boundingBox();
      const titleBox = await page.getByTestId("merchant-title").boundingBox();
      assert.ok(nameBox && titleBox && nameBox.y + nameBox.height <= titleBox.y + 1, "the name is above the title");
      assert.equal((await publicStatus(order.id)).json.merchant_name, name);
      saveShot(await page.screenshot({ fullPage: true }), `trust-merchant-name-${vp.name}.png`);
      assert.deepEqual(foreign, []);
      assert.deepEqual(errors, []);
      await page.close();
    } finally {
      cli(["--db", state.db, "keys", "clear-name", state.keyId]);
    }
  });

  test(`every coin names the network to send on (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const { page, foreign, errors } = await newPage(viewport);
    for (const [coin, network] of [
      ["BTC", "Bitcoin testnet"],
      ["ETH", "Sepolia test network"],
      ["USDT", "Sepolia test network (ERC-20)"],
      ["USDC", "Sepolia test network (ERC-20)"],
    ]) {
      const order = await createOrder({ amount: "19.99", title: `Network check ${coin}`, pay_currency: coin });
      await page.goto(order.url);
      await page.getByTestId("network").waitFor({ state: "visible" });
      assert.equal(await page.getByTestId("network").innerText(), network, coin);
      assert.match(await page.locator("#network-note").innerText(), new RegExp(`^Send ${coin} on this network only`));
      assert.equal((await publicStatus(order.id)).json.network, network, `${coin} in /pay/status`);
      if (vp.name === "phone") {
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `${coin}: no horizontal scrolling at 390 px (overflow ${overflow} px)`);
      }
      if (coin === "ETH") saveShot(await page.screenshot({ fullPage: true }), `trust-network-eth-${vp.name}.png`);
    }
    assert.deepEqual(foreign, []);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`after a partial payment the QR code asks for what is still due (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    // Desktop pays in a token (EIP-681 base units), the phone in bitcoin (BIP-21 amount).
    const coin = vp.name === "desktop" ? "USDT" : "BTC";
    // Text that looks like a status member must not fool the page's exact amount reader.
    const order = await createOrder({
      amount: 5,
      title: "Lighthouse Prints",
      description: 'A3 poster ,"due_amount":0,"pay_amount":0 (matte)',
      pay_currency: coin,
    });
    const { page, foreign, errors } = await newPage(viewport);
    await page.goto(order.url);
    const before = await publicStatus(order.id);
    const qr = page.getByTestId("qr");
    assert.equal(await qr.getAttribute("data-payment-uri"), before.json.payment_uri, "a NEW order's QR is the invoice's");
    assert.equal(before.json.due_payment_uri, before.json.payment_uri);
    const firstPath = await page.locator("#qr-svg path").getAttribute("d");

    await simulate(order.id, { action: "partial" });
    await waitForStatus(page, "PENDING");
    await page.waitForFunction((old) => document.getElementById("qr").dataset.paymentUri !== old, before.json.payment_uri, {
      timeout: STEP_MS,
    });
    const after = await publicStatus(order.id);
    const due = rawAmount(after.raw, "due_amount");
    const total = rawAmount(after.raw, "pay_amount");
    assert.notEqual(due, total);
    const dueUri = after.json.due_payment_uri;
    if (coin === "USDT") {
      assert.ok(dueUri.endsWith(`&uint256=${baseUnits(due, 6)}`), `${dueUri} asks for ${due} USDT`);
      assert.ok(before.json.payment_uri.endsWith(`&uint256=${baseUnits(total, 6)}`));
    } else {
      assert.equal(dueUri, `bitcoin:${after.json.address}?amount=${due}`);
    }
    assert.equal(await qr.getAttribute("data-payment-uri"), dueUri, "the QR code encodes what is due");
    assert.equal(await qr.getAttribute("data-amount"), due);
    assert.equal(await qr.isVisible(), true);
    assert.notEqual(await page.locator("#qr-svg path").getAttribute("d"), firstPath, "a new QR code was drawn");
    assert.equal(await page.getByTestId("open-wallet").getAttribute("href"), dueUri);
    assert.equal(await page.getByTestId("crypto-amount").innerText(), due);
    assert.equal(await page.getByTestId("copy-amount").getAttribute("data-copy"), due);
    assert.equal(await page.locator("#amount-label").innerText(), "Amount still due");
    assert.equal(await page.locator("#amount-sub").innerText(), `of ${total} ${coin} in total`);
    const swapped = await page.locator("#qr-svg path").getAttribute("d");
    saveShot(await page.screenshot({ fullPage: true }), `trust-qr-due-${vp.name}.png`);

    // The server renders the same QR code the script swapped in.
    await page.reload();
    assert.equal(await qr.getAttribute("data-payment-uri"), dueUri);
    assert.equal(await page.locator("#qr-svg path").getAttribute("d"), swapped);
    assert.equal(await page.getByTestId("crypto-amount").innerText(), due);
    assert.deepEqual(foreign, []);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`a PAID order shows a receipt with the amount, txids and time (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const order = await createOrder({ amount: 8, title: "Tidewater Tea", pay_currency: "USDT" });
    const { page, foreign, errors } = await newPage(viewport);
    await page.goto(order.url);
    assert.equal(await page.getByTestId("receipt").isVisible(), false, "no receipt before the order is paid");
    // Two payments: half from elsewhere, the rest from the page.
    await simulate(order.id, { action: "partial" });
    await waitForStatus(page, "PENDING");
    await page.getByTestId("simulate-pay").click();
    await page.getByTestId("receipt").waitFor({ state: "visible" });

    const { json, raw } = await publicStatus(order.id);
    assert.equal(json.status, "PAID");
    const receipt = json.receipt;
    assert.equal(receipt.amount, rawAmount(raw, "pay_amount"), "exactly the invoice was paid");
    assert.equal(receipt.currency, "USDT");
    assert.equal(receipt.payments.length, 2);
    for (const payment of receipt.payments) assert.match(payment.txid, /^sandbox_tx_[0-9A-Za-z]+$/);
    assert.equal(await page.getByTestId("receipt-amount").innerText(), receipt.amount);
    assert.equal(await page.locator("#receipt-currency").innerText(), "USDT");
    const txids = await page.locator("#receipt-txids li").allInnerTexts();
    assert.deepEqual(txids, receipt.payments.map((p) => p.txid));
    assert.equal(await page.locator("#receipt-txids-label").innerText(), "Transaction IDs");
    const time = page.getByTestId("receipt-time");
    assert.equal(await time.getAttribute("datetime"), receipt.paid_at);
    assert.equal(await time.innerText(), receipt.paid_at_text);
    assert.match(receipt.paid_at_text, /^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
    assert.equal(await page.getByTestId("back-to-shop").isVisible(), false, "no shop to go back to");
    assert.equal(json.return_url, null);
    saveShot(await page.screenshot({ fullPage: true }), `trust-receipt-${vp.name}.png`);

    // Rendered by the server too, the same.
    await page.reload();
    assert.equal(await page.getByTestId("receipt").isVisible(), true);
    assert.deepEqual(await page.locator("#receipt-txids li").allInnerTexts(), txids);
    assert.equal(await page.getByTestId("receipt-amount").innerText(), receipt.amount);
    assert.deepEqual(foreign, []);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`"Back to the shop" leads to the success_url while the page shows the receipt (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const success = `${state.merchant}/shop/thanks?cart=77`;
    const order = await createOrder({
      amount: 12,
      title: "Maple & Pine",
      pay_currency: "BTC",
      success_url: success,
      callback_url: `${state.merchant}/shop/callback`,
      webhook_url: `${state.merchant}/hooks/private-path`,
      customer_email: "buyer.private@example.org",
    });
    const { page, foreign, errors } = await newPage(viewport);
    // The automatic return (4 s, seen in payment_page.test.mjs) must not beat a slow test.
    await holdPaidRedirect(page);
    await page.goto(order.url);
    await page.getByTestId("simulate-pay").click();
    const link = page.getByTestId("back-to-shop");
    await link.waitFor({ state: "visible" });
    assert.equal(await page.getByTestId("receipt").isVisible(), true);
    assert.equal(await page.locator("#receipt-txids li").count(), 1);
    assert.equal(await page.locator("#receipt-txids-label").innerText(), "Transaction ID");
    assert.match(await page.getByTestId("redirect-note").innerText(), /^Returning you to the shop in \d+ seconds/);
    const href = new URL(await link.getAttribute("href"));
    assert.equal(href.pathname, "/shop/thanks", "success_url is preferred over callback_url");
    assert.equal(href.searchParams.get("cart"), "77");
    assert.equal(href.searchParams.get("order_id"), order.id);
    assert.equal(href.searchParams.get("status"), "PAID");
    const status = await publicStatus(order.id);
    assert.equal(status.json.return_url, href.href);
    for (const secret of ["private-path", "buyer.private@example.org", state.key]) {
      assert.ok(!status.raw.includes(secret), `${secret} in /pay/status`);
    }
    saveShot(await page.screenshot({ fullPage: true }), `trust-receipt-back-${vp.name}.png`);
    await Promise.all([
      page.waitForURL((url) => url.href.startsWith(`${state.merchant}/shop/thanks`), { timeout: STEP_MS }),
      link.click(),
    ]);
    assert.equal(new URL(page.url()).searchParams.get("status"), "PAID");
    assert.deepEqual(foreign, []);
    assert.deepEqual(errors, []);
    await page.close();

    // Without JavaScript the server-rendered page has the receipt and the link as well.
    const plain = await newPage(viewport);
    const cdp = await plain.page.context().newCDPSession(plain.page);
    await cdp.send("Emulation.setScriptExecutionDisabled", { value: true });
    await plain.page.goto(order.url);
    assert.equal(await plain.page.getByTestId("receipt").isVisible(), true);
    assert.equal(await plain.page.getByTestId("back-to-shop").getAttribute("href"), href.href);
    assert.equal(await plain.page.getByTestId("result-title").innerText(), "Paid ✓");
    assert.equal(new URL(plain.page.url()).pathname, "/pay", "no script, no redirect");
    await plain.page.close();
  });

  test(`Cancel asks for confirmation before it cancels (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const order = await createOrder({ amount: 9, title: "Quiet Harbor Candles" });
    const { page, foreign, errors } = await newPage(viewport);
    await page.goto(order.url);
    const dialog = page.getByTestId("cancel-confirm");
    const cancel = page.getByTestId("cancel");
    assert.equal(await dialog.isVisible(), false);
    assert.equal(await cancel.getAttribute("aria-expanded"), "false");

    await cancel.click();
    await dialog.waitFor({ state: "visible" });
    assert.equal(await dialog.getAttribute("role"), "alertdialog");
    assert.equal(await page.getByRole("alertdialog", { name: "Cancel this payment?" }).count(), 1, "named for screen readers");
    assert.equal(await cancel.getAttribute("aria-expanded"), "true");
    assert.equal(await page.evaluate(() => document.activeElement.id), "cancel-no", "focus goes to the safe choice");
    saveShot(await page.screenshot({ fullPage: true }), `trust-cancel-confirm-${vp.name}.png`);
    // Cancel alone cancelled nothing, even after the page polled.
    await page.waitForTimeout(1_800);
    assert.equal((await getOrder(order.id)).order.status, "NEW");
    assert.equal(await page.getByTestId("status").getAttribute("data-status"), "NEW");

    // "Keep paying" and Escape both close it, back on Cancel.
    await page.getByTestId("cancel-no").click();
    assert.equal(await dialog.isVisible(), false);
    assert.equal(await page.evaluate(() => document.activeElement.id), "cancel");
    assert.equal(await cancel.getAttribute("aria-expanded"), "false");
    await page.keyboard.press("Enter");
    await dialog.waitFor({ state: "visible" });
    await page.keyboard.press("Escape");
    assert.equal(await dialog.isVisible(), false);
    assert.equal(await page.evaluate(() => document.activeElement.id), "cancel");
    assert.equal((await getOrder(order.id)).order.status, "NEW");

    // Confirmed, it cancels; the outcome takes the focus.
    await cancel.click();
    await page.getByTestId("cancel-yes").click();
    await page.getByTestId("result").waitFor({ state: "visible" });
    assert.equal(await page.getByTestId("result-title").innerText(), "Cancelled");
    assert.equal(await page.evaluate(() => document.activeElement.id), "result-title");
    assert.equal(await dialog.isVisible(), false);
    assert.equal((await getOrder(order.id)).order.status, "CANCELLED");
    assert.deepEqual(foreign, []);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`every interactive element shows a focus ring of at least 3:1, light and dark (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const open = await createOrder({ amount: 15, title: "Focus Ring Supply Co.", pay_currency: "BTC" });
    const paid = await createOrder({ amount: 15, title: "Focus Ring Supply Co.", success_url: `${state.merchant}/shop/ok` });
    await simulate(paid.id, { action: "pay" });
    const { page, errors } = await newPage(viewport);
    await holdPaidRedirect(page);
    for (const colorScheme of ["light", "dark"]) {
      await page.emulateMedia({ colorScheme });
      await page.goto(open.url);
      await page.getByTestId("qr-svg").waitFor({ state: "visible" });
      const where = `NEW, ${colorScheme}, ${vp.name}`;
      assertRings(await tabThrough(page), ["copy-amount", "copy-address", "open-wallet", "simulate-pay", "cancel"], where);

      await page.getByTestId("cancel").focus();
      await page.keyboard.press("Enter");
      await page.getByTestId("cancel-confirm").waitFor({ state: "visible" });
      assertRings(
        await tabThrough(page),
        ["copy-amount", "copy-address", "open-wallet", "simulate-pay", "cancel", "cancel-yes", "cancel-no"],
        `${where}, confirming`,
      );
      await page.getByTestId("cancel-no").focus();
      saveShot(await page.screenshot({ fullPage: true }), `trust-focus-${colorScheme}-${vp.name}.png`);

      await page.goto(paid.url);
      await page.getByTestId("back-to-shop").waitFor({ state: "visible" });
      assertRings(await tabThrough(page), ["back-to-shop"], `PAID, ${colorScheme}, ${vp.name}`);
    }
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`reduced motion stops the animations; dark mode gives a dark theme (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const order = await createOrder({ amount: 6, title: "Night Owl Coffee" });
    const { page, errors } = await newPage(viewport);
    await page.goto(order.url);
    const motion = () =>
      page.evaluate(() => ({
        pill: getComputedStyle(document.getElementById("status"), "::before").animationName,
        button: getComputedStyle(document.getElementById("simulate-pay")).transitionDuration,
      }));
    await page.emulateMedia({ reducedMotion: "no-preference", colorScheme: "light" });
    const moving = await motion();
    assert.equal(moving.pill, "pulse", "the status dot pulses by default");
    assert.notEqual(moving.button, "0s");
    await page.emulateMedia({ reducedMotion: "reduce" });
    assert.deepEqual(await motion(), { pill: "none", button: "0s" }, "no animation or transition under reduce");

    const light = await contrastOf(page, ".card h1");
    assert.ok(light.background > 0.8, "a light card by default");
    await page.emulateMedia({ colorScheme: "dark" });
    const dark = await contrastOf(page, ".card h1");
    assert.ok(dark.background < 0.05, `a dark card in dark mode (luminance ${dark.background})`);
    assert.equal(await page.evaluate(() => getComputedStyle(document.documentElement).colorScheme), "dark");
    for (const selector of [".card h1", "#status-detail", "#pay-currency", "#network", "#countdown-label", ".foot", ".powered"]) {
      const { contrast } = await contrastOf(page, selector);
      assert.ok(contrast >= 4.5, `${selector} in dark mode: contrast ${contrast.toFixed(2)} is at least 4.5:1`);
    }
    const body = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.notEqual(body, "rgb(243, 244, 248)", "the page background changed too");
    saveShot(await page.screenshot({ fullPage: true }), `trust-dark-${vp.name}.png`);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`an EXPIRED order tells a customer who already paid what to do (${vp.name})`, { timeout: TEST_MS }, async () => {
    ready();
    const order = await createOrder({ amount: 20, title: "Sundial Ceramics" });
    const { page, foreign, errors } = await newPage(viewport);
    await page.goto(order.url);
    const help = page.getByTestId("expired-help");
    assert.equal(await help.isVisible(), false, "no such hint on an open order");
    await simulate(order.id, { action: "expire" });
    await waitForStatus(page, "EXPIRED");
    await help.waitFor({ state: "visible" });
    const text = await help.innerText();
    assert.match(text, /Already sent the coins\?/);
    assert.match(text, /do not send them again/);
    assert.match(text, /Contact the merchant with your transaction ID \(txid\)/);
    assert.match(text, /arrives after the time ran out is still recorded, and the merchant can accept it/);
    assert.equal(await page.getByTestId("order-id").innerText(), order.id, "the order number to quote");
    assert.equal(await page.getByTestId("result-title").innerText(), "Expired");
    saveShot(await page.screenshot({ fullPage: true }), `trust-expired-${vp.name}.png`);
    await page.reload();
    assert.equal(await help.isVisible(), true, "rendered by the server too");
    assert.deepEqual(foreign, []);
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`axe-core: no serious or critical violations in NEW, PENDING, PAID, EXPIRED, light and dark (${vp.name})`, { timeout: 2 * TEST_MS }, async () => {
    ready();
    const fresh = await createOrder({ amount: "48.50", title: "Northwind Coffee Roasters", description: "2 bags", pay_currency: "BTC" });
    const pending = await createOrder({ amount: 10, title: "Corner Bakery", pay_currency: "USDT" });
    await simulate(pending.id, { action: "partial" });
    const paid = await createOrder({ amount: 10, title: "Harbor Books", success_url: `${state.merchant}/shop/ok` });
    await simulate(paid.id, { action: "pay" });
    const expired = await createOrder({ amount: 10, title: "Sundial Ceramics" });
    await simulate(expired.id, { action: "expire" });

    const { page, errors } = await newPage(viewport);
    await holdPaidRedirect(page);
    const found = [];
    for (const [name, order] of [["NEW", fresh], ["PENDING", pending], ["PAID", paid], ["EXPIRED", expired]]) {
      await page.goto(order.url);
      assert.equal(await page.getByTestId("status").getAttribute("data-status"), name);
      for (const colorScheme of ["light", "dark"]) {
        // Reduced motion: a theme switch would otherwise fade the buttons' backgrounds
        // (a 0.15 s transition) while axe measures their contrast.
        await page.emulateMedia({ colorScheme, reducedMotion: "reduce" });
        for (const v of await axeViolations(page)) found.push({ state: name, colorScheme, ...v });
        if (name === "NEW") {
          await page.getByTestId("cancel").click();
          await page.getByTestId("cancel-confirm").waitFor({ state: "visible" });
          for (const v of await axeViolations(page)) found.push({ state: "NEW, confirming", colorScheme, ...v });
          await page.getByTestId("cancel-no").click();
        }
        saveShot(await page.screenshot({ fullPage: true }), `trust-axe-${name.toLowerCase()}-${colorScheme}-${vp.name}.png`);
      }
    }
    assert.deepEqual(found, [], `axe found:\n${JSON.stringify(found, null, 2)}`);
    assert.deepEqual(errors, []);
    await page.close();
  });
}

test("polls leave the live status alone until it changes; a confirmation closed by one leaves focus on the outcome", { timeout: TEST_MS }, async () => {
  ready();
  const order = await createOrder({ amount: 8, title: "Quiet Lamp" });
  const { page, errors } = await newPage({ width: 1280, height: 800 });
  await page.goto(order.url);
  // Count every change under the live region (the badge) and its detail line.
  await page.evaluate(() => {
    window.statusMutations = 0;
    const observer = new MutationObserver((records) => { window.statusMutations += records.length; });
    for (const id of ["status", "status-detail"]) {
      observer.observe(document.getElementById(id), { childList: true, characterData: true, subtree: true });
    }
  });
  for (let poll = 0; poll < 2; poll++) {
    await page.waitForResponse((response) => response.url().includes("/pay/status?"), { timeout: STEP_MS });
  }
  await page.waitForTimeout(100); // the second answer applied
  assert.equal(await page.evaluate(() => window.statusMutations), 0, "two polls of a NEW order rewrote the live region");

  // The customer opens Cancel; the order is paid elsewhere before they choose.
  await page.getByTestId("cancel").click();
  assert.equal(await page.evaluate(() => document.activeElement.id), "cancel-no");
  const paid = await api("POST", `/v1/orders/${order.id}/simulate`, { action: "pay" });
  assert.equal(paid.status, 200, paid.text);
  await page.getByTestId("result").waitFor({ state: "visible", timeout: STEP_MS });
  assert.equal(await page.getByTestId("cancel-confirm").isVisible(), false);
  assert.equal(await page.evaluate(() => document.activeElement.id), "result-title", "focus is not left on the page body");
  assert.ok((await page.evaluate(() => window.statusMutations)) > 0, "the change itself is announced");
  assert.deepEqual(errors, []);
  await page.close();
});
