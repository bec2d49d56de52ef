/* Throughput of the C ABI: N coinorder_order_create calls (each a distinct
 * merchant_order_id) and M coinorder_handle GET /v1/orders/<id> calls on one sandbox
 * service with rate limiting off. Prints one line:
 *   c create_per_s=<x> handle_get_per_s=<y>
 * Usage: calls DBPATH ROUNDS_CREATE ROUNDS_GET   (scripts/bench-c runs it; the Rust twin
 * is examples/bench_calls.rs). */
#define _POSIX_C_SOURCE 200809L
#include <coinorder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, coinorder_status status, coinorder_error *err) {
    fprintf(stderr, "%s failed (status %u): %s: %s\n", what, (unsigned)status, coinorder_error_code(err),
            coinorder_error_message(err));
    coinorder_error_free(err);
    return 1;
}

/* The string value of "name" in flat JSON text, copied into out (empty if absent). */
static void json_str(const char *json, const char *name, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", name);
    out[0] = '\0';
    const char *start = strstr(json, pattern);
    if (start == NULL) return;
    start += strlen(pattern);
    const char *end = strchr(start, '"');
    if (end != NULL && (size_t)(end - start) < size) {
        memcpy(out, start, (size_t)(end - start));
        out[end - start] = '\0';
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DBPATH ROUNDS_CREATE ROUNDS_GET\n", argv[0]);
        return 2;
    }
    long creates = strtol(argv[2], NULL, 10), gets = strtol(argv[3], NULL, 10);
    if (creates < 1 || gets < 1) {
        fprintf(stderr, "ROUNDS_CREATE and ROUNDS_GET must be positive\n");
        return 2;
    }
    coinorder_service *svc = NULL;
    coinorder_error *err = NULL;
    coinorder_status st = coinorder_service_open(argv[1], "{\"rate_limit\":0}", &svc, &err);
    if (st != COINORDER_OK) return fail("open", st, err);

    int rc = 1;
    char *out = NULL;
    char key[128], order_id[64] = "", body[160], path[96], headers[192];
    st = coinorder_key_create(svc, "{\"user_id\":1,\"webhook_url\":null}", &out, &err);
    if (st != COINORDER_OK) { rc = fail("key_create", st, err); goto done; }
    json_str(out, "key", key, sizeof key);
    coinorder_string_free(out);

    double start = now_s();
    for (long i = 0; i < creates; i++) {
        snprintf(body, sizeof body, "{\"currency\":\"USD\",\"amount\":19.99,\"merchant_order_id\":\"bench-%ld\"}", i);
        st = coinorder_order_create(svc, key, body, &out, &err);
        if (st != COINORDER_OK) { rc = fail("order_create", st, err); goto done; }
        if (i == 0) json_str(out, "order_id", order_id, sizeof order_id);
        coinorder_string_free(out);
    }
    double create_s = now_s() - start;

    snprintf(path, sizeof path, "/v1/orders/%s", order_id);
    snprintf(headers, sizeof headers, "{\"x-api-key\":\"%s\"}", key);
    start = now_s();
    for (long i = 0; i < gets; i++) {
        uint16_t http_status = 0;
        st = coinorder_handle(svc, "GET", path, headers, NULL, 0, &http_status, &out, &err);
        if (st != COINORDER_OK) { rc = fail("handle", st, err); goto done; }
        coinorder_string_free(out);
        if (http_status != 200) { fprintf(stderr, "GET %s -> %u\n", path, (unsigned)http_status); goto done; }
    }
    double get_s = now_s() - start;

    printf("c create_per_s=%.1f handle_get_per_s=%.1f\n", (double)creates / create_s, (double)gets / get_s);
    rc = 0;
done:
    coinorder_service_close(svc);
    return rc;
}
