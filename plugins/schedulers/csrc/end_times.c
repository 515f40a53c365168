/* Running jobs' expected ends per node class, in C: see free_index.h (fi_ends). */
#include "free_index.h"

#include <stdlib.h>
#include <string.h>

/* How long an id is kept in its entry itself (longer ones are copied to the heap). */
#define INLINE_ID 16

/* One job listed under an end: its id (`len` bytes, not NUL-terminated: in the entry when
 * it fits, else an owned copy), whether the id holds a NUL byte, and whether the job was
 * removed (a tombstone: kept, id included, until the bucket is compacted, so that removals
 * from a long bucket shift nothing). */
typedef struct {
    union {
        char *heap;
        char inline_id[INLINE_ID];
    } id;
    int32_t len;
    int16_t nul;
    int16_t dead;
    int32_t entry; /* the job's first entry in the node index's book (-1: not given) */
} end_job;

static const char *id_of(const end_job *job) {
    return job->len <= INLINE_ID ? job->id.inline_id : job->id.heap;
}

static void id_free(end_job *job) {
    if (job->len > INLINE_ID)
        free(job->id.heap);
}

/* The jobs ending at `end`, sorted by id (tombstones among them). */
typedef struct {
    double end;
    int32_t count; /* entries, tombstones included */
    int32_t live;
    int32_t room;
    end_job *jobs;
} end_bucket;

/* One class's buckets, sorted by end. */
typedef struct {
    int32_t count;
    int32_t room;
    end_bucket *buckets;
} end_list;

struct fi_ends {
    int32_t count; /* lists, by class number */
    end_list *lists;
};

fi_ends *fi_ends_new(void) { return calloc(1, sizeof(fi_ends)); }

static void bucket_free(end_bucket *bucket) {
    for (int32_t i = 0; i < bucket->count; i++)
        id_free(bucket->jobs + i);
    free(bucket->jobs);
}

void fi_ends_free(fi_ends *ends) {
    if (ends == NULL)
        return;
    for (int32_t n = 0; n < ends->count; n++) {
        end_list *list = ends->lists + n;
        for (int32_t b = 0; b < list->count; b++)
            bucket_free(list->buckets + b);
        free(list->buckets);
    }
    free(ends->lists);
    free(ends);
}

/* Python's order of str: UTF-8 bytes compared bytewise order code points the same way. */
static int compare_ids(const char *a, int32_t alen, const char *b, int32_t blen) {
    int c = memcmp(a, b, (size_t)(alen < blen ? alen : blen));
    if (c)
        return c;
    return (alen > blen) - (alen < blen);
}

