/*
 * A deliberately leaking program: it takes a string from libcoinorder and never calls
 * coinorder_string_free() on it. scripts/test-c runs it under the same valgrind gate as
 * the tests and expects the gate to FAIL (a definite leak), proving the gate can fail.
 *
 * Build: gcc -std=c11 -Wall -Wextra -Werror -pedantic leak_canary.c $(pkg-config --cflags --libs coinorder)
 */

#define _POSIX_C_SOURCE 200809L

#include <coinorder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Takes the key list and drops the only pointer to it: a definite leak. */
static size_t leak_one_string(coinorder_service *svc) {
    char *keys = NULL;
    if (coinorder_key_list(svc, &keys, NULL) != COINORDER_OK || keys == NULL) {
        return 0;
    }
    size_t length = strlen(keys);
    keys = NULL; /* deliberately NOT coinorder_string_free(keys) */
    return length;
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    char path[4200];
    char keyfile[4300];
    snprintf(dir, sizeof dir, "%s/coinorder-c-canary-XXXXXX", (tmp && tmp[0]) ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(path, sizeof path, "%s/canary.sqlite", dir);

    coinorder_service *svc = NULL;
    coinorder_error *err = NULL;
    if (coinorder_service_open(path, "{\"rate_limit\":0}", &svc, &err) != COINORDER_OK) {
        fprintf(stderr, "leak_canary: open failed: %s\n", coinorder_error_message(err));
        coinorder_error_free(err);
        return 2;
    }
    size_t length = leak_one_string(svc);
    coinorder_service_close(svc);

    /* Tidy the files up; only the string stays leaked. */
    const char *suffixes[] = {"", "-wal", "-shm", ".key"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(keyfile, sizeof keyfile, "%s%s", path, suffixes[i]);
        unlink(keyfile);
    }
    rmdir(dir);
    printf("leak_canary: leaked a %zu-byte string\n", length);
    return 0;
}
