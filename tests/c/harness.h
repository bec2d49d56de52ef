/*
 * A tiny test harness for the C tests of libcoinorder (header only, C11).
 *
 * Each test is a `void name(void)` function listed in a `struct harness_test` table and
 * run by `harness_run()`. CHECK-style macros record a failure with file:line and a
 * message and carry on; REQUIRE-style macros also return from the test function. The
 * runner prints one line per test:
 *
 *     ok - name
 *     not ok - name: file:line: reason (+N more)
 *
 * and at the end exactly `c: N passed, N failed` (N counts test functions). It returns
 * the process exit code: 1 if any test failed, 0 otherwise.
 */

#ifndef COINORDER_TEST_HARNESS_H
#define COINORDER_TEST_HARNESS_H

#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct harness_test {
    const char *name;
    void (*fn)(void);
};

struct harness_state {
    int failures;      /* failed checks in the current test */
    char reason[1024]; /* the first one, "file:line: message" */
};

static inline struct harness_state *harness_state(void) {
    static struct harness_state state;
    return &state;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline void harness_fail(const char *file, int line, const char *fmt, ...) {
    struct harness_state *st = harness_state();
    if (st->failures++ == 0) {
        int n = snprintf(st->reason, sizeof st->reason, "%s:%d: ", file, line);
        if (n < 0 || (size_t)n >= sizeof st->reason) {
            n = 0;
        }
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->reason + n, sizeof st->reason - (size_t)n, fmt, ap);
        va_end(ap);
        /* One line per test: no newline may leak into the reason. */
        for (char *p = st->reason; *p; p++) {
            if (*p == '\n' || *p == '\r') {
                *p = ' ';
            }
        }
    }
}

/* Whether the current test has failed so far. */
static inline int harness_test_failed(void) { return harness_state()->failures != 0; }

static inline int harness_run(const struct harness_test *tests, size_t count) {
    int passed = 0;
    int failed = 0;
    for (size_t i = 0; i < count; i++) {
        struct harness_state *st = harness_state();
        st->failures = 0;
        st->reason[0] = '\0';
        tests[i].fn();
        if (st->failures == 0) {
            printf("ok - %s\n", tests[i].name);
            passed++;
        } else if (st->failures == 1) {
            printf("not ok - %s: %s\n", tests[i].name, st->reason);
            failed++;
        } else {
            printf("not ok - %s: %s (+%d more)\n", tests[i].name, st->reason, st->failures - 1);
            failed++;
        }
        fflush(stdout);
    }
    printf("c: %d passed, %d failed\n", passed, failed);
    fflush(stdout);
    return failed ? 1 : 0;
}

/* CHECK_MSG(cond, fmt, args...): records a failure with a printf-style message. */
#define CHECK_MSG(cond, ...)                                  \
    do {                                                      \
        if (!(cond)) {                                        \
            harness_fail(__FILE__, __LINE__, __VA_ARGS__);    \
        }                                                     \
    } while (0)

/* CHECK(cond): records a failure naming the condition. */
#define CHECK(cond) CHECK_MSG(cond, "check failed: %s", #cond)

/* REQUIRE(cond): as CHECK, and ends the test function when it fails. */
#define REQUIRE(cond)                                                       \
    do {                                                                    \
        if (!(cond)) {                                                      \
            harness_fail(__FILE__, __LINE__, "requirement failed: %s", #cond); \
            return;                                                         \
        }                                                                   \
    } while (0)

/* Integer equality, printing both values. */
#define CHECK_INT_EQ(actual, expected)                                                   \
    do {                                                                                 \
        long long harness_a_ = (long long)(actual);                                      \
        long long harness_e_ = (long long)(expected);                                    \
        CHECK_MSG(harness_a_ == harness_e_, "%s is %lld, expected %lld", #actual, harness_a_, \
                  harness_e_);                                                           \
    } while (0)

/* String equality (NULL-safe), printing both values. */
#define CHECK_STR_EQ(actual, expected)                                                       \
    do {                                                                                     \
        const char *harness_a_ = (actual);                                                   \
        const char *harness_e_ = (expected);                                                 \
        CHECK_MSG(harness_a_ != NULL && harness_e_ != NULL && strcmp(harness_a_, harness_e_) == 0, \
                  "%s is \"%s\", expected \"%s\"", #actual, harness_a_ ? harness_a_ : "(null)",  \
                  harness_e_ ? harness_e_ : "(null)");                                       \
    } while (0)

/* Substring presence (NULL-safe). */
#define CHECK_CONTAINS(haystack, needle)                                                       \
    do {                                                                                       \
        const char *harness_h_ = (haystack);                                                   \
        const char *harness_n_ = (needle);                                                     \
        CHECK_MSG(harness_h_ != NULL && strstr(harness_h_, harness_n_) != NULL,                \
                  "%s does not contain \"%s\": %.300s", #haystack, harness_n_,                 \
                  harness_h_ ? harness_h_ : "(null)");                                         \
    } while (0)

/* Creates this run's temporary directory, $TMPDIR (or /tmp)/coinorder-c-<name>-XXXXXX,
 * into dir; 0 on success. */
static int harness_make_temp_dir(const char *name, char *dir, size_t size) {
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0') {
        tmp = "/tmp";
    }
    snprintf(dir, size, "%s/coinorder-c-%s-XXXXXX", tmp, name);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Removes a directory made by harness_make_temp_dir and the files in it. */
static void harness_remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    struct dirent *entry;
    char path[8300];
    while ((entry = readdir(d)) != NULL) {
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(dir);
}

#endif /* COINORDER_TEST_HARNESS_H */