/* The position of the first bucket of `list` whose end is not less than `end`. */
static int32_t bucket_position(const end_list *list, double end) {
    int32_t low = 0, high = list->count;
    while (low < high) {
        int32_t mid = low + (high - low) / 2;
        if (list->buckets[mid].end < end)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* The position of the first job of `bucket` whose id is not less than (`upper`: greater
 * than) `id`. */
static int32_t job_position(const end_bucket *bucket, const char *id, int32_t len, int upper) {
    int32_t low = 0, high = bucket->count;
    while (low < high) {
        int32_t mid = low + (high - low) / 2;
        const end_job *job = bucket->jobs + mid;
        int c = compare_ids(id_of(job), job->len, id, len);
        if (c < 0 || (upper && c == 0))
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

int fi_end_add(fi_ends *ends, int32_t number, double end, const char *id, int32_t len,
               int32_t entry) {
    if (number < 0 || len < 0)
        return -1;
    if (number >= ends->count) {
        int32_t count = ends->count ? ends->count : 16;
        while (count <= number)
            count *= 2;
        end_list *lists = realloc(ends->lists, sizeof(end_list) * (size_t)count);
        if (lists == NULL)
            return -1;
        memset(lists + ends->count, 0, sizeof(end_list) * (size_t)(count - ends->count));
        ends->lists = lists;
        ends->count = count;
    }
    end_list *list = ends->lists + number;
    int32_t at = bucket_position(list, end);
    if (at == list->count || list->buckets[at].end != end) {
        if (list->count == list->room) {
            int32_t room = list->room ? list->room * 2 : 8;
            end_bucket *buckets = realloc(list->buckets, sizeof(end_bucket) * (size_t)room);
            if (buckets == NULL)
                return -1;
            list->buckets = buckets;
            list->room = room;
        }
        memmove(list->buckets + at + 1, list->buckets + at,
                sizeof(end_bucket) * (size_t)(list->count - at));
        list->buckets[at] = (end_bucket){end, 0, 0, 0, NULL};
        list->count++;
    }
    end_bucket *bucket = list->buckets + at;
    end_job made = {
        .len = len, .nul = memchr(id, 0, (size_t)len) != NULL, .dead = 0, .entry = entry};
    char *copy = made.id.inline_id;
    if (len > INLINE_ID)
        copy = made.id.heap = malloc((size_t)len);
    if (copy == NULL || bucket->count == bucket->room) {
        int32_t room = bucket->room ? bucket->room * 2 : 2;
        end_job *jobs = copy == NULL ? NULL : realloc(bucket->jobs, sizeof(end_job) * (size_t)room);
        if (jobs == NULL) {
            id_free(&made);
            if (bucket->count == 0) {
                /* the bucket made for this job goes again */
                memmove(list->buckets + at, list->buckets + at + 1,
                        sizeof(end_bucket) * (size_t)(list->count - at - 1));
                list->count--;
            }
            return -1;
        }
        bucket->jobs = jobs;
        bucket->room = room;
    }
    memcpy(copy, id, (size_t)len);
    /* jobs mostly come in id order (a pass places in queue order): appended */
    int32_t position = bucket->count;
    if (position &&
        compare_ids(id_of(bucket->jobs + position - 1), bucket->jobs[position - 1].len, id, len) >
            0)
        position = job_position(bucket, id, len, 1);
    memmove(bucket->jobs + position + 1, bucket->jobs + position,
            sizeof(end_job) * (size_t)(bucket->count - position));
    bucket->jobs[position] = made;
    bucket->count++;
    bucket->live++;
    return 0;
}

/* Drop `bucket`'s tombstones, keeping the order. */
static void compact(end_bucket *bucket) {
    int32_t kept = 0;
    for (int32_t i = 0; i < bucket->count; i++) {
        if (bucket->jobs[i].dead)
            id_free(bucket->jobs + i);
        else
            bucket->jobs[kept++] = bucket->jobs[i];
    }
    bucket->count = kept;
}

int fi_end_remove(fi_ends *ends, int32_t number, double end, const char *id, int32_t len) {
    if (number < 0 || number >= ends->count)
        return -1;
    end_list *list = ends->lists + number;
    int32_t at = bucket_position(list, end);
    if (at == list->count || list->buckets[at].end != end)
        return -1;
    end_bucket *bucket = list->buckets + at;
    int32_t position = bucket->count == 1 ? 0 : job_position(bucket, id, len, 0);
    /* a removed job of the same id may lie before the live one */
    for (; position < bucket->count; position++) {
        end_job *job = bucket->jobs + position;
        if (compare_ids(id_of(job), job->len, id, len) != 0)
            return -1;
        if (!job->dead)
            break;
    }
    if (position == bucket->count)
        return -1;
    bucket->jobs[position].dead = 1;
    bucket->live--;
    if (bucket->live == 0) {
        bucket_free(bucket);
        memmove(list->buckets + at, list->buckets + at + 1,
                sizeof(end_bucket) * (size_t)(list->count - at - 1));
        list->count--;
        if (list->count == 0) {
            free(list->buckets);
            list->buckets = NULL;
            list->room = 0;
        }
    } else if (bucket->count - bucket->live > bucket->live) {
        compact(bucket);
    }
    return 0;
}

/* the bucket class ``c`` of a walk stands at (its list numbered ``numbers[c]``, its cursor
 * ``cursors[c]``), or NULL when the class has no list or its walk is over */
static const end_bucket *bucket_at(const fi_ends *ends, const int32_t *numbers,
                                   const int32_t *cursors, int32_t c) {
    int32_t number = numbers[c];
    if (number < 0 || number >= ends->count)
        return NULL;
    const end_list *list = ends->lists + number;
    return cursors[c] < list->count ? list->buckets + cursors[c] : NULL;
}

/* the least end the classes' walks stand at, in ``*least``; 0 when every walk is over */
static int least_next_end(const fi_ends *ends, const int32_t *numbers, int32_t n,
                          const int32_t *cursors, double *least) {
    int found = 0;
    for (int32_t c = 0; c < n; c++) {
        const end_bucket *bucket = bucket_at(ends, numbers, cursors, c);
        if (bucket != NULL && (!found || bucket->end < *least)) {
            *least = bucket->end;
            found = 1;
        }
    }
    return found;
}

int64_t fi_ends_next(const fi_ends *ends, const int32_t *numbers, int32_t n, int32_t *cursors,
                     double *end, char *out, int32_t *lengths, int64_t room, int32_t *jobs,
                     int32_t *plain) {
    double least = 0;
    if (!least_next_end(ends, numbers, n, cursors, &least))
        return -1;
    /* the buckets of that end, merged by id (a job under several classes once); a walk
     * over more classes than the stack's arrays hold takes them from the heap */
    const end_bucket *stack_merged[64];
    int32_t stack_at[64];
    const end_bucket **merged = stack_merged;
    int32_t *at = stack_at;
    if (n > 64) {
        merged = malloc(sizeof(*merged) * (size_t)n);
        at = malloc(sizeof(*at) * (size_t)n);
        if (merged == NULL || at == NULL) {
            free(merged);
            free(at);
            return -2;
        }
    }
    int32_t parts = 0;
    int64_t total = 0;
    for (int32_t c = 0; c < n; c++) {
        const end_bucket *bucket = bucket_at(ends, numbers, cursors, c);
        if (bucket != NULL && bucket->end == least) {
            merged[parts] = bucket;
            at[parts] = 0;
            /* every job's id and its NUL, tombstones counted too (a bound) */
            for (int32_t i = 0; i < merged[parts]->count; i++)
                total += merged[parts]->jobs[i].len + 1;
            parts++;
        }
    }
    if (total > room) {
        if (n > 64) {
            free(merged);
            free(at);
        }
        return -3 - total;
    }
    int64_t written = 0;
    int32_t count = 0;
    int nul = 0;
    const end_job *last = NULL;
    for (;;) {
        const end_job *next = NULL;
        int32_t from = -1;
        for (int32_t p = 0; p < parts; p++) {
            while (at[p] < merged[p]->count && merged[p]->jobs[at[p]].dead)
                at[p]++;
            if (at[p] == merged[p]->count)
                continue;
            const end_job *job = merged[p]->jobs + at[p];
            if (next == NULL || compare_ids(id_of(job), job->len, id_of(next), next->len) < 0) {
                next = job;
                from = p;
            }
        }
        if (next == NULL)
            break;
        at[from]++;
        if (last != NULL && compare_ids(id_of(last), last->len, id_of(next), next->len) == 0)
            continue;
        memcpy(out + written, id_of(next), (size_t)next->len);
        written += next->len;
        out[written++] = 0;
        lengths[count++] = next->len;
        nul |= next->nul;
        last = next;
    }
    if (n > 64) {
        free(merged);
        free(at);
    }
    /* only now: a call told to make room is asked again from the same place */
    for (int32_t c = 0; c < n; c++) {
        const end_bucket *bucket = bucket_at(ends, numbers, cursors, c);
        if (bucket != NULL && bucket->end == least)
            cursors[c]++;
    }
    *end = least;
    *jobs = count;
    *plain = !nul;
    return written;
}

int64_t fi_ends_count(const fi_ends *ends, int32_t number) {
    if (number < 0 || number >= ends->count)
        return 0;
    const end_list *list = ends->lists + number;
    int64_t count = 0;
    for (int32_t b = 0; b < list->count; b++)
        count += list->buckets[b].live;
    return count;
}

int64_t fi_ends_next_entries(const fi_ends *ends, const int32_t *numbers, int32_t n,
                             int32_t *cursors, double *end, int32_t *out, int64_t room) {
    double least = 0;
    if (!least_next_end(ends, numbers, n, cursors, &least))
        return -1;
    int64_t total = 0;
    for (int32_t c = 0; c < n; c++) {
        const end_bucket *bucket = bucket_at(ends, numbers, cursors, c);
        if (bucket != NULL && bucket->end == least)
            total += bucket->live;
    }
    if (total > room)
        return -3 - total;
    int64_t written = 0;
    for (int32_t c = 0; c < n; c++) {
        const end_bucket *bucket = bucket_at(ends, numbers, cursors, c);
        if (bucket != NULL && bucket->end == least) {
            for (int32_t i = 0; i < bucket->count; i++)
                if (!bucket->jobs[i].dead)
                    out[written++] = bucket->jobs[i].entry;
            cursors[c]++;
        }
    }
    *end = least;
    return written;
}
