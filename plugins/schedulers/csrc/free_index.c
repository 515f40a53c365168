/* The default scheduler's free-capacity index: see free_index.h. */
#include "free_index.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t memory;
    int64_t rank;
    int32_t slot;
} entry;

/* The entries of one free key, sorted by (memory, rank). */
typedef struct {
    int32_t count;
    int32_t room;
    entry *entries;
} entry_list;

struct fi_class {
    int ncomp;
    int32_t nkeys;
    int32_t room;
    int64_t indexed;
    int64_t *keys; /* nkeys * ncomp, sorted */
    entry_list *lists;
    /* the idle nodes, a list linked through their records, oldest first (slots; -1: none) */
    int32_t idle_head;
    int32_t idle_tail;
    int64_t idle_count;
};

/* Where a slot's node is indexed: its class (NULL: out of the index), key and entry. */
typedef struct {
    fi_class *cls;
    int64_t *key; /* key_room components */
    int key_room;
    int64_t memory;
    int64_t rank;
    int32_t jobs;      /* jobs running on the node (kept while it is indexed) */
    int32_t idle_prev; /* its neighbours in its class's idle list (-1: none) */
    int32_t idle_next;
    int idle; /* whether it is in that list */
} record;

struct fi_book {
    int32_t count;
    record *records;
};

fi_class *fi_class_new(int ncomp) {
    if (ncomp < 1)
        return NULL;
    fi_class *cls = calloc(1, sizeof *cls);
    if (cls != NULL) {
        cls->ncomp = ncomp;
        cls->idle_head = cls->idle_tail = -1;
    }
    return cls;
}

void fi_class_free(fi_class *cls) {
    if (cls == NULL)
        return;
    for (int32_t i = 0; i < cls->nkeys; i++)
        free(cls->lists[i].entries);
    free(cls->lists);
    free(cls->keys);
    free(cls);
}

int64_t fi_class_count(const fi_class *cls) { return cls->indexed; }

int32_t fi_class_nkeys(const fi_class *cls) { return cls->nkeys; }

fi_book *fi_book_new(void) { return calloc(1, sizeof(fi_book)); }

void fi_book_free(fi_book *book) {
    if (book == NULL)
        return;
    for (int32_t i = 0; i < book->count; i++)
        free(book->records[i].key);
    free(book->records);
    free(book);
}

static int compare_keys(const int64_t *a, const int64_t *b, int ncomp) {
    for (int i = 0; i < ncomp; i++) {
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    }
    return 0;
}

/* The position of the first key not less than `key` (found: it equals `key`). */
static int32_t key_position(const fi_class *cls, const int64_t *key, int *found) {
    int32_t low = 0, high = cls->nkeys;
    int ncomp = cls->ncomp;
    while (low < high) {
        int32_t mid = low + (high - low) / 2;
        if (compare_keys(cls->keys + (int64_t)mid * ncomp, key, ncomp) < 0)
            low = mid + 1;
        else
            high = mid;
    }
    *found = low < cls->nkeys && compare_keys(cls->keys + (int64_t)low * ncomp, key, ncomp) == 0;
    return low;
}

