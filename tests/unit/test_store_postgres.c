/*
 * tests/unit/test_store_postgres.c - plugins/store-postgres/pg_store.c against
 * a real PostgreSQL server: the pg_server ctest fixture (tests/pg/server.sh)
 * starts one on a Unix socket and WEIR_PG_CONNINFO_FILE names its conninfo.
 * Without a server the test fails: it is never skipped.
 */
#include <libpq-fe.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "pg_store.h"
#include "session_log.h"
#include "surface.h"
#include "host_int.h"
#include "store.h"
#include "testutil.h"
#include "weir/host.h"

static char conninfo[1024];

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static pgs *connect_db(void) {
    pgs *db = NULL;
    pgs_status st = pgs_open(conninfo, &db);
    if (st != PGS_OK)
        fail_msg("pgs_open: %s", pgs_error(db));
    return db;
}

/* Run SQL on a plain connection (what a hostile or careless operator can do). */
static void raw_sql(const char *sql) {
    PGconn *c = PQconnectdb(conninfo);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

static void schema_is_created_once(void **state) {
    (void)state;
    pgs *a = connect_db(), *b = connect_db(); /* the second open finds version 1 */
    PGconn *c = PQconnectdb(conninfo);
    PGresult *r = PQexec(c, "SELECT count(*), max(version) FROM weir_schema");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), "1");
    assert_string_equal(PQgetvalue(r, 0, 1), "1");
    PQclear(r);
    PQfinish(c);
    pgs_close(a);
    pgs_close(b);
}

static void a_newer_schema_is_refused(void **state) {
    (void)state;
    raw_sql("INSERT INTO weir_schema VALUES (99)");
    pgs *db = NULL;
    assert_int_equal(pgs_open(conninfo, &db), PGS_IO);
    assert_non_null(strstr(pgs_error(db), "version 99"));
    pgs_close(db);
    raw_sql("DELETE FROM weir_schema WHERE version = 99");
}

static void a_bad_conninfo_names_the_failure(void **state) {
    (void)state;
    pgs *db = NULL;
    assert_int_equal(pgs_open("host=/nonexistent-weir-socket-dir dbname=weir", &db), PGS_IO);
    assert_non_null(strstr(pgs_error(db), "cannot connect"));
    pgs_close(db);
}

static const char *ev(char *buf, size_t n, long seq, const char *type) {
    snprintf(buf, n, "{\"seq\":%ld,\"time\":1,\"type\":\"%s\",\"data\":{\"turn\":1}}", seq, type);
    return buf;
}

static void append_read_and_fencing(void **state) {
    (void)state;
    pgs *a = connect_db(), *b = connect_db();
    int64_t ea, eb, next;
    assert_int_equal(pgs_lease(a, "s1", "worker-a", 60000, &ea, &next), PGS_OK);
    assert_int_equal(next, 0);
    char l0[128], l1[128], l2[128];
    const char *lines[] = {ev(l0, sizeof l0, 0, "turn/start"), ev(l1, sizeof l1, 1, "step/start"),
                           ev(l2, sizeof l2, 2, "step/end")};
    assert_int_equal(pgs_append(a, "s1", ea, 0, lines, 2), PGS_OK);
    /* a second writer is refused while the lease is live, naming the holder */
    assert_int_equal(pgs_lease(b, "s1", "worker-b", 60000, &eb, &next), PGS_BUSY);
    assert_non_null(strstr(pgs_error(b), "worker-a"));
    /* an append at the wrong seq changes nothing */
    assert_int_equal(pgs_append(a, "s1", ea, 5, lines + 2, 1), PGS_CONFLICT);
    assert_non_null(strstr(pgs_error(a), "next seq is 2"));
    assert_int_equal(pgs_append(a, "s1", ea, 2, lines + 2, 1), PGS_OK);
    char *buf;
    size_t len;
    assert_int_equal(pgs_read(b, "s1", 0, &buf, &len), PGS_OK);
    assert_int_equal(len, strlen(buf));
    /* jsonb keeps the values, not the bytes: the reader parses the lines */
    assert_int_equal(strchr(buf, '\n') - buf + 1 > 0, 1);
    size_t nl = 0;
    for (const char *p = buf; *p; p++)
        nl += *p == '\n';
    assert_int_equal(nl, 3);
    assert_non_null(strstr(buf, "\"step/end\""));
    free(buf);
    assert_int_equal(pgs_read(b, "s1", 2, &buf, &len), PGS_OK);
    assert_non_null(strstr(buf, "\"seq\": 2"));
    assert_null(strstr(buf, "\"seq\": 1"));
    free(buf);
    assert_int_equal(pgs_renew(a, "s1", ea, 60000), PGS_OK);
    pgs_close(a);
    pgs_close(b);
}

static void a_frozen_writer_is_fenced_after_a_takeover(void **state) {
    (void)state;
    pgs *a = connect_db(), *b = connect_db();
    int64_t ea, eb, next;
    assert_int_equal(pgs_lease(a, "s2", "worker-a", 30, &ea, &next), PGS_OK);
    char l0[128], l1[128];
    const char *first[] = {ev(l0, sizeof l0, 0, "turn/start")};
    assert_int_equal(pgs_append(a, "s2", ea, 0, first, 1), PGS_OK);
    sleep_ms(120); /* worker-a is frozen past its lease */
    assert_int_equal(pgs_lease(b, "s2", "worker-b", 60000, &eb, &next), PGS_OK);
    assert_true(eb > ea);
    assert_int_equal(next, 1);
    /* worker-a wakes up: its appends and its heartbeat are refused */
    const char *late[] = {ev(l1, sizeof l1, 1, "step/start")};
    assert_int_equal(pgs_append(a, "s2", ea, 1, late, 1), PGS_LEASE_LOST);
    assert_non_null(strstr(pgs_error(a), "lost"));
    assert_int_equal(pgs_renew(a, "s2", ea, 60000), PGS_LEASE_LOST);
    /* its release does not free worker-b's lease */
    assert_int_equal(pgs_release(a, "s2", ea), PGS_OK);
    int64_t e3;
    assert_int_equal(pgs_lease(a, "s2", "worker-a", 60000, &e3, &next), PGS_BUSY);
    assert_int_equal(pgs_append(b, "s2", eb, 1, late, 1), PGS_OK);
    char *buf;
    size_t len;
    assert_int_equal(pgs_read(b, "s2", 0, &buf, &len), PGS_OK);
    size_t nl = 0;
    for (const char *p = buf; *p; p++)
        nl += *p == '\n';
    assert_int_equal(nl, 2);
    free(buf);
    /* released, the session is free for anyone */
    assert_int_equal(pgs_release(b, "s2", eb), PGS_OK);
    assert_int_equal(pgs_lease(a, "s2", "worker-a", 60000, &e3, &next), PGS_OK);
    assert_true(e3 > eb);
    assert_int_equal(next, 2);
    pgs_close(a);
    pgs_close(b);
}

