/*
 * coinorder: the embeddable crypto-payment order engine, C ABI.
 *
 * Generated from bindings/c/src by cbindgen; do not edit by hand.
 *
 * Ownership, in one place:
 * - every `const char *` argument is borrowed for the call only (UTF-8, NUL-terminated);
 * - every `char *` the library hands out (through an out pointer) is the caller's, freed
 *   with coinorder_string_free();
 * - every `coinorder_error *` is the caller's, freed with coinorder_error_free(); the
 *   strings coinorder_error_code() and coinorder_error_message() return are borrowed
 *   from it;
 * - out pointers are written only when the call returns COINORDER_OK; `err` may be NULL
 *   and is set only on failure.
 * Thread safety: one coinorder_service may be used from any number of threads at once;
 * close it once, after every thread is done.
 */

#ifndef COINORDER_H
#define COINORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * The version of the C ABI this library implements. It grows when a function is added
 * or changes; `coinorder_abi_version()` returns it so a host can check at run time that
 * the library it loaded matches the header it was compiled with.
 */
#define COINORDER_ABI_VERSION 7

/**
 * `PARAMETERS_MISSING`
 */
#define COINORDER_ERROR_PARAMETERS_MISSING 1

/**
 * `API_LIMIT_EXCEEDED`
 */
#define COINORDER_ERROR_API_LIMIT_EXCEEDED 2

/**
 * `AUTHENTICATION_FAILED`
 */
#define COINORDER_ERROR_AUTHENTICATION_FAILED 3

/**
 * `Unauthorized`
 */
#define COINORDER_ERROR_UNAUTHORIZED 4

/**
 * `ORDER_NOT_VALID`
 */
#define COINORDER_ERROR_ORDER_NOT_VALID 5

/**
 * `ORDER_DUPLICATE`
 */
#define COINORDER_ERROR_ORDER_DUPLICATE 6

/**
 * `ORDER_STATE_INVALID`
 */
#define COINORDER_ERROR_ORDER_STATE_INVALID 7

/**
 * `KEY_NOT_FOUND`
 */
#define COINORDER_ERROR_KEY_NOT_FOUND 8

/**
 * `PAYMENT_NOT_FOUND`
 */
#define COINORDER_ERROR_PAYMENT_NOT_FOUND 9

/**
 * `Not Found`
 */
#define COINORDER_ERROR_NOT_FOUND 10

/**
 * `InternalServerError`
 */
#define COINORDER_ERROR_INTERNAL_SERVER_ERROR 11

/**
 * `SIGNATURE_INVALID`
 */
#define COINORDER_ERROR_SIGNATURE_INVALID 12

/**
 * `ServiceUnavailable`: the database stayed locked past the busy timeout; nothing
 * was done, try again later
 */
#define COINORDER_ERROR_SERVICE_UNAVAILABLE 13

/**
 * `EVENT_NOT_FOUND`: no event with that id in this environment
 */
#define COINORDER_ERROR_EVENT_NOT_FOUND 14

/**
 * What a call returns: `COINORDER_OK` (0) or why it failed. Retired values are never reused.
 *
 * A bad argument (NULL, not UTF-8, not JSON, or JSON that is not an object where one is
 * taken) sets `*err` with error code `PARAMETERS_MISSING` (http status 400) and a
 * message naming the argument: `"request_json: must be a JSON object"`.
 */
enum coinorder_status
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * Success: the out pointers were written.
   */
  COINORDER_OK = 0,
  /**
   * A required pointer argument was NULL; `*err` names it.
   */
  COINORDER_NULL_ARGUMENT = 1,
  /**
   * A string argument was not valid UTF-8; `*err` names it.
   */
  COINORDER_INVALID_UTF8 = 2,
  /**
   * A JSON argument did not parse, or is not a JSON object where the function takes
   * one; `*err` names it and says where. A member with a wrong value (`{"user_id":"x"}`)
   * is the service's `COINORDER_ERROR` with `PARAMETERS_MISSING` naming the field, as
   * over HTTP.
   */
  COINORDER_INVALID_JSON = 3,
  /**
   * The service refused or failed; `*err` has the spec's error code, message and HTTP status.
   */
  COINORDER_ERROR = 4,
  /**
   * A bug inside the library was caught at the boundary; the service is still usable.
   */
  COINORDER_PANIC = 5,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum coinorder_status coinorder_status;
