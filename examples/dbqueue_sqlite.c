/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* requires: sqlite3 */
/*
 * dbqueue_sqlite.c — a small key-value store on SQLite in WAL mode, ordered by a QueueKit DB queue.
 *
 * The layout is the classic "one writer, many readers" pool (GRDB's DatabasePool does the same):
 *   - one WRITER connection, used only inside qk_dbqueue_write / qk_dbqueue_write_async blocks,
 *     so writes are exclusive and run in FIFO order whatever thread submits them;
 *   - one READER connection per reader thread, used inside qk_dbqueue_read blocks: reads run
 *     concurrently with each other, never with a write, and see every write submitted before
 *     they began (WAL lets readers and the writer share the file without SQLITE_BUSY);
 *   - a read helper (kv_get) that business code calls anywhere. Called from inside a write, it
 *     runs inline and must use the WRITER connection: that is where the write's open transaction
 *     lives. It tells the two cases apart with an identity check: inside a write,
 *     qk_queue_check(qk_dbqueue_queue(db), QK_ON_QUEUE_AS_BARRIER) holds.
 *
 * At the end it checks that every write landed: each key's value and the running total.
 *
 * Usage: dbqueue_sqlite [writes-per-thread]   (default 300; validated with strtonum)
 * Exits 0 when every check held, 1 otherwise. The database lives in a temporary file (mkstemp)
 * that is removed at exit, with its -wal and -shm companions.
 */
#define _POSIX_C_SOURCE 200809L

#include <queuekit.h>

#include <bsd/stdlib.h> /* arc4random_uniform, strtonum */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define KEYS             32
#define TOTAL_KEY        0 /* key 0 holds the sum of keys 1..KEYS: updated in the same transaction */
#define WRITER_THREADS   3
#define READER_THREADS   3
#define READS_PER_THREAD 600

static char path[64];
static qk_dbqueue_t *db;
static sqlite3 *writer;                 /* only used inside writes (or reads nested in them) */
static pthread_key_t reader_connection; /* each reader thread's own connection */
static int failures;
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, long long got, long long expected) {
    pthread_mutex_lock(&failures_lock);
    failures++;
    pthread_mutex_unlock(&failures_lock);
    fprintf(stderr, "FAILED: %s: got %lld, expected %lld\n", what, got, expected);
}

static void remove_database_files(void) {
    char companion[80];
    if (path[0] == '\0') return;
    unlink(path);
    snprintf(companion, sizeof companion, "%s-wal", path);
    unlink(companion);
    snprintf(companion, sizeof companion, "%s-shm", path);
    unlink(companion);
}

static void exec_or_fail(sqlite3 *connection, const char *sql) {
    char *message = NULL;
    if (sqlite3_exec(connection, sql, NULL, NULL, &message) != SQLITE_OK) {
        fprintf(stderr, "FAILED: %s: %s\n", sql, message ? message : "?");
        sqlite3_free(message);
        pthread_mutex_lock(&failures_lock);
        failures++;
        pthread_mutex_unlock(&failures_lock);
    }
}

static sqlite3 *open_connection(void) {
    sqlite3 *connection = NULL;
    /* NOMUTEX: each connection is used by one thread at a time, which the DB queue guarantees
     * for the writer and the thread-per-reader layout guarantees for the readers. */
    if (sqlite3_open_v2(path, &connection,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite3_open_v2(%s): %s\n", path, sqlite3_errmsg(connection));
        return NULL;
    }
    sqlite3_busy_timeout(connection, 2000);
    return connection;
}

/* ---------------------------------------------------------------------------------------- */
/* The read helper: usable anywhere, picks the connection that sees the right state.        */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    int key;
    long long value;
} kv_lookup;

static sqlite3 *connection_for_this_block(void) {
    /* Inside a write (also a read nested in one), the thread holds the queue exclusively: use the
     * writer connection, whose open transaction holds the write's changes so far. */
    if (qk_queue_check(qk_dbqueue_queue(db), QK_ON_QUEUE_AS_BARRIER) == 0) return writer;
    return pthread_getspecific(reader_connection);
}