static void hostile_rows_are_refused(void **state) {
    (void)state;
    pgs *db = connect_db();
    int64_t e, next;
    assert_int_equal(pgs_lease(db, "s3", "w", 60000, &e, &next), PGS_OK);
    /* a row whose envelope says another seq than its key */
    raw_sql("INSERT INTO weir_events VALUES ('s3', 0, '{\"seq\": 7, \"type\": \"turn/start\"}')");
    char *buf = NULL;
    size_t len;
    assert_int_equal(pgs_read(db, "s3", 0, &buf, &len), PGS_CORRUPT);
    assert_null(buf);
    assert_non_null(strstr(pgs_error(db), "seq 0"));
    /* a row without a seq at all */
    raw_sql("UPDATE weir_events SET event = '[1,2]' WHERE session_id = 's3'");
    assert_int_equal(pgs_read(db, "s3", 0, &buf, &len), PGS_CORRUPT);
    /* a value is a parameter, never SQL */
    int64_t e2;
    assert_int_equal(pgs_lease(db, "x'); DROP TABLE weir_events; --", "w", 60000, &e2, &next),
                     PGS_OK);
    raw_sql("SELECT count(*) FROM weir_events");
    pgs_close(db);
}

static void the_inbox_is_claimed_once_and_consumed_with_the_append(void **state) {
    (void)state;
    pgs *a = connect_db(), *b = connect_db();
    bool dup, woken;
    assert_int_equal(pgs_wait(b, 0, &woken), PGS_OK); /* b listens from now on */
    assert_int_equal(pgs_send(a, "q1", "in-1", "followup",
                              "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}",
                              &dup),
                     PGS_OK);
    assert_false(dup);
    assert_int_equal(pgs_send(a, "q1", "in-1", "followup",
                              "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}",
                              &dup),
                     PGS_OK);
    assert_true(dup); /* the same input id is queued once */
    /* the same id with another message is refused, nothing queued */
    assert_int_equal(pgs_send(a, "q1", "in-1", "followup", "{\"role\":\"user\",\"content\":[]}", &dup),
                     PGS_CONFLICT);
    assert_non_null(strstr(pgs_error(a), "in-1"));
    assert_int_equal(pgs_wait(b, 5000, &woken), PGS_OK);
    assert_true(woken);
    assert_int_equal(pgs_send(a, "q2", NULL, "steer", "{\"role\":\"user\",\"content\":[]}", &dup),
                     PGS_OK);
    /* two claimers get different sessions, a third finds none; a claim
     * that skips both (ids quoted into a text[]: " and \ too) finds none */
    char *ia = NULL, *ib = NULL, *ic = NULL;
    int64_t ea, eb, ec, na, nb, nc;
    const char *skip[] = {"q\"1\\", "q1", "q2"};
    assert_int_equal(pgs_claim_except(a, "worker-x", 60000, skip, 3, &ic, &ec, &nc, NULL),
                     PGS_NOT_FOUND);
    assert_null(ic);
    assert_int_equal(pgs_claim_except(a, "worker-x", 60000, skip, 1, &ic, &ec, &nc, NULL),
                     PGS_OK); /* only the odd id skipped: q1 or q2 is free; give it back */
    assert_int_equal(pgs_release(a, ic, ec), PGS_OK);
    free(ic);
    ic = NULL;
    assert_int_equal(pgs_claim(a, "worker-a", 60000, &ia, &ea, &na, NULL), PGS_OK);
    assert_int_equal(pgs_claim(b, "worker-b", 60000, &ib, &eb, &nb, NULL), PGS_OK);
    assert_string_not_equal(ia, ib);
    assert_int_equal(pgs_claim(b, "worker-c", 60000, &ic, &ec, &nc, NULL), PGS_NOT_FOUND);
    assert_null(ic);
    /* q1's worker splices its input into the log and consumes it at once */
    pgs *w = strcmp(ia, "q1") == 0 ? a : b;
    int64_t ew = w == a ? ea : eb;
    char *json = NULL;
    assert_int_equal(pgs_inbox(w, "q1", &json), PGS_OK);
    assert_non_null(strstr(json, "\"in-1\""));
    assert_non_null(strstr(json, "\"hi\""));
    char *idp = strstr(json, "\"inbox_id\" : ");
    assert_non_null(idp);
    long long upto = atoll(idp + strlen("\"inbox_id\" : "));
    free(json);
    char l0[128];
    const char *lines[] = {ev(l0, sizeof l0, 0, "turn/start")};
    char upto_ids[32];
    snprintf(upto_ids, sizeof upto_ids, "{%lld}", upto);
    assert_int_equal(pgs_append_consume(w, "q1", ew, 0, lines, 1, upto_ids), PGS_OK);
    assert_int_equal(pgs_inbox(w, "q1", &json), PGS_OK);
    assert_string_equal(json, "[]");
    free(json);
    /* released with nothing queued, q1 is not claimed again */
    assert_int_equal(pgs_release(w, "q1", ew), PGS_OK);
    assert_int_equal(pgs_claim(a, "worker-d", 60000, &ic, &ec, &nc, NULL), PGS_NOT_FOUND);
    /* a fenced writer consumes nothing: q2's input stays queued */
    pgs *v = w == a ? b : a;
    int64_t ev2 = v == a ? ea : eb;
    assert_int_equal(pgs_append_consume(v, "q2", ev2 + 100, 0, lines, 1, "{1000000}"),
                     PGS_LEASE_LOST);
    assert_int_equal(pgs_inbox(v, "q2", &json), PGS_OK);
    assert_non_null(strstr(json, "\"steer\""));
    free(json);
    free(ia);
    free(ib);
    pgs_close(a);
    pgs_close(b);
}