#else
typedef uint32_t coinorder_status;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * A failure description (opaque), created by a failing call when its `err` argument is
 * not NULL and freed with `coinorder_error_free`.
 */
typedef struct coinorder_error coinorder_error;

/**
 * An open order service (opaque). Thread-safe: any function may be called on one
 * service from any number of threads at once. Opened with [`coinorder_service_open`],
 * closed with [`coinorder_service_close`].
 */
typedef struct coinorder_service coinorder_service;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The library version as text, e.g. `"0.1.0"`. Static: never free it.
 */
const char *coinorder_version(void);

/**
 * The ABI version of the library (`COINORDER_ABI_VERSION` of the header it was built with).
 */
uint32_t coinorder_abi_version(void);

/**
 * Opens (creating if needed) the order service over `target`, as `coinorder --db` takes
 * it: a SQLite file path, or a PostgreSQL URL (`postgres://user@host:5432/db`).
 *
 * `config_json` is NULL for the sandbox defaults, or a JSON object of options, e.g.
 * `{"environment":"live","invoice_ttl":900,"rate_limit":0}` (every option is listed in
 * the README). An unknown option or a bad value is a `COINORDER_ERROR` whose error code
 * is `PARAMETERS_MISSING` and whose message names it.
 *
 * On success `*service_out` is a new service, to be closed with
 * [`coinorder_service_close`]. `target` and `config_json` are borrowed for the call only.
 */
coinorder_status coinorder_service_open(const char *target,
                                        const char *config_json,
                                        struct coinorder_service **service_out,
                                        struct coinorder_error **err);

/**
 * Closes a service and frees it. NULL is fine. No other call may use `service` during
 * or after this one: close it once every thread is done with it. Key uses that requests
 * could not write while the writer was busy are written first (waiting for the writer up
 * to `busy_timeout_ms`), so no `last_used_at` is lost.
 *
 * In a process forked from the one that opened it, where every other call on it fails,
 * this lets go of it without closing or freeing anything: the database connections
 * belong to the parent.
 */
void coinorder_service_close(struct coinorder_service *service);

/**
 * The spec's HTTP API in one call: mount the order service in any C HTTP server.
 *
 * `method` (e.g. `"POST"`), `path_and_query` (e.g. `"/v1/orders?limit=5"`) and
 * `headers_json` (a JSON object of header names to string values, e.g.
 * `{"x-api-key":"test_..."}`, or NULL for none; a name sent twice is passed on twice, so
 * two `x-api-key`s are refused as over HTTP) are borrowed; `body` points at `body_len`
 * bytes (NULL is fine when `body_len` is 0).
 *
 * Every HTTP answer, including the spec's 400/401/404 errors, is a success of this
 * call: `*http_status_out` gets the status and `*body_out` the body, NUL-terminated, to
 * be freed with [`coinorder_string_free`]. Only a bad argument is a failure. For the
 * response's headers too (`content-type`, `retry-after`), call
 * [`coinorder_handle_with_headers`].
 */
coinorder_status coinorder_handle(const struct coinorder_service *service,
                                  const char *method,
                                  const char *path_and_query,
                                  const char *headers_json,
                                  const uint8_t *body,
                                  size_t body_len,
                                  uint16_t *http_status_out,
                                  char **body_out,
                                  struct coinorder_error **err);

/**
 * [`coinorder_handle`], and the response's headers: `*headers_json_out` gets them as a
 * JSON object of lower-case names to string values (`{"content-type":"application/json",
 * "cache-control":"no-store",...}`, with `retry-after` on a rate-limited or busy answer),
 * to be freed with [`coinorder_string_free`]. A host's HTTP server sends them with the
 * status and body.
 */
coinorder_status coinorder_handle_with_headers(const struct coinorder_service *service,
                                               const char *method,
                                               const char *path_and_query,
                                               const char *headers_json,
                                               const uint8_t *body,
                                               size_t body_len,
                                               uint16_t *http_status_out,
                                               char **headers_json_out,
                                               char **body_out,
                                               struct coinorder_error **err);

/**
 * [`coinorder_handle_with_headers`] (`headers_json_out` is required here too) for a
 * request from `client_address`: the TCP peer's address as text (`"203.0.113.7"`,
 * `"2001:db8::1"`, with a port or zone too; empty for a unix socket's peer, which is
 * this host; NULL or anything else that is not an address: unknown). With it, failed
 * authentications are limited per address (a burst of 20, then 1 a second: `400
 * API_LIMIT_EXCEEDED` with `retry-after`), as `coinorder serve` limits them; without
 * it, they are not limited. A peer on this host (a reverse proxy) is counted under the
 * address its `X-Forwarded-For` ends with, and not at all without one; a proxy on
 * another host must pass the customer's address here instead, or one client's bad keys
 * hold back every client behind it.
 */
