/*
 * The C ABI of libcoinorder, function by function and failure by failure: every function
 * of include/coinorder.h is called, with every pointer argument NULL in turn, with
 * non-UTF-8 text and bad JSON, and through the service's refusals, asserting the exact
 * status, error code, error number, HTTP status and message. Every string and error the
 * library hands out is freed (the suite runs under valgrind --leak-check=full).
 *
 * Build: gcc -std=c11 -Wall -Wextra -Werror -pedantic test_api.c $(pkg-config --cflags --libs coinorder)
 */

#define _POSIX_C_SOURCE 200809L

#include <coinorder.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "harness.h"

/* ---------------------------------------------------------------------------------------
 * Shared state and helpers
 * ------------------------------------------------------------------------------------- */

static const char *const SANDBOX = "{\"rate_limit\":0}";
static const char *const LIVE = "{\"environment\":\"live\",\"rate_limit\":0}";

/* Not valid UTF-8: a lone continuation byte and an invalid lead byte. */
static const char *const BAD_UTF8 = "ab\xff\xfe";

static char g_dir[4096]; /* this run's temporary directory */
static int g_db_seq;

/* What an out pointer holds before a call that must not write it. */
static char g_sentinel_byte;
#define SENTINEL ((char *)&g_sentinel_byte)
static coinorder_service *const SERVICE_SENTINEL = (coinorder_service *)(void *)&g_sentinel_byte;

/* A new database path in the run's directory. */
static void new_db_path(char *buf, size_t size) { snprintf(buf, size, "%s/db%d.sqlite", g_dir, ++g_db_seq); }

/* The string value of the first "key":"..." in json (escapes kept as written). */
static int json_str(const char *json, const char *key, char *buf, size_t size) {
    char needle[128];
    if (json == NULL || size == 0) {
        return 0;
    }
    snprintf(needle, sizeof needle, "\"%s\":\"", key);
    const char *p = strstr(json, needle);
    if (p == NULL) {
        return 0;
    }
    p += strlen(needle);
    size_t n = 0;
    while (*p && *p != '"') {
        if (*p == '\\' && p[1]) {
            if (n + 1 < size) {
                buf[n++] = *p;
            }
            p++;
        }
        if (n + 1 < size) {
            buf[n++] = *p;
        }
        p++;
    }
    buf[n] = '\0';
    return *p == '"';
}

/* The raw text of the first "key":<value> in json (a number, true, false, null). */
static int json_raw(const char *json, const char *key, char *buf, size_t size) {
    char needle[128];
    if (json == NULL || size == 0) {
        return 0;
    }
    snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *p = strstr(json, needle);
    if (p == NULL) {
        return 0;
    }
    p += strlen(needle);
    size_t n = 0;
    while (*p && *p != ',' && *p != '}' && *p != ']' && n + 1 < size) {
        buf[n++] = *p++;
    }
    buf[n] = '\0';
    return n > 0;
}

/* How many times needle occurs in haystack. */
static int count_of(const char *haystack, const char *needle) {
    int count = 0;
    if (haystack == NULL) {
        return 0;
    }
    for (const char *p = strstr(haystack, needle); p != NULL; p = strstr(p + 1, needle)) {
        count++;
    }
    return count;
}

/* Checks one failed call in full, then frees its error. */
static void expect_error_at(const char *file, int line, const char *call, coinorder_status status,
                            coinorder_error *err, coinorder_status want_status, const char *want_code,
                            uint32_t want_number, uint16_t want_http, const char *want_message, int exact) {
    const char *message = coinorder_error_message(err);
    if (status != want_status) {
        harness_fail(file, line, "%s returned status %u, expected %u (message: %s)", call, (unsigned)status,
                     (unsigned)want_status, message ? message : "(no error)");
    }
    if (err == NULL) {
        harness_fail(file, line, "%s set no error object", call);
        return;
    }
    if (coinorder_error_status(err) != want_status) {
        harness_fail(file, line, "%s: coinorder_error_status is %u, expected %u", call,
                     (unsigned)coinorder_error_status(err), (unsigned)want_status);
    }
    const char *code = coinorder_error_code(err);
    if (code == NULL || strcmp(code, want_code) != 0) {
        harness_fail(file, line, "%s: error code \"%s\", expected \"%s\" (message: %s)", call,
                     code ? code : "(null)", want_code, message ? message : "(null)");
    }
    if (coinorder_error_number(err) != want_number) {
        harness_fail(file, line, "%s: error number %u, expected %u", call, (unsigned)coinorder_error_number(err),
                     (unsigned)want_number);
    }
    if (coinorder_error_http_status(err) != want_http) {
        harness_fail(file, line, "%s: http status %u, expected %u", call,
                     (unsigned)coinorder_error_http_status(err), (unsigned)want_http);
    }
    if (want_message != NULL) {
        int matches = message != NULL && (exact ? strcmp(message, want_message) == 0
                                                : strstr(message, want_message) != NULL);
        if (!matches) {
            harness_fail(file, line, "%s: message \"%s\", expected %s \"%s\"", call, message ? message : "(null)",
                         exact ? "exactly" : "to contain", want_message);
        }
    }
    coinorder_error_free(err);
}

/* Checks one call that must succeed, and that it left `err` alone. */
static int expect_ok_at(const char *file, int line, const char *call, coinorder_status status,
                        coinorder_error *err) {
    if (status != COINORDER_OK) {
        const char *message = coinorder_error_message(err);
        const char *code = coinorder_error_code(err);
        harness_fail(file, line, "%s failed: status %u, %s: %s", call, (unsigned)status, code ? code : "(null)",
                     message ? message : "(null)");
        coinorder_error_free(err);
        return 0;
    }
    if (err != NULL) {
        harness_fail(file, line, "%s succeeded but set *err", call);
        coinorder_error_free(err);
        return 0;
    }
    return 1;
}

/*
 * The macros below run `call` (which must pass `&err`, a `coinorder_error *` of the test)
 * after resetting `err`, then check it. The call is sequenced before the check.
 */
