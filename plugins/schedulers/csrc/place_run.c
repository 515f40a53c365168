/* A run of queued one-node jobs placed by one call: see fi_place_run in free_index.h.
 *
 * The shapes' table is open addressing over the shape objects' ids (keys are never 0: an
 * object's address), grown to keep it at most half full. */
#include "free_index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SETTLED = 1, BLOCKED = 2, PLACED = 4, REFUSED = 8 };

typedef struct {
    uint64_t key; /* 0: empty */
    int32_t flags;
    int32_t n;
    fi_class *const *classes;
    const int64_t *const *needs;
    const int32_t *numbers;
    int64_t cores;
    int64_t memory;
    int32_t usage;
    int32_t plan;
} shape_entry;

struct fi_run {
    shape_entry *slots;
    int32_t capacity; /* a power of two */
    int32_t count;
    /* what fi_run_bind bound */
    fi_book *book;
    fi_ends *ends;
    const fi_queue *queue;
    int32_t *full;
    int32_t *out;
    int32_t room;
    int32_t *settled;
    int32_t *stop;
};

fi_run *fi_run_new(void) {
    fi_run *run = calloc(1, sizeof *run);
    if (run == NULL)
        return NULL;
    run->capacity = 64;
    run->slots = calloc((size_t)run->capacity, sizeof *run->slots);
    if (run->slots == NULL) {
        free(run);
        return NULL;
    }
    return run;
}

void fi_run_free(fi_run *run) {
    if (run == NULL)
        return;
    free(run->slots);
    free(run);
}

int32_t fi_run_count(const fi_run *run) { return run->count; }

void fi_run_clear(fi_run *run) {
    memset(run->slots, 0, sizeof *run->slots * (size_t)run->capacity);
    run->count = 0;
}

static uint32_t position_of(uint64_t key, int32_t capacity) {
    /* ids are aligned addresses: their low bits say nothing */
    uint64_t h = (key >> 4) * 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(h >> 32) & (uint32_t)(capacity - 1);
}

static shape_entry *lookup(const fi_run *run, uint64_t key) {
    uint32_t mask = (uint32_t)run->capacity - 1;
    for (uint32_t at = position_of(key, run->capacity);; at = (at + 1) & mask) {
        shape_entry *entry = run->slots + at;
        if (entry->key == key || entry->key == 0)
            return entry;
    }
}

/* The entry of `key`, made (flags 0) when there is none; NULL when out of memory. */
static shape_entry *entry_of(fi_run *run, uint64_t key) {
    shape_entry *entry = lookup(run, key);
    if (entry->key == key)
        return entry;
    if (2 * (run->count + 1) > run->capacity) {
        int32_t capacity = run->capacity * 2;
        shape_entry *slots = calloc((size_t)capacity, sizeof *slots);
        if (slots == NULL)
            return NULL;
        shape_entry *old = run->slots;
        int32_t old_capacity = run->capacity;
        run->slots = slots;
        run->capacity = capacity;
        for (int32_t i = 0; i < old_capacity; i++) {
            if (old[i].key != 0)
                *lookup(run, old[i].key) = old[i];
        }
        free(old);
        entry = lookup(run, key);
    }
    memset(entry, 0, sizeof *entry);
    entry->key = key;
    run->count++;
    return entry;
}

int fi_run_set(fi_run *run, uint64_t key, fi_class *const *classes, const int64_t *const *needs,
               int32_t n, const int32_t *numbers, int64_t cores, int64_t memory, int32_t usage,
               int32_t plan) {
    shape_entry *entry = entry_of(run, key);
    if (entry == NULL)
        return -1;
    entry->flags |= PLACED;
    entry->classes = classes;
    entry->needs = needs;
    entry->n = n;
    entry->numbers = numbers;
    entry->cores = cores;
    entry->memory = memory;
    entry->usage = usage;
    entry->plan = plan;
    return 0;
}

int fi_run_flag(fi_run *run, uint64_t key, int32_t flag) {
    shape_entry *entry = entry_of(run, key);
    if (entry == NULL)
        return -1;
    entry->flags |= flag;
    return 0;
}

void fi_run_unflag(fi_run *run, int32_t flags) {
    for (int32_t i = 0; i < run->capacity; i++)
        run->slots[i].flags &= ~flags;
}

typedef struct {
    uint64_t shape;
    double runtime;
    char *id;
    int32_t len;
} queued;

struct fi_queue {
    queued *jobs;
    int32_t count;
    int32_t capacity;
};

fi_queue *fi_queue_new(void) { return calloc(1, sizeof(fi_queue)); }

void fi_queue_free(fi_queue *queue) {
    if (queue == NULL)
        return;
    for (int32_t i = 0; i < queue->count; i++)
        free(queue->jobs[i].id);
    free(queue->jobs);
    free(queue);
}

int32_t fi_queue_count(const fi_queue *queue) { return queue->count; }

