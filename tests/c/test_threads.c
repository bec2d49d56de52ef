/*
 * One coinorder_service shared by 8 pthreads, each creating 200 orders (distinct
 * merchant_order_id) with coinorder_order_create and reading each back with
 * coinorder_order_get. No call may fail; the 1,600 order ids must be distinct, and
 * coinorder_order_list (pages of 50 via offset) must report exactly them.
 *
 * Build: gcc -std=c11 -Wall -Wextra -Werror -pedantic -pthread test_threads.c \
 *            $(pkg-config --cflags --libs coinorder)
 */

#define _POSIX_C_SOURCE 200809L

#include <coinorder.h>

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define THREADS 8
#define ORDERS_PER_THREAD 200
#define TOTAL (THREADS * ORDERS_PER_THREAD)
#define ID_SIZE 64
#define PAGE 50

static char g_dir[4096];
static coinorder_service *g_svc;
static char g_key[128];

/* All ids, thread t writing slots [t*ORDERS_PER_THREAD, (t+1)*ORDERS_PER_THREAD). */
static char g_ids[TOTAL][ID_SIZE];

struct worker {
    int index;
    int failures;
    char first_failure[512];
};

/* The string value of the first "key":"..." at or after json. */
static const char *json_str(const char *json, const char *key, char *buf, size_t size) {
    char needle[64];
    if (json == NULL) {
        return NULL;
    }
    snprintf(needle, sizeof needle, "\"%s\":\"", key);
    const char *p = strstr(json, needle);
    if (p == NULL) {
        return NULL;
    }
    p += strlen(needle);
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < size) {
        buf[n++] = *p++;
    }
    buf[n] = '\0';
    return *p == '"' ? p : NULL;
}

static void worker_fail(struct worker *w, const char *what, coinorder_error *err) {
    if (w->failures++ == 0) {
        snprintf(w->first_failure, sizeof w->first_failure, "thread %d: %s: %s: %s", w->index, what,
                 err ? coinorder_error_code(err) : "-", err ? coinorder_error_message(err) : "-");
    }
    coinorder_error_free(err);
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    char request[256];
    for (int i = 0; i < ORDERS_PER_THREAD; i++) {
        char *slot = g_ids[w->index * ORDERS_PER_THREAD + i];
        snprintf(request, sizeof request,
                 "{\"currency\":\"USD\",\"amount\":%d.%02d,\"merchant_order_id\":\"t%d-o%d\",\"title\":\"thread %d\"}",
                 1 + i, w->index, w->index, i, w->index);
        char *created = NULL;
        coinorder_error *err = NULL;
        if (coinorder_order_create(g_svc, g_key, request, &created, &err) != COINORDER_OK) {
            worker_fail(w, "coinorder_order_create", err);
            continue;
        }
        if (json_str(created, "order_id", slot, ID_SIZE) == NULL) {
            worker_fail(w, "no order_id in the create answer", NULL);
        }
        coinorder_string_free(created);

        char *got = NULL;
        err = NULL;
        if (coinorder_order_get(g_svc, g_key, slot, &got, &err) != COINORDER_OK) {
            worker_fail(w, "coinorder_order_get", err);
            continue;
        }
        char got_id[ID_SIZE] = "";
        char got_mid[64] = "";
        char want_mid[64];
        snprintf(want_mid, sizeof want_mid, "t%d-o%d", w->index, i);
        json_str(got, "order_id", got_id, sizeof got_id);
        json_str(got, "merchant_order_id", got_mid, sizeof got_mid);
        if (strcmp(got_id, slot) != 0 || strcmp(got_mid, want_mid) != 0) {
            worker_fail(w, "coinorder_order_get returned another order", NULL);
        }
        coinorder_string_free(got);
    }
    return NULL;
}