static void list_shows_the_sessions(void **state) {
    (void)state;
    pgs *db = connect_db();
    char *json = NULL;
    assert_int_equal(pgs_list(db, &json), PGS_OK);
    assert_non_null(strstr(json, "\"session_id\" : \"s1\""));
    assert_non_null(strstr(json, "\"owner\" : \"worker-a\""));
    free(json);
    pgs_close(db);
}

/* The plugin, through the host: a row registers the store, and the core
 * finds it by the row id as "session": {"store": "pg"} does. */
static weir_host *pg_host(const char *row_config, weir_error *err, int *rc) {
    char plugin[4096];
    snprintf(plugin, sizeof plugin, "%s/weir-store-postgres.so", wt_env("WEIR_TEST_PLUGIN_DIR"));
    json_t *cfg = json_loads(row_config, 0, NULL);
    assert_non_null(cfg);
    json_t *config = json_pack("{s:[{s:s, s:s, s:o}]}", "plugins", "id", "pg", "plugin", plugin,
                               "config", cfg);
    weir_host *host = NULL;
    *rc = weir_host_create(config, &host, err);
    json_decref(config);
    return host;
}

static void the_plugin_is_a_store_with_leases(void **state) {
    (void)state;
    char row[1200];
    snprintf(row, sizeof row, "{\"conninfo\": \"%s\", \"lease_ms\": 300, \"owner\": \"w1\"}",
             conninfo);
    weir_error err = {0};
    int rc;
    weir_host *host = pg_host(row, &err, &rc);
    if (rc != WEIR_OK)
        fail_msg("host: %s", err.text);
    weir__store_ref st;
    assert_int_equal(weir__store_lookup(host, "pg", &st), WEIR_OK);
    void *h = NULL, *h2 = NULL;
    uint64_t epoch = 0, e2;
    assert_int_equal(st.vt->open(st.self, "p1", "unused", 0, &h, &epoch, &err), WEIR_OK);
    assert_true(epoch > 0);
    /* a second writer, even of the same owner name in this process, waits
     * for the lease: refused while it is live */
    snprintf(row, sizeof row, "{\"conninfo\": \"%s\", \"owner\": \"w2\"}", conninfo);
    weir_host *host2 = pg_host(row, &err, &rc);
    assert_int_equal(rc, WEIR_OK);
    weir__store_ref st2;
    assert_int_equal(weir__store_lookup(host2, "pg", &st2), WEIR_OK);
    assert_int_equal(st2.vt->open(st2.self, "p1", "unused", 0, &h2, &e2, &err), WEIR_E_BUSY);
    assert_non_null(strstr(err.text, "w1"));
    const char lines[] = "{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"
                         "{\"seq\":1,\"time\":2,\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}\n";
    assert_int_equal(st.vt->append(st.self, h, epoch, 0, 2, lines, strlen(lines), 0, &err), WEIR_OK);
    /* the heartbeat keeps the lease past lease_ms */
    sleep_ms(900);
    assert_int_equal(st2.vt->open(st2.self, "p1", "unused", 0, &h2, &e2, &err), WEIR_E_BUSY);
    bool live = false;
    assert_int_equal(st2.vt->probe(st2.self, "p1", NULL, &live, NULL, &err), WEIR_OK);
    assert_true(live);
    /* a reader sees both events */
    void *r = NULL;
    uint64_t e0;
    assert_int_equal(st2.vt->open(st2.self, "p1", NULL, WEIR_STORE_READONLY, &r, &e0, &err), WEIR_OK);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(st2.vt->read(st2.self, r, 0, &buf, &len, &err), WEIR_OK);
    assert_non_null(strstr(buf, "step/start"));
    st2.vt->buffer_free(st2.self, buf);
    st2.vt->close(st2.self, r);
    assert_int_equal(st2.vt->open(st2.self, "nope", NULL, WEIR_STORE_READONLY, &r, &e0, &err),
                     WEIR_E_NOT_FOUND);
    /* another writer takes the lease over (as after an expiry): the first
     * writer's next append is fenced, and so is every one after it */
    raw_sql("UPDATE weir_sessions SET owner = 'w3', epoch = epoch + 1 WHERE session_id = 'p1'");
    const char more[] = "{\"seq\":2,\"time\":3,\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}}\n";
    assert_int_equal(st.vt->append(st.self, h, epoch, 2, 1, more, strlen(more), 0, &err),
                     WEIR_E_LEASE_LOST);
    assert_int_equal(st.vt->append(st.self, h, epoch, 2, 1, more, strlen(more), 0, &err),
                     WEIR_E_LEASE_LOST);
    json_t *list = NULL;
    assert_int_equal(st.vt->list(st.self, NULL, &list, &err), WEIR_OK);
    assert_true(json_array_size(list) >= 1);
    json_decref(list);
    st.vt->close(st.self, h); /* does not release w3's lease */
    assert_int_equal(st2.vt->open(st2.self, "p1", "unused", 0, &h2, &e2, &err), WEIR_E_BUSY);
    assert_non_null(strstr(err.text, "w3"));
    weir_host_destroy(host);
    weir_host_destroy(host2);
}

/* The one value a query returns (what an operator sees), as a long. */
static long raw_long(const char *sql) {
    PGconn *c = PQconnectdb(conninfo);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    long v = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return v;
}

/* weir send's path (weir_host_store_send), a worker's claim and delivery
 * (weir_agent_take_store_inbox), and the crash between the splice and the
 * delete: the row delivered again is acknowledged, never logged twice. */