/* The position of the first entry of `list` not less than (memory, rank). */
static int32_t entry_position(const entry_list *list, int64_t memory, int64_t rank) {
    int32_t low = 0, high = list->count;
    const entry *entries = list->entries;
    while (low < high) {
        int32_t mid = low + (high - low) / 2;
        const entry *e = entries + mid;
        if (e->memory < memory || (e->memory == memory && e->rank < rank))
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* The list of `key`, created (empty) when absent; NULL when out of memory. */
static entry_list *list_for(fi_class *cls, const int64_t *key) {
    int found;
    int32_t at = key_position(cls, key, &found);
    if (found)
        return cls->lists + at;
    int ncomp = cls->ncomp;
    if (cls->nkeys == cls->room) {
        int32_t room = cls->room ? cls->room * 2 : 8;
        int64_t *keys = realloc(cls->keys, sizeof(int64_t) * (size_t)room * (size_t)ncomp);
        if (keys == NULL)
            return NULL;
        cls->keys = keys;
        entry_list *lists = realloc(cls->lists, sizeof(entry_list) * (size_t)room);
        if (lists == NULL)
            return NULL;
        cls->lists = lists;
        cls->room = room;
    }
    int32_t after = cls->nkeys - at;
    memmove(cls->keys + (int64_t)(at + 1) * ncomp, cls->keys + (int64_t)at * ncomp,
            sizeof(int64_t) * (size_t)after * (size_t)ncomp);
    memmove(cls->lists + at + 1, cls->lists + at, sizeof(entry_list) * (size_t)after);
    memcpy(cls->keys + (int64_t)at * ncomp, key, sizeof(int64_t) * (size_t)ncomp);
    memset(cls->lists + at, 0, sizeof(entry_list));
    cls->nkeys++;
    return cls->lists + at;
}

static int insert(fi_class *cls, const int64_t *key, int64_t memory, int64_t rank, int32_t slot) {
    entry_list *list = list_for(cls, key);
    if (list == NULL)
        return -1;
    if (list->count == list->room) {
        int32_t room = list->room ? list->room * 2 : 4;
        entry *entries = realloc(list->entries, sizeof(entry) * (size_t)room);
        if (entries == NULL) {
            if (list->count == 0) {
                int found;
                int32_t at = key_position(cls, key, &found);
                int32_t after = cls->nkeys - at - 1;
                memmove(cls->keys + (int64_t)at * cls->ncomp,
                        cls->keys + (int64_t)(at + 1) * cls->ncomp,
                        sizeof(int64_t) * (size_t)after * (size_t)cls->ncomp);
                memmove(cls->lists + at, cls->lists + at + 1, sizeof(entry_list) * (size_t)after);
                cls->nkeys--;
            }
            return -1;
        }
        list->entries = entries;
        list->room = room;
    }
    int32_t at = entry_position(list, memory, rank);
    memmove(list->entries + at + 1, list->entries + at,
            sizeof(entry) * (size_t)(list->count - at));
    list->entries[at] = (entry){memory, rank, slot};
    list->count++;
    cls->indexed++;
    return 0;
}

static void remove_entry(fi_class *cls, const int64_t *key, int64_t memory, int64_t rank) {
    int found;
    int32_t position = key_position(cls, key, &found);
    if (!found)
        return;
    entry_list *list = cls->lists + position;
    int32_t at = entry_position(list, memory, rank);
    if (at == list->count || list->entries[at].rank != rank || list->entries[at].memory != memory)
        return;
    memmove(list->entries + at, list->entries + at + 1,
            sizeof(entry) * (size_t)(list->count - at - 1));
    list->count--;
    cls->indexed--;
    if (list->count)
        return;
    /* the key's last node left: the key goes (its list's memory with it) */
    free(list->entries);
    int ncomp = cls->ncomp;
    int32_t after = cls->nkeys - position - 1;
    memmove(cls->keys + (int64_t)position * ncomp, cls->keys + (int64_t)(position + 1) * ncomp,
            sizeof(int64_t) * (size_t)after * (size_t)ncomp);
    memmove(cls->lists + position, cls->lists + position + 1, sizeof(entry_list) * (size_t)after);
    cls->nkeys--;
}

static record *record_of(fi_book *book, int32_t slot) {
    if (slot < 0)
        return NULL;
    if (slot >= book->count) {
        int32_t count = book->count ? book->count : 64;
        while (count <= slot)
            count *= 2;
        record *records = realloc(book->records, sizeof(record) * (size_t)count);
        if (records == NULL)
            return NULL;
        memset(records + book->count, 0, sizeof(record) * (size_t)(count - book->count));
        book->records = records;
        book->count = count;
    }
    return book->records + slot;
}

/* Append indexed node `slot` to its class's idle list. */
static void idle_link(fi_book *book, int32_t slot) {
    record *r = book->records + slot;
    fi_class *cls = r->cls;
    r->idle = 1;
    r->idle_next = -1;
    r->idle_prev = cls->idle_tail;
    if (cls->idle_tail >= 0)
        book->records[cls->idle_tail].idle_next = slot;
    else
        cls->idle_head = slot;
    cls->idle_tail = slot;
    cls->idle_count++;
}

/* Take node `slot` out of its class's idle list (nothing when it is not in it). */
static void idle_unlink(fi_book *book, int32_t slot) {
    record *r = book->records + slot;
    if (!r->idle)
        return;
    fi_class *cls = r->cls;
    if (r->idle_prev >= 0)
        book->records[r->idle_prev].idle_next = r->idle_next;
    else
        cls->idle_head = r->idle_next;
    if (r->idle_next >= 0)
        book->records[r->idle_next].idle_prev = r->idle_prev;
    else
        cls->idle_tail = r->idle_prev;
    cls->idle_count--;
    r->idle = 0;
}

void fi_drop(fi_book *book, int32_t slot) {
    if (slot < 0 || slot >= book->count)
        return;
    record *r = book->records + slot;
    if (r->cls == NULL)
        return;
    idle_unlink(book, slot);
    remove_entry(r->cls, r->key, r->memory, r->rank);
    r->cls = NULL;
}

int fi_indexed(const fi_book *book, int32_t slot) {
    return slot >= 0 && slot < book->count && book->records[slot].cls != NULL;
}

int fi_put(fi_book *book, int32_t slot, fi_class *cls, const int64_t *key, int64_t memory,
           int64_t rank, int32_t jobs) {
    record *r = record_of(book, slot);
    if (r == NULL)
        return -1;
    fi_drop(book, slot);
    if (r->key_room < cls->ncomp) {
        int64_t *room = realloc(r->key, sizeof(int64_t) * (size_t)cls->ncomp);
        if (room == NULL)
            return -1;
        r->key = room;
        r->key_room = cls->ncomp;
    }
    if (insert(cls, key, memory, rank, slot) != 0)
        return -1;
    memcpy(r->key, key, sizeof(int64_t) * (size_t)cls->ncomp);
    r->memory = memory;
    r->rank = rank;
    r->cls = cls;
    r->jobs = jobs;
    r->idle = 0;
    if (jobs == 0)
        idle_link(book, slot);
    return 0;
}

/* fi_shift of a slot known to be indexed: `cores` added to its key's last component and,
 * when `devices` is not NULL, `scale` times each of its first ncomp - 1 (the device kinds'
 * counts: fi_shift_key's change, or fi_place's need taken off) to the others. */
static int shift(fi_book *book, int32_t slot, int64_t memory, const int64_t *devices,
                 int64_t scale, int64_t cores, int32_t jobs) {
    record *r = book->records + slot;
    fi_class *cls = r->cls;
    remove_entry(cls, r->key, r->memory, r->rank);
    if (devices != NULL) {
        for (int i = 0; i < cls->ncomp - 1; i++)
            r->key[i] += scale * devices[i];
    }
    r->key[cls->ncomp - 1] += cores;
    r->memory += memory;
    if (jobs) {
        int32_t was = r->jobs;
        r->jobs += jobs;
        if (was == 0)
            idle_unlink(book, slot);
        else if (r->jobs == 0)
            idle_link(book, slot);
    }
    if (insert(cls, r->key, r->memory, r->rank, slot) != 0) {
        idle_unlink(book, slot);
        r->cls = NULL;
        return -1;
    }
    return 0;
}

int fi_shift(fi_book *book, int32_t slot, int64_t memory, int64_t cores, int32_t jobs) {
    if (!fi_indexed(book, slot))
        return -1;
    return shift(book, slot, memory, NULL, 0, cores, jobs);
}

int fi_shift_key(fi_book *book, int32_t slot, int64_t memory, const int64_t *delta,
                 int32_t jobs) {
    if (!fi_indexed(book, slot))
        return -1;
    return shift(book, slot, memory, delta, 1, delta[book->records[slot].cls->ncomp - 1], jobs);
}

int fi_release(fi_book *book, int32_t slot, int64_t memory, int64_t cores, fi_ends *ends,
               int32_t number, double end, const char *id, int32_t len) {
    int unlisted = fi_end_remove(ends, number, end, id, len) != 0;
    int lost = fi_shift(book, slot, memory, cores, -1) != 0;
    return -(lost + 2 * unlisted);
}

int64_t fi_idle_count(const fi_class *cls) { return cls->idle_count; }

int32_t fi_idle(const fi_book *book, const fi_class *cls, int32_t *cursor, int32_t *out,
                int32_t room) {
    int32_t slot = *cursor == -1 ? cls->idle_head : *cursor;
    int32_t written = 0;
    while (slot >= 0 && written < room) {
        out[written++] = slot;
        slot = book->records[slot].idle_next;
    }
    /* -2: the walk is over (-1 would start it again) */
    *cursor = slot >= 0 ? slot : -2;
    return written;
}

void fi_rank_set(fi_book *book, int32_t slot, int64_t rank) {
    record *r = record_of(book, slot);
    if (r != NULL)
        r->rank = rank;
}

void fi_class_rerank(fi_class *cls, const fi_book *book) {
    for (int32_t k = 0; k < cls->nkeys; k++) {
        entry_list *list = cls->lists + k;
        for (int32_t i = 0; i < list->count; i++)
            list->entries[i].rank = book->records[list->entries[i].slot].rank;
    }
}

/* The first key position whose leading component is at least `first`. */
static int32_t first_position(const fi_class *cls, int64_t first) {
    int32_t low = 0, high = cls->nkeys;
    int ncomp = cls->ncomp;
    while (low < high) {
        int32_t mid = low + (high - low) / 2;
        if (cls->keys[(int64_t)mid * ncomp] < first)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* Whether `key` covers `need` past the leading component (the bisect settled that one). */
static int covers_rest(const int64_t *key, const int64_t *need, int ncomp) {
    for (int i = 1; i < ncomp; i++) {
        if (key[i] < need[i])
            return 0;
    }
    return 1;
}

/* The best-fitting entry for the need (see fi_first_fit), or NULL. */
static const entry *best_fit(const fi_class *cls, const int64_t *need, int64_t memory) {
    int ncomp = cls->ncomp;
    for (int32_t k = first_position(cls, need[0]); k < cls->nkeys; k++) {
        if (!covers_rest(cls->keys + (int64_t)k * ncomp, need, ncomp))
            continue;
        const entry_list *list = cls->lists + k;
        int32_t at = entry_position(list, memory, INT64_MIN);
        if (at < list->count)
            return list->entries + at;
    }
    return NULL;
}

int64_t fi_first_fit(const fi_class *cls, const int64_t *need, int64_t memory) {
    const entry *found = best_fit(cls, need, memory);
    return found == NULL ? -1 : found->rank;
}

int64_t fi_place(fi_book *book, fi_class *const *classes, const int64_t *const *needs, int32_t n,
                 int32_t start, int64_t cores, int64_t memory, const int32_t *avoid,
                 int32_t navoid, int32_t *where, fi_ends *ends, const int32_t *numbers,
                 double end, const char *id, int32_t len) {
    where[0] = n;
    where[1] = where[2] = -1;
    for (int32_t position = start < 0 ? 0 : start; position < n; position++) {
        const entry *found = best_fit(classes[position], needs[position], memory);
        if (found == NULL)
            continue;
        where[0] = where[1] = position;
        int32_t slot = where[2] = found->slot;
        for (int32_t i = 0; i < navoid; i++) {
            if (avoid[i] == slot)
                return -2;
        }
        /* `found` points into the list the move rewrites: only its slot is read */
        /* the need's device counts come off too (zeros for a job without devices) */
        if (shift(book, slot, -memory, needs[position], -1, -cores, 1) != 0)
            return -3;
        if (ends != NULL && fi_end_add(ends, numbers[position], end, id, len) != 0)
            return -4;
        return slot;
    }
    return -1;
}

int32_t fi_choose(const fi_book *book, fi_class *const *classes, const int64_t *const *needs,
                  int32_t n, int64_t memory, int exclusive, int32_t *out, int32_t room) {
    int32_t written = 0;
    for (int32_t position = 0; position < n && written < room; position++) {
        const fi_class *cls = classes[position];
        if (exclusive) {
            for (int32_t slot = cls->idle_head; slot >= 0 && written < room;
                 slot = book->records[slot].idle_next)
                out[written++] = slot;
            continue;
        }
        const int64_t *need = needs[position];
        int ncomp = cls->ncomp;
        for (int32_t k = first_position(cls, need[0]); k < cls->nkeys && written < room; k++) {
            if (!covers_rest(cls->keys + (int64_t)k * ncomp, need, ncomp))
                continue;
            const entry_list *list = cls->lists + k;
            for (int32_t at = entry_position(list, memory, INT64_MIN);
                 at < list->count && written < room; at++)
                out[written++] = list->entries[at].slot;
        }
    }
    return written;
}

int32_t fi_fitting(const fi_class *cls, const int64_t *need, int64_t memory, int32_t *cursor,
                   int64_t *out, int32_t room) {
    int ncomp = cls->ncomp;
    int32_t k = cursor[0], at = cursor[1];
    int32_t written = 0;
    if (k < 0) {
        k = first_position(cls, need[0]);
        at = -1;
    }
    while (k < cls->nkeys && written < room) {
        const entry_list *list = cls->lists + k;
        if (at < 0) {
            if (!covers_rest(cls->keys + (int64_t)k * ncomp, need, ncomp)) {
                k++;
                continue;
            }
            at = entry_position(list, memory, INT64_MIN);
        }
        while (at < list->count && written < room)
            out[written++] = list->entries[at++].rank;
        if (at < list->count)
            break; /* `out` is full: resume inside this key */
        k++;
        at = -1;
    }
    cursor[0] = k;
    cursor[1] = at;
    return written;
}

int32_t fi_scan(const fi_class *cls, const int64_t *need, int64_t memory, int64_t *lacking,
                int64_t *with_room, int64_t *closest, double *score) {
    int ncomp = cls->ncomp;
    int64_t cores = need[ncomp - 1];
    int32_t written = 0;
    double best = 0;
    closest[ncomp + 1] = -1;
    memset(lacking, 0, sizeof(int64_t) * (size_t)(ncomp + 1));
    for (int32_t k = 0; k < cls->nkeys; k++) {
        const int64_t *key = cls->keys + (int64_t)k * ncomp;
        const entry_list *list = cls->lists + k;
        int32_t low = entry_position(list, memory, INT64_MIN);
        /* what the key lacks first: the cores, else the first device kind it lacks */
        int short_at = -1;
        double this_score = 0;
        if (key[ncomp - 1] < cores) {
            short_at = ncomp - 1;
            this_score = (double)(cores - key[ncomp - 1]) / (double)(cores > 1 ? cores : 1);
        }
        for (int i = 0; i < ncomp - 1; i++) {
            if (key[i] < need[i]) {
                if (short_at < 0)
                    short_at = i;
                this_score += (double)(need[i] - key[i]) / (double)(need[i] > 1 ? need[i] : 1);
            }
        }
        if (short_at == ncomp - 1) {
            lacking[ncomp - 1] += list->count;
        } else {
            lacking[ncomp] += low;
            if (short_at >= 0)
                lacking[short_at] += list->count - low;
            else
                for (int32_t at = low; at < list->count; at++)
                    with_room[written++] = list->entries[at].rank;
        }
        const entry *near;
        if (short_at >= 0)
            near = list->entries + list->count - 1;
        else if (low)
            near = list->entries + low - 1;
        else
            continue;
        if (near->memory < memory)
            this_score += (double)(memory - near->memory) / (double)(memory > 1 ? memory : 1);
        if (closest[ncomp + 1] < 0 || this_score < best ||
            (this_score == best && near->rank < closest[ncomp + 1])) {
            best = this_score;
            memcpy(closest, key, sizeof(int64_t) * (size_t)ncomp);
            closest[ncomp] = near->memory;
            closest[ncomp + 1] = near->rank;
        }
    }
    *score = best;
    return written;
}