#define EXPECT_OK(call)                                                         \
    do {                                                                        \
        err = NULL;                                                             \
        coinorder_status expect_st_ = (call);                                   \
        expect_ok_at(__FILE__, __LINE__, #call, expect_st_, err);               \
    } while (0)

/* The service refused: COINORDER_ERROR with this code, number, http status and exact message. */
#define EXPECT_ERROR(call, code, number, http, message)                                                  \
    do {                                                                                                 \
        err = NULL;                                                                                      \
        coinorder_status expect_st_ = (call);                                                            \
        expect_error_at(__FILE__, __LINE__, #call, expect_st_, err, COINORDER_ERROR, code, number, http, \
                        message, 1);                                                                     \
    } while (0)

/* As EXPECT_ERROR, with a message that contains `part`. */
#define EXPECT_ERROR_HAS(call, code, number, http, part)                                                 \
    do {                                                                                                 \
        err = NULL;                                                                                      \
        coinorder_status expect_st_ = (call);                                                            \
        expect_error_at(__FILE__, __LINE__, #call, expect_st_, err, COINORDER_ERROR, code, number, http, \
                        part, 0);                                                                        \
    } while (0)

/* A NULL pointer argument: COINORDER_NULL_ARGUMENT naming it. */
#define EXPECT_NULL_ARG(call, argument)                                                                 \
    do {                                                                                                \
        err = NULL;                                                                                     \
        coinorder_status expect_st_ = (call);                                                           \
        expect_error_at(__FILE__, __LINE__, #call, expect_st_, err, COINORDER_NULL_ARGUMENT,            \
                        "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,                  \
                        argument ": must not be NULL", 1);                                              \
    } while (0)

/* A non-UTF-8 string argument: COINORDER_INVALID_UTF8 naming it. */
#define EXPECT_BAD_UTF8(call, argument)                                                                 \
    do {                                                                                                \
        err = NULL;                                                                                     \
        coinorder_status expect_st_ = (call);                                                           \
        expect_error_at(__FILE__, __LINE__, #call, expect_st_, err, COINORDER_INVALID_UTF8,             \
                        "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,                  \
                        argument ": is not valid UTF-8", 1);                                            \
    } while (0)

/* A JSON argument that does not parse: COINORDER_INVALID_JSON naming it and saying where. */
#define EXPECT_BAD_JSON(call, argument)                                                                 \
    do {                                                                                                \
        err = NULL;                                                                                     \
        coinorder_status expect_st_ = (call);                                                           \
        expect_error_at(__FILE__, __LINE__, #call, expect_st_, err, COINORDER_INVALID_JSON,             \
                        "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,                  \
                        argument ": is not valid JSON (", 0);                                           \
    } while (0)

/* A JSON argument of the wrong shape: COINORDER_INVALID_JSON with this exact message. */
#define EXPECT_JSON_SHAPE(call, message)                                                                \
    do {                                                                                                \
        err = NULL;                                                                                     \
        coinorder_status expect_st_ = (call);                                                           \
        expect_error_at(__FILE__, __LINE__, #call, expect_st_, err, COINORDER_INVALID_JSON,             \
                        "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, message, 1);     \
    } while (0)

/* A service with one active sandbox (or live) key of merchant 1. */
struct fixture {
    coinorder_service *svc;
    char path[4200];
    char key[128];        /* the plain key, for api_key */
    char key_id[64];      /* key_... */
    char secret[128];     /* whsec_... */
};

static int fixture_open(struct fixture *fx, const char *config) {
    coinorder_error *err = NULL;
    char *key_json = NULL;
    memset(fx, 0, sizeof *fx);
    new_db_path(fx->path, sizeof fx->path);
    coinorder_status st = coinorder_service_open(fx->path, config, &fx->svc, &err);
    if (!expect_ok_at(__FILE__, __LINE__, "coinorder_service_open", st, err)) {
        return 0;
    }
    err = NULL;
    st = coinorder_key_create(fx->svc, "{\"user_id\":1,\"webhook_url\":null}", &key_json, &err);
    if (!expect_ok_at(__FILE__, __LINE__, "coinorder_key_create", st, err)) {
        coinorder_service_close(fx->svc);
        fx->svc = NULL;
        return 0;
    }
    int ok = json_str(key_json, "key", fx->key, sizeof fx->key) &&
             json_str(key_json, "id", fx->key_id, sizeof fx->key_id) &&
             json_str(key_json, "webhook_secret", fx->secret, sizeof fx->secret);
    CHECK_MSG(ok, "key_create output lacks key/id/webhook_secret: %s", key_json ? key_json : "(null)");
    coinorder_string_free(key_json);
    if (!ok) {
        coinorder_service_close(fx->svc);
        fx->svc = NULL;
    }
    return ok;
}

static void fixture_close(struct fixture *fx) {
    coinorder_service_close(fx->svc);
    fx->svc = NULL;
}

/* Creates an order (body as given) and copies its order_id; 1 on success. */
static int create_order_at(const char *file, int line, struct fixture *fx, const char *body, char *order_id,
                           size_t size) {
    coinorder_error *err = NULL;
    char *out = NULL;
    coinorder_status st = coinorder_order_create(fx->svc, fx->key, body, &out, &err);
    if (!expect_ok_at(file, line, "coinorder_order_create", st, err)) {
        return 0;
    }
    int ok = json_str(out, "order_id", order_id, size);
    if (!ok) {
        harness_fail(file, line, "no order_id in %s", out ? out : "(null)");
    }
    coinorder_string_free(out);
    return ok;
}
#define CREATE_ORDER(fx, body, id) create_order_at(__FILE__, __LINE__, fx, body, id, sizeof(id))

/* The order's status as coinorder_order_get reports it, into buf. */
static void order_status(struct fixture *fx, const char *order_id, char *buf, size_t size) {
    coinorder_error *err = NULL;
    char *out = NULL;
    buf[0] = '\0';
    coinorder_status st = coinorder_order_get(fx->svc, fx->key, order_id, &out, &err);
    if (expect_ok_at(__FILE__, __LINE__, "coinorder_order_get", st, err)) {
        const char *order = strstr(out, "\"order\":");
        json_str(order, "status", buf, size);
    }
    coinorder_string_free(out);
}

#define CHECK_ORDER_STATUS(fx, id, want)                    \
    do {                                                    \
        char status_buf_[32];                               \
        order_status(fx, id, status_buf_, sizeof status_buf_); \
        CHECK_STR_EQ(status_buf_, want);                    \
    } while (0)

/* The crypto amount the invoice asks for, as exact decimal text. */
static int invoice_amount(struct fixture *fx, const char *order_id, char *buf, size_t size) {
    coinorder_error *err = NULL;
    char *out = NULL;
    int ok = 0;
    coinorder_status st = coinorder_order_get(fx->svc, fx->key, order_id, &out, &err);
    if (expect_ok_at(__FILE__, __LINE__, "coinorder_order_get", st, err)) {
        const char *invoice = strstr(out, "\"invoice\":");
        ok = json_raw(invoice, "amount", buf, size);
    }
    coinorder_string_free(out);
    return ok;
}

/* ---------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------- */

static void test_version_and_abi(void) {
    const char *version = coinorder_version();
    REQUIRE(version != NULL);
    /* MAJOR.MINOR.PATCH, each a run of digits, optionally followed by -pre or +build. */
    const char *p = version;
    int parts = 0;
    for (;;) {
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
        CHECK_MSG(digits > 0, "version \"%s\" is not MAJOR.MINOR.PATCH", version);
        parts++;
        if (parts == 3 || *p != '.') {
            break;
        }
        p++;
    }
    CHECK_MSG(parts == 3 && (*p == '\0' || *p == '-' || *p == '+'), "version \"%s\" is not MAJOR.MINOR.PATCH",
              version);
    /* Static: the same pointer every time. */
    CHECK(coinorder_version() == version);
#ifdef EXPECTED_VERSION
    CHECK_STR_EQ(version, EXPECTED_VERSION);
#endif
    CHECK_INT_EQ(coinorder_abi_version(), COINORDER_ABI_VERSION);
    CHECK_INT_EQ(COINORDER_ABI_VERSION, 7);
}

static void test_null_is_fine_for_free_close_and_accessors(void) {
    coinorder_service_close(NULL);
    coinorder_string_free(NULL);
    coinorder_error_free(NULL);
    CHECK(coinorder_error_code(NULL) == NULL);
    CHECK(coinorder_error_message(NULL) == NULL);
    CHECK_INT_EQ(coinorder_error_http_status(NULL), 0);
    CHECK_INT_EQ(coinorder_error_number(NULL), 0);
    CHECK_INT_EQ(coinorder_error_status(NULL), COINORDER_OK);
}

static void test_status_and_error_number_values(void) {
    CHECK_INT_EQ(COINORDER_OK, 0);
    CHECK_INT_EQ(COINORDER_NULL_ARGUMENT, 1);
    CHECK_INT_EQ(COINORDER_INVALID_UTF8, 2);
    CHECK_INT_EQ(COINORDER_INVALID_JSON, 3);
    CHECK_INT_EQ(COINORDER_ERROR, 4);
    CHECK_INT_EQ(COINORDER_PANIC, 5);
    CHECK_INT_EQ(COINORDER_ERROR_PARAMETERS_MISSING, 1);
    CHECK_INT_EQ(COINORDER_ERROR_API_LIMIT_EXCEEDED, 2);
    CHECK_INT_EQ(COINORDER_ERROR_AUTHENTICATION_FAILED, 3);
    CHECK_INT_EQ(COINORDER_ERROR_UNAUTHORIZED, 4);
    CHECK_INT_EQ(COINORDER_ERROR_ORDER_NOT_VALID, 5);
    CHECK_INT_EQ(COINORDER_ERROR_ORDER_DUPLICATE, 6);
    CHECK_INT_EQ(COINORDER_ERROR_ORDER_STATE_INVALID, 7);
    CHECK_INT_EQ(COINORDER_ERROR_KEY_NOT_FOUND, 8);
    CHECK_INT_EQ(COINORDER_ERROR_PAYMENT_NOT_FOUND, 9);
    CHECK_INT_EQ(COINORDER_ERROR_NOT_FOUND, 10);
    CHECK_INT_EQ(COINORDER_ERROR_INTERNAL_SERVER_ERROR, 11);
    CHECK_INT_EQ(COINORDER_ERROR_SIGNATURE_INVALID, 12);
    CHECK_INT_EQ(COINORDER_ERROR_SERVICE_UNAVAILABLE, 13);
    CHECK_INT_EQ(COINORDER_ERROR_EVENT_NOT_FOUND, 14);
}

static void test_service_open_failures(void) {
    coinorder_error *err;
    coinorder_service *svc = SERVICE_SENTINEL;
    char path[4200];
    new_db_path(path, sizeof path);

    EXPECT_NULL_ARG(coinorder_service_open(NULL, SANDBOX, &svc, &err), "target");
    CHECK(svc == SERVICE_SENTINEL);
    EXPECT_NULL_ARG(coinorder_service_open(path, SANDBOX, NULL, &err), "service_out");
    EXPECT_BAD_UTF8(coinorder_service_open(BAD_UTF8, SANDBOX, &svc, &err), "target");
    CHECK(svc == SERVICE_SENTINEL);
    EXPECT_BAD_UTF8(coinorder_service_open(path, BAD_UTF8, &svc, &err), "config_json");
    CHECK(svc == SERVICE_SENTINEL);
    EXPECT_BAD_JSON(coinorder_service_open(path, "{\"rate_limit\":", &svc, &err), "config_json");
    CHECK(svc == SERVICE_SENTINEL);
    EXPECT_BAD_JSON(coinorder_service_open(path, "", &svc, &err), "config_json");

    /* Bad options: COINORDER_ERROR, PARAMETERS_MISSING, naming config.<option>. */
    EXPECT_ERROR(coinorder_service_open(path, "{\"bogus_option\":1}", &svc, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "config.bogus_option: unknown option");
    CHECK(svc == SERVICE_SENTINEL);
    EXPECT_ERROR(coinorder_service_open(path, "{\"rate_limit\":-1}", &svc, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "config.rate_limit: must be a whole number from 0 to 4294967295");
    EXPECT_ERROR_HAS(coinorder_service_open(path, "{\"invoice_ttl\":\"900\"}", &svc, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "config.invoice_ttl: ");
    EXPECT_ERROR(coinorder_service_open(path, "{\"environment\":\"moon\"}", &svc, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "config.environment: must be \"sandbox\" or \"live\"");
    EXPECT_ERROR(coinorder_service_open(path, "{\"synchronous\":\"sometimes\"}", &svc, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "config.synchronous: must be \"full\" or \"normal\"");
    EXPECT_JSON_SHAPE(coinorder_service_open(path, "[1,2]", &svc, &err), "config_json: must be a JSON object");
    CHECK(svc == SERVICE_SENTINEL);
    /* Values of the right type that the service cannot use, and an option sent twice. */
    EXPECT_ERROR(coinorder_service_open(path, "{\"payment_page_url\":\"not a url\"}", &svc, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "config.payment_page_url: must be an absolute http:// or https:// URL");
    EXPECT_ERROR_HAS(coinorder_service_open(path, "{\"pay_currencies\":[\"DOGE\"]}", &svc, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                     "config.pay_currencies: unknown coin \"DOGE\"");
    EXPECT_ERROR(coinorder_service_open(path, "{\"environment\":\"live\",\"environment\":\"sandbox\"}", &svc, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "config.environment: sent more than once");
    CHECK(svc == SERVICE_SENTINEL);
    /* A target that is not a file: each connection would see an empty database of its own. */
    EXPECT_ERROR_HAS(coinorder_service_open("", SANDBOX, &svc, &err), "PARAMETERS_MISSING",
                     COINORDER_ERROR_PARAMETERS_MISSING, 400, "target: must be a SQLite file path");
    EXPECT_ERROR_HAS(coinorder_service_open(":memory:", SANDBOX, &svc, &err), "PARAMETERS_MISSING",
                     COINORDER_ERROR_PARAMETERS_MISSING, 400, "target: must be a SQLite file path");
    CHECK(svc == SERVICE_SENTINEL);

    /* err == NULL: the status still comes back. */
    CHECK_INT_EQ(coinorder_service_open(NULL, SANDBOX, &svc, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_service_open(path, "{\"bogus_option\":1}", &svc, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_service_open(path, "{", &svc, NULL), COINORDER_INVALID_JSON);
    CHECK_INT_EQ(coinorder_service_open(BAD_UTF8, NULL, &svc, NULL), COINORDER_INVALID_UTF8);
    CHECK(svc == SERVICE_SENTINEL);
}

static void test_service_open_defaults_and_close(void) {
    coinorder_error *err;
    coinorder_service *svc = NULL;
    char path[4200];
    new_db_path(path, sizeof path);
    /* NULL config: the sandbox defaults. */
    EXPECT_OK(coinorder_service_open(path, NULL, &svc, &err));
    REQUIRE(svc != NULL);
    char *key = NULL;
    EXPECT_OK(coinorder_key_create(svc, "{\"user_id\":7}", &key, &err));
    CHECK_CONTAINS(key, "\"environment\":\"sandbox\"");
    CHECK_CONTAINS(key, "\"key\":\"test_");
    coinorder_string_free(key);
    coinorder_service_close(svc);

    /* An empty object is the defaults too; a null option is skipped. */
    svc = NULL;
    EXPECT_OK(coinorder_service_open(path, "{\"invoice_ttl\":null,\"rate_limit\":0}", &svc, &err));
    coinorder_service_close(svc);
    svc = NULL;
    EXPECT_OK(coinorder_service_open(path, "{}", &svc, &err));
    coinorder_service_close(svc);
}

static void test_close_and_reopen_reads_order_back(void) {
    coinorder_error *err;
    struct fixture fx;
    char order_id[128];
    REQUIRE(fixture_open(&fx, SANDBOX));
    int created = CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":19.99,\"merchant_order_id\":\"cart-7\",\"title\":\"T\"}",
                               order_id);
    fixture_close(&fx);
    REQUIRE(created);

    /* The same file, opened again: the key and the order are still there. */
    coinorder_service *svc = NULL;
    EXPECT_OK(coinorder_service_open(fx.path, SANDBOX, &svc, &err));
    REQUIRE(svc != NULL);
    char *out = NULL;
    EXPECT_OK(coinorder_order_get(svc, fx.key, order_id, &out, &err));
    char got[128] = "";
    json_str(out, "order_id", got, sizeof got);
    CHECK_STR_EQ(got, order_id);
    CHECK_CONTAINS(out, "\"merchant_order_id\":\"cart-7\"");
    CHECK_CONTAINS(out, "\"title\":\"T\"");
    CHECK_CONTAINS(out, "\"price_amount\":19.99");
    CHECK_CONTAINS(out, "\"price_currency\":\"USD\"");
    CHECK_CONTAINS(out, "\"status\":200");
    coinorder_string_free(out);

    /* Replaying the create after the reopen still finds the same order. */
    out = NULL;
    EXPECT_OK(coinorder_order_create(
        svc, fx.key, "{\"currency\":\"USD\",\"amount\":19.99,\"merchant_order_id\":\"cart-7\",\"title\":\"T\"}", &out,
        &err));
    got[0] = '\0';
    json_str(out, "order_id", got, sizeof got);
    CHECK_STR_EQ(got, order_id);
    coinorder_string_free(out);
    coinorder_service_close(svc);
}

/* The child's side of test_a_forked_child_gets_an_error_from_the_parents_service: 0 when
 * the inherited service refuses calls, closing it lets go, and a service of its own works. */
static int forked_child_checks(struct fixture *fx) {
    coinorder_error *child_err = NULL;
    char *out = NULL;
    alarm(60); /* a child stuck on a lock its parent's thread held dies, and says so */
    if (coinorder_key_list(fx->svc, &out, &child_err) != COINORDER_ERROR || out != NULL) {
        return 10;
    }
    int named = strcmp(coinorder_error_code(child_err), "PARAMETERS_MISSING") == 0 &&
                strstr(coinorder_error_message(child_err), "this process is a fork of it") != NULL &&
                strncmp(coinorder_error_message(child_err), "service: was opened in process ", 31) == 0;
    coinorder_error_free(child_err);
    if (!named) {
        return 11;
    }
    coinorder_workers_stop(fx->svc);
    coinorder_service_close(fx->svc);
    coinorder_service *own = NULL;
    if (coinorder_service_open(fx->path, SANDBOX, &own, &child_err) != COINORDER_OK) {
        return 12;
    }
    int created = coinorder_order_create(own, fx->key, "{\"currency\":\"USD\",\"amount\":3}", &out, &child_err);
    coinorder_string_free(out);
    coinorder_service_close(own);
    return created == COINORDER_OK ? 0 : 13;
}

static void test_a_forked_child_gets_an_error_from_the_parents_service(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    EXPECT_OK(coinorder_workers_start(fx.svc, 50, 10, &err));
    pid_t child = fork();
    if (child == 0) {
        /* The child ends by exec, with its result as the exit status: the parent's worker
         * threads do not exist in it, so under valgrind the memory only they pointed to
         * would read as lost at its exit, and an exec'd image is not leak-checked. */
        char exit_with[32];
        snprintf(exit_with, sizeof exit_with, "exit %d", forked_child_checks(&fx));
        execl("/bin/sh", "sh", "-c", exit_with, (char *)NULL);
        _exit(99);
    }
    REQUIRE(child > 0);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    /* The parent's service is untouched. */
    char *out = NULL;
    EXPECT_OK(coinorder_key_list(fx.svc, &out, &err));
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_key_create(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_key_create(NULL, "{\"user_id\":1}", &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_create(fx.svc, NULL, &out, &err), "request_json");
    EXPECT_NULL_ARG(coinorder_key_create(fx.svc, "{\"user_id\":1}", NULL, &err), "key_json_out");
    EXPECT_BAD_UTF8(coinorder_key_create(fx.svc, BAD_UTF8, &out, &err), "request_json");
    EXPECT_BAD_JSON(coinorder_key_create(fx.svc, "{user_id:1}", &out, &err), "request_json");
    EXPECT_JSON_SHAPE(coinorder_key_create(fx.svc, "[1]", &out, &err), "request_json: must be a JSON object");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "user_id: required; an integer from 0 to 9223372036854775807");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":null}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "user_id: required; an integer from 0 to 9223372036854775807");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":\"1\"}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "user_id: must be an integer from 0 to 9223372036854775807");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":9223372036854775808}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "user_id: must be an integer from 0 to 9223372036854775807");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":-1}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "user_id: must be an integer from 0 to 9223372036854775807");
    /* A member sent twice is refused naming it, never its last value taken: a key for
     * whichever user_id came last would belong to another merchant. */
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":1,\"user_id\":2}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "user_id: sent more than once");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":1,\"environment\":\"sandbox\",\"environment\":\"live\"}",
                                      &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "environment: sent more than once");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":1,\"webhook_url\":5}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "webhook_url: must be a string or null");
    EXPECT_ERROR_HAS(coinorder_key_create(fx.svc, "{\"user_id\":1,\"webhook_url\":\"not a url\"}", &out, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "webhook_url: ");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":1,\"environment\":\"moon\"}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "environment: must be sandbox or live, got \"moon\"");
    EXPECT_ERROR(coinorder_key_create(fx.svc, "{\"user_id\":1,\"environment\":3}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "environment: must be sandbox or live");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_key_create(fx.svc, "{}", &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_key_create(NULL, "{}", &out, NULL), COINORDER_NULL_ARGUMENT);
    CHECK(out == SENTINEL);

    /* A live key from a sandbox service, with a webhook URL. */
    out = NULL;
    EXPECT_OK(coinorder_key_create(
        fx.svc, "{\"user_id\":2,\"environment\":\"live\",\"webhook_url\":\"https://example.com/hook\"}", &out, &err));
    CHECK_CONTAINS(out, "\"environment\":\"live\"");
    CHECK_CONTAINS(out, "\"key\":\"prod_");
    CHECK_CONTAINS(out, "\"webhook_secret\":\"whsec_");
    CHECK_CONTAINS(out, "\"webhook_url\":\"https://example.com/hook\"");
    CHECK_CONTAINS(out, "\"status\":\"active\"");
    CHECK_CONTAINS(out, "\"user_id\":2");
    CHECK_CONTAINS(out, "\"id\":\"key_");
    coinorder_string_free(out);

    /* The fixture's key is a sandbox one. */
    CHECK(strncmp(fx.key, "test_", 5) == 0);
    CHECK(strncmp(fx.key_id, "key_", 4) == 0);
    CHECK(strncmp(fx.secret, "whsec_", 6) == 0);
    fixture_close(&fx);
}

static void test_key_list(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_key_list(NULL, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_list(fx.svc, NULL, &err), "keys_json_out");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_key_list(NULL, &out, NULL), COINORDER_NULL_ARGUMENT);

    char *second = NULL;
    char second_id[64] = "";
    EXPECT_OK(coinorder_key_create(fx.svc, "{\"user_id\":9,\"environment\":\"live\"}", &second, &err));
    json_str(second, "id", second_id, sizeof second_id);
    coinorder_string_free(second);

    out = NULL;
    EXPECT_OK(coinorder_key_list(fx.svc, &out, &err));
    REQUIRE(out != NULL);
    CHECK(out[0] == '[');
    CHECK_CONTAINS(out, fx.key_id);
    CHECK_CONTAINS(out, second_id);
    CHECK_INT_EQ(count_of(out, "\"id\":\"key_"), 2);
    /* Never the plain key or the secret. */
    CHECK(strstr(out, fx.key) == NULL);
    CHECK(strstr(out, fx.secret) == NULL);
    CHECK(strstr(out, "\"key\":") == NULL);
    CHECK(strstr(out, "webhook_secret") == NULL);
    CHECK_CONTAINS(out, "\"environment\":\"sandbox\"");
    CHECK_CONTAINS(out, "\"environment\":\"live\"");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_key_set_active(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;
    const char *body = "{\"currency\":\"USD\",\"amount\":5}";

    EXPECT_NULL_ARG(coinorder_key_set_active(NULL, fx.key_id, false, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_set_active(fx.svc, NULL, false, &out, &err), "key_id");
    EXPECT_NULL_ARG(coinorder_key_set_active(fx.svc, fx.key_id, false, NULL, &err), "key_json_out");
    EXPECT_BAD_UTF8(coinorder_key_set_active(fx.svc, BAD_UTF8, false, &out, &err), "key_id");
    EXPECT_ERROR(coinorder_key_set_active(fx.svc, "key_doesnotexist0000", false, &out, &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    EXPECT_ERROR(coinorder_key_set_active(fx.svc, "key_doesnotexist0000", true, &out, &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_key_set_active(fx.svc, "key_nope", false, &out, NULL), COINORDER_ERROR);

    /* Deactivated: its requests fail with AUTHENTICATION_FAILED (400). */
    out = NULL;
    EXPECT_OK(coinorder_key_set_active(fx.svc, fx.key_id, false, &out, &err));
    CHECK_CONTAINS(out, "\"status\":\"inactive\"");
    CHECK_CONTAINS(out, fx.key_id);
    CHECK(strstr(out ? out : "", fx.key) == NULL);
    coinorder_string_free(out);

    char *order = SENTINEL;
    EXPECT_ERROR(coinorder_order_create(fx.svc, fx.key, body, &order, &err), "AUTHENTICATION_FAILED",
                 COINORDER_ERROR_AUTHENTICATION_FAILED, 400, "API key is inactive");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, NULL, &order, &err), "AUTHENTICATION_FAILED",
                 COINORDER_ERROR_AUTHENTICATION_FAILED, 400, "API key is inactive");
    CHECK(order == SENTINEL);

    /* Active again: it works. */
    out = NULL;
    EXPECT_OK(coinorder_key_set_active(fx.svc, fx.key_id, true, &out, &err));
    CHECK_CONTAINS(out, "\"status\":\"active\"");
    coinorder_string_free(out);
    char order_id[128];
    CHECK(CREATE_ORDER(&fx, body, order_id));
    fixture_close(&fx);
}

static void test_key_set_webhook_url(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;
    const char *url = "https://example.com/hooks/coinorder";

    EXPECT_NULL_ARG(coinorder_key_set_webhook_url(NULL, fx.key_id, url, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_set_webhook_url(fx.svc, NULL, url, &out, &err), "key_id");
    EXPECT_NULL_ARG(coinorder_key_set_webhook_url(fx.svc, fx.key_id, url, NULL, &err), "key_json_out");
    EXPECT_BAD_UTF8(coinorder_key_set_webhook_url(fx.svc, BAD_UTF8, url, &out, &err), "key_id");
    EXPECT_BAD_UTF8(coinorder_key_set_webhook_url(fx.svc, fx.key_id, BAD_UTF8, &out, &err), "webhook_url");
    EXPECT_ERROR_HAS(coinorder_key_set_webhook_url(fx.svc, fx.key_id, "ftp://example.com/x", &out, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "webhook_url: ");
    EXPECT_ERROR_HAS(coinorder_key_set_webhook_url(fx.svc, fx.key_id, "not a url", &out, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "webhook_url: ");
    EXPECT_ERROR(coinorder_key_set_webhook_url(fx.svc, "key_doesnotexist0000", url, &out, &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    EXPECT_ERROR(coinorder_key_set_webhook_url(fx.svc, "key_doesnotexist0000", NULL, &out, &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    CHECK(out == SENTINEL);

    out = NULL;
    EXPECT_OK(coinorder_key_set_webhook_url(fx.svc, fx.key_id, url, &out, &err));
    CHECK_CONTAINS(out, "\"webhook_url\":\"https://example.com/hooks/coinorder\"");
    coinorder_string_free(out);

    char *list = NULL;
    EXPECT_OK(coinorder_key_list(fx.svc, &list, &err));
    CHECK_CONTAINS(list, "\"webhook_url\":\"https://example.com/hooks/coinorder\"");
    coinorder_string_free(list);

    /* NULL clears it. */
    out = NULL;
    EXPECT_OK(coinorder_key_set_webhook_url(fx.svc, fx.key_id, NULL, &out, &err));
    CHECK_CONTAINS(out, "\"webhook_url\":null");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_key_get_and_display_name(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_key_get(NULL, fx.key_id, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_get(fx.svc, NULL, &out, &err), "key_id");
    EXPECT_NULL_ARG(coinorder_key_get(fx.svc, fx.key_id, NULL, &err), "key_json_out");
    EXPECT_BAD_UTF8(coinorder_key_get(fx.svc, BAD_UTF8, &out, &err), "key_id");
    EXPECT_ERROR(coinorder_key_get(fx.svc, "key_doesnotexist0000", &out, &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    EXPECT_NULL_ARG(coinorder_key_set_display_name(NULL, fx.key_id, "Shop", &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_set_display_name(fx.svc, NULL, "Shop", &out, &err), "key_id");
    EXPECT_NULL_ARG(coinorder_key_set_display_name(fx.svc, fx.key_id, "Shop", NULL, &err), "key_json_out");
    EXPECT_BAD_UTF8(coinorder_key_set_display_name(fx.svc, BAD_UTF8, "Shop", &out, &err), "key_id");
    EXPECT_BAD_UTF8(coinorder_key_set_display_name(fx.svc, fx.key_id, BAD_UTF8, &out, &err), "display_name");
    EXPECT_ERROR(coinorder_key_set_display_name(fx.svc, "key_doesnotexist0000", "Shop", &out, &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    EXPECT_ERROR(coinorder_key_set_display_name(fx.svc, fx.key_id, "  ", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "display_name: must not be empty (clear it instead)");
    char long_name[82];
    memset(long_name, 'n', 81);
    long_name[81] = '\0';
    EXPECT_ERROR(coinorder_key_set_display_name(fx.svc, fx.key_id, long_name, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "display_name: at most 80 characters");
    CHECK(out == SENTINEL);

    out = NULL;
    EXPECT_OK(coinorder_key_get(fx.svc, fx.key_id, &out, &err));
    CHECK_CONTAINS(out, fx.key_id);
    CHECK_CONTAINS(out, "\"display_name\":null");
    CHECK(strstr(out, fx.key) == NULL && strstr(out, "whsec_") == NULL);
    coinorder_string_free(out);

    out = NULL;
    EXPECT_OK(coinorder_key_set_display_name(fx.svc, fx.key_id, "Ada's Mugs", &out, &err));
    CHECK_CONTAINS(out, "\"display_name\":\"Ada's Mugs\"");
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_key_get(fx.svc, fx.key_id, &out, &err));
    CHECK_CONTAINS(out, "\"display_name\":\"Ada's Mugs\"");
    coinorder_string_free(out);

    /* NULL clears it. */
    out = NULL;
    EXPECT_OK(coinorder_key_set_display_name(fx.svc, fx.key_id, NULL, &out, &err));
    CHECK_CONTAINS(out, "\"display_name\":null");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_key_rotate_webhook_secret(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_key_rotate_webhook_secret(NULL, fx.key_id, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_rotate_webhook_secret(fx.svc, NULL, &out, &err), "key_id");
    EXPECT_NULL_ARG(coinorder_key_rotate_webhook_secret(fx.svc, fx.key_id, NULL, &err), "secret_out");
    EXPECT_BAD_UTF8(coinorder_key_rotate_webhook_secret(fx.svc, BAD_UTF8, &out, &err), "key_id");
    EXPECT_ERROR(coinorder_key_rotate_webhook_secret(fx.svc, "key_doesnotexist0000", &out, &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    CHECK_INT_EQ(coinorder_key_rotate_webhook_secret(fx.svc, "key_doesnotexist0000", &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);

    /* A new secret each time, never the one the key was created with. */
    char *first = NULL;
    EXPECT_OK(coinorder_key_rotate_webhook_secret(fx.svc, fx.key_id, &first, &err));
    REQUIRE(first != NULL);
    CHECK(strncmp(first, "whsec_", 6) == 0);
    CHECK(strcmp(first, fx.secret) != 0);
    char *second = NULL;
    EXPECT_OK(coinorder_key_rotate_webhook_secret(fx.svc, fx.key_id, &second, &err));
    REQUIRE(second != NULL);
    CHECK(strncmp(second, "whsec_", 6) == 0);
    CHECK(strcmp(second, first) != 0);

    /* The key list never shows it. */
    char *list = NULL;
    EXPECT_OK(coinorder_key_list(fx.svc, &list, &err));
    CHECK(list != NULL && strstr(list, second) == NULL && strstr(list, "whsec_") == NULL);
    coinorder_string_free(list);

    /* Keeping the old secret signing for a while: the same checks, and a bound. */
    EXPECT_NULL_ARG(coinorder_key_rotate_webhook_secret_keeping_old(NULL, fx.key_id, 60, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_rotate_webhook_secret_keeping_old(fx.svc, NULL, 60, &out, &err), "key_id");
    EXPECT_NULL_ARG(coinorder_key_rotate_webhook_secret_keeping_old(fx.svc, fx.key_id, 60, NULL, &err), "secret_out");
    EXPECT_ERROR(coinorder_key_rotate_webhook_secret_keeping_old(fx.svc, fx.key_id, 2592001, &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "keep_old_for: at most 2592000 seconds (30 days)");
    EXPECT_ERROR(coinorder_key_rotate_webhook_secret_keeping_old(fx.svc, "key_doesnotexist0000", 60, &out, &err),
                 "KEY_NOT_FOUND", COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    CHECK(out == SENTINEL);
    char *third = NULL;
    EXPECT_OK(coinorder_key_rotate_webhook_secret_keeping_old(fx.svc, fx.key_id, 2592000, &third, &err));
    REQUIRE(third != NULL);
    CHECK(strncmp(third, "whsec_", 6) == 0 && strcmp(third, second) != 0);
    coinorder_string_free(first);
    coinorder_string_free(second);
    coinorder_string_free(third);
    fixture_close(&fx);
}

static void test_key_delete(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));

    EXPECT_NULL_ARG(coinorder_key_delete(NULL, fx.key_id, &err), "service");
    EXPECT_NULL_ARG(coinorder_key_delete(fx.svc, NULL, &err), "key_id");
    EXPECT_BAD_UTF8(coinorder_key_delete(fx.svc, BAD_UTF8, &err), "key_id");
    EXPECT_ERROR(coinorder_key_delete(fx.svc, "key_doesnotexist0000", &err), "KEY_NOT_FOUND",
                 COINORDER_ERROR_KEY_NOT_FOUND, 400, "api key \"key_doesnotexist0000\" not found");
    CHECK_INT_EQ(coinorder_key_delete(fx.svc, "key_doesnotexist0000", NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_key_delete(NULL, NULL, NULL), COINORDER_NULL_ARGUMENT);

    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":3}", order_id));

    EXPECT_OK(coinorder_key_delete(fx.svc, fx.key_id, &err));

    /* A deleted key: Unauthorized (401), for every merchant call. */
    char *out = SENTINEL;
    EXPECT_ERROR(coinorder_order_create(fx.svc, fx.key, "{\"currency\":\"USD\",\"amount\":3}", &out, &err),
                 "Unauthorized", COINORDER_ERROR_UNAUTHORIZED, 401, "API credentials are not valid");
    EXPECT_ERROR(coinorder_order_get(fx.svc, fx.key, order_id, &out, &err), "Unauthorized",
                 COINORDER_ERROR_UNAUTHORIZED, 401, "API credentials are not valid");
    CHECK(out == SENTINEL);

    /* Gone from the list; deleting again is KEY_NOT_FOUND. */
    char *list = NULL;
    EXPECT_OK(coinorder_key_list(fx.svc, &list, &err));
    CHECK(list != NULL && strstr(list, fx.key_id) == NULL);
    coinorder_string_free(list);
    EXPECT_ERROR_HAS(coinorder_key_delete(fx.svc, fx.key_id, &err), "KEY_NOT_FOUND", COINORDER_ERROR_KEY_NOT_FOUND,
                     400, fx.key_id);
    fixture_close(&fx);
}

static void test_order_create(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    const char *body = "{\"currency\":\"USD\",\"amount\":19.99,\"merchant_order_id\":\"cart-7\",\"title\":\"T\"}";
    char *out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_order_create(NULL, fx.key, body, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_order_create(fx.svc, NULL, body, &out, &err), "api_key");
    EXPECT_NULL_ARG(coinorder_order_create(fx.svc, fx.key, NULL, &out, &err), "request_json");
    EXPECT_NULL_ARG(coinorder_order_create(fx.svc, fx.key, body, NULL, &err), "order_json_out");
    EXPECT_BAD_UTF8(coinorder_order_create(fx.svc, BAD_UTF8, body, &out, &err), "api_key");
    EXPECT_BAD_UTF8(coinorder_order_create(fx.svc, fx.key, BAD_UTF8, &out, &err), "request_json");
    EXPECT_BAD_JSON(coinorder_order_create(fx.svc, fx.key, "{\"currency\":\"USD\",", &out, &err), "request_json");
    EXPECT_BAD_JSON(coinorder_order_create(fx.svc, fx.key, "", &out, &err), "request_json");
    CHECK(out == SENTINEL);
    /* A NULL out pointer changes nothing: no order was created by that call. */
    char *list = NULL;
    EXPECT_OK(coinorder_order_list(fx.svc, fx.key, NULL, &list, &err));
    CHECK_CONTAINS(list, "\"orders\":[]");
    coinorder_string_free(list);

    /* Valid JSON of the wrong shape is the service's refusal. */
    EXPECT_JSON_SHAPE(coinorder_order_create(fx.svc, fx.key, "[1]", &out, &err), "request_json: must be a JSON object");
    EXPECT_ERROR(coinorder_order_create(fx.svc, fx.key, "{\"amount\":1}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "currency: is required");
    EXPECT_ERROR(coinorder_order_create(fx.svc, fx.key, "{\"currency\":\"USD\"}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "amount: is required");
    EXPECT_ERROR(coinorder_order_create(fx.svc, fx.key, "{\"currency\":\"USD\",\"amount\":0}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "amount: must be greater than 0");
    EXPECT_ERROR_HAS(coinorder_order_create(fx.svc, fx.key, "{\"currency\":\"USD\",\"amount\":-1}", &out, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "amount");
    EXPECT_ERROR(coinorder_order_create(fx.svc, fx.key, "{\"currency\":\"USD\",\"amount\":true}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "amount: must be a number");
    EXPECT_ERROR_HAS(coinorder_order_create(fx.svc, fx.key, "{\"currency\":\"XXQ\",\"amount\":1}", &out, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "currency");

    /* Title: 200 characters fit, 201 are API_LIMIT_EXCEEDED. */
    char title[202];
    char request[400];
    memset(title, 'a', 201);
    title[201] = '\0';
    snprintf(request, sizeof request, "{\"currency\":\"USD\",\"amount\":1,\"title\":\"%s\"}", title);
    EXPECT_ERROR(coinorder_order_create(fx.svc, fx.key, request, &out, &err), "API_LIMIT_EXCEEDED",
                 COINORDER_ERROR_API_LIMIT_EXCEEDED, 400, "title: at most 200 characters");
    CHECK(out == SENTINEL);
    title[200] = '\0';
    snprintf(request, sizeof request, "{\"currency\":\"USD\",\"amount\":1,\"title\":\"%s\"}", title);
    char long_title_id[128];
    CHECK(CREATE_ORDER(&fx, request, long_title_id));

    /* Bad keys. */
    EXPECT_ERROR(coinorder_order_create(fx.svc, "test_doesnotexist", body, &out, &err), "Unauthorized",
                 COINORDER_ERROR_UNAUTHORIZED, 401, "API credentials are not valid");
    EXPECT_ERROR(coinorder_order_create(fx.svc, "", body, &out, &err), "AUTHENTICATION_FAILED",
                 COINORDER_ERROR_AUTHENTICATION_FAILED, 400, "Authentication token is not set or expired");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_order_create(fx.svc, "test_doesnotexist", body, &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_order_create(fx.svc, fx.key, "{", &out, NULL), COINORDER_INVALID_JSON);
    CHECK(out == SENTINEL);

    /* Success: the 201 body. */
    out = NULL;
    EXPECT_OK(coinorder_order_create(fx.svc, fx.key, body, &out, &err));
    char order_id[128] = "";
    CHECK(json_str(out, "order_id", order_id, sizeof order_id));
    CHECK_CONTAINS(out, "\"status\":201");
    CHECK_CONTAINS(out, "\"message\":\"Order created successfully\"");
    CHECK_CONTAINS(out, "\"data\":{");
    CHECK_CONTAINS(out, "\"payment_url\":\"");
    CHECK_CONTAINS(out, "\"merchant_order_id\":\"cart-7\"");
    CHECK_CONTAINS(out, "\"title\":\"T\"");
    CHECK_CONTAINS(out, "\"amount\":19.99");
    CHECK_CONTAINS(out, "\"currency\":\"USD\"");
    CHECK_CONTAINS(out, "\"status\":\"NEW\"");
    CHECK_CONTAINS(out, "\"user_id\":1");
    coinorder_string_free(out);

    /* The identical request again: the same order. */
    out = NULL;
    EXPECT_OK(coinorder_order_create(fx.svc, fx.key, body, &out, &err));
    char again[128] = "";
    json_str(out, "order_id", again, sizeof again);
    CHECK_STR_EQ(again, order_id);
    coinorder_string_free(out);

    /* The same merchant_order_id with a different body: ORDER_DUPLICATE. */
    out = SENTINEL;
    EXPECT_ERROR(coinorder_order_create(
                     fx.svc, fx.key,
                     "{\"currency\":\"USD\",\"amount\":20.00,\"merchant_order_id\":\"cart-7\",\"title\":\"T\"}", &out,
                     &err),
                 "ORDER_DUPLICATE", COINORDER_ERROR_ORDER_DUPLICATE, 400,
                 "merchant_order_id: \"cart-7\" is already used by a different order");
    EXPECT_ERROR_HAS(coinorder_order_create(fx.svc, fx.key,
                                            "{\"currency\":\"USD\",\"amount\":19.99,\"merchant_order_id\":\"cart-7\"}",
                                            &out, &err),
                     "ORDER_DUPLICATE", COINORDER_ERROR_ORDER_DUPLICATE, 400, "merchant_order_id");
    CHECK(out == SENTINEL);

    /* Exactly the two orders exist. */
    list = NULL;
    EXPECT_OK(coinorder_order_list(fx.svc, fx.key, NULL, &list, &err));
    CHECK_INT_EQ(count_of(list, "\"order_id\":"), 2);
    coinorder_string_free(list);

    /* A leading byte order mark is ignored, as in the HTTP body. */
    char *bom = NULL;
    EXPECT_OK(coinorder_order_create(fx.svc, fx.key, "\xEF\xBB\xBF{\"currency\":\"USD\",\"amount\":2}", &bom, &err));
    CHECK_CONTAINS(bom, "\"status\":201");
    coinorder_string_free(bom);
    fixture_close(&fx);
}

static void test_order_get(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"EUR\",\"amount\":\"12.50\",\"merchant_order_id\":\"g-1\"}", order_id));
    char *out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_order_get(NULL, fx.key, order_id, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_order_get(fx.svc, NULL, order_id, &out, &err), "api_key");
    EXPECT_NULL_ARG(coinorder_order_get(fx.svc, fx.key, NULL, &out, &err), "order_id");
    EXPECT_NULL_ARG(coinorder_order_get(fx.svc, fx.key, order_id, NULL, &err), "order_json_out");
    EXPECT_BAD_UTF8(coinorder_order_get(fx.svc, BAD_UTF8, order_id, &out, &err), "api_key");
    EXPECT_BAD_UTF8(coinorder_order_get(fx.svc, fx.key, BAD_UTF8, &out, &err), "order_id");
    EXPECT_ERROR(coinorder_order_get(fx.svc, fx.key, "00000000-0000-0000-0000-000000000000", &out, &err),
                 "ORDER_NOT_VALID", COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    EXPECT_ERROR(coinorder_order_get(fx.svc, fx.key, "no-such-order", &out, &err), "ORDER_NOT_VALID",
                 COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    EXPECT_ERROR(coinorder_order_get(fx.svc, "prod_doesnotexist", order_id, &out, &err), "Unauthorized",
                 COINORDER_ERROR_UNAUTHORIZED, 401, "API credentials are not valid");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_order_get(fx.svc, fx.key, "no-such-order", &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);

    /* Another merchant's order is ORDER_NOT_VALID too. */
    char *other = NULL;
    char other_key[128] = "";
    EXPECT_OK(coinorder_key_create(fx.svc, "{\"user_id\":2}", &other, &err));
    json_str(other, "key", other_key, sizeof other_key);
    coinorder_string_free(other);
    EXPECT_ERROR(coinorder_order_get(fx.svc, other_key, order_id, &out, &err), "ORDER_NOT_VALID",
                 COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    CHECK(out == SENTINEL);

    out = NULL;
    EXPECT_OK(coinorder_order_get(fx.svc, fx.key, order_id, &out, &err));
    CHECK_CONTAINS(out, "\"status\":200");
    CHECK_CONTAINS(out, "\"order\":{");
    CHECK_CONTAINS(out, "\"invoice\":{");
    CHECK_CONTAINS(out, "\"merchant_order_id\":\"g-1\"");
    CHECK_CONTAINS(out, "\"price_currency\":\"EUR\"");
    CHECK_CONTAINS(out, "\"price_amount\":12.5");
    CHECK_CONTAINS(out, "\"invoice_id\":\"");
    CHECK_INT_EQ(count_of(out, order_id), 2);
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_order_list(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char ids[3][128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":1,\"merchant_order_id\":\"l-1\"}", ids[0]));
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":2,\"merchant_order_id\":\"l-2\"}", ids[1]));
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":3,\"merchant_order_id\":\"l-3\"}", ids[2]));
    char *out = NULL;
    EXPECT_OK(coinorder_order_cancel(fx.svc, fx.key, ids[1], &out, &err));
    coinorder_string_free(out);
    out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_order_list(NULL, fx.key, NULL, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_order_list(fx.svc, NULL, NULL, &out, &err), "api_key");
    EXPECT_NULL_ARG(coinorder_order_list(fx.svc, fx.key, NULL, NULL, &err), "orders_json_out");
    EXPECT_BAD_UTF8(coinorder_order_list(fx.svc, BAD_UTF8, NULL, &out, &err), "api_key");
    EXPECT_BAD_UTF8(coinorder_order_list(fx.svc, fx.key, BAD_UTF8, &out, &err), "query_json");
    EXPECT_BAD_JSON(coinorder_order_list(fx.svc, fx.key, "{\"limit\":", &out, &err), "query_json");
    EXPECT_JSON_SHAPE(coinorder_order_list(fx.svc, fx.key, "[]", &out, &err), "query_json: must be a JSON object");
    EXPECT_JSON_SHAPE(coinorder_order_list(fx.svc, fx.key, "5", &out, &err), "query_json: must be a JSON object");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, "{\"limit\":51}", &out, &err), "API_LIMIT_EXCEEDED",
                 COINORDER_ERROR_API_LIMIT_EXCEEDED, 400, "limit: at most 50");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, "{\"status\":\"NEW\",\"limit\":51}", &out, &err),
                 "API_LIMIT_EXCEEDED", COINORDER_ERROR_API_LIMIT_EXCEEDED, 400, "limit: at most 50");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, "{\"limit\":1,\"limit\":50}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "limit: sent more than once");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, "{\"limit\":0}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "limit: must be an integer from 1 to 50");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, "{\"limit\":2.5}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "limit: must be an integer from 1 to 50");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, "{\"limit\":true}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "limit: must be a string or a number");
    EXPECT_ERROR_HAS(coinorder_order_list(fx.svc, fx.key, "{\"status\":\"BOGUS\"}", &out, &err),
                     "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "status: must be one of ");
    EXPECT_ERROR(coinorder_order_list(fx.svc, fx.key, "{\"offset\":-1}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "offset: must be an integer >= 0");
    EXPECT_ERROR(coinorder_order_list(fx.svc, "test_doesnotexist", NULL, &out, &err), "Unauthorized",
                 COINORDER_ERROR_UNAUTHORIZED, 401, "API credentials are not valid");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_order_list(fx.svc, fx.key, "{\"limit\":51}", &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);

    /* status NEW, limit 5: the two NEW orders, newest first. */
    out = NULL;
    EXPECT_OK(coinorder_order_list(fx.svc, fx.key, "{\"status\":\"NEW\",\"limit\":5}", &out, &err));
    CHECK_CONTAINS(out, "\"status\":200");
    CHECK_CONTAINS(out, "\"limit\":5");
    CHECK_CONTAINS(out, "\"offset\":0");
    CHECK_CONTAINS(out, "\"has_more\":false");
    CHECK_INT_EQ(count_of(out, "\"order_id\":"), 2);
    CHECK_CONTAINS(out, ids[0]);
    CHECK_CONTAINS(out, ids[2]);
    CHECK(out != NULL && strstr(out, ids[1]) == NULL);
    CHECK(out != NULL && strstr(out, "CANCELLED") == NULL);
    /* Newest first: created_at never grows down the page (ties, in one millisecond, may come either way). */
    {
        char first[64] = "", second[64] = "";
        const char *p = out ? strstr(out, "\"created_at\":") : NULL;
        json_str(p, "created_at", first, sizeof first);
        json_str(p ? p + 1 : NULL, "created_at", second, sizeof second);
        CHECK_MSG(first[0] && second[0] && strcmp(first, second) >= 0, "not newest first: %s then %s", first,
                  second);
    }
    coinorder_string_free(out);

    /* NULL query: the defaults (limit 10), every order. */
    out = NULL;
    EXPECT_OK(coinorder_order_list(fx.svc, fx.key, NULL, &out, &err));
    CHECK_CONTAINS(out, "\"limit\":10");
    CHECK_CONTAINS(out, "\"offset\":0");
    CHECK_INT_EQ(count_of(out, "\"order_id\":"), 3);
    CHECK_CONTAINS(out, "\"status\":\"CANCELLED\"");
    coinorder_string_free(out);

    /* Paging with offset, one by one: each order once; null members are skipped; numbers as strings work. */
    char paged[3][128];
    for (int i = 0; i < 3; i++) {
        char query[128];
        snprintf(query, sizeof query, "{\"limit\":\"1\",\"offset\":%d,\"status\":null}", i);
        out = NULL;
        paged[i][0] = '\0';
        EXPECT_OK(coinorder_order_list(fx.svc, fx.key, query, &out, &err));
        CHECK_CONTAINS(out, "\"limit\":1");
        CHECK_INT_EQ(count_of(out, "\"order_id\":"), 1);
        CHECK_CONTAINS(out, i < 2 ? "\"has_more\":true" : "\"has_more\":false");
        json_str(out, "order_id", paged[i], sizeof paged[i]);
        coinorder_string_free(out);
    }
    for (int i = 0; i < 3; i++) {
        int found = 0;
        for (int j = 0; j < 3; j++) {
            found += strcmp(paged[j], ids[i]) == 0;
        }
        CHECK_MSG(found == 1, "order %s is on %d of the 3 one-order pages", ids[i], found);
    }
    out = NULL;
    EXPECT_OK(coinorder_order_list(fx.svc, fx.key, "{\"offset\":3}", &out, &err));
    CHECK_CONTAINS(out, "\"orders\":[]");
    CHECK_CONTAINS(out, "\"offset\":3");
    CHECK_CONTAINS(out, "\"has_more\":false");
    coinorder_string_free(out);

    out = NULL;
    EXPECT_OK(coinorder_order_list(fx.svc, fx.key, "{\"status\":\"CANCELLED\"}", &out, &err));
    CHECK_INT_EQ(count_of(out, "\"order_id\":"), 1);
    CHECK_CONTAINS(out, ids[1]);
    coinorder_string_free(out);

    /* Another merchant sees none of them. */
    char *other = NULL;
    char other_key[128] = "";
    EXPECT_OK(coinorder_key_create(fx.svc, "{\"user_id\":2}", &other, &err));
    json_str(other, "key", other_key, sizeof other_key);
    coinorder_string_free(other);
    out = NULL;
    EXPECT_OK(coinorder_order_list(fx.svc, other_key, "{}", &out, &err));
    CHECK_CONTAINS(out, "\"orders\":[]");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_order_cancel(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":4}", order_id));
    char *out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_order_cancel(NULL, fx.key, order_id, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_order_cancel(fx.svc, NULL, order_id, &out, &err), "api_key");
    EXPECT_NULL_ARG(coinorder_order_cancel(fx.svc, fx.key, NULL, &out, &err), "order_id");
    EXPECT_NULL_ARG(coinorder_order_cancel(fx.svc, fx.key, order_id, NULL, &err), "order_json_out");
    EXPECT_BAD_UTF8(coinorder_order_cancel(fx.svc, BAD_UTF8, order_id, &out, &err), "api_key");
    EXPECT_BAD_UTF8(coinorder_order_cancel(fx.svc, fx.key, BAD_UTF8, &out, &err), "order_id");
    EXPECT_ERROR(coinorder_order_cancel(fx.svc, fx.key, "no-such-order", &out, &err), "ORDER_NOT_VALID",
                 COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    EXPECT_ERROR(coinorder_order_cancel(fx.svc, "test_doesnotexist", order_id, &out, &err), "Unauthorized",
                 COINORDER_ERROR_UNAUTHORIZED, 401, "API credentials are not valid");
    CHECK(out == SENTINEL);
    CHECK_ORDER_STATUS(&fx, order_id, "NEW");

    out = NULL;
    EXPECT_OK(coinorder_order_cancel(fx.svc, fx.key, order_id, &out, &err));
    CHECK_CONTAINS(out, "\"order\":{");
    CHECK_CONTAINS(out, "\"invoice\":{");
    CHECK_CONTAINS(out, "\"status\":\"CANCELLED\"");
    CHECK_CONTAINS(out, "\"environment\":\"sandbox\"");
    CHECK_CONTAINS(out, "\"rate\":");
    CHECK_CONTAINS(out, "\"address\":");
    CHECK_CONTAINS(out, order_id);
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "CANCELLED");

    /* Only a NEW order can be cancelled. */
    out = SENTINEL;
    EXPECT_ERROR_HAS(coinorder_order_cancel(fx.svc, fx.key, order_id, &out, &err), "ORDER_STATE_INVALID",
                     COINORDER_ERROR_ORDER_STATE_INVALID, 400, "order is CANCELLED");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_order_cancel(fx.svc, fx.key, order_id, &out, NULL), COINORDER_ERROR);
    fixture_close(&fx);
}

static void test_order_mark_paid(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":8}", order_id));
    char *out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_order_mark_paid(NULL, order_id, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_order_mark_paid(fx.svc, NULL, &out, &err), "order_id");
    EXPECT_NULL_ARG(coinorder_order_mark_paid(fx.svc, order_id, NULL, &err), "order_json_out");
    EXPECT_BAD_UTF8(coinorder_order_mark_paid(fx.svc, BAD_UTF8, &out, &err), "order_id");
    EXPECT_ERROR(coinorder_order_mark_paid(fx.svc, "no-such-order", &out, &err), "ORDER_NOT_VALID",
                 COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    /* A NEW order cannot be marked paid. */
    EXPECT_ERROR_HAS(coinorder_order_mark_paid(fx.svc, order_id, &out, &err), "ORDER_STATE_INVALID",
                     COINORDER_ERROR_ORDER_STATE_INVALID, 400, "order is NEW");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_order_mark_paid(fx.svc, order_id, &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);

    /* Expire it, then mark it paid. */
    out = NULL;
    EXPECT_OK(coinorder_simulate(fx.svc, order_id, "{\"action\":\"expire\"}", &out, &err));
    CHECK_CONTAINS(out, "\"status\":\"EXPIRED\"");
    CHECK_CONTAINS(out, "\"type\":\"order.expired\"");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "EXPIRED");

    out = NULL;
    EXPECT_OK(coinorder_order_mark_paid(fx.svc, order_id, &out, &err));
    CHECK_CONTAINS(out, "\"status\":\"PAID\"");
    CHECK_CONTAINS(out, "\"marked_paid\":true");
    CHECK_CONTAINS(out, order_id);
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "PAID");

    /* PAID is final. */
    out = SENTINEL;
    EXPECT_ERROR_HAS(coinorder_order_mark_paid(fx.svc, order_id, &out, &err), "ORDER_STATE_INVALID",
                     COINORDER_ERROR_ORDER_STATE_INVALID, 400, "order is PAID");
    CHECK(out == SENTINEL);
    fixture_close(&fx);
}

static void test_payments(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char order_id[128];
    char amount[64] = "";
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":19.99,\"merchant_order_id\":\"pay-1\"}", order_id));
    REQUIRE(invoice_amount(&fx, order_id, amount, sizeof amount));
    const char *txid = "tx_c_abi_0001";
    char *out = SENTINEL;

    /* record: NULL, UTF-8, bad amount, unknown order. */
    EXPECT_NULL_ARG(coinorder_payment_record(NULL, order_id, txid, amount, false, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_payment_record(fx.svc, NULL, txid, amount, false, &out, &err), "order_id");
    EXPECT_NULL_ARG(coinorder_payment_record(fx.svc, order_id, NULL, amount, false, &out, &err), "txid");
    EXPECT_NULL_ARG(coinorder_payment_record(fx.svc, order_id, txid, NULL, false, &out, &err), "amount");
    EXPECT_NULL_ARG(coinorder_payment_record(fx.svc, order_id, txid, amount, false, NULL, &err),
                    "outcome_json_out");
    EXPECT_BAD_UTF8(coinorder_payment_record(fx.svc, BAD_UTF8, txid, amount, false, &out, &err), "order_id");
    EXPECT_BAD_UTF8(coinorder_payment_record(fx.svc, order_id, BAD_UTF8, amount, false, &out, &err), "txid");
    EXPECT_BAD_UTF8(coinorder_payment_record(fx.svc, order_id, txid, BAD_UTF8, false, &out, &err), "amount");
    EXPECT_ERROR(coinorder_payment_record(fx.svc, order_id, txid, "abc", false, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "amount: must be a decimal number, got \"abc\"");
    EXPECT_ERROR(coinorder_payment_record(fx.svc, order_id, txid, "", false, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "amount: must be a decimal number, got \"\"");
    /* The core's one parser of amounts, as over HTTP: `+`, `_` and a bare `.` are typos. */
    EXPECT_ERROR(coinorder_payment_record(fx.svc, order_id, txid, "+1", false, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "amount: must be a decimal number, got \"+1\"");
    EXPECT_ERROR(coinorder_payment_record(fx.svc, "no-such-order", txid, amount, false, &out, &err),
                 "ORDER_NOT_VALID", COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_payment_record(fx.svc, order_id, txid, "abc", false, &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);
    CHECK_ORDER_STATUS(&fx, order_id, "NEW");

    /* An unconfirmed payment of the whole amount: PENDING. */
    out = NULL;
    EXPECT_OK(coinorder_payment_record(fx.svc, order_id, txid, amount, false, &out, &err));
    CHECK_CONTAINS(out, "\"txid\":\"tx_c_abi_0001\"");
    CHECK_CONTAINS(out, "\"duplicate\":false");
    CHECK_CONTAINS(out, "\"payment\":{");
    CHECK_CONTAINS(out, "\"events\":[");
    CHECK_CONTAINS(out, "\"type\":\"order.pending\"");
    CHECK_CONTAINS(out, "\"status\":\"PENDING\"");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "PENDING");

    /* The same txid again: a no-op. */
    out = NULL;
    EXPECT_OK(coinorder_payment_record(fx.svc, order_id, txid, amount, false, &out, &err));
    CHECK_CONTAINS(out, "\"duplicate\":true");
    CHECK_CONTAINS(out, "\"events\":[]");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "PENDING");

    /* confirm: NULL, UTF-8, unknown txid. */
    out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_payment_confirm(NULL, txid, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_payment_confirm(fx.svc, NULL, &out, &err), "txid");
    EXPECT_NULL_ARG(coinorder_payment_confirm(fx.svc, txid, NULL, &err), "outcome_json_out");
    EXPECT_BAD_UTF8(coinorder_payment_confirm(fx.svc, BAD_UTF8, &out, &err), "txid");
    EXPECT_ERROR(coinorder_payment_confirm(fx.svc, "tx_nope", &out, &err), "PAYMENT_NOT_FOUND",
                 COINORDER_ERROR_PAYMENT_NOT_FOUND, 400, "txid: no payment \"tx_nope\"");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_payment_confirm(fx.svc, "tx_nope", &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);
    CHECK_ORDER_STATUS(&fx, order_id, "PENDING");

    out = NULL;
    EXPECT_OK(coinorder_payment_confirm(fx.svc, txid, &out, &err));
    CHECK_CONTAINS(out, "\"state\":\"confirmed\"");
    CHECK_CONTAINS(out, "\"type\":\"order.paid\"");
    CHECK_CONTAINS(out, "\"status\":\"PAID\"");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "PAID");

    /* reject: NULL, UTF-8, unknown, and a confirmed payment cannot be rejected. */
    out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_payment_reject(NULL, txid, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_payment_reject(fx.svc, NULL, &out, &err), "txid");
    EXPECT_NULL_ARG(coinorder_payment_reject(fx.svc, txid, NULL, &err), "outcome_json_out");
    EXPECT_BAD_UTF8(coinorder_payment_reject(fx.svc, BAD_UTF8, &out, &err), "txid");
    EXPECT_ERROR(coinorder_payment_reject(fx.svc, "tx_nope", &out, &err), "PAYMENT_NOT_FOUND",
                 COINORDER_ERROR_PAYMENT_NOT_FOUND, 400, "txid: no payment \"tx_nope\"");
    EXPECT_ERROR(coinorder_payment_reject(fx.svc, txid, &out, &err), "ORDER_STATE_INVALID",
                 COINORDER_ERROR_ORDER_STATE_INVALID, 400, "txid: payment \"tx_c_abi_0001\" is already confirmed");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_payment_reject(fx.svc, txid, &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);
    CHECK_ORDER_STATUS(&fx, order_id, "PAID");

    /* Confirming twice is a no-op. */
    out = NULL;
    EXPECT_OK(coinorder_payment_confirm(fx.svc, txid, &out, &err));
    CHECK_CONTAINS(out, "\"duplicate\":true");
    CHECK_CONTAINS(out, "\"events\":[]");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "PAID");

    /* A rejected unconfirmed payment fails its PENDING order. */
    char second[128];
    char second_amount[64] = "";
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":7,\"merchant_order_id\":\"pay-2\"}", second));
    REQUIRE(invoice_amount(&fx, second, second_amount, sizeof second_amount));
    out = NULL;
    EXPECT_OK(coinorder_payment_record(fx.svc, second, "tx_c_abi_0002", second_amount, false, &out, &err));
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, second, "PENDING");
    out = NULL;
    EXPECT_OK(coinorder_payment_reject(fx.svc, "tx_c_abi_0002", &out, &err));
    CHECK_CONTAINS(out, "\"state\":\"rejected\"");
    CHECK_CONTAINS(out, "\"status\":\"FAILED\"");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, second, "FAILED");
    /* Rejecting twice is a no-op; a rejected payment cannot be confirmed. */
    out = NULL;
    EXPECT_OK(coinorder_payment_reject(fx.svc, "tx_c_abi_0002", &out, &err));
    CHECK_CONTAINS(out, "\"duplicate\":true");
    coinorder_string_free(out);
    out = SENTINEL;
    EXPECT_ERROR(coinorder_payment_confirm(fx.svc, "tx_c_abi_0002", &out, &err), "ORDER_STATE_INVALID",
                 COINORDER_ERROR_ORDER_STATE_INVALID, 400, "txid: payment \"tx_c_abi_0002\" is already rejected");
    CHECK(out == SENTINEL);
    /* The order stays FAILED, so the merchant may accept it by hand. */
    out = NULL;
    EXPECT_OK(coinorder_order_mark_paid(fx.svc, second, &out, &err));
    CHECK_CONTAINS(out, "\"marked_paid\":true");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, second, "PAID");

    /* A confirmed payment recorded at once pays a NEW order. */
    char third[128];
    char third_amount[64] = "";
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":3,\"merchant_order_id\":\"pay-3\"}", third));
    REQUIRE(invoice_amount(&fx, third, third_amount, sizeof third_amount));
    out = NULL;
    EXPECT_OK(coinorder_payment_record(fx.svc, third, "tx_c_abi_0003", third_amount, true, &out, &err));
    CHECK_CONTAINS(out, "\"status\":\"PAID\"");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, third, "PAID");

    /* order_payments: each order's payments, oldest first, with their states. */
    out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_order_payments(NULL, second, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_order_payments(fx.svc, NULL, &out, &err), "order_id");
    EXPECT_NULL_ARG(coinorder_order_payments(fx.svc, second, NULL, &err), "payments_json_out");
    EXPECT_BAD_UTF8(coinorder_order_payments(fx.svc, BAD_UTF8, &out, &err), "order_id");
    EXPECT_ERROR(coinorder_order_payments(fx.svc, "no-such-order", &out, &err), "ORDER_NOT_VALID",
                 COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    CHECK(out == SENTINEL);
    out = NULL;
    EXPECT_OK(coinorder_order_payments(fx.svc, second, &out, &err));
    CHECK_CONTAINS(out, "[{\"txid\":\"tx_c_abi_0002\",\"amount\":");
    CHECK_CONTAINS(out, "\"state\":\"rejected\"");
    CHECK_CONTAINS(out, "\"counts\":true"); /* seen while the quote was open */
    CHECK_INT_EQ(count_of(out, "\"txid\""), 1);
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_order_payments(fx.svc, third, &out, &err));
    CHECK_CONTAINS(out, "\"txid\":\"tx_c_abi_0003\"");
    CHECK_CONTAINS(out, "\"state\":\"confirmed\"");
    CHECK_CONTAINS(out, "\"settled_at\":\"");
    coinorder_string_free(out);
    char unpaid[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":3,\"merchant_order_id\":\"pay-4\"}", unpaid));
    out = NULL;
    EXPECT_OK(coinorder_order_payments(fx.svc, unpaid, &out, &err));
    CHECK_STR_EQ(out, "[]");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_simulate(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":11}", order_id));
    const char *pay = "{\"action\":\"pay\"}";
    char *out = SENTINEL;

    EXPECT_NULL_ARG(coinorder_simulate(NULL, order_id, pay, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_simulate(fx.svc, NULL, pay, &out, &err), "order_id");
    EXPECT_NULL_ARG(coinorder_simulate(fx.svc, order_id, NULL, &out, &err), "action_json");
    EXPECT_NULL_ARG(coinorder_simulate(fx.svc, order_id, pay, NULL, &err), "simulation_json_out");
    EXPECT_BAD_UTF8(coinorder_simulate(fx.svc, BAD_UTF8, pay, &out, &err), "order_id");
    EXPECT_BAD_UTF8(coinorder_simulate(fx.svc, order_id, BAD_UTF8, &out, &err), "action_json");
    EXPECT_BAD_JSON(coinorder_simulate(fx.svc, order_id, "{\"action\":pay}", &out, &err), "action_json");
    EXPECT_ERROR(coinorder_simulate(fx.svc, order_id, "{}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "action: is required");
    EXPECT_JSON_SHAPE(coinorder_simulate(fx.svc, order_id, "[]", &out, &err), "action_json: must be a JSON object");
    EXPECT_ERROR(coinorder_simulate(fx.svc, order_id, "{\"action\":\"fly\"}", &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "action: must be one of pay, partial, confirm, reject, cancel, expire, got \"fly\"");
    EXPECT_ERROR(coinorder_simulate(fx.svc, order_id, "{\"action\":\"pay\",\"confirmed\":1}", &out, &err),
                 "PARAMETERS_MISSING", COINORDER_ERROR_PARAMETERS_MISSING, 400, "confirmed: must be true or false");
    EXPECT_ERROR(coinorder_simulate(fx.svc, "no-such-order", pay, &out, &err), "ORDER_NOT_VALID",
                 COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_simulate(fx.svc, order_id, "{}", &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);
    CHECK_ORDER_STATUS(&fx, order_id, "NEW");

    /* An unconfirmed pay, then confirm. */
    out = NULL;
    EXPECT_OK(coinorder_simulate(fx.svc, order_id, "{\"action\":\"pay\",\"confirmed\":false}", &out, &err));
    CHECK_CONTAINS(out, "\"status\":\"PENDING\"");
    CHECK_CONTAINS(out, "\"txid\":\"sandbox_tx_");
    CHECK_CONTAINS(out, "\"payments\":[");
    CHECK_CONTAINS(out, "\"events\":[");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "PENDING");
    out = NULL;
    EXPECT_OK(coinorder_simulate(fx.svc, order_id, "{\"action\":\"confirm\"}", &out, &err));
    CHECK_CONTAINS(out, "\"status\":\"PAID\"");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, order_id, "PAID");

    /* cancel of a PAID order is refused. */
    out = SENTINEL;
    EXPECT_ERROR_HAS(coinorder_simulate(fx.svc, order_id, "{\"action\":\"cancel\"}", &out, &err),
                     "ORDER_STATE_INVALID", COINORDER_ERROR_ORDER_STATE_INVALID, 400, "order is PAID");
    CHECK(out == SENTINEL);
    fixture_close(&fx);

    /* A live service has no simulation: Not Found (404). */
    struct fixture live;
    REQUIRE(fixture_open(&live, LIVE));
    CHECK(strncmp(live.key, "prod_", 5) == 0);
    EXPECT_ERROR(coinorder_simulate(live.svc, order_id, pay, &out, &err), "Not Found", COINORDER_ERROR_NOT_FOUND,
                 404, "simulation is available in the sandbox only");
    EXPECT_ERROR(coinorder_simulate(live.svc, "no-such-order", "{\"action\":\"expire\"}", &out, &err), "Not Found",
                 COINORDER_ERROR_NOT_FOUND, 404, "simulation is available in the sandbox only");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_simulate(live.svc, order_id, pay, &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);
    fixture_close(&live);
}

static void test_expire_due(void) {
    coinorder_error *err;
    struct fixture fx;
    /* Quotes valid for one second, so the test can watch them run out. */
    REQUIRE(fixture_open(&fx, "{\"rate_limit\":0,\"invoice_ttl\":1}"));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_expire_due(NULL, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_expire_due(fx.svc, NULL, &err), "report_json_out");
    CHECK_INT_EQ(coinorder_expire_due(NULL, &out, NULL), COINORDER_NULL_ARGUMENT);
    CHECK(out == SENTINEL);

    char unpaid[128], short_paid[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":10}", unpaid));
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":10}", short_paid));
    out = NULL;
    EXPECT_OK(coinorder_simulate(fx.svc, short_paid, "{\"action\":\"partial\"}", &out, &err));
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, short_paid, "PENDING");

    /* Nothing has run out yet. */
    out = NULL;
    EXPECT_OK(coinorder_expire_due(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "{\"expired\":0,\"failed\":0}");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, unpaid, "NEW");

    struct timespec past_the_quote = {1, 200 * 1000 * 1000};
    nanosleep(&past_the_quote, NULL);
    out = NULL;
    EXPECT_OK(coinorder_expire_due(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "{\"expired\":1,\"failed\":1}");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, unpaid, "EXPIRED");
    CHECK_ORDER_STATUS(&fx, short_paid, "FAILED");

    /* Each order moves once. */
    out = NULL;
    EXPECT_OK(coinorder_expire_due(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "{\"expired\":0,\"failed\":0}");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_deliver_due(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_deliver_due(NULL, 10, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_deliver_due(fx.svc, 10, NULL, &err), "report_json_out");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_deliver_due(NULL, 10, &out, NULL), COINORDER_NULL_ARGUMENT);
    CHECK(out == SENTINEL);

    /* Nothing due yet: order creation is no event. */
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":0,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":0}");
    coinorder_string_free(out);

    /* The key has no webhook URL and the order names none: the event has no target. */
    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":6,\"merchant_order_id\":\"wh-1\"}", order_id));
    out = NULL;
    EXPECT_OK(coinorder_order_cancel(fx.svc, fx.key, order_id, &out, &err));
    coinorder_string_free(out);

    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":1,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":1}");
    coinorder_string_free(out);

    /* Settled: nothing is due any more. */
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":0,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":0}");
    coinorder_string_free(out);

    /* limit bounds the run: two events, limit 1, then the other. */
    char a[128], b[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":6,\"merchant_order_id\":\"wh-2\"}", a));
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":6,\"merchant_order_id\":\"wh-3\"}", b));
    out = NULL;
    EXPECT_OK(coinorder_simulate(fx.svc, a, "{\"action\":\"expire\"}", &out, &err));
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_simulate(fx.svc, b, "{\"action\":\"expire\"}", &out, &err));
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 1, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":1,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":1}");
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 0xffffffffu, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":1,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":1}");
    coinorder_string_free(out);
    fixture_close(&fx);
}

/* A real SMTP server on 127.0.0.1 for one connection: it speaks the protocol's minimum
 * (EHLO, MAIL, RCPT, DATA, QUIT) and keeps the recipient and the message. */
struct smtp_sink {
    int listen_fd;
    int port;
    pthread_t thread;
    int messages;
    char rcpt[256];
    char data[16384];
    size_t data_len;
};

/* One line (with its CRLF) into buf; its length, or -1 at the end or on a timeout. */
static int smtp_read_line(int fd, char *buf, size_t size) {
    size_t len = 0;
    while (len + 1 < size) {
        char c;
        if (recv(fd, &c, 1, 0) != 1) {
            return -1;
        }
        buf[len++] = c;
        if (c == '\n') {
            break;
        }
    }
    buf[len] = '\0';
    return (int)len;
}

static void smtp_say(int fd, const char *line) {
    size_t len = strlen(line);
    if (send(fd, line, len, MSG_NOSIGNAL) != (ssize_t)len) {
        fprintf(stderr, "smtp sink: short send\n");
    }
}

static void *smtp_sink_main(void *arg) {
    struct smtp_sink *sink = arg;
    int fd = accept(sink->listen_fd, NULL, NULL);
    if (fd < 0) {
        return NULL;
    }
    struct timeval timeout = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    smtp_say(fd, "220 sink.test ESMTP\r\n");
    char line[2048];
    bool in_data = false;
    while (smtp_read_line(fd, line, sizeof line) > 0) {
        if (in_data) {
            if (strcmp(line, ".\r\n") == 0) {
                in_data = false;
                sink->messages++;
                smtp_say(fd, "250 accepted\r\n");
            } else {
                size_t len = strlen(line);
                if (sink->data_len + len < sizeof sink->data) {
                    memcpy(sink->data + sink->data_len, line, len + 1);
                    sink->data_len += len;
                }
            }
        } else if (strncasecmp(line, "EHLO", 4) == 0) {
            smtp_say(fd, "250-sink.test\r\n250 8BITMIME\r\n");
        } else if (strncasecmp(line, "RCPT TO:", 8) == 0) {
            snprintf(sink->rcpt, sizeof sink->rcpt, "%s", line + 8);
            smtp_say(fd, "250 ok\r\n");
        } else if (strncasecmp(line, "DATA", 4) == 0) {
            in_data = true;
            smtp_say(fd, "354 end with .\r\n");
        } else if (strncasecmp(line, "QUIT", 4) == 0) {
            smtp_say(fd, "221 bye\r\n");
            break;
        } else {
            smtp_say(fd, "250 ok\r\n"); /* HELO, MAIL FROM, RSET, NOOP */
        }
    }
    close(fd);
    return NULL;
}

/* Starts the sink on a free port; false if it cannot. */
static bool smtp_sink_start(struct smtp_sink *sink) {
    memset(sink, 0, sizeof *sink);
    sink->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (sink->listen_fd < 0) {
        return false;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(sink->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(sink->listen_fd, 4) != 0 ||
        getsockname(sink->listen_fd, (struct sockaddr *)&addr, &len) != 0) {
        close(sink->listen_fd);
        return false;
    }
    sink->port = ntohs(addr.sin_port);
    if (pthread_create(&sink->thread, NULL, smtp_sink_main, sink) != 0) {
        close(sink->listen_fd);
        return false;
    }
    return true;
}

/* Waits for the sink's connection to end, then closes it. */
static void smtp_sink_stop(struct smtp_sink *sink) {
    pthread_join(sink->thread, NULL);
    close(sink->listen_fd);
}

static void test_send_due_emails(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_send_due_emails(NULL, 10, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_send_due_emails(fx.svc, 10, NULL, &err), "report_json_out");
    CHECK(out == SENTINEL);

    /* No SMTP server configured: the e-mail stays pending, nothing is attempted. */
    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":6,\"customer_email\":\"buyer@example.com\"}",
                         order_id));
    out = NULL;
    EXPECT_OK(coinorder_send_due_emails(fx.svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":0,\"sent\":0,\"retrying\":0,\"failed\":0}");
    coinorder_string_free(out);
    fixture_close(&fx);

    /* With one: deliver_due leaves the e-mail alone, send_due_emails sends it, once. */
    struct smtp_sink sink;
    REQUIRE(smtp_sink_start(&sink));
    char config[256], path[4200];
    snprintf(config, sizeof config,
             "{\"rate_limit\":0,\"smtp_url\":\"smtp://127.0.0.1:%d\",\"smtp_from\":\"Shop <pay@shop.example>\"}",
             sink.port);
    new_db_path(path, sizeof path);
    coinorder_service *svc = NULL;
    EXPECT_OK(coinorder_service_open(path, config, &svc, &err));
    REQUIRE(svc != NULL);
    char key[128];
    out = NULL;
    EXPECT_OK(coinorder_key_create(svc, "{\"user_id\":1}", &out, &err));
    REQUIRE(json_str(out, "key", key, sizeof key));
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_order_create(svc, key, "{\"currency\":\"USD\",\"amount\":6,\"customer_email\":\"buyer@example.com\"}",
                                     &out, &err));
    REQUIRE(json_str(out, "order_id", order_id, sizeof order_id));
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":0,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":0}");
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_send_due_emails(svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":1,\"sent\":1,\"retrying\":0,\"failed\":0}");
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_send_due_emails(svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":0,\"sent\":0,\"retrying\":0,\"failed\":0}");
    coinorder_string_free(out);
    coinorder_service_close(svc);
    smtp_sink_stop(&sink);
    CHECK_INT_EQ(sink.messages, 1);
    CHECK_CONTAINS(sink.rcpt, "buyer@example.com");
    CHECK_CONTAINS(sink.data, order_id);
}

static void test_redeliver(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    EXPECT_NULL_ARG(coinorder_redeliver(NULL, "msg_x", &err), "service");
    EXPECT_NULL_ARG(coinorder_redeliver(fx.svc, NULL, &err), "event_id");
    EXPECT_BAD_UTF8(coinorder_redeliver(fx.svc, BAD_UTF8, &err), "event_id");
    EXPECT_ERROR(coinorder_redeliver(fx.svc, "msg_doesnotexist", &err), "EVENT_NOT_FOUND",
                 COINORDER_ERROR_EVENT_NOT_FOUND, 400, "event_id: no event \"msg_doesnotexist\"");
    CHECK_INT_EQ(coinorder_redeliver(fx.svc, "msg_doesnotexist", NULL), COINORDER_ERROR);

    /* An event sent once (no target), then queued again and sent again. */
    char order_id[128], event_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":6}", order_id));
    char *out = NULL;
    EXPECT_OK(coinorder_simulate(fx.svc, order_id, "{\"action\":\"cancel\"}", &out, &err));
    REQUIRE(json_str(out, "event_id", event_id, sizeof event_id));
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":1,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":1}");
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":0,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":0}");
    coinorder_string_free(out);

    EXPECT_OK(coinorder_redeliver(fx.svc, event_id, &err));
    out = NULL;
    EXPECT_OK(coinorder_deliver_due(fx.svc, 10, &out, &err));
    CHECK_STR_EQ(out, "{\"attempted\":1,\"delivered\":0,\"retrying\":0,\"failed\":0,\"no_target\":1}");
    coinorder_string_free(out);

    /* event_deliveries: the order's one event, where its delivery stands, and its body. */
    out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_event_deliveries(NULL, order_id, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_event_deliveries(fx.svc, NULL, &out, &err), "order_id");
    EXPECT_NULL_ARG(coinorder_event_deliveries(fx.svc, order_id, NULL, &err), "deliveries_json_out");
    EXPECT_BAD_UTF8(coinorder_event_deliveries(fx.svc, BAD_UTF8, &out, &err), "order_id");
    EXPECT_ERROR(coinorder_event_deliveries(fx.svc, "no-such-order", &out, &err), "ORDER_NOT_VALID",
                 COINORDER_ERROR_ORDER_NOT_VALID, 400, "order not found");
    CHECK(out == SENTINEL);
    out = NULL;
    EXPECT_OK(coinorder_event_deliveries(fx.svc, order_id, &out, &err));
    CHECK_CONTAINS(out, event_id);
    CHECK_CONTAINS(out, "\"type\":\"order.cancelled\"");
    CHECK_CONTAINS(out, "\"delivery\":{");
    CHECK_CONTAINS(out, "\"state\":\"no_target\"");
    CHECK_CONTAINS(out, "\"log\":[]");
    CHECK_CONTAINS(out, "\"payload\":{");
    CHECK_INT_EQ(count_of(out, "\"event_id\""), 1);
    coinorder_string_free(out);
    fixture_close(&fx);
}

/* ---------------------------------------------------------------------------------------
 * Rates, watch-only wallets and the chain watcher
 * ------------------------------------------------------------------------------------- */

/* A mainnet BIP84 account key (the "abandon ... about" test wallet) and its receive
 * addresses at indexes 0 and 1. */
#define ZPUB "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"
#define ZPUB_ADDRESS_0 "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"
#define ZPUB_ADDRESS_1 "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"
/* A BIP32 root private key: must be refused, and never echoed. */
#define XPRV "xprv9s21ZrQH143K3GJpoapnV8SFfukcVBSfeCficPSGfubmSFDxo1kuHnLisriDvSnRRuL2Qrg5ggqHKNVpxR86QEC8w35uxmGoggxtQTPvfUu"

static void test_rates(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, LIVE));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_rate_set(NULL, "BTC", "USD", "1", 0, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_rate_set(fx.svc, NULL, "USD", "1", 0, &out, &err), "crypto");
    EXPECT_NULL_ARG(coinorder_rate_set(fx.svc, "BTC", NULL, "1", 0, &out, &err), "fiat");
    EXPECT_NULL_ARG(coinorder_rate_set(fx.svc, "BTC", "USD", NULL, 0, &out, &err), "rate");
    EXPECT_NULL_ARG(coinorder_rate_set(fx.svc, "BTC", "USD", "1", 0, NULL, &err), "rate_json_out");
    EXPECT_BAD_UTF8(coinorder_rate_set(fx.svc, BAD_UTF8, "USD", "1", 0, &out, &err), "crypto");
    EXPECT_ERROR(coinorder_rate_set(fx.svc, "BTC", "USD", "1,5", 0, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "rate: must be a decimal number, got \"1,5\"");
    EXPECT_ERROR(coinorder_rate_set(fx.svc, "BTC", "USD", "3000", -1, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400,
                 "valid_until: must be in the future (a rate past it is never used)");
    EXPECT_ERROR(coinorder_rate_set(fx.svc, "BTC", "USD", "3000", INT64_MAX, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "valid_until: must be before the year 10000");
    EXPECT_ERROR(coinorder_rate_set(fx.svc, "BTC", "USD", "0", 0, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "rate: must be greater than 0");
    EXPECT_ERROR(coinorder_rate_set(fx.svc, "DOGE", "USD", "1", 0, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "crypto: unknown coin \"DOGE\"");
    EXPECT_NULL_ARG(coinorder_rate_list(NULL, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_rate_list(fx.svc, NULL, &err), "rates_json_out");
    CHECK(out == SENTINEL);

    out = NULL;
    EXPECT_OK(coinorder_rate_list(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "[]");
    coinorder_string_free(out);

    /* Exact text in, exact number out; 0: no expiry. */
    out = NULL;
    /* No spaces around a number, as on every other surface. */
    EXPECT_ERROR(coinorder_rate_set(fx.svc, "BTC", "USD", " 64250.50 ", 0, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "rate: must be a decimal number, got \" 64250.50 \"");
    EXPECT_OK(coinorder_rate_set(fx.svc, "BTC", "USD", "64250.50", 0, &out, &err));
    CHECK_CONTAINS(out, "{\"environment\":\"live\",\"crypto\":\"BTC\",\"fiat\":\"USD\",\"rate\":64250.5,"
                        "\"valid_until\":null,\"updated_at\":\"");
    coinorder_string_free(out);
    /* valid_until_unix is seconds. */
    out = NULL;
    EXPECT_OK(coinorder_rate_set(fx.svc, "ETH", "EUR", "3e3", 4102444800, &out, &err));
    CHECK_CONTAINS(out, "\"rate\":3000,\"valid_until\":\"2100-01-01T00:00:00.000Z\"");
    coinorder_string_free(out);

    out = NULL;
    EXPECT_OK(coinorder_rate_list(fx.svc, &out, &err));
    CHECK_INT_EQ(count_of(out, "\"environment\":\"live\""), 2);
    CHECK_CONTAINS(out, "\"crypto\":\"BTC\",\"fiat\":\"USD\",\"rate\":64250.5,\"valid_until\":null");
    CHECK_CONTAINS(out,
                   "\"crypto\":\"ETH\",\"fiat\":\"EUR\",\"rate\":3000,\"valid_until\":\"2100-01-01T00:00:00.000Z\"");
    coinorder_string_free(out);

    /* The live service quotes with it: 6425.05 USD at 64250.5 is 0.1 BTC. */
    char order_id[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":6425.05,\"pay_currency\":\"BTC\"}", order_id));
    out = NULL;
    EXPECT_OK(coinorder_order_get(fx.svc, fx.key, order_id, &out, &err));
    CHECK_CONTAINS(out, "\"amount\":0.1,");
    CHECK_CONTAINS(out, "\"currency\":\"BTC\"");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_wallet_set_and_address(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, LIVE));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_wallet_set(NULL, "BTC", ZPUB, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_wallet_set(fx.svc, NULL, ZPUB, &out, &err), "coin");
    EXPECT_NULL_ARG(coinorder_wallet_set(fx.svc, "BTC", NULL, &out, &err), "key");
    EXPECT_NULL_ARG(coinorder_wallet_set(fx.svc, "BTC", ZPUB, NULL, &err), "wallet_json_out");
    EXPECT_BAD_UTF8(coinorder_wallet_set(fx.svc, "BTC", BAD_UTF8, &out, &err), "key");
    EXPECT_ERROR(coinorder_wallet_set(fx.svc, "DOGE", ZPUB, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "coin: must be one of BTC, ETH, USDT, USDC");
    /* No address before a wallet is set. */
    EXPECT_ERROR(coinorder_wallet_address(fx.svc, "BTC", 0, &out, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "coin: has no wallet in live (set one first)");
    CHECK(out == SENTINEL);

    out = NULL;
    EXPECT_OK(coinorder_wallet_set(fx.svc, "BTC", ZPUB, &out, &err));
    char buf[512];
    CHECK(json_str(out, "coin", buf, sizeof buf));
    CHECK_STR_EQ(buf, "BTC");
    CHECK(json_str(out, "first_address", buf, sizeof buf));
    CHECK_STR_EQ(buf, ZPUB_ADDRESS_0);
    CHECK(json_raw(out, "next_index", buf, sizeof buf));
    CHECK_STR_EQ(buf, "0");
    CHECK(json_str(out, "descriptor", buf, sizeof buf));
    CHECK_MSG(strncmp(buf, "wpkh(", 5) == 0, "descriptor is \"%s\"", buf);
    CHECK_CONTAINS(out, "{\"environment\":\"live\",\"coin\":\"BTC\",\"descriptor\":\"wpkh(");
    CHECK_CONTAINS(out, "\"created_at\":\"");
    CHECK_CONTAINS(out, "\"updated_at\":\"");
    coinorder_string_free(out);

    out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_wallet_address(NULL, "BTC", 1, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_wallet_address(fx.svc, NULL, 1, &out, &err), "coin");
    EXPECT_NULL_ARG(coinorder_wallet_address(fx.svc, "BTC", 1, NULL, &err), "address_out");
    EXPECT_ERROR_HAS(coinorder_wallet_address(fx.svc, "BTC", 0x80000000u, &out, &err), "PARAMETERS_MISSING",
                     COINORDER_ERROR_PARAMETERS_MISSING, 400, "index: must be below 2^31");
    CHECK(out == SENTINEL);
    out = NULL;
    EXPECT_OK(coinorder_wallet_address(fx.svc, "BTC", 0, &out, &err));
    CHECK_STR_EQ(out, ZPUB_ADDRESS_0);
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_wallet_address(fx.svc, "btc", 1, &out, &err));
    CHECK_STR_EQ(out, ZPUB_ADDRESS_1);
    coinorder_string_free(out);

    /* Live quotes need a rate; each BTC order then gets the next derived address. */
    out = NULL;
    EXPECT_OK(coinorder_rate_set(fx.svc, "BTC", "USD", "64250.5", 0, &out, &err));
    coinorder_string_free(out);
    const char *addresses[2] = {ZPUB_ADDRESS_0, ZPUB_ADDRESS_1};
    for (int i = 0; i < 2; i++) {
        char order_id[128];
        REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":25,\"pay_currency\":\"BTC\"}", order_id));
        out = NULL;
        EXPECT_OK(coinorder_order_get(fx.svc, fx.key, order_id, &out, &err));
        CHECK(json_str(out, "address", buf, sizeof buf));
        CHECK_STR_EQ(buf, addresses[i]);
        coinorder_string_free(out);
    }
    out = NULL;
    EXPECT_OK(coinorder_wallet_list(fx.svc, &out, &err));
    CHECK(json_raw(out, "next_index", buf, sizeof buf));
    CHECK_STR_EQ(buf, "2");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_wallet_refuses_a_private_key(void) {
    coinorder_error *err = NULL;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, LIVE));
    char *out = SENTINEL;
    coinorder_status st = coinorder_wallet_set(fx.svc, "BTC", XPRV, &out, &err);
    CHECK_INT_EQ(st, COINORDER_ERROR);
    CHECK(out == SENTINEL);
    REQUIRE(err != NULL);
    CHECK_INT_EQ(coinorder_error_status(err), COINORDER_ERROR);
    CHECK_STR_EQ(coinorder_error_code(err), "PARAMETERS_MISSING");
    CHECK_INT_EQ(coinorder_error_number(err), COINORDER_ERROR_PARAMETERS_MISSING);
    CHECK_INT_EQ(coinorder_error_http_status(err), 400);
    const char *message = coinorder_error_message(err);
    CHECK_CONTAINS(message, "wallet: is a private key");
    /* Neither the key nor any long piece of it. */
    CHECK_MSG(message != NULL && strstr(message, XPRV) == NULL, "the message repeats the key: %s", message);
    char piece[13];
    for (size_t i = 0; message != NULL && i + 12 <= strlen(XPRV); i++) {
        memcpy(piece, XPRV + i, 12);
        piece[12] = '\0';
        CHECK_MSG(strstr(message, piece) == NULL, "the message holds \"%s\" of the key: %s", piece, message);
    }
    coinorder_error_free(err);

    /* err NULL: the same status, nothing stored. */
    CHECK_INT_EQ(coinorder_wallet_set(fx.svc, "ETH", XPRV, &out, NULL), COINORDER_ERROR);
    CHECK(out == SENTINEL);
    out = NULL;
    EXPECT_OK(coinorder_wallet_list(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "[]");
    coinorder_string_free(out);
    fixture_close(&fx);
}

static void test_wallet_list_and_remove(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, LIVE));
    char *out = SENTINEL;
    bool removed = true;
    EXPECT_NULL_ARG(coinorder_wallet_list(NULL, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_wallet_list(fx.svc, NULL, &err), "wallets_json_out");
    CHECK(out == SENTINEL);
    EXPECT_NULL_ARG(coinorder_wallet_remove(NULL, "BTC", &removed, &err), "service");
    EXPECT_NULL_ARG(coinorder_wallet_remove(fx.svc, NULL, &removed, &err), "coin");
    EXPECT_NULL_ARG(coinorder_wallet_remove(fx.svc, "BTC", NULL, &err), "removed_out");
    EXPECT_BAD_UTF8(coinorder_wallet_remove(fx.svc, BAD_UTF8, &removed, &err), "coin");
    EXPECT_ERROR(coinorder_wallet_remove(fx.svc, "DOGE", &removed, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "coin: must be one of BTC, ETH, USDT, USDC");
    CHECK(removed == true); /* untouched by the failures */

    out = NULL;
    EXPECT_OK(coinorder_wallet_list(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "[]");
    coinorder_string_free(out);

    out = NULL;
    EXPECT_OK(coinorder_wallet_set(fx.svc, "BTC", ZPUB, &out, &err));
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_wallet_list(fx.svc, &out, &err));
    CHECK_MSG(out != NULL && out[0] == '[' && out[strlen(out) - 1] == ']', "not an array: %s", out ? out : "(null)");
    CHECK_INT_EQ(count_of(out, "\"coin\":"), 1);
    CHECK_CONTAINS(out, "[{\"environment\":\"live\",\"coin\":\"BTC\",\"descriptor\":\"wpkh(");
    CHECK_CONTAINS(out, "\"next_index\":0,\"first_address\":\"" ZPUB_ADDRESS_0 "\"");
    coinorder_string_free(out);

    removed = false;
    EXPECT_OK(coinorder_wallet_remove(fx.svc, "BTC", &removed, &err));
    CHECK(removed == true);
    EXPECT_OK(coinorder_wallet_remove(fx.svc, "BTC", &removed, &err));
    CHECK(removed == false);
    out = NULL;
    EXPECT_OK(coinorder_wallet_list(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "[]");
    coinorder_string_free(out);
    fixture_close(&fx);
}

/* A TCP port on 127.0.0.1 that nothing listens on (bound, then closed); 0 on failure. */
static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return 0;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 && getsockname(fd, (struct sockaddr *)&addr, &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
}

static void test_watch_chain_due(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, LIVE));
    char *out = SENTINEL;
    EXPECT_NULL_ARG(coinorder_watch_chain_due(NULL, &out, &err), "service");
    EXPECT_NULL_ARG(coinorder_watch_chain_due(fx.svc, NULL, &err), "report_json_out");
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(coinorder_watch_chain_due(NULL, &out, NULL), COINORDER_NULL_ARGUMENT);
    CHECK(out == SENTINEL);

    /* No chain configured: nothing to do. */
    out = NULL;
    EXPECT_OK(coinorder_watch_chain_due(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "{\"recorded\":0,\"confirmed\":0,\"rejected\":0,\"backing_off\":[],\"errors\":[]}");
    coinorder_string_free(out);
    fixture_close(&fx);

    /* An Esplora endpoint that refuses connections: one error line, without the URL's
     * credentials or path; then the chain backs off. */
    int port = closed_port();
    REQUIRE(port != 0);
    char config[256], path[4200];
    snprintf(config, sizeof config,
             "{\"environment\":\"live\",\"esplora_url\":\"http://u:hunter2@127.0.0.1:%d/KEY123\"}", port);
    new_db_path(path, sizeof path);
    coinorder_service *svc = NULL;
    EXPECT_OK(coinorder_service_open(path, config, &svc, &err));
    REQUIRE(svc != NULL);
    out = NULL;
    EXPECT_OK(coinorder_watch_chain_due(svc, &out, &err));
    CHECK_CONTAINS(out, "{\"recorded\":0,\"confirmed\":0,\"rejected\":0,\"backing_off\":[],\"errors\":[\"bitcoin: ");
    CHECK_INT_EQ(count_of(out, "\"bitcoin: "), 1);
    CHECK_MSG(out != NULL && strstr(out, "\"],") == NULL && strcmp(out + strlen(out) - 3, "\"]}") == 0,
              "not exactly one error: %s", out ? out : "(null)");
    CHECK_MSG(out != NULL && strstr(out, "hunter2") == NULL, "the report holds the password: %s", out);
    CHECK_MSG(out != NULL && strstr(out, "KEY123") == NULL, "the report holds the URL's path: %s", out);
    coinorder_string_free(out);
    out = NULL;
    EXPECT_OK(coinorder_watch_chain_due(svc, &out, &err));
    CHECK_STR_EQ(out, "{\"recorded\":0,\"confirmed\":0,\"rejected\":0,\"backing_off\":[\"bitcoin\"],\"errors\":[]}");
    coinorder_string_free(out);
    coinorder_service_close(svc);
}

/* The Standard Webhooks specification's published test vector. */
#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_MSG_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TIMESTAMP "1614265330"
#define SW_BODY "{\"test\": 2432232314}"
#define SW_SIGNATURE "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
#define SW_NOW ((int64_t)1614265330)

static void test_signature_verify(void) {
    coinorder_error *err;
    const uint8_t *body = (const uint8_t *)SW_BODY;
    size_t len = strlen(SW_BODY);

    EXPECT_OK(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW, &err));
    CHECK_INT_EQ(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW, NULL),
                 COINORDER_OK);
    /* Within the 5 minute window, either side. */
    EXPECT_OK(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW + 300,
                                         &err));
    EXPECT_OK(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW - 300,
                                         &err));
    /* One of several signatures matching is enough; the secret without its prefix works too. */
    EXPECT_OK(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP,
                                         "v1,bm9wZQ== " SW_SIGNATURE, body, len, SW_NOW, &err));
    EXPECT_OK(coinorder_signature_verify("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE,
                                         body, len, SW_NOW, &err));

    /* A changed body. */
    const char *changed = "{\"test\": 2432232315}";
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE,
                                            (const uint8_t *)changed, strlen(changed), SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: no matching signature");
    /* The same body one byte short. */
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len - 1, SW_NOW,
                                            &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: no matching signature");
    /* An empty v1 signature. */
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, "v1,", body, len, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: no matching signature");
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, "", body, len, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: no matching signature");
    /* Another msg_id. */
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, "msg_other", SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW,
                                            &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: no matching signature");
    /* Stale: the timestamp more than 5 minutes from now, either way. */
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW + 301,
                                            &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: webhook-timestamp is more than 5 minutes from now");
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW - 301,
                                            &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: webhook-timestamp is more than 5 minutes from now");
    /* now_unix 0: the system clock, long past 2021. */
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, 0, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: webhook-timestamp is more than 5 minutes from now");
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, "yesterday", SW_SIGNATURE, body, len, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: webhook-timestamp is not a Unix time in seconds");
    /* Missing headers (NULL) are refusals, not NULL_ARGUMENT. */
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, NULL, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: missing header webhook-id");
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, NULL, SW_SIGNATURE, body, len, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: missing header webhook-timestamp");
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, NULL, body, len, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: missing header webhook-signature");
    /* A malformed secret. */
    EXPECT_ERROR(coinorder_signature_verify("whsec_!!not base64!!", SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len,
                                            SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: the webhook secret is not whsec_ followed by base64");
    EXPECT_ERROR(coinorder_signature_verify("whsec_", SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: the webhook secret is not whsec_ followed by base64");
    CHECK_INT_EQ(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, "v1,", body, len, SW_NOW, NULL),
                 COINORDER_ERROR);

    /* Bad arguments. */
    EXPECT_NULL_ARG(coinorder_signature_verify(NULL, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW, &err),
                    "secret");
    EXPECT_NULL_ARG(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, NULL, len, SW_NOW,
                                               &err),
                    "body");
    EXPECT_BAD_UTF8(coinorder_signature_verify(BAD_UTF8, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW,
                                               &err),
                    "secret");
    EXPECT_BAD_UTF8(coinorder_signature_verify(SW_SECRET, BAD_UTF8, SW_TIMESTAMP, SW_SIGNATURE, body, len, SW_NOW,
                                               &err),
                    "msg_id");
    EXPECT_BAD_UTF8(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, BAD_UTF8, SW_SIGNATURE, body, len, SW_NOW,
                                               &err),
                    "timestamp");
    EXPECT_BAD_UTF8(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, BAD_UTF8, body, len, SW_NOW, &err),
                    "signatures");
    CHECK_INT_EQ(coinorder_signature_verify(NULL, NULL, NULL, NULL, NULL, 1, 0, NULL), COINORDER_NULL_ARGUMENT);
    /* A NULL body of length 0 is an empty body: verified (and refused) as such. */
    EXPECT_ERROR(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, SW_SIGNATURE, NULL, 0, SW_NOW, &err),
                 "SIGNATURE_INVALID", COINORDER_ERROR_SIGNATURE_INVALID, 400,
                 "webhook signature: no matching signature");
}

/* One coinorder_handle call; the checks read *status and *body (freed by the caller). */
static coinorder_status handle(coinorder_service *svc, const char *method, const char *path, const char *headers,
                               const char *body, uint16_t *status, char **out, coinorder_error **err) {
    return coinorder_handle(svc, method, path, headers, (const uint8_t *)body, body ? strlen(body) : 0, status, out,
                            err);
}

/* coinorder_handle_with_headers: the same answer, and the headers a host's server sends. */
static void test_handle_with_headers(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, "{\"rate_limit\":1,\"rate_burst\":1}"));
    char headers[256];
    snprintf(headers, sizeof headers, "{\"x-api-key\":\"%s\"}", fx.key);
    uint16_t status = 0;
    char *head = NULL;
    char *out = NULL;

    EXPECT_OK(coinorder_handle_with_headers(fx.svc, "GET", "/v1/orders", headers, NULL, 0, &status, &head, &out,
                                            &err));
    CHECK_INT_EQ(status, 200);
    CHECK_CONTAINS(out, "\"orders\":[");
    CHECK_CONTAINS(head, "\"content-type\":\"application/json\"");
    CHECK_CONTAINS(head, "\"cache-control\":\"no-store\"");
    coinorder_string_free(head);
    coinorder_string_free(out);

    /* Over the rate: the wait is in retry-after, which coinorder_handle cannot give. */
    head = NULL;
    out = NULL;
    EXPECT_OK(coinorder_handle_with_headers(fx.svc, "GET", "/v1/orders", headers, NULL, 0, &status, &head, &out,
                                            &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "API_LIMIT_EXCEEDED");
    CHECK_CONTAINS(head, "\"retry-after\":\"");
    coinorder_string_free(head);
    coinorder_string_free(out);

    /* A header name sent twice in headers_json reaches the service twice: refused as over HTTP. */
    char twice[320];
    snprintf(twice, sizeof twice, "{\"x-api-key\":\"bogus\",\"x-api-key\":\"%s\"}", fx.key);
    out = NULL;
    EXPECT_OK(handle(fx.svc, "GET", "/v1/orders", twice, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "x-api-key: sent more than once");
    coinorder_string_free(out);

    uint16_t status_sentinel = 7;
    out = NULL;
    EXPECT_NULL_ARG(coinorder_handle_with_headers(fx.svc, "GET", "/v1/orders", headers, NULL, 0, &status_sentinel,
                                                  NULL, &out, &err),
                    "headers_json_out");
    CHECK_INT_EQ(status_sentinel, 7);
    CHECK(out == NULL);
    fixture_close(&fx);
}

/* coinorder_handle_from: failed authentications are limited per client address. */
static void test_handle_from(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    const char *bad = "{\"x-api-key\":\"test_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}";
    uint16_t status = 0;
    char *head = NULL;
    char *out = NULL;
    int unauthorized = 0, limited = 0;
    for (int i = 0; i < 30; i++) {
        head = NULL;
        out = NULL;
        EXPECT_OK(coinorder_handle_from(fx.svc, "203.0.113.7", "GET", "/v1/orders", bad, NULL, 0, &status, &head, &out,
                                        &err));
        if (status == 401) unauthorized++;
        if (status == 400 && strstr(out, "API_LIMIT_EXCEEDED") && strstr(head, "\"retry-after\":\"")) limited++;
        coinorder_string_free(head);
        coinorder_string_free(out);
    }
    CHECK(unauthorized >= 20 && unauthorized < 30);
    CHECK_INT_EQ(unauthorized + limited, 30);

    /* Another address, and no address at all, are not held back by that one's failures. */
    char headers[256];
    snprintf(headers, sizeof headers, "{\"x-api-key\":\"%s\"}", fx.key);
    head = NULL;
    out = NULL;
    EXPECT_OK(coinorder_handle_from(fx.svc, "2001:db8::1", "GET", "/v1/orders", headers, NULL, 0, &status, &head, &out,
                                    &err));
    CHECK_INT_EQ(status, 200);
    coinorder_string_free(head);
    coinorder_string_free(out);
    head = NULL;
    out = NULL;
    EXPECT_OK(coinorder_handle_from(fx.svc, NULL, "GET", "/v1/orders", bad, NULL, 0, &status, &head, &out, &err));
    CHECK_INT_EQ(status, 401);
    coinorder_string_free(head);
    coinorder_string_free(out);

    /* With a port, as some servers give it: the same address, its budget spent. */
    head = NULL;
    out = NULL;
    EXPECT_OK(coinorder_handle_from(fx.svc, "203.0.113.7:80", "GET", "/v1/orders", headers, NULL, 0, &status, &head,
                                    &out, &err));
    CHECK_INT_EQ(status, 400);
    coinorder_string_free(head);
    coinorder_string_free(out);
    /* Not an address (a unix socket's empty one): unknown, not an error, never counted. */
    for (int i = 0; i < 25; i++) {
        head = NULL;
        out = NULL;
        EXPECT_OK(coinorder_handle_from(fx.svc, "", "GET", "/v1/orders", bad, NULL, 0, &status, &head, &out, &err));
        CHECK_INT_EQ(status, 401);
        coinorder_string_free(head);
        coinorder_string_free(out);
    }
    EXPECT_BAD_UTF8(coinorder_handle_from(fx.svc, BAD_UTF8, "GET", "/v1/orders", headers, NULL, 0, &status, &head,
                                          &out, &err),
                    "client_address");
    fixture_close(&fx);
}

static void test_handle(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char headers[256];
    snprintf(headers, sizeof headers, "{\"x-api-key\":\"%s\",\"content-type\":\"application/json\"}", fx.key);
    const char *create = "{\"currency\":\"USD\",\"amount\":19.99,\"merchant_order_id\":\"cart-7\",\"title\":\"T\"}";
    uint16_t status = 0;
    char *out = NULL;
    char order_id[128] = "";

    /* 201: created. */
    EXPECT_OK(handle(fx.svc, "POST", "/v1/orders", headers, create, &status, &out, &err));
    CHECK_INT_EQ(status, 201);
    CHECK_CONTAINS(out, "\"status\":201");
    CHECK_CONTAINS(out, "\"message\":\"Order created successfully\"");
    CHECK_CONTAINS(out, "\"merchant_order_id\":\"cart-7\"");
    CHECK_CONTAINS(out, "\"payment_url\":");
    CHECK(json_str(out, "order_id", order_id, sizeof order_id));
    coinorder_string_free(out);

    /* The same order through the typed API: one order, the same id. */
    char typed_id[128] = "";
    CHECK(CREATE_ORDER(&fx, create, typed_id));
    CHECK_STR_EQ(typed_id, order_id);

    /* 200: get and list. */
    char path[256];
    snprintf(path, sizeof path, "/v1/orders/%s", order_id);
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", path, headers, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 200);
    CHECK_CONTAINS(out, "\"status\":200");
    CHECK_CONTAINS(out, "\"order\":{");
    CHECK_CONTAINS(out, "\"invoice\":{");
    CHECK_CONTAINS(out, order_id);
    coinorder_string_free(out);

    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "get", "/v1/orders?limit=5&status=NEW", headers, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 200);
    CHECK_CONTAINS(out, "\"limit\":5");
    CHECK_CONTAINS(out, "\"orders\":[");
    CHECK_CONTAINS(out, order_id);
    coinorder_string_free(out);

    /* 400s. */
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "POST", "/v1/orders", headers, "{\"currency\":\"USD\",\"amount\":0}", &status, &out,
                     &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "\"status\":400");
    CHECK_CONTAINS(out, "\"error_code\":\"PARAMETERS_MISSING\"");
    CHECK_CONTAINS(out, "\"error\":\"amount: must be greater than 0\"");
    coinorder_string_free(out);

    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "POST", "/v1/orders", headers, "not json", &status, &out, &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "\"error_code\":\"PARAMETERS_MISSING\"");
    CHECK_CONTAINS(out, "\"error\":\"body: must be a JSON object (not valid JSON: expected ident at line 1 column 2)\"");
    coinorder_string_free(out);

    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", "/v1/orders/no-such-order", headers, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "\"error_code\":\"ORDER_NOT_VALID\"");
    CHECK_CONTAINS(out, "\"error\":\"order not found\"");
    coinorder_string_free(out);

    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", "/v1/orders?limit=51", headers, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "\"error_code\":\"API_LIMIT_EXCEEDED\"");
    coinorder_string_free(out);

    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "POST", "/v1/orders", headers,
                     "{\"currency\":\"USD\",\"amount\":20,\"merchant_order_id\":\"cart-7\"}", &status, &out, &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "\"error_code\":\"ORDER_DUPLICATE\"");
    coinorder_string_free(out);

    /* headers_json NULL: no key, AUTHENTICATION_FAILED (400). */
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", "/v1/orders", NULL, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "\"status\":400");
    CHECK_CONTAINS(out, "\"error_code\":\"AUTHENTICATION_FAILED\"");
    CHECK_CONTAINS(out, "\"error\":\"Authentication token is not set or expired\"");
    coinorder_string_free(out);

    /* An empty header object: the same. */
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", "/v1/orders", "{}", NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 400);
    CHECK_CONTAINS(out, "\"error_code\":\"AUTHENTICATION_FAILED\"");
    coinorder_string_free(out);

    /* 401: an unknown key. */
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", "/v1/orders", "{\"x-api-key\":\"test_doesnotexist\"}", NULL, &status, &out,
                     &err));
    CHECK_INT_EQ(status, 401);
    CHECK_CONTAINS(out, "\"status\":401");
    CHECK_CONTAINS(out, "\"error_code\":\"Unauthorized\"");
    CHECK_CONTAINS(out, "\"error\":\"API credentials are not valid\"");
    coinorder_string_free(out);

    /* 404: no such route. */
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", "/v2/nothing", headers, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 404);
    CHECK_CONTAINS(out, "\"status\":404");
    CHECK_CONTAINS(out, "\"error_code\":\"Not Found\"");
    coinorder_string_free(out);
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "DELETE", "/v1/orders", headers, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 404);
    CHECK_CONTAINS(out, "\"error_code\":\"Not Found\"");
    coinorder_string_free(out);

    /* Simulation through the wire, in the sandbox: 200 and the order. */
    char sim_path[256];
    snprintf(sim_path, sizeof sim_path, "/v1/orders/%s/simulate", order_id);
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "POST", sim_path, headers, "{\"action\":\"pay\"}", &status, &out, &err));
    CHECK_INT_EQ(status, 200);
    CHECK_CONTAINS(out, "\"status\":\"PAID\"");
    coinorder_string_free(out);

    /* The payment page is served too (HTML, no key). */
    char page[256];
    snprintf(page, sizeof page, "/pay?id=%s", order_id);
    out = NULL;
    status = 0;
    EXPECT_OK(handle(fx.svc, "GET", page, NULL, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 200);
    CHECK_CONTAINS(out, "<");
    coinorder_string_free(out);

    /* Bad arguments: failures of the call, out pointers untouched. */
    uint16_t status_sentinel = 777;
    char *body_sentinel = SENTINEL;
    EXPECT_NULL_ARG(handle(NULL, "GET", "/v1/orders", headers, NULL, &status_sentinel, &body_sentinel, &err),
                    "service");
    EXPECT_NULL_ARG(handle(fx.svc, NULL, "/v1/orders", headers, NULL, &status_sentinel, &body_sentinel, &err),
                    "method");
    EXPECT_NULL_ARG(handle(fx.svc, "GET", NULL, headers, NULL, &status_sentinel, &body_sentinel, &err),
                    "path_and_query");
    EXPECT_NULL_ARG(handle(fx.svc, "GET", "/v1/orders", headers, NULL, NULL, &body_sentinel, &err),
                    "http_status_out");
    EXPECT_NULL_ARG(handle(fx.svc, "GET", "/v1/orders", headers, NULL, &status_sentinel, NULL, &err), "body_out");
    EXPECT_NULL_ARG(coinorder_handle(fx.svc, "POST", "/v1/orders", headers, NULL, 5, &status_sentinel,
                                     &body_sentinel, &err),
                    "body");
    EXPECT_BAD_UTF8(handle(fx.svc, BAD_UTF8, "/v1/orders", headers, NULL, &status_sentinel, &body_sentinel, &err),
                    "method");
    EXPECT_BAD_UTF8(handle(fx.svc, "GET", BAD_UTF8, headers, NULL, &status_sentinel, &body_sentinel, &err),
                    "path_and_query");
    EXPECT_BAD_UTF8(handle(fx.svc, "GET", "/v1/orders", BAD_UTF8, NULL, &status_sentinel, &body_sentinel, &err),
                    "headers_json");
    EXPECT_BAD_JSON(handle(fx.svc, "GET", "/v1/orders", "{\"x-api-key\":", NULL, &status_sentinel, &body_sentinel,
                           &err),
                    "headers_json");
    EXPECT_JSON_SHAPE(handle(fx.svc, "GET", "/v1/orders", "[\"x-api-key\"]", NULL, &status_sentinel,
                             &body_sentinel, &err),
                      "headers_json: must be a JSON object");
    EXPECT_JSON_SHAPE(handle(fx.svc, "GET", "/v1/orders", "\"x-api-key\"", NULL, &status_sentinel,
                             &body_sentinel, &err),
                      "headers_json: must be a JSON object");
    EXPECT_JSON_SHAPE(handle(fx.svc, "GET", "/v1/orders", "{\"x-api-key\":1}", NULL, &status_sentinel,
                             &body_sentinel, &err),
                      "headers_json: must be a JSON object of strings");
    CHECK_INT_EQ(status_sentinel, 777);
    CHECK(body_sentinel == SENTINEL);
    CHECK_INT_EQ(handle(NULL, "GET", "/v1/orders", headers, NULL, &status_sentinel, &body_sentinel, NULL),
                 COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(handle(fx.svc, "GET", "/v1/orders", "[]", NULL, &status_sentinel, &body_sentinel, NULL),
                 COINORDER_INVALID_JSON);
    CHECK_INT_EQ(status_sentinel, 777);
    CHECK(body_sentinel == SENTINEL);
    fixture_close(&fx);

    /* Live: simulation is no route at all (404). */
    struct fixture live;
    REQUIRE(fixture_open(&live, LIVE));
    snprintf(headers, sizeof headers, "{\"x-api-key\":\"%s\"}", live.key);
    out = NULL;
    status = 0;
    EXPECT_OK(handle(live.svc, "POST", "/v1/orders/anything/simulate", headers, "{\"action\":\"pay\"}", &status,
                     &out, &err));
    CHECK_INT_EQ(status, 404);
    CHECK_CONTAINS(out, "\"error_code\":\"Not Found\"");
    coinorder_string_free(out);
    /* A sandbox key on the live service: 401. */
    snprintf(headers, sizeof headers, "{\"x-api-key\":\"%s\"}", fx.key);
    out = NULL;
    status = 0;
    EXPECT_OK(handle(live.svc, "GET", "/v1/orders", headers, NULL, &status, &out, &err));
    CHECK_INT_EQ(status, 401);
    CHECK_CONTAINS(out, "\"error_code\":\"Unauthorized\"");
    coinorder_string_free(out);
    fixture_close(&live);
}

static void test_err_null_still_returns_status(void) {
    struct fixture fx;
    REQUIRE(fixture_open(&fx, SANDBOX));
    char *out = SENTINEL;
    uint16_t status = 0;
    CHECK_INT_EQ(coinorder_key_list(fx.svc, NULL, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_key_set_webhook_url(fx.svc, BAD_UTF8, NULL, &out, NULL), COINORDER_INVALID_UTF8);
    CHECK_INT_EQ(coinorder_order_get(fx.svc, fx.key, "nope", &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_order_list(fx.svc, fx.key, "{", &out, NULL), COINORDER_INVALID_JSON);
    CHECK_INT_EQ(coinorder_order_cancel(fx.svc, fx.key, "nope", &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_payment_confirm(fx.svc, "nope", &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_payment_reject(fx.svc, NULL, &out, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_payment_record(fx.svc, "nope", "tx", "1", true, &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_simulate(fx.svc, "nope", "{", &out, NULL), COINORDER_INVALID_JSON);
    CHECK_INT_EQ(coinorder_deliver_due(fx.svc, 1, NULL, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_key_delete(fx.svc, "key_nope", NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_rate_set(fx.svc, "BTC", "USD", "x", 0, &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_rate_list(fx.svc, NULL, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_wallet_set(fx.svc, "BTC", "nope", &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_wallet_list(NULL, &out, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_wallet_remove(fx.svc, BAD_UTF8, NULL, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_wallet_address(fx.svc, "BTC", 0, &out, NULL), COINORDER_ERROR);
    CHECK_INT_EQ(coinorder_watch_chain_due(fx.svc, NULL, NULL), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_handle(fx.svc, "GET", "/", "{", NULL, 0, &status, &out, NULL), COINORDER_INVALID_JSON);
    CHECK(out == SENTINEL);
    CHECK_INT_EQ(status, 0);
    fixture_close(&fx);
}

static void test_errors_are_independent_objects(void) {
    /* Two errors alive at once, each with its own text, read after other calls. */
    coinorder_error *a = NULL;
    coinorder_error *b = NULL;
    CHECK_INT_EQ(coinorder_signature_verify(NULL, NULL, NULL, NULL, NULL, 0, 0, &a), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_signature_verify(SW_SECRET, SW_MSG_ID, SW_TIMESTAMP, "v1,", (const uint8_t *)SW_BODY,
                                            strlen(SW_BODY), SW_NOW, &b),
                 COINORDER_ERROR);
    REQUIRE(a != NULL && b != NULL && a != b);
    CHECK_STR_EQ(coinorder_error_message(a), "secret: must not be NULL");
    CHECK_STR_EQ(coinorder_error_code(b), "SIGNATURE_INVALID");
    CHECK_INT_EQ(coinorder_error_status(a), COINORDER_NULL_ARGUMENT);
    CHECK_INT_EQ(coinorder_error_status(b), COINORDER_ERROR);
    coinorder_error_free(a);
    CHECK_STR_EQ(coinorder_error_message(b), "webhook signature: no matching signature");
    coinorder_error_free(b);
}

/* ---------------------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------------------- */

static void test_workers(void) {
    coinorder_error *err;
    struct fixture fx;
    REQUIRE(fixture_open(&fx, "{\"rate_limit\":0,\"invoice_ttl\":1}"));
    EXPECT_NULL_ARG(coinorder_workers_start(NULL, 1000, 100, &err), "service");
    EXPECT_ERROR(coinorder_workers_start(fx.svc, 0, 100, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "interval_ms: must be from 1 to 3600000");
    EXPECT_ERROR(coinorder_workers_start(fx.svc, 20, 0, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "batch: must be from 1 to 10000");

    char unpaid[128];
    REQUIRE(CREATE_ORDER(&fx, "{\"currency\":\"USD\",\"amount\":10}", unpaid));
    EXPECT_OK(coinorder_workers_start(fx.svc, 20, 100, &err));
    EXPECT_ERROR(coinorder_workers_start(fx.svc, 20, 100, &err), "PARAMETERS_MISSING",
                 COINORDER_ERROR_PARAMETERS_MISSING, 400, "workers: already running");
    /* Nobody reads the order: the expiry worker moves it once its quote runs out. */
    struct timespec past_the_quote = {1, 400 * 1000 * 1000};
    nanosleep(&past_the_quote, NULL);
    coinorder_workers_stop(fx.svc);
    coinorder_workers_stop(fx.svc); /* none running: fine */
    coinorder_workers_stop(NULL);
    char *out = NULL;
    EXPECT_OK(coinorder_expire_due(fx.svc, &out, &err));
    CHECK_STR_EQ(out, "{\"expired\":0,\"failed\":0}");
    coinorder_string_free(out);
    CHECK_ORDER_STATUS(&fx, unpaid, "EXPIRED");

    /* Started again and left running: closing the service stops them first. */
    EXPECT_OK(coinorder_workers_start(fx.svc, 20, 100, &err));
    fixture_close(&fx);
}

int main(void) {
    if (harness_make_temp_dir("api", g_dir, sizeof g_dir) != 0) {
        return 2;
    }

    static const struct harness_test tests[] = {
        {"version and abi version", test_version_and_abi},
        {"NULL is fine for free, close and the error accessors", test_null_is_fine_for_free_close_and_accessors},
        {"status and error number values", test_status_and_error_number_values},
        {"service_open failures", test_service_open_failures},
        {"service_open defaults and close", test_service_open_defaults_and_close},
        {"closed then reopened service reads the order back", test_close_and_reopen_reads_order_back},
        {"a forked child gets an error from the parent's service", test_a_forked_child_gets_an_error_from_the_parents_service},
        {"key_create", test_key_create},
        {"key_list", test_key_list},
        {"key_set_active", test_key_set_active},
        {"key_set_webhook_url", test_key_set_webhook_url},
        {"key_get, key_set_display_name", test_key_get_and_display_name},
        {"key_rotate_webhook_secret", test_key_rotate_webhook_secret},
        {"key_delete", test_key_delete},
        {"order_create", test_order_create},
        {"order_get", test_order_get},
        {"order_list", test_order_list},
        {"order_cancel", test_order_cancel},
        {"order_mark_paid", test_order_mark_paid},
        {"payment_record, confirm, reject; order_payments", test_payments},
        {"simulate (sandbox and live)", test_simulate},
        {"expire_due: NEW -> EXPIRED, PENDING short -> FAILED", test_expire_due},
        {"workers_start, workers_stop: expiry without host loops", test_workers},
        {"deliver_due without a webhook url", test_deliver_due},
        {"redeliver: an event sent again; event_deliveries", test_redeliver},
        {"send_due_emails: payment links to a real SMTP server", test_send_due_emails},
        {"rate_set, rate_list (live quotes with them)", test_rates},
        {"wallet_set, wallet_address: invoices get the derived addresses", test_wallet_set_and_address},
        {"wallet_set refuses a private key without echoing it", test_wallet_refuses_a_private_key},
        {"wallet_list, wallet_remove", test_wallet_list_and_remove},
        {"watch_chain_due (no chain; a refused endpoint, redacted, backs off)", test_watch_chain_due},
        {"signature_verify (Standard Webhooks test vector)", test_signature_verify},
        {"handle (201/200/400/401/404, headers)", test_handle},
        {"handle_with_headers (content-type, retry-after; a header sent twice)", test_handle_with_headers},
        {"handle_from (failed authentications limited per client address)", test_handle_from},
        {"err NULL still returns the status", test_err_null_still_returns_status},
        {"errors are independent objects", test_errors_are_independent_objects},
    };
    int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
    harness_remove_dir(g_dir);
    return rc;
}