static void queued_input_is_delivered_once_across_a_crash(void **state) {
    (void)state;
    char plugin[4096];
    snprintf(plugin, sizeof plugin, "%s/weir-store-postgres.so", wt_env("WEIR_TEST_PLUGIN_DIR"));
    json_t *config = json_pack("{s:{s:s}, s:[{s:s, s:s, s:{s:s, s:i}}]}", "session", "store",
                               "pg", "plugins", "id", "pg", "plugin", plugin, "config",
                               "conninfo", conninfo, "lease_ms", 60000);
    weir_host *host = NULL;
    weir_error err = {0};
    if (weir_host_create(config, &host, &err) != WEIR_OK)
        fail_msg("host: %s", err.text);
    json_decref(config);
    /* only this test's session needs a writer */
    raw_sql("UPDATE weir_sessions SET owner = NULL, lease_expires = NULL");
    raw_sql("DELETE FROM weir_inbox");
    json_t *hello = json_pack("{s:s, s:s}", "role", "user", "content", "hello");
    json_t *other = json_pack("{s:s, s:s}", "role", "user", "content", "not hello");
    bool dup = true;
    assert_int_equal(weir_host_store_send(host, "dq", "in-dq", "followup", hello, &dup, &err),
                     WEIR_OK);
    assert_false(dup);
    assert_int_equal(weir_host_store_send(host, "dq", "in-dq", "followup", hello, &dup, &err),
                     WEIR_OK);
    assert_true(dup);
    assert_int_equal(weir_host_store_send(host, "dq", "in-dq", "followup", other, &dup, &err),
                     WEIR_E_DUPLICATE);
    assert_non_null(strstr(err.text, "in-dq"));
    assert_int_equal(weir_host_store_send(host, "dq", NULL, "sideways", hello, &dup, &err),
                     WEIR_E_INVAL);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'dq'"), 1);
    /* a claim that skips it (a worker's backoff) neither takes nor locks it;
     * a claim takes it (free: no previous owner); a second finds nothing */
    char *id = NULL, *prev = NULL;
    const char *held[] = {"other", "dq"};
    assert_int_equal(weir_host_store_claim_except(host, held, 2, &id, &prev, &err),
                     WEIR_E_NOT_FOUND);
    assert_null(id);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_sessions WHERE session_id = 'dq' AND "
                              "owner IS NULL"),
                     1);
    assert_int_equal(weir_host_store_claim(host, &id, &prev, &err), WEIR_OK);
    assert_string_equal(id, "dq");
    assert_null(prev);
    free(id);
    assert_int_equal(weir_host_store_claim(host, &id, &prev, &err), WEIR_E_NOT_FOUND);
    /* the writer delivers it: one splice in the log, the row gone */
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = "dq";
    weir_agent *agent = NULL;
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK)
        fail_msg("open: %s", err.text);
    assert_true(weir_agent_lease_epoch(agent) > 0);
    assert_false(weir_agent_lease_lost(agent));
    size_t taken = 0;
    assert_int_equal(weir_agent_take_store_inbox(agent, &taken, &err), WEIR_OK);
    assert_int_equal(taken, 1);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'dq'"), 0);
    const char *logged = "SELECT count(*) FROM weir_events WHERE session_id = 'dq'"
                         " AND event::text LIKE '%in-dq%'";
    long n1 = raw_long(logged);
    assert_true(n1 > 0);
    /* a crash after the splice, before the delete: the row is still there */
    const char *requeue = "INSERT INTO weir_inbox (session_id, input_id, mode, message)"
                          " VALUES ('dq', 'in-dq', 'followup', '{\"role\":\"user\",\"content\":\"hello\"}')";
    raw_sql(requeue);
    assert_int_equal(weir_agent_take_store_inbox(agent, &taken, &err), WEIR_OK);
    assert_int_equal(raw_long(logged), n1); /* acknowledged, not logged again */
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'dq'"), 0);
    weir_agent_close(agent);
    /* ... and by the next writer, a new agent that folds the log */
    raw_sql(requeue);
    agent = NULL;
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK)
        fail_msg("reopen: %s", err.text);
    assert_int_equal(weir_agent_take_store_inbox(agent, &taken, &err), WEIR_OK);
    assert_int_equal(taken, 1);
    assert_int_equal(raw_long(logged), n1);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'dq'"), 0);
    assert_int_equal(weir_agent_interrupted_turn(agent), 0); /* no turn ran */
    /* a fenced writer deletes nothing: the row waits for the new owner */
    raw_sql(requeue);
    raw_sql("UPDATE weir_sessions SET owner = 'someone', epoch = epoch + 1 WHERE session_id = 'dq'");
    assert_int_equal(weir_agent_take_store_inbox(agent, &taken, &err), WEIR_E_LEASE_LOST);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'dq'"), 1);
    assert_true(weir_agent_lease_lost(agent)); /* the handle knows it now */
    weir_agent_close(agent);
    json_decref(hello);
    json_decref(other);
    raw_sql("UPDATE weir_sessions SET owner = NULL, lease_expires = NULL WHERE session_id = 'dq'");
    raw_sql("DELETE FROM weir_inbox WHERE session_id = 'dq'");
    weir_host_destroy(host);
}

/* Inputs are dropped by their ids, never by a range (an id handed out
 * earlier may commit after a later one was read); an input over the
 * deployment's agent.max_input_chars is refused by weir_host_store_send,
 * and one queued anyway (the cap was lowered since) is refused by the take
 * and dropped, so it does not hold back the inputs after it. */