coinorder_status coinorder_handle_from(const struct coinorder_service *service,
                                       const char *client_address,
                                       const char *method,
                                       const char *path_and_query,
                                       const char *headers_json,
                                       const uint8_t *body,
                                       size_t body_len,
                                       uint16_t *http_status_out,
                                       char **headers_json_out,
                                       char **body_out,
                                       struct coinorder_error **err);

/**
 * Creates an API key. `request_json`: `{"user_id":1,"webhook_url":null}`, optionally
 * with `"environment":"sandbox"|"live"` (default: the service's).
 *
 * `*key_json_out` gets the key as `coinorder keys create` prints it, including, this
 * once, the plain `key` and the `webhook_secret`: keep them, they are never shown again.
 */
coinorder_status coinorder_key_create(const struct coinorder_service *service,
                                      const char *request_json,
                                      char **key_json_out,
                                      struct coinorder_error **err);

/**
 * Lists every API key (of both environments) as a JSON array; never a plain key or secret.
 */
coinorder_status coinorder_key_list(const struct coinorder_service *service,
                                    char **keys_json_out,
                                    struct coinorder_error **err);

/**
 * Activates (`active` true) or deactivates a key by its id (`key_...`); an inactive
 * key's requests fail with `AUTHENTICATION_FAILED`. `*key_json_out` gets the key as
 * stored now. An unknown id is `KEY_NOT_FOUND`.
 */
coinorder_status coinorder_key_set_active(const struct coinorder_service *service,
                                          const char *key_id,
                                          bool active,
                                          char **key_json_out,
                                          struct coinorder_error **err);

/**
 * Sets a key's webhook URL, or clears it when `webhook_url` is NULL. `*key_json_out`
 * gets the key as stored now.
 */
coinorder_status coinorder_key_set_webhook_url(const struct coinorder_service *service,
                                               const char *key_id,
                                               const char *webhook_url,
                                               char **key_json_out,
                                               struct coinorder_error **err);

/**
 * One key by id. `*key_json_out` gets the key as stored (never the plain key or its
 * secret). An unknown id is `KEY_NOT_FOUND`.
 */
coinorder_status coinorder_key_get(const struct coinorder_service *service,
                                   const char *key_id,
                                   char **key_json_out,
                                   struct coinorder_error **err);

/**
 * Sets the merchant's name the payment page shows above the titles of this key's orders
 * (1 to 80 characters, no control characters), or clears it when `display_name` is
 * NULL. `*key_json_out` gets the key as stored now. A name out of bounds is
 * `PARAMETERS_MISSING` naming `display_name`; an unknown id is `KEY_NOT_FOUND`.
 */
coinorder_status coinorder_key_set_display_name(const struct coinorder_service *service,
                                                const char *key_id,
                                                const char *display_name,
                                                char **key_json_out,
                                                struct coinorder_error **err);

/**
 * Gives a key a new webhook signing secret: every delivery from now on (pending ones
 * too) is signed with it, none with the old one. `*secret_out` gets the new secret (`whsec_…`),
 * shown this once: store it where the receiver checks signatures, then free it with
 * `coinorder_string_free`. An unknown id is `KEY_NOT_FOUND`.
 */
coinorder_status coinorder_key_rotate_webhook_secret(const struct coinorder_service *service,
                                                     const char *key_id,
                                                     char **secret_out,
                                                     struct coinorder_error **err);

/**
 * Like `coinorder_key_rotate_webhook_secret`, while the old secret goes on signing for
 * `keep_old_secs` seconds (at most 2592000, 30 days; 0 is the hard cut): until then
 * every delivery carries both signatures (`webhook-signature: v1,<new> v1,<old>`), so
 * the receiver can switch secrets at its own pace. More is `PARAMETERS_MISSING`
 * ("keep_old_for: at most 2592000 seconds (30 days)").
 */
coinorder_status coinorder_key_rotate_webhook_secret_keeping_old(const struct coinorder_service *service,
                                                                 const char *key_id,
                                                                 uint64_t keep_old_secs,
                                                                 char **secret_out,
                                                                 struct coinorder_error **err);