static int compare_ids(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void test_concurrent_create_and_get(void) {
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    int started = 0;
    memset(g_ids, 0, sizeof g_ids);
    for (int t = 0; t < THREADS; t++) {
        workers[t].index = t;
        workers[t].failures = 0;
        workers[t].first_failure[0] = '\0';
        int rc = pthread_create(&threads[t], NULL, worker_main, &workers[t]);
        CHECK_MSG(rc == 0, "pthread_create failed: %d", rc);
        if (rc == 0) {
            started++;
        } else {
            break;
        }
    }
    for (int t = 0; t < started; t++) {
        pthread_join(threads[t], NULL);
    }
    REQUIRE(started == THREADS);
    for (int t = 0; t < THREADS; t++) {
        CHECK_MSG(workers[t].failures == 0, "%d failures, first: %s", workers[t].failures, workers[t].first_failure);
    }

    /* 1,600 distinct ids. */
    static char sorted[TOTAL][ID_SIZE];
    memcpy(sorted, g_ids, sizeof sorted);
    qsort(sorted, TOTAL, ID_SIZE, compare_ids);
    int empty = 0;
    int duplicates = 0;
    for (int i = 0; i < TOTAL; i++) {
        if (sorted[i][0] == '\0') {
            empty++;
        } else if (i > 0 && strcmp(sorted[i], sorted[i - 1]) == 0) {
            duplicates++;
        }
    }
    CHECK_INT_EQ(empty, 0);
    CHECK_INT_EQ(duplicates, 0);
}

static void test_list_reports_them_all(void) {
    static char listed[TOTAL + PAGE][ID_SIZE];
    int count = 0;
    int pages = 0;
    int has_more = 1;
    char query[128];
    while (has_more && count <= TOTAL) {
        snprintf(query, sizeof query, "{\"limit\":%d,\"offset\":%d}", PAGE, count);
        char *out = NULL;
        coinorder_error *err = NULL;
        coinorder_status st = coinorder_order_list(g_svc, g_key, query, &out, &err);
        if (st != COINORDER_OK) {
            CHECK_MSG(0, "coinorder_order_list(%s) failed: %s", query, err ? coinorder_error_message(err) : "-");
            coinorder_error_free(err);
            return;
        }
        pages++;
        int on_page = 0;
        const char *p = out;
        char id[ID_SIZE];
        while ((p = json_str(p, "order_id", id, sizeof id)) != NULL) {
            if (count < TOTAL + PAGE) {
                memcpy(listed[count], id, ID_SIZE);
            }
            count++;
            on_page++;
        }
        has_more = strstr(out, "\"has_more\":true") != NULL;
        CHECK_MSG(on_page == PAGE || !has_more, "page %d has %d orders and more follow", pages, on_page);
        CHECK_MSG(on_page > 0 || count == 0, "page %d is empty", pages);
        coinorder_string_free(out);
        if (on_page == 0) {
            break;
        }
    }
    CHECK_INT_EQ(count, TOTAL);
    CHECK_INT_EQ(pages, TOTAL / PAGE);
    REQUIRE(count == TOTAL);

    /* The listed ids are exactly the created ones. */
    static char created[TOTAL][ID_SIZE];
    memcpy(created, g_ids, sizeof created);
    qsort(created, TOTAL, ID_SIZE, compare_ids);
    qsort(listed, TOTAL, ID_SIZE, compare_ids);
    int mismatches = 0;
    for (int i = 0; i < TOTAL; i++) {
        if (strcmp(created[i], listed[i]) != 0) {
            mismatches++;
        }
    }
    CHECK_INT_EQ(mismatches, 0);

    /* status NEW lists them all too; nothing past the end. */
    char *out = NULL;
    coinorder_error *err = NULL;
    snprintf(query, sizeof query, "{\"status\":\"NEW\",\"limit\":%d,\"offset\":%d}", PAGE, TOTAL - 1);
    CHECK_INT_EQ(coinorder_order_list(g_svc, g_key, query, &out, &err), COINORDER_OK);
    CHECK(out != NULL && strstr(out, "\"has_more\":false") != NULL);
    int last = 0;
    for (const char *p = out; p && (p = strstr(p, "\"order_id\":")) != NULL; p++) {
        last++;
    }
    CHECK_INT_EQ(last, 1);
    coinorder_string_free(out);
    coinorder_error_free(err);
}

int main(void) {
    if (harness_make_temp_dir("threads", g_dir, sizeof g_dir) != 0) {
        return 2;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/threads.sqlite", g_dir);

    coinorder_error *err = NULL;
    char *key = NULL;
    if (coinorder_service_open(path, "{\"rate_limit\":0,\"synchronous\":\"normal\"}", &g_svc, &err) != COINORDER_OK ||
        coinorder_key_create(g_svc, "{\"user_id\":1}", &key, &err) != COINORDER_OK ||
        json_str(key, "key", g_key, sizeof g_key) == NULL) {
        fprintf(stderr, "setup failed: %s\n", err ? coinorder_error_message(err) : "no key in the answer");
        printf("not ok - setup: %s\nc: 0 passed, 1 failed\n", err ? coinorder_error_message(err) : "no key");
        coinorder_error_free(err);
        coinorder_string_free(key);
        coinorder_service_close(g_svc);
        harness_remove_dir(g_dir);
        return 1;
    }
    coinorder_string_free(key);

    static const struct harness_test tests[] = {
        {"8 threads x 200 orders: create and get, 1600 distinct ids", test_concurrent_create_and_get},
        {"order_list reports all 1600 orders (pages of 50)", test_list_reports_them_all},
    };
    int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
    coinorder_service_close(g_svc);
    harness_remove_dir(g_dir);
    return rc;
}