static void inputs_are_consumed_by_id_and_caps_refuse(void **state) {
    (void)state;
    pgs *a = connect_db();
    raw_sql("UPDATE weir_sessions SET owner = NULL, lease_expires = NULL");
    raw_sql("DELETE FROM weir_inbox");
    bool dup;
    assert_int_equal(pgs_send(a, "cid", "in-a", "followup", "{\"role\":\"user\",\"content\":\"a\"}",
                              &dup),
                     PGS_OK);
    assert_int_equal(pgs_send(a, "cid", "in-b", "followup", "{\"role\":\"user\",\"content\":\"b\"}",
                              &dup),
                     PGS_OK);
    long lo = raw_long("SELECT min(id) FROM weir_inbox WHERE session_id = 'cid'");
    long hi = raw_long("SELECT max(id) FROM weir_inbox WHERE session_id = 'cid'");
    assert_true(lo < hi);
    char *id = NULL;
    int64_t epoch = 0, next = 0;
    assert_int_equal(pgs_claim(a, "worker-id", 60000, &id, &epoch, &next, NULL), PGS_OK);
    assert_string_equal(id, "cid");
    free(id);
    char ids[64];
    snprintf(ids, sizeof ids, "{%ld}", hi); /* only the later one was delivered */
    assert_int_equal(pgs_consume(a, "cid", epoch, ids), PGS_OK);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'cid'"), 1);
    assert_int_equal(raw_long("SELECT min(id) FROM weir_inbox WHERE session_id = 'cid'"), lo);
    assert_int_equal(pgs_consume(a, "cid", epoch + 7, "{1}"), PGS_LEASE_LOST);
    assert_int_equal(pgs_release(a, "cid", epoch), PGS_OK);
    pgs_close(a);
    raw_sql("DELETE FROM weir_inbox WHERE session_id = 'cid'");

    char plugin[4096];
    snprintf(plugin, sizeof plugin, "%s/weir-store-postgres.so", wt_env("WEIR_TEST_PLUGIN_DIR"));
    json_t *config = json_pack("{s:{s:i}, s:{s:s}, s:[{s:s, s:s, s:{s:s, s:i}}]}", "agent",
                               "max_input_chars", 10, "session", "store", "pg", "plugins", "id",
                               "pg", "plugin", plugin, "config", "conninfo", conninfo,
                               "lease_ms", 60000);
    weir_host *host = NULL;
    weir_error err = {0};
    if (weir_host_create(config, &host, &err) != WEIR_OK)
        fail_msg("host: %s", err.text);
    json_decref(config);
    json_t *longer = json_pack("{s:s, s:s}", "role", "user", "content",
                               "a message of forty-two characters, or so!");
    assert_int_equal(weir_host_store_send(host, "cap", "in-long", "followup", longer, &dup, &err),
                     WEIR_E_LIMIT);
    assert_non_null(strstr(err.text, "max_input_chars"));
    json_decref(longer);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'cap'"), 0);
    /* queued behind the cap's back, before a short one */
    json_t *shorter = json_pack("{s:s, s:s}", "role", "user", "content", "short");
    assert_int_equal(weir_host_store_send(host, "cap", "in-short", "followup", shorter, &dup, &err),
                     WEIR_OK);
    json_decref(shorter);
    raw_sql("UPDATE weir_inbox SET id = id + 1000000 WHERE session_id = 'cap'");
    raw_sql("INSERT INTO weir_inbox (session_id, input_id, mode, message) VALUES ('cap', 'in-long',"
            " 'followup', '{\"role\":\"user\",\"content\":\"far too long for ten\"}')");
    raw_sql("UPDATE weir_inbox SET id = 1 WHERE session_id = 'cap' AND input_id = 'in-long'");
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = "cap";
    weir_agent *agent = NULL;
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK)
        fail_msg("open: %s", err.text);
    size_t taken = 0;
    int trc = weir_agent_take_store_inbox(agent, &taken, &err);
    if (trc != WEIR_OK)
        fail_msg("take: %s (%s)", weir_status_name(trc), err.text);
    assert_int_equal(taken, 1); /* the short one; the long one refused and dropped */
    assert_int_equal(raw_long("SELECT count(*) FROM weir_inbox WHERE session_id = 'cap'"), 0);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_events WHERE session_id = 'cap'"
                              " AND event::text LIKE '%in-short%'"),
                     1);
    assert_int_equal(raw_long("SELECT count(*) FROM weir_events WHERE session_id = 'cap'"
                              " AND event::text LIKE '%in-long%'"),
                     0);
    weir_agent_close(agent);
    raw_sql("UPDATE weir_sessions SET owner = NULL, lease_expires = NULL WHERE session_id = 'cap'");
    weir_host_destroy(host);
}

static void a_wrong_conninfo_fails_the_deployment(void **state) {
    (void)state;
    weir_error err = {0};
    int rc;
    weir_host *host = pg_host("{\"conninfo\": \"host=/nonexistent-weir dbname=weir\"}", &err, &rc);
    assert_int_not_equal(rc, WEIR_OK);
    assert_null(host);
    assert_non_null(strstr(err.text, "cannot connect"));
    host = pg_host("{\"conninfo\": \"x\", \"lease_ms\": 5}", &err, &rc);
    assert_int_not_equal(rc, WEIR_OK);
    assert_non_null(strstr(err.text, "lease_ms"));
}

/* The lines of `buf` (pgs_read's format) whose seq lies in the ranges:
 * the reference read_ranges must match, byte for byte. */
static char *lines_in(const char *buf, const uint64_t *ranges, size_t n) {
    char *out = calloc(1, strlen(buf) + 1);
    size_t at = 0;
    for (const char *p = buf; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        json_t *ev = json_loadb(p, (size_t)(nl - p), 0, NULL);
        assert_non_null(ev);
        uint64_t seq = (uint64_t)json_integer_value(json_object_get(ev, "seq"));
        json_decref(ev);
        bool in = false;
        for (size_t r = 0; r < n; r++)
            in = in || (seq >= ranges[2 * r] && seq <= ranges[2 * r + 1]);
        if (in) {
            memcpy(out + at, p, (size_t)(nl - p) + 1);
            at += (size_t)(nl - p) + 1;
        }
        p = nl + 1;
    }
    return out;
}

static void check_ranges(pgs *db, const char *id, const char *all, const uint64_t *ranges,
                         size_t n) {
    char *buf = NULL;
    size_t len = 0;
    if (pgs_read_ranges(db, id, ranges, n, &buf, &len) != PGS_OK)
        fail_msg("pgs_read_ranges: %s", pgs_error(db));
    char *want = lines_in(all, ranges, n);
    assert_string_equal(buf, want);
    assert_int_equal(len, strlen(want));
    free(want);
    free(buf);
}

/* find_last and read_ranges (ABI 1.10) in SQL: the last event of a type
 * (the type inside data never counts), and the rows of several ranges in
 * one statement, as pgs_read returns them. */