/**
 * Deletes a key for good: its requests fail with `Unauthorized` from now on.
 */
coinorder_status coinorder_key_delete(const struct coinorder_service *service,
                                      const char *key_id,
                                      struct coinorder_error **err);

/**
 * Creates an order (`POST /v1/orders`, docs/api.md) for the merchant whose `api_key` is given.
 * `request_json` is the body of `POST /v1/orders`, e.g.
 * `{"currency":"USD","amount":19.99,"merchant_order_id":"cart-7"}`.
 *
 * `*order_json_out` gets the 201 body: `{"status":201,"message":...,"data":{...},
 * "payment_url":...}`; repeating an identical request returns the same order. A
 * different request with a used `merchant_order_id` fails with `ORDER_DUPLICATE`, a bad
 * key with `Unauthorized` (401) or `AUTHENTICATION_FAILED`, a bad field with
 * `PARAMETERS_MISSING` or `API_LIMIT_EXCEEDED` naming the field.
 */
coinorder_status coinorder_order_create(const struct coinorder_service *service,
                                        const char *api_key,
                                        const char *request_json,
                                        char **order_json_out,
                                        struct coinorder_error **err);

/**
 * Reads an order with its invoice (`GET /v1/orders/{order_id}`, docs/api.md). `*order_json_out` gets the 200 body:
 * `{"status":200,"order":{...},"invoice":{...}}`. An order that does not exist, or is
 * another merchant's, fails with `ORDER_NOT_VALID` (http status 400).
 */
coinorder_status coinorder_order_get(const struct coinorder_service *service,
                                     const char *api_key,
                                     const char *order_id,
                                     char **order_json_out,
                                     struct coinorder_error **err);

/**
 * Lists the merchant's orders, newest first (`GET /v1/orders`, docs/api.md). `query_json` is NULL for the
 * defaults or an object with any of `status` (e.g. `"NEW"`), `limit` (1 to 50, default
 * 10) and `offset`. `*orders_json_out` gets the 200 body:
 * `{"status":200,"orders":[...],"limit":10,"offset":0,"has_more":false}`.
 */
coinorder_status coinorder_order_list(const struct coinorder_service *service,
                                      const char *api_key,
                                      const char *query_json,
                                      char **orders_json_out,
                                      struct coinorder_error **err);

/**
 * The merchant cancels a NEW order of theirs. `*order_json_out` gets
 * `{"order":{..},"invoice":{..}}`: the objects of `coinorder_order_get`, the order with
 * its `environment` and `marked_paid` too, the invoice with its `derivation_index` and
 * `updated_at`. Any other state fails with `ORDER_STATE_INVALID`.
 */
coinorder_status coinorder_order_cancel(const struct coinorder_service *service,
                                        const char *api_key,
                                        const char *order_id,
                                        char **order_json_out,
                                        struct coinorder_error **err);

/**
 * The merchant accepts a late or short payment: an EXPIRED or FAILED order becomes PAID
 * (its `order.paid` event says it was marked by hand). `*order_json_out` gets the order
 * and invoice as [`coinorder_order_cancel`] gives them (`"marked_paid":true`).
 */
coinorder_status coinorder_order_mark_paid(const struct coinorder_service *service,
                                           const char *order_id,
                                           char **order_json_out,
                                           struct coinorder_error **err);

/**
 * Records a payment seen on chain for an order (the host's chain watcher). `amount` is
 * exact decimal text in the invoice's coin, e.g. `"0.00052"`. Recording the same `txid`
 * again is a no-op (`"duplicate":true`). `*outcome_json_out` gets
 * `{"txid","duplicate","payment","events":[...],"order","invoice"}`.
 */
coinorder_status coinorder_payment_record(const struct coinorder_service *service,
                                          const char *order_id,
                                          const char *txid,
                                          const char *amount,
                                          bool confirmed,
                                          char **outcome_json_out,
                                          struct coinorder_error **err);

/**
 * Marks a recorded payment final; the order becomes PAID once confirmed payments cover
 * it. `*outcome_json_out` as for [`coinorder_payment_record`]. Confirming twice is a
 * no-op (`"duplicate":true`); confirming a rejected payment fails with
 * `ORDER_STATE_INVALID`, an unknown `txid` with `PAYMENT_NOT_FOUND`.
 */
