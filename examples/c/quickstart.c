/* coinorder from C: open a sandbox service, issue an API key, create an order, have the
 * (simulated) customer pay it, read it back twice (typed call and HTTP API), then send
 * the due webhooks. Every char * the library returns is ours: coinorder_string_free().
 *
 *   cc -std=c11 quickstart.c $(pkg-config --cflags --libs coinorder) -o quickstart
 *   ./quickstart [DATABASE]          (default: quickstart-c.db)
 */
#include <coinorder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies the string value of "name" from flat JSON text into out (empty if absent).
 * Enough for this demo; a real host would use its JSON library. */
static const char *json_str(const char *json, const char *name, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", name);
    out[0] = '\0';
    const char *start = strstr(json, pattern);
    if (start == NULL) return out;
    start += strlen(pattern);
    const char *end = strchr(start, '"');
    if (end != NULL && (size_t)(end - start) < size) {
        memcpy(out, start, (size_t)(end - start));
        out[end - start] = '\0';
    }
    return out;
}

/* Prints why a call failed and frees the error. Returns 1 so callers can `return fail(...)`. */
static int fail(const char *what, coinorder_status status, coinorder_error *err) {
    fprintf(stderr, "%s failed (status %u): %s: %s\n", what, (unsigned)status,
            coinorder_error_code(err), coinorder_error_message(err));
    coinorder_error_free(err);
    return 1;
}

int main(int argc, char **argv) {
    const char *db = argc > 1 ? argv[1] : "quickstart-c.db";
    coinorder_service *svc = NULL;
    coinorder_error *err = NULL;
    char *key_json = NULL, *created = NULL, *paid = NULL, *got = NULL, *http = NULL, *report = NULL;
    char key[128], order_id[64], status[32] = "", path[96], headers[192];
    uint16_t http_status = 0;
    coinorder_status st;
    int rc = 1;

    printf("libcoinorder %s (ABI %u)\n", coinorder_version(), (unsigned)coinorder_abi_version());
    if ((st = coinorder_service_open(db, NULL, &svc, &err)) != COINORDER_OK) return fail("open", st, err);

    /* The plain key is in this JSON once, never again: keep it. */
    st = coinorder_key_create(svc, "{\"user_id\":1,\"webhook_url\":null}", &key_json, &err);
    if (st != COINORDER_OK) { rc = fail("key_create", st, err); goto done; }
    json_str(key_json, "key", key, sizeof key);

    /* The body of POST /v1/orders. Add "merchant_order_id" to make retries idempotent
     * (the same request again returns the same order). */
    st = coinorder_order_create(svc, key, "{\"currency\":\"USD\",\"amount\":19.99}", &created, &err);
    if (st != COINORDER_OK) { rc = fail("order_create", st, err); goto done; }
    printf("created order %s\n", json_str(created, "order_id", order_id, sizeof order_id));

    st = coinorder_simulate(svc, order_id, "{\"action\":\"pay\"}", &paid, &err);
    if (st != COINORDER_OK) { rc = fail("simulate", st, err); goto done; }

    st = coinorder_order_get(svc, key, order_id, &got, &err);
    if (st != COINORDER_OK) { rc = fail("order_get", st, err); goto done; }
    printf("order status: %s\n", json_str(got, "status", status, sizeof status));

    /* The same read through the HTTP API, as a C web server would mount it. */
    snprintf(path, sizeof path, "/v1/orders/%s", order_id);
    snprintf(headers, sizeof headers, "{\"x-api-key\":\"%s\"}", key);
    st = coinorder_handle(svc, "GET", path, headers, NULL, 0, &http_status, &http, &err);
    if (st != COINORDER_OK) { rc = fail("handle", st, err); goto done; }
    printf("GET %s -> HTTP %u\n", path, (unsigned)http_status);

    st = coinorder_deliver_due(svc, 100, &report, &err);
    if (st != COINORDER_OK) { rc = fail("deliver_due", st, err); goto done; }
    printf("webhooks: %s\n", report);

    rc = strcmp(status, "PAID") == 0 && http_status == 200 ? 0 : 1;
done:
    coinorder_string_free(key_json);
    coinorder_string_free(created);
    coinorder_string_free(paid);
    coinorder_string_free(got);
    coinorder_string_free(http);
    coinorder_string_free(report);
    coinorder_service_close(svc);
    return rc;
}