static void find_last_and_read_ranges(void **state) {
    (void)state;
    pgs *db = connect_db();
    int64_t e, next, seq = -1;
    assert_int_equal(pgs_find_last(db, "fr-none", "log/checkpoint", &seq), PGS_NOT_FOUND);
    assert_int_equal(pgs_lease(db, "fr1", "w", 60000, &e, &next), PGS_OK);
    /* an empty session: nothing found, nothing read */
    assert_int_equal(pgs_find_last(db, "fr1", "log/checkpoint", &seq), PGS_NOT_FOUND);
    char *buf = NULL;
    size_t len = 7;
    const uint64_t all[] = {0, UINT64_MAX};
    assert_int_equal(pgs_read_ranges(db, "fr1", all, 1, &buf, &len), PGS_OK);
    assert_string_equal(buf, "");
    assert_int_equal(len, 0);
    free(buf);
    const char *types[] = {"turn/start", "step/start", "log/checkpoint", "step/end",
                           "log/checkpoint", "turn/end", "log/checkpoints", "log/check"};
    char text[20][160];
    const char *lines[20];
    for (int i = 0; i < 20; i++) {
        if (i < 8)
            ev(text[i], sizeof text[i], i, types[i]);
        else /* the type inside data only */
            snprintf(text[i], sizeof text[i],
                     "{\"seq\":%d,\"time\":1,\"type\":\"note/x\",\"data\":{\"type\":"
                     "\"log/checkpoint\",\"s\":\"\\\"type\\\":\\\"log/checkpoint\\\"\"}}",
                     i);
        lines[i] = text[i];
    }
    assert_int_equal(pgs_append(db, "fr1", e, 0, lines, 20), PGS_OK);
    assert_int_equal(pgs_find_last(db, "fr1", "log/checkpoint", &seq), PGS_OK);
    assert_int_equal(seq, 4);
    assert_int_equal(pgs_find_last(db, "fr1", "turn/start", &seq), PGS_OK);
    assert_int_equal(seq, 0);
    assert_int_equal(pgs_find_last(db, "fr1", "note/x", &seq), PGS_OK);
    assert_int_equal(seq, 19);
    assert_int_equal(pgs_find_last(db, "fr1", "log", &seq), PGS_NOT_FOUND);
    assert_non_null(strstr(pgs_error(db), "fr1"));
    char *whole = NULL;
    assert_int_equal(pgs_read(db, "fr1", 0, &whole, &len), PGS_OK);
    const uint64_t several[] = {1, 2, 5, 5, 10, 12};
    const uint64_t past[] = {18, 25};
    const uint64_t beyond[] = {20, 20, 30, 40};
    const uint64_t tail[] = {0, 0, 15, UINT64_MAX};
    const uint64_t last[] = {UINT64_MAX, UINT64_MAX};
    const uint64_t huge[] = {(uint64_t)INT64_MAX, UINT64_MAX};
    check_ranges(db, "fr1", whole, several, 3);
    check_ranges(db, "fr1", whole, past, 1);
    check_ranges(db, "fr1", whole, beyond, 2);
    check_ranges(db, "fr1", whole, tail, 2);
    check_ranges(db, "fr1", whole, all, 1);
    check_ranges(db, "fr1", whole, last, 1);
    check_ranges(db, "fr1", whole, huge, 1);
    check_ranges(db, "fr1", whole, NULL, 0);
    check_ranges(db, "fr-none", "", all, 1); /* no such session: no rows */
    const uint64_t bad[] = {5, 3};
    assert_int_equal(pgs_read_ranges(db, "fr1", bad, 1, &buf, &len), PGS_IO);
    assert_non_null(strstr(pgs_error(db), "ascending"));
    const uint64_t overlap[] = {1, 5, 5, 6};
    assert_int_equal(pgs_read_ranges(db, "fr1", overlap, 2, &buf, &len), PGS_IO);
    /* a row whose envelope says another seq is refused when it is read,
     * and only then */
    raw_sql("UPDATE weir_events SET event = jsonb_set(event, '{seq}', '99')"
            " WHERE session_id = 'fr1' AND seq = 7");
    const uint64_t seven[] = {6, 8};
    buf = NULL;
    assert_int_equal(pgs_read_ranges(db, "fr1", seven, 1, &buf, &len), PGS_CORRUPT);
    assert_null(buf);
    assert_non_null(strstr(pgs_error(db), "seq 7"));
    check_ranges(db, "fr1", whole, several, 3);
    free(whole);
    assert_int_equal(pgs_release(db, "fr1", e), PGS_OK);
    pgs_close(db);
}

/* The plan of `sql` as the server ran it (EXPLAIN ANALYZE), a new object. */
static json_t *explain(const char *sql, int n, const char *const *params) {
    PGconn *c = PQconnectdb(conninfo);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    char *q = malloc(strlen(sql) + 64);
    sprintf(q, "EXPLAIN (ANALYZE, FORMAT JSON) %s", sql);
    PGresult *r = PQexecParams(c, q, n, NULL, params, NULL, NULL, 0);
    free(q);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("EXPLAIN: %s", PQresultErrorMessage(r));
    json_t *plan = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    assert_non_null(plan);
    PQclear(r);
    PQfinish(c);
    json_t *top = json_incref(json_object_get(json_array_get(plan, 0), "Plan"));
    json_decref(plan);
    assert_non_null(top);
    return top;
}

/* The node of `plan` (borrowed) that scans weir_events, or NULL. */
static const json_t *events_scan(const json_t *plan) {
    const char *rel = json_string_value(json_object_get(plan, "Relation Name"));
    if (rel && strcmp(rel, "weir_events") == 0)
        return plan;
    size_t i;
    const json_t *sub;
    json_array_foreach(json_object_get(plan, "Plans"), i, sub) {
        const json_t *found = events_scan(sub);
        if (found)
            return found;
    }
    return NULL;
}

static long node_long(const json_t *node, const char *key) {
    const json_t *v = json_object_get(node, key);
    if (!json_is_number(v))
        fail_msg("plan node without %s", key);
    return (long)json_number_value(v);
}

/* Of a long session, find_last reads back from the end to the last
 * checkpoint (the rows after it, filtered out, and it), and one old event
 * is one index probe that reads one row: the server's own account
 * (EXPLAIN ANALYZE of the statements pgs runs), not the session. */
