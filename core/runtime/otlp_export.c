/*
 * core/runtime/otlp_export.c - the live OTLP/HTTP (JSON) exporter of a
 * host (docs/telemetry.md, "Export").
 *
 * The agents' event delivery pushes finished spans (core/format/otlp.c
 * builds them) into a bounded queue and returns: the turn never waits on
 * the network.  One thread per host wakes every batch_ms (or when the
 * queue holds a batch), takes the whole queue and POSTs it to
 * {endpoint}/v1/traces with a timeout of timeout_ms.  A full queue drops
 * the span, a failed export drops its batch; both are counted and
 * reported on stderr (at most once per batch period, and at the end).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "otlp_export.h"

#define BATCH_SPANS 512 /* a full batch wakes the thread before batch_ms */

struct weir__otlp_exporter {
    weir__otlp_settings s;
    char *shown_url; /* s.url with any userinfo as "***" (a credential): for messages */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *queue; /* spans waiting, under mu */
    bool stop;
    bool failing;                             /* the last export failed; under mu */
    uint64_t queued, sent, dropped, reported; /* under mu */
    CURL *easy;                               /* the thread's */
    struct curl_slist *headers;               /* the thread's */
};

static size_t discard(char *p, size_t size, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return size * n;
}

/* POST one batch; true when the collector answered 2xx.  `why` gets the
 * reason of a failure (never a header value). */
static bool post(weir__otlp_exporter *x, const json_t *spans, char *why, size_t size) {
    json_t *req = weir__otlp_request(x->s.service_name, spans);
    char *body = req ? weir__json_dump(req) : NULL;
    json_decref(req);
    if (!body) {
        snprintf(why, size, "out of memory");
        return false;
    }
    CURL *e = x->easy;
    char errbuf[CURL_ERROR_SIZE] = "";
    long status = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    if (curl_easy_setopt(e, CURLOPT_URL, x->s.url) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body)) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf) == CURLE_OK)
        rc = curl_easy_perform(e);
    if (rc == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
    free(body);
    if (rc != CURLE_OK)
        snprintf(why, size, "%s", *errbuf ? errbuf : curl_easy_strerror(rc));
    else if (status < 200 || status > 299)
        snprintf(why, size, "HTTP %ld", status);
    return rc == CURLE_OK && status >= 200 && status <= 299;
}

/* Report new drops on stderr.  With mu held. */
static void report(weir__otlp_exporter *x, const char *why) {
    if (x->dropped == x->reported)
        return;
    weir__warn("weir: telemetry: %llu span(s) dropped (%llu so far) exporting to %s: %s",
               (unsigned long long)(x->dropped - x->reported), (unsigned long long)x->dropped,
               x->shown_url, why);
    x->reported = x->dropped;
}

/* `url` with the userinfo of its authority (a credential) as "***". */
static char *shown(const char *url) {
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    size_t end = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', end);
    if (!at)
        return weir__strdup(url);
    return weir__asprintf("%.*s***%s", (int)(auth - url), url, at);
}

static void *run(void *ud) {
    weir__otlp_exporter *x = ud;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        if (!x->stop && json_array_size(x->queue) < BATCH_SPANS) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            long ns = until.tv_nsec + (x->s.batch_ms % 1000) * 1000000L;
            until.tv_sec += x->s.batch_ms / 1000 + ns / 1000000000L;
            until.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&x->cv, &x->mu, &until);
        }
        bool stop = x->stop;
        json_t *batch = NULL;
        if (json_array_size(x->queue) > 0) {
            json_t *fresh = json_array();
            if (fresh) {
                batch = x->queue;
                x->queue = fresh;
            }
        }
        if (batch && stop && x->failing) {
            /* closing after a failed export: no second wait on a collector
             * that did not answer (a dead one costs at most timeout_ms) */
            x->dropped += json_array_size(batch);
            report(x, "closing after a failed export");
            json_decref(batch);
        } else if (batch) {
            pthread_mutex_unlock(&x->mu);
            char why[CURL_ERROR_SIZE + 32] = "";
            bool ok = post(x, batch, why, sizeof why);
            pthread_mutex_lock(&x->mu);
            x->failing = !ok;
            if (ok)
                x->sent += json_array_size(batch);
            else
                x->dropped += json_array_size(batch);
            report(x, why);
            json_decref(batch);
        }
        if (stop)
            break;
    }
    report(x, "the queue was full");
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