coinorder_status coinorder_payment_confirm(const struct coinorder_service *service,
                                           const char *txid,
                                           char **outcome_json_out,
                                           struct coinorder_error **err);

/**
 * Marks a recorded payment as never final (a double spend); a PENDING order it was
 * paying fails. `*outcome_json_out` as for [`coinorder_payment_record`]. Rejecting twice
 * is a no-op (`"duplicate":true`); rejecting a confirmed payment fails with
 * `ORDER_STATE_INVALID`.
 */
coinorder_status coinorder_payment_reject(const struct coinorder_service *service,
                                          const char *txid,
                                          char **outcome_json_out,
                                          struct coinorder_error **err);

/**
 * Every payment recorded for an order, oldest first. `*payments_json_out` gets a JSON
 * array of `{"txid","amount","currency","state","counts","seen_at","settled_at"}`
 * (`state` is `unconfirmed`, `confirmed` or `rejected`; `counts` is false for a payment
 * first seen after the quote ended, which pays nothing by itself; `settled_at` is null
 * while unconfirmed). An unknown order is `ORDER_NOT_VALID`.
 */
coinorder_status coinorder_order_payments(const struct coinorder_service *service,
                                          const char *order_id,
                                          char **payments_json_out,
                                          struct coinorder_error **err);

/**
 * Runs one sandbox simulation step on an order (a sandbox service only; on live it fails
 * with `Not Found`). `action_json` is the body of `POST /v1/orders/<id>/simulate`:
 * `{"action":"pay"}` (also `partial`, `confirm`, `reject`, `cancel`, `expire`; `pay` and
 * `partial` take an optional `"amount"` in the invoice's coin and an optional
 * `"confirmed":false`). `*simulation_json_out` gets what the step did:
 * `{"order","invoice","events":[...],"payments":[...]}` (plus `txid` and `payment` when
 * it made one payment).
 */
coinorder_status coinorder_simulate(const struct coinorder_service *service,
                                    const char *order_id,
                                    const char *action_json,
                                    char **simulation_json_out,
                                    struct coinorder_error **err);

/**
 * Sends up to `limit` due webhooks (in parallel, bounded) and returns when they are
 * answered; payment-link e-mails go out with [`coinorder_send_due_emails`].
 * `*report_json_out` gets the counts:
 * `{"attempted","delivered","retrying","failed","no_target"}`.
 */
coinorder_status coinorder_deliver_due(const struct coinorder_service *service,
                                       uint32_t limit,
                                       char **report_json_out,
                                       struct coinorder_error **err);

/**
 * Sends up to `limit` due payment-link e-mails (orders created with a `customer_email`)
 * over the SMTP server of the service's config (`"smtp_url"`, `"smtp_from"`), one at a
 * time, and returns when they are answered; call it from the same loop or timer as
 * [`coinorder_deliver_due`]. Without SMTP configured it sends nothing and the e-mails
 * stay pending. `*report_json_out` gets the counts: `{"attempted","sent","retrying","failed"}`.
 */
coinorder_status coinorder_send_due_emails(const struct coinorder_service *service,
                                           uint32_t limit,
                                           char **report_json_out,
                                           struct coinorder_error **err);

/**
 * Moves every order of the service's environment whose quote has run out: NEW →
 * EXPIRED, PENDING paid short with no payment left to confirm → FAILED, each with its
 * `order.expired` / `order.failed` event. Run it every few seconds, like
 * [`coinorder_deliver_due`] (`coinorder serve` runs it every second), or let
 * [`coinorder_workers_start`] run both. A read of an order whose quote ran out moves it
 * first when the writer is free (a read never waits for a write); an order nobody reads
 * waits for a run, and so does its `order.expired` webhook. `*report_json_out` gets the
 * counts:
 * `{"expired","failed"}`.
 */
coinorder_status coinorder_expire_due(const struct coinorder_service *service,
                                      char **report_json_out,
                                      struct coinorder_error **err);

/**
 * Starts the background work `coinorder serve` runs, on threads of the service: the
 * expiry sweep every `interval_ms` milliseconds (1 to 3600000), webhooks and
 * payment-link e-mails as they come due (`batch` at a time, 1 to 10000), and the chain
 * watcher every 15 s when one is configured. [`coinorder_workers_stop`] stops them, and so does
 * [`coinorder_service_close`]. Workers already running are `PARAMETERS_MISSING`
 * ("workers: already running").
 */