static void lookup(void *context) {
    kv_lookup *request = context;
    sqlite3 *connection = connection_for_this_block();
    sqlite3_stmt *statement = NULL;
    request->value = -1;
    if (connection == NULL) {
        fail("a read on a thread without a reader connection", 1, 0);
        return;
    }
    if (sqlite3_prepare_v2(connection, "SELECT value FROM kv WHERE key = ?", -1, &statement,
                           NULL) != SQLITE_OK) {
        fail("prepare SELECT", sqlite3_errcode(connection), SQLITE_OK);
        return;
    }
    sqlite3_bind_int(statement, 1, request->key);
    if (sqlite3_step(statement) == SQLITE_ROW) request->value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
}

/* Reads one key: inline when nested in a read or a write, concurrent with other reads otherwise. */
static long long kv_get(int key) {
    kv_lookup request;
    int status;
    request.key = key;
    status = qk_dbqueue_read(db, &request, lookup);
    if (status != 0) fail("qk_dbqueue_read status", status, 0);
    return request.value;
}

/* ---------------------------------------------------------------------------------------- */
/* Writes: a transaction on the writer connection, inside the DB queue.                      */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    int key;
    long long delta;
} kv_add_request;

static void set_value(int key, long long value) {
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(writer, "UPDATE kv SET value = ? WHERE key = ?", -1, &statement, NULL) !=
        SQLITE_OK) {
        fail("prepare UPDATE", sqlite3_errcode(writer), SQLITE_OK);
        return;
    }
    sqlite3_bind_int64(statement, 1, value);
    sqlite3_bind_int(statement, 2, key);
    if (sqlite3_step(statement) != SQLITE_DONE)
        fail("UPDATE", sqlite3_errcode(writer), SQLITE_DONE);
    sqlite3_finalize(statement);
}

static void add(void *context) {
    kv_add_request *request = context;
    exec_or_fail(writer, "BEGIN IMMEDIATE");
    /* Nested reads inside the write: kv_get runs inline, on the writer connection. */
    set_value(request->key, kv_get(request->key) + request->delta);
    set_value(TOTAL_KEY, kv_get(TOTAL_KEY) + request->delta);
    /* Read-your-own-writes inside the transaction. */
    if (kv_get(TOTAL_KEY) < request->delta)
        fail("the write sees its own change", kv_get(TOTAL_KEY), request->delta);
    exec_or_fail(writer, "COMMIT");
}

static void add_and_free(void *context) {
    add(context);
    free(context);
}

/* A synchronous write: returns once it committed. */
static void kv_add(int key, long long delta) {
    kv_add_request request;
    int status;
    request.key = key;
    request.delta = delta;
    status = qk_dbqueue_write(db, &request, add);
    if (status != 0) fail("qk_dbqueue_write status", status, 0);
}