int fi_queue_insert(fi_queue *queue, int32_t position, uint64_t shape, double runtime,
                    const char *id, int32_t len) {
    if (position < 0 || position > queue->count)
        return -1;
    if (queue->count == queue->capacity) {
        int32_t capacity = queue->capacity ? 2 * queue->capacity : 256;
        queued *jobs = realloc(queue->jobs, sizeof *jobs * (size_t)capacity);
        if (jobs == NULL)
            return -1;
        queue->jobs = jobs;
        queue->capacity = capacity;
    }
    char *copied = malloc(len > 0 ? (size_t)len : 1);
    if (copied == NULL)
        return -1;
    if (len > 0)
        memcpy(copied, id, (size_t)len);
    queued *at = queue->jobs + position;
    memmove(at + 1, at, sizeof *at * (size_t)(queue->count - position));
    at->shape = shape;
    at->runtime = runtime;
    at->id = copied;
    at->len = len;
    queue->count++;
    return 0;
}

int fi_queue_extend(fi_queue *queue, int32_t n, const uint64_t *shapes, const double *runtimes,
                    const char *ids, const int32_t *lengths) {
    int64_t offset = 0;
    for (int32_t i = 0; i < n; i++) {
        if (fi_queue_insert(queue, queue->count, shapes[i], runtimes[i], ids + offset,
                            lengths[i]) != 0)
            return -1;
        offset += lengths[i];
    }
    return 0;
}

int fi_run_flag_many(fi_run *run, const uint64_t *keys, int32_t n, int32_t flag) {
    for (int32_t i = 0; i < n; i++) {
        if (fi_run_flag(run, keys[i], flag) != 0)
            return -1;
    }
    return 0;
}

void fi_queue_delete(fi_queue *queue, int32_t position) {
    if (position < 0 || position >= queue->count)
        return;
    queued *at = queue->jobs + position;
    free(at->id);
    memmove(at, at + 1, sizeof *at * (size_t)(queue->count - position - 1));
    queue->count--;
}

void fi_queue_drop(fi_queue *queue, const int32_t *positions, int32_t n) {
    int32_t kept = 0, next = 0;
    for (int32_t i = 0; i < queue->count; i++) {
        if (next < n && positions[next] == i) {
            free(queue->jobs[i].id);
            next++;
            continue;
        }
        queue->jobs[kept++] = queue->jobs[i];
    }
    queue->count = kept;
}

void fi_run_bind(fi_run *run, fi_book *book, fi_ends *ends, const fi_queue *queue,
                 int32_t *full, int32_t *out, int32_t *settled, int32_t room, int32_t *stop) {
    run->settled = settled;
    run->book = book;
    run->ends = ends;
    run->queue = queue;
    run->full = full;
    run->out = out;
    run->room = room;
    run->stop = stop;
}

int32_t fi_place_run(fi_run *run, int32_t from, double now, int guard, double start,
                     const int32_t *avoid, int32_t navoid) {
    const fi_queue *queue = run->queue;
    int32_t *full = run->full, *stop = run->stop;
    int32_t placed = 0, nsettled = 0;
    int32_t position = from < 0 ? 0 : from;
    int32_t count = queue->count;
    stop[1] = -5;
    stop[2] = stop[3] = stop[4] = stop[5] = -1;
    for (; position < count; position++) {
        const queued *job = queue->jobs + position;
        shape_entry *entry = lookup(run, job->shape);
        if (entry->key == 0)
            break;
        int32_t flags = entry->flags;
        if (flags & SETTLED)
            continue;
        if (placed == run->room || nsettled == run->room)
            break;
        double runtime = job->runtime;
        /* as _Protection.applies_to: a job expected to end before the reservation starts
         * may take its nodes */
        int guarded = guard && (isnan(runtime) || start == INFINITY || now + runtime > start);
        if ((flags & BLOCKED) || ((flags & REFUSED) && guarded)) {
            /* the pass settles the shape at this job: noted, and its later jobs passed over */
            int32_t *written = run->settled + 2 * nsettled++;
            written[0] = position;
            written[1] = guarded;
            entry->flags |= SETTLED;
            continue;
        }
        if (!(flags & PLACED))
            break;
        double end = isnan(runtime) ? INFINITY : now + runtime;
        int32_t where[4];
        int32_t plan = entry->plan;
        int64_t slot = fi_place(run->book, entry->classes, entry->needs, entry->n, full[plan],
                                entry->cores, entry->memory, guarded ? avoid : NULL,
                                guarded ? navoid : 0, where, run->ends, entry->numbers, end,
                                job->id, job->len, entry->usage);
        /* as _place_one: the classes before the first with room have none for the pass */
        if (where[0] > full[plan])
            full[plan] = where[0];
        if (slot < 0 || where[3] < 0) {
            stop[1] = (int32_t)slot;
            memcpy(stop + 2, where, sizeof where);
            break;
        }
        int32_t *written = run->out + 5 * placed++;
        written[0] = position;
        written[1] = (int32_t)slot;
        written[2] = where[3];
        written[3] = plan;
        written[4] = where[1];
    }
    stop[0] = position;
    stop[6] = nsettled;
    return placed;
}