static void find_last_and_one_old_event_cost_what_they_read(void **state) {
    (void)state;
    pgs *db = connect_db();
    int64_t e, next;
    assert_int_equal(pgs_lease(db, "fr-long", "w", 60000, &e, &next), PGS_OK);
    enum { N = 5000, BATCH = 500 };
    char (*text)[128] = malloc(BATCH * sizeof *text);
    const char *lines[BATCH];
    for (int b = 0; b < N / BATCH; b++) {
        for (int i = 0; i < BATCH; i++) {
            int seq = b * BATCH + i;
            lines[i] = ev(text[i], sizeof text[i], seq,
                          seq % 1000 == 500 ? "log/checkpoint" : "step/start");
        }
        assert_int_equal(pgs_append(db, "fr-long", e, b * BATCH, lines, BATCH), PGS_OK);
    }
    free(text);
    raw_sql("ANALYZE weir_events");
    int64_t seq;
    assert_int_equal(pgs_find_last(db, "fr-long", "log/checkpoint", &seq), PGS_OK);
    assert_int_equal(seq, 4500);
    const char *fp[] = {"fr-long", "log/checkpoint"};
    json_t *plan = explain(PGS_FIND_LAST_SQL, 2, fp);
    const json_t *scan = events_scan(plan);
    assert_non_null(scan);
    assert_string_equal(json_string_value(json_object_get(scan, "Node Type")), "Index Scan");
    assert_string_equal(json_string_value(json_object_get(scan, "Scan Direction")), "Backward");
    assert_int_equal(node_long(scan, "Actual Rows"), 1);
    assert_int_equal(node_long(scan, "Rows Removed by Filter"), N - 1 - 4500);
    json_decref(plan);

    const uint64_t one[] = {1234, 1234};
    char *buf = NULL;
    size_t len;
    assert_int_equal(pgs_read_ranges(db, "fr-long", one, 1, &buf, &len), PGS_OK);
    assert_non_null(strstr(buf, "\"seq\": 1234,"));
    assert_int_equal(strchr(buf, '\n') - buf + 1, (long)len); /* one line */
    free(buf);
    const char *rp[] = {"fr-long", "{1234}", "{1234}"};
    plan = explain(PGS_READ_RANGES_SQL, 3, rp);
    scan = events_scan(plan);
    assert_non_null(scan);
    const char *type = json_string_value(json_object_get(scan, "Node Type"));
    if (strcmp(type, "Seq Scan") == 0)
        fail_msg("read_ranges scans the whole table: %s", type);
    assert_int_equal(node_long(scan, "Actual Rows"), 1);
    json_decref(plan);
    assert_int_equal(pgs_release(db, "fr-long", e), PGS_OK);
    pgs_close(db);
}

/* The plugin's vtable members over them, on a writer and a reader. */
static void the_plugin_finds_and_reads_ranges(void **state) {
    (void)state;
    char row[1200];
    snprintf(row, sizeof row, "{\"conninfo\": \"%s\", \"owner\": \"fr\"}", conninfo);
    weir_error err = {0};
    int rc;
    weir_host *host = pg_host(row, &err, &rc);
    if (rc != WEIR_OK)
        fail_msg("host: %s", err.text);
    weir__store_ref st;
    assert_int_equal(weir__store_lookup(host, "pg", &st), WEIR_OK);
    assert_non_null(st.vt->find_last);
    assert_non_null(st.vt->read_ranges);
    void *w = NULL, *r = NULL;
    uint64_t epoch = 0, e0, seq = 77;
    assert_int_equal(st.vt->open(st.self, "fr2", NULL, 0, &w, &epoch, &err), WEIR_OK);
    assert_int_equal(st.vt->find_last(st.self, w, "log/checkpoint", &seq, &err), WEIR_E_NOT_FOUND);
    const char lines[] =
        "{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"
        "{\"seq\":1,\"time\":2,\"type\":\"log/checkpoint\",\"data\":{\"events\":1,\"turns\":1}}\n"
        "{\"seq\":2,\"time\":3,\"type\":\"turn/end\",\"data\":{\"turn\":1}}\n";
    assert_int_equal(st.vt->append(st.self, w, epoch, 0, 3, lines, strlen(lines), 0, &err),
                     WEIR_OK);
    assert_int_equal(st.vt->open(st.self, "fr2", NULL, WEIR_STORE_READONLY, &r, &e0, &err),
                     WEIR_OK);
    void *hs[] = {w, r};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(st.vt->find_last(st.self, hs[i], "log/checkpoint", &seq, &err), WEIR_OK);
        assert_int_equal(seq, 1);
        const uint64_t ranges[] = {0, 0, 2, UINT64_MAX};
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(st.vt->read_ranges(st.self, hs[i], ranges, 2, &buf, &len, &err),
                         WEIR_OK);
        assert_int_equal(len, strlen(buf));
        assert_non_null(strstr(buf, "turn/start"));
        assert_non_null(strstr(buf, "turn/end"));
        assert_null(strstr(buf, "log/checkpoint"));
        st.vt->buffer_free(st.self, buf);
        const uint64_t bad[] = {2, 2, 1, 1};
        assert_int_equal(st.vt->read_ranges(st.self, hs[i], bad, 2, &buf, &len, &err),
                         WEIR_E_INVAL);
        assert_null(buf);
        assert_non_null(strstr(err.text, "fr2"));
    }
    st.vt->close(st.self, r);
    st.vt->close(st.self, w);
    weir_host_destroy(host);
}

/* Append `type` with `data_json` to `log` ("append" for a surface type). */
static void pg_add(weir__log *log, const char *type, const char *data_json, const json_t *op,
                   const json_t *src) {
    json_t *data = json_loads(data_json, 0, NULL);
    assert_non_null(data);
    json_t *append = weir__is_surface_type(type) && !op ? json_string("append") : NULL;
    weir_error err = {0};
    if (weir__log_append(log, type, data, op ? op : append, src, 0, NULL, &err) != WEIR_OK)
        fail_msg("append %s: %s", type, err.text);
    json_decref(append);
    json_decref(data);
}

/* The derived history (a copy: PostgreSQL's jsonb orders keys its way, so
 * histories are compared as JSON, not text). */
static json_t *pg_derived(weir__log *log) {
    json_t *d = weir__log_derive(log);
    assert_non_null(d);
    json_t *copy = json_deep_copy(d);
    json_decref(d);
    return copy;
}

/* Issue #34: a session in PostgreSQL opens from its latest checkpoint row
 * (find_last, then one read_ranges of the surface's runs, the kept events
 * and the rows from the checkpoint on), not by reading every event: the
 * same derived history and count as a read of every row (the same store
 * without find_last), and a compaction's shadowed rows are not read. */
