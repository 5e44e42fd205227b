/*
 * core/runtime/agent_state.c - api->agent_state: a row's state per agent
 * (get-or-create keyed by plugin instance and agent), released with a
 * destructor when the agent is disposed (core/api/agent.c, after
 * agent/disposed) or the row is unloaded (host.c, before its fini; the test
 * kit too).  One lock for every instance: a get-or-create is a short walk.
 */
#include <pthread.h>
#include <string.h>

#include "host_int.h"

struct weir__row_agent_state {
    struct weir__row_agent_state *next;
    const void *agent; /* identity only, never read */
    size_t size;
    void (*destroy)(void *state);
    max_align_t block[]; /* the plugin's `size` bytes */
};

static pthread_mutex_t states_mu = PTHREAD_MUTEX_INITIALIZER;

void *weir__plugin_agent_state(weir_plugin *self, weir_agent *agent, size_t size,
                               void (*destroy)(void *state)) {
    if (!self || !agent || size == 0 || size > SIZE_MAX - sizeof(struct weir__row_agent_state))
        return NULL;
    pthread_mutex_lock(&states_mu);
    struct weir__row_agent_state *s = self->states;
    while (s && s->agent != agent)
        s = s->next;
    if (!s) {
        s = weir__calloc(1, sizeof *s + size);
        if (s) {
            s->agent = agent;
            s->size = size;
            s->destroy = destroy;
            s->next = self->states;
            self->states = s;
        }
    }
    void *out = s && s->size == size ? (void *)s->block : NULL;
    pthread_mutex_unlock(&states_mu);
    return out;
}

void weir__plugin_states_release(weir_plugin *self, const void *agent) {
    if (!self)
        return;
    /* unlink under the lock, destroy outside it (a destructor may log) */
    struct weir__row_agent_state *gone = NULL;
    pthread_mutex_lock(&states_mu);
    for (struct weir__row_agent_state **at = &self->states; *at;) {
        struct weir__row_agent_state *s = *at;
        if (!agent || s->agent == agent) {
            *at = s->next;
            s->next = gone;
            gone = s;
        } else {
            at = &s->next;
        }
    }
    pthread_mutex_unlock(&states_mu);
    while (gone) {
        struct weir__row_agent_state *next = gone->next;
        if (gone->destroy)
            gone->destroy(gone->block);
        weir__free(gone);
        gone = next;
    }
}