coinorder_status coinorder_workers_start(const struct coinorder_service *service,
                                         uint32_t interval_ms,
                                         uint32_t batch,
                                         struct coinorder_error **err);

/**
 * Stops the workers [`coinorder_workers_start`] started, waiting for the webhooks and
 * the e-mail already on their way. NULL, or no workers running, is fine.
 */
void coinorder_workers_stop(const struct coinorder_service *service);

/**
 * Queues an event for delivery again, due now, with a fresh retry schedule (the same
 * `webhook-id` and body): after a receiver was down past the retries, say. An attempt
 * in flight finishes first; the event is then sent again by the next
 * [`coinorder_deliver_due`]. An unknown id is `EVENT_NOT_FOUND`.
 */
coinorder_status coinorder_redeliver(const struct coinorder_service *service,
                                     const char *event_id,
                                     struct coinorder_error **err);

/**
 * An order's events with their webhook delivery, oldest first: what a merchant's support
 * looks at when a webhook did not arrive. `*deliveries_json_out` gets a JSON array of the
 * events (`event_id`, `type`, `sequence`, `previous_status`, `status`, `created_at`,
 * `order_id`, `payload`: the exact body sent), each with `"delivery"`: `state`
 * (`pending`, `delivered`, `failed`, `no_target`), `attempts`, `next_attempt_at`,
 * `delivered_at`, `last_error` and `log`, every attempt with its `url`, `started_at`,
 * HTTP `status`, `latency_ms`, `response_excerpt` and `error`. An unknown order is
 * `ORDER_NOT_VALID`.
 */
coinorder_status coinorder_event_deliveries(const struct coinorder_service *service,
                                            const char *order_id,
                                            char **deliveries_json_out,
                                            struct coinorder_error **err);

/**
 * Sets (or replaces) the exchange rate of `crypto` (e.g. `"BTC"`) priced in `fiat` (e.g.
 * `"USD"`) in the service's environment: `rate` is exact decimal text, fiat units per
 * one coin, e.g. `"64250.5"`. A live service quotes orders only in coins that have a
 * rate; the sandbox has built-in test rates. `valid_until_unix` is the Unix time in
 * seconds after which the rate is not used, or 0 for valid until replaced.
 *
 * `*rate_json_out` gets the rate as stored:
 * `{"environment","crypto","fiat","rate","valid_until","updated_at"}` (`valid_until`
 * null when 0 was given). An unknown coin or fiat code, a rate not above 0, or a
 * `valid_until_unix` already past or after the year 9999, fails with
 * `PARAMETERS_MISSING` naming it.
 */
coinorder_status coinorder_rate_set(const struct coinorder_service *service,
                                    const char *crypto,
                                    const char *fiat,
                                    const char *rate,
                                    int64_t valid_until_unix,
                                    char **rate_json_out,
                                    struct coinorder_error **err);

/**
 * Lists the exchange rates set in the service's environment (the sandbox's built-in
 * rates are not listed) as a JSON array of the objects [`coinorder_rate_set`] returns.
 */
coinorder_status coinorder_rate_list(const struct coinorder_service *service,
                                     char **rates_json_out,
                                     struct coinorder_error **err);

/**
 * Sets (or replaces) the watch-only wallet of `coin` (`"BTC"`, `"ETH"`, `"USDT"` or
 * `"USDC"`) in the service's environment: from then on each new invoice in `coin` gets
 * the next address derived from it.
 *
 * `key` is an extended public key, never a private one: for BTC a `zpub` or `xpub`
 * account key (BIP84 native segwit) or a `wpkh(...)` descriptor of one such key with
 * its receive path and wildcard, in the sandbox a `vpub` or `tpub`; for ETH and the
 * tokens the account `xpub` at `m/44'/60'/0'`. A private key, or a key of the other
 * network, fails with `PARAMETERS_MISSING`; the message never repeats the key.
 *
 * `*wallet_json_out` gets the wallet as stored:
 * `{"environment","coin","descriptor","next_index","first_address","created_at","updated_at"}`.
 * Compare `first_address` with the first receive address the merchant's own wallet
 * shows before taking payments.
 */
coinorder_status coinorder_wallet_set(const struct coinorder_service *service,
                                      const char *coin,
                                      const char *key,
                                      char **wallet_json_out,
                                      struct coinorder_error **err);

/**
 * Lists the watch-only wallets of the service's environment, by coin, as a JSON array
 * of the objects [`coinorder_wallet_set`] returns.
 */