static void a_session_resumes_from_its_latest_checkpoint_row(void **state) {
    (void)state;
    char row[1200];
    snprintf(row, sizeof row, "{\"conninfo\": \"%s\", \"owner\": \"cp\"}", conninfo);
    weir_error err = {0};
    int rc;
    weir_host *host = pg_host(row, &err, &rc);
    if (rc != WEIR_OK)
        fail_msg("host: %s", err.text);
    weir__store_ref st;
    assert_int_equal(weir__store_lookup(host, "pg", &st), WEIR_OK);
    raw_sql("DELETE FROM weir_events WHERE session_id = 'cp1'");
    raw_sql("DELETE FROM weir_sessions WHERE session_id = 'cp1'");
    weir__log *log = NULL;
    if (weir__log_open_store("pg", st, "cp1", NULL, false, WEIR__FSYNC_NONE, NULL, NULL, &log,
                             &err) != WEIR_OK)
        fail_msg("open: %s", err.text);
    weir__log_set_checkpoint_every(log, 1);
    char buf[512];
    for (int k = 1; k <= 12; k++) {
        snprintf(buf, sizeof buf, "{\"turn\":%d}", k);
        pg_add(log, "turn/start", buf, NULL, NULL);
        snprintf(buf, sizeof buf, "{\"turn\":%d,\"step\":1}", k);
        pg_add(log, "step/start", buf, NULL, NULL);
        if (k == 8) { /* a compaction: one summary for every node but the last two */
            const weir__surface *sf = weir__log_surface(log);
            size_t n = weir__surface_len(sf);
            json_t *src = json_array();
            for (size_t i = 0; i + 2 < n; i++)
                json_array_append_new(src, json_integer((json_int_t)weir__surface_node(sf, i)));
            json_t *op = json_pack("{s:s,s:I,s:I}", "op", "replace", "start_seq",
                                   (json_int_t)weir__surface_node(sf, 0), "end_seq",
                                   (json_int_t)weir__surface_node(sf, n - 3));
            pg_add(log, "user/message",
                   "{\"turn\":8,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":"
                   "\"text\",\"text\":\"summary\"}]}}",
                   op, src);
            json_decref(op);
            json_decref(src);
        }
        snprintf(buf, sizeof buf,
                 "{\"turn\":%d,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"text\",\"text\":\"q%d\"}],\"id\":\"in-%d\"}}",
                 k, k, k);
        pg_add(log, "user/message", buf, NULL, NULL);
        if (k == 1)
            pg_add(log, "request/header",
                   "{\"reason\":\"initial\",\"header\":{\"config\":{\"provider\":\"p\","
                   "\"model\":\"m\"}}}",
                   NULL, NULL);
        snprintf(buf, sizeof buf,
                 "{\"turn\":%d,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[{"
                 "\"type\":\"text\",\"text\":\"a%d\"}]},\"stream\":[]}",
                 k, k);
        pg_add(log, "assistant/message", buf, NULL, NULL);
        snprintf(buf, sizeof buf, "{\"turn\":%d,\"step\":1}", k);
        pg_add(log, "step/end", buf, NULL, NULL);
        snprintf(buf, sizeof buf, "{\"turn\":%d,\"reason\":{\"kind\":\"completed\"}}", k);
        pg_add(log, "turn/end", buf, NULL, NULL);
        if (k < 12) /* turn 12 follows the last checkpoint */
            assert_int_equal(weir__log_tally_checkpoint(log, &err), WEIR_OK);
    }
    size_t count = weir__log_count(log);
    json_t *before = pg_derived(log);
    weir__log_close(log);
    /* from the checkpoint row */
    log = NULL;
    if (weir__log_open_store("pg", st, "cp1", NULL, true, WEIR__FSYNC_NONE, NULL, NULL, &log,
                             &err) != WEIR_OK)
        fail_msg("reopen: %s", err.text);
    assert_int_equal(weir__log_base(log), count - 7); /* turn 12's 6 events, the checkpoint */
    assert_int_equal(weir__log_count(log), count);
    assert_int_equal(weir__log_last_turn(log), 12);
    json_t *after = pg_derived(log);
    assert_true(json_equal(after, before));
    /* turn 2's step/start is neither on the surface nor kept: not read, but
     * it reads back from its row when asked */
    size_t old = 0;
    for (; old < count; old++) {
        json_t *ev = weir__log_event_ref(log, old);
        assert_non_null(ev);
        bool hit = !strcmp(json_string_value(json_object_get(ev, "type")), "step/start") &&
                   json_integer_value(json_object_get(json_object_get(ev, "data"), "turn")) == 2;
        json_decref(ev);
        if (hit)
            break;
    }
    assert_true(old < count);
    assert_false(weir__log_held(log, old));
    weir__log_close(log);
    /* the same store without find_last reads every row: the same history */
    weir_store whole = *st.vt;
    whole.find_last = NULL;
    weir__store_ref all = {&whole, st.self};
    log = NULL;
    if (weir__log_open_store("pg", all, "cp1", NULL, true, WEIR__FSYNC_NONE, NULL, NULL, &log,
                             &err) != WEIR_OK)
        fail_msg("whole open: %s", err.text);
    assert_int_equal(weir__log_base(log), 0);
    json_t *whole_history = pg_derived(log);
    assert_true(json_equal(whole_history, before));
    weir__log_close(log);
    json_decref(before);
    json_decref(after);
    json_decref(whole_history);
    weir_host_destroy(host);
}

int main(void) {
    const char *f = getenv("WEIR_PG_CONNINFO_FILE");
    FILE *fp = f ? fopen(f, "r") : NULL;
    if (!fp || !fgets(conninfo, sizeof conninfo, fp)) {
        fprintf(stderr, "test_store_postgres: no PostgreSQL server (WEIR_PG_CONNINFO_FILE=%s): "
                        "the pg_server fixture (tests/pg/server.sh) must start one\n",
                f ? f : "unset");
        return 1;
    }
    fclose(fp);
    conninfo[strcspn(conninfo, "\n")] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schema_is_created_once),
        cmocka_unit_test(a_newer_schema_is_refused),
        cmocka_unit_test(a_bad_conninfo_names_the_failure),
        cmocka_unit_test(append_read_and_fencing),
        cmocka_unit_test(a_frozen_writer_is_fenced_after_a_takeover),
        cmocka_unit_test(hostile_rows_are_refused),
        cmocka_unit_test(the_inbox_is_claimed_once_and_consumed_with_the_append),
        cmocka_unit_test(list_shows_the_sessions),
        cmocka_unit_test(the_plugin_is_a_store_with_leases),
        cmocka_unit_test(a_wrong_conninfo_fails_the_deployment),
        cmocka_unit_test(queued_input_is_delivered_once_across_a_crash),
        cmocka_unit_test(inputs_are_consumed_by_id_and_caps_refuse),
        cmocka_unit_test(find_last_and_read_ranges),
        cmocka_unit_test(find_last_and_one_old_event_cost_what_they_read),
        cmocka_unit_test(the_plugin_finds_and_reads_ranges),
        cmocka_unit_test(a_session_resumes_from_its_latest_checkpoint_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