int weir__otlp_exporter_create(weir__otlp_settings *settings, weir__otlp_exporter **out,
                               weir_error *err) {
    if (!settings || !out || !settings->url)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "telemetry: invalid exporter settings");
    *out = NULL;
    if (weir__http_global_init() != WEIR_OK)
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL, "telemetry: libcurl did not initialise");
    weir__otlp_exporter *x = weir__calloc(1, sizeof *x);
    if (!x)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    x->s = *settings;
    memset(settings, 0, sizeof *settings);
    x->queue = json_array();
    x->shown_url = shown(x->s.url);
    x->easy = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    bool ok = x->queue && x->shown_url && x->easy && h;
    const char *name;
    json_t *v;
    json_object_foreach(x->s.headers, name, v) {
        char *line =
            ok ? weir__asprintf("%s: %s", name, weir__json_str(x->s.headers, name, "")) : NULL;
        struct curl_slist *more = line ? curl_slist_append(h, line) : NULL;
        weir__free(line);
        ok = more != NULL;
        if (more)
            h = more;
    }
    x->headers = h;
    long timeout = x->s.timeout_ms;
    if (ok && (curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L) ||
               curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https") ||
               curl_easy_setopt(x->easy, CURLOPT_FOLLOWLOCATION, 0L) ||
               curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers) ||
               curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, discard) ||
               curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, timeout) ||
               curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout)))
        ok = false;
    if (!ok) {
        if (x->easy)
            curl_easy_cleanup(x->easy);
        curl_slist_free_all(x->headers);
        json_decref(x->queue);
        weir__free(x->shown_url);
        weir__otlp_settings_free(&x->s);
        weir__free(x);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    }
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    if (pthread_create(&x->thread, NULL, run, x) != 0) {
        pthread_cond_destroy(&x->cv);
        pthread_mutex_destroy(&x->mu);
        curl_easy_cleanup(x->easy);
        curl_slist_free_all(x->headers);
        json_decref(x->queue);
        weir__free(x->shown_url);
        weir__otlp_settings_free(&x->s);
        weir__free(x);
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL,
                         "telemetry: cannot start the exporter thread");
    }
    *out = x;
    return WEIR_OK;
}

void weir__otlp_exporter_push(weir__otlp_exporter *x, json_t *spans) {
    if (!x || !json_is_array(spans) || json_array_size(spans) == 0)
        return;
    pthread_mutex_lock(&x->mu);
    size_t i;
    json_t *s;
    json_array_foreach(spans, i, s) {
        if (json_array_size(x->queue) < (size_t)x->s.max_queue &&
            json_array_append(x->queue, s) == 0)
            x->queued++;
        else
            x->dropped++;
    }
    /* moved: the queue holds the only reference to each span once the lock
     * is released, so no other thread counts references on them */
    json_array_clear(spans);
    if (json_array_size(x->queue) >= BATCH_SPANS)
        pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

void weir__otlp_exporter_counts(weir__otlp_exporter *x, uint64_t *queued, uint64_t *sent,
                                uint64_t *dropped) {
    uint64_t q = 0, s = 0, d = 0;
    if (x) {
        pthread_mutex_lock(&x->mu);
        q = x->queued;
        s = x->sent;
        d = x->dropped;
        pthread_mutex_unlock(&x->mu);
    }
    if (queued)
        *queued = q;
    if (sent)
        *sent = s;
    if (dropped)
        *dropped = d;
}

void weir__otlp_exporter_destroy(weir__otlp_exporter *x) {
    if (!x)
        return;
    pthread_mutex_lock(&x->mu);
    x->stop = true;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->thread, NULL);
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    json_decref(x->queue);
    weir__free(x->shown_url);
    weir__otlp_settings_free(&x->s);
    weir__free(x);
}