coinorder_status coinorder_wallet_list(const struct coinorder_service *service,
                                       char **wallets_json_out,
                                       struct coinorder_error **err);

/**
 * Removes the watch-only wallet of `coin`: new invoices in it get no derived address;
 * invoices made before keep theirs and are still watched. `*removed_out` is true when a
 * wallet was removed, false when none was set.
 */
coinorder_status coinorder_wallet_remove(const struct coinorder_service *service,
                                         const char *coin,
                                         bool *removed_out,
                                         struct coinorder_error **err);

/**
 * The address of `coin`'s watch-only wallet at derivation `index`, to check against
 * the merchant's own wallet software. `*address_out` gets the address as text (not
 * JSON). A coin without a wallet fails with `PARAMETERS_MISSING`.
 */
coinorder_status coinorder_wallet_address(const struct coinorder_service *service,
                                          const char *coin,
                                          uint32_t index,
                                          char **address_out,
                                          struct coinorder_error **err);

/**
 * One pass of the chain watchers configured in `config_json` (`esplora_url` for
 * Bitcoin, `ethereum_rpc_url` for ETH and the tokens): records new payments to the
 * invoices' derived addresses, confirms those deep enough and rejects those that
 * vanished. Run it every few seconds, like [`coinorder_deliver_due`]; with no chain
 * configured it does nothing.
 *
 * `*report_json_out` gets
 * `{"recorded","confirmed","rejected","backing_off":[...],"errors":[...]}`. An endpoint
 * failing is not a failure of the call: it is a line of `errors` naming the chain (the
 * endpoint shown as scheme, host and port only), and the next passes list the chain in
 * `backing_off` and skip it for a pause that doubles up to five minutes. Only a
 * database failure is an error.
 */
coinorder_status coinorder_watch_chain_due(const struct coinorder_service *service,
                                           char **report_json_out,
                                           struct coinorder_error **err);

/**
 * Verifies a received webhook (Standard Webhooks): `secret` is the key's `whsec_...`
 * secret; `msg_id`, `timestamp` and `signatures` are the `webhook-id`,
 * `webhook-timestamp` and `webhook-signature` header values as received; `body` points
 * at the `body_len` bytes received. `now_unix` is the current Unix time in seconds (0:
 * the system clock), for tests.
 *
 * `COINORDER_OK` means authentic and fresh. Otherwise `COINORDER_ERROR` with error code
 * `SIGNATURE_INVALID` and a message saying why (no matching signature, a timestamp more
 * than 5 minutes off, a missing header, a malformed secret).
 */
coinorder_status coinorder_signature_verify(const char *secret,
                                            const char *msg_id,
                                            const char *timestamp,
                                            const char *signatures,
                                            const uint8_t *body,
                                            size_t body_len,
                                            int64_t now_unix,
                                            struct coinorder_error **err);

/**
 * Frees a string returned by this library. NULL is fine.
 */
void coinorder_string_free(char *string);

/**
 * The error's code: the spec's `error_code` string (`"ORDER_NOT_VALID"`,
 * `"PARAMETERS_MISSING"`, `"Unauthorized"`, ...). Borrowed from `err`: valid until
 * [`coinorder_error_free`]. NULL when `err` is NULL.
 */
const char *coinorder_error_code(const struct coinorder_error *err);

/**
 * The error's message, naming the field or argument at fault
 * (`"amount: must be greater than 0"`). Borrowed from `err`: valid until
 * [`coinorder_error_free`]. NULL when `err` is NULL.
 */
const char *coinorder_error_message(const struct coinorder_error *err);

/**
 * The HTTP status the spec gives this error (400, 401, 404 or 500, and 503 for a
 * database another process kept locked past the busy timeout); 0 when `err` is NULL.
 */
uint16_t coinorder_error_http_status(const struct coinorder_error *err);

/**
 * The error's stable number, one per error code (the `COINORDER_ERROR_*` constants);
 * 0 when `err` is NULL.
 */
uint32_t coinorder_error_number(const struct coinorder_error *err);

/**
 * The status the failed call returned (`COINORDER_ERROR`, `COINORDER_NULL_ARGUMENT`,
 * ...); `COINORDER_OK` when `err` is NULL.
 */
coinorder_status coinorder_error_status(const struct coinorder_error *err);

/**
 * Frees an error. NULL is fine.
 */
void coinorder_error_free(struct coinorder_error *err);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* COINORDER_H */