/* A queued write: returns at once; a later read on any thread sees it. */
static void kv_add_async(int key, long long delta) {
    kv_add_request *request = malloc(sizeof *request);
    int status;
    if (request == NULL) {
        fail("malloc", 0, 1);
        return;
    }
    request->key = key;
    request->delta = delta;
    status = qk_dbqueue_write_async(db, request, add_and_free);
    if (status != 0) {
        free(request);
        fail("qk_dbqueue_write_async status", status, 0);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Threads                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static long writes_per_thread = 300;
static long long expected[WRITER_THREADS][KEYS + 1]; /* each writer thread's own tally */

/* Gives the calling thread its own reader connection, for its reads outside writes. */
static sqlite3 *attach_reader_connection(void) {
    sqlite3 *connection = open_connection();
    if (connection == NULL) fail("open a reader connection", 0, 1);
    pthread_setspecific(reader_connection, connection);
    return connection;
}

static void detach_reader_connection(sqlite3 *connection) {
    pthread_setspecific(reader_connection, NULL);
    sqlite3_close(connection);
}

static void *writer_thread(void *argument) {
    long long *tally = argument;
    sqlite3 *connection = attach_reader_connection(); /* writer threads read too */
    long i;
    for (i = 0; i < writes_per_thread; i++) {
        int key = 1 + (int)arc4random_uniform(KEYS);
        long long delta = 1 + (long long)arc4random_uniform(9);
        if (arc4random_uniform(2) == 0) {
            long long before = kv_get(key); /* outside any write: the reader path */
            kv_add(key, delta);
            /* Read-your-writes: this thread's sync write has committed. */
            if (kv_get(key) < before + delta)
                fail("read after a sync write", kv_get(key), before + delta);
        } else {
            kv_add_async(key, delta);
        }
        tally[key] += delta;
    }
    detach_reader_connection(connection);
    return NULL;
}

/* A consistent snapshot: inside one read, the total equals the sum of the keys. */
static void check_snapshot(void *context) {
    long long sum = 0;
    int key;
    (void)context;
    for (key = 1; key <= KEYS; key++) sum += kv_get(key); /* nested reads: inline */
    if (sum != kv_get(TOTAL_KEY))
        fail("snapshot: total equals the sum of the keys", kv_get(TOTAL_KEY), sum);
}

static void *reader_thread(void *unused) {
    sqlite3 *connection = attach_reader_connection();
    int i;
    (void)unused;
    if (connection == NULL) return NULL;
    for (i = 0; i < READS_PER_THREAD; i++) {
        if (i % 20 == 0) {
            int status = qk_dbqueue_read(db, NULL, check_snapshot);
            if (status != 0) fail("snapshot read status", status, 0);
        } else {
            if (kv_get(1 + (int)arc4random_uniform(KEYS)) < 0) fail("a key is missing", -1, 0);
        }
    }
    detach_reader_connection(connection);
    return NULL;
}

/* Creates the schema: one row per key, all zero. */
static void create_schema(void *context) {
    int key;
    char sql[96];
    (void)context;
    exec_or_fail(writer, "CREATE TABLE kv (key INTEGER PRIMARY KEY, value INTEGER NOT NULL)");
    exec_or_fail(writer, "BEGIN");
    for (key = 0; key <= KEYS; key++) {
        snprintf(sql, sizeof sql, "INSERT INTO kv (key, value) VALUES (%d, 0)", key);
        exec_or_fail(writer, sql);
    }
    exec_or_fail(writer, "COMMIT");
}

int main(int argc, char **argv) {
    pthread_t writers[WRITER_THREADS], readers[READER_THREADS];
    const char *error = NULL;
    sqlite3 *checker;
    long long total = 0;
    int fd, i, key;

    if (argc > 1) {
        writes_per_thread = (long)strtonum(argv[1], 1, 100000, &error);
        if (error != NULL) {
            fprintf(stderr, "usage: %s [writes-per-thread 1..100000]: %s\n", argv[0], error);
            return 2;
        }
    }

    strcpy(path, "/tmp/queuekit-kv-XXXXXX");
    fd = mkstemp(path); /* an empty file is a valid, empty SQLite database */
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    atexit(remove_database_files);

    db = qk_dbqueue_create("kv.db");
    writer = open_connection();
    if (db == NULL || writer == NULL) return 1;
    exec_or_fail(writer, "PRAGMA journal_mode = WAL");
    exec_or_fail(writer, "PRAGMA synchronous = OFF"); /* a throwaway demo file: skip the fsyncs */
    pthread_key_create(&reader_connection, NULL);
    if (qk_dbqueue_write(db, NULL, create_schema) != 0) fail("create the schema", 1, 0);

    for (i = 0; i < WRITER_THREADS; i++)
        pthread_create(&writers[i], NULL, writer_thread, expected[i]);
    for (i = 0; i < READER_THREADS; i++) pthread_create(&readers[i], NULL, reader_thread, NULL);
    for (i = 0; i < WRITER_THREADS; i++) pthread_join(writers[i], NULL);
    for (i = 0; i < READER_THREADS; i++) pthread_join(readers[i], NULL);

    /* Wait for the queued writes, then check every write landed, from a fresh connection. */
    if (qk_dbqueue_flush(db) != 0) fail("flush", 1, 0);
    checker = attach_reader_connection();
    for (key = 1; key <= KEYS; key++) {
        long long want = 0;
        for (i = 0; i < WRITER_THREADS; i++) want += expected[i][key];
        if (kv_get(key) != want) fail("a key's final value", kv_get(key), want);
        total += want;
    }
    if (kv_get(TOTAL_KEY) != total) fail("the final total", kv_get(TOTAL_KEY), total);
    printf("%d writer threads x %ld writes (sync and async), %d reader threads x %d reads: total "
           "%lld\n",
           WRITER_THREADS, writes_per_thread, READER_THREADS, READS_PER_THREAD, kv_get(TOTAL_KEY));
    detach_reader_connection(checker);

    if (qk_dbqueue_destroy(db) != 0) fail("destroy", 1, 0);
    sqlite3_close(writer);

    if (failures != 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok: every write landed\n");
    return 0;
}
