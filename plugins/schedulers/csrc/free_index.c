/* The default scheduler's free-capacity index: see free_index.h. */
#include "free_index.h"

#include <math.h>
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
    /* entries inserted or removed: a move counts 2 (NodeClass.changes reads it) */
    int64_t changes;
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
    /* the node's running jobs' entries (all of them, indexed or not), oldest first */
    int32_t head;
    int32_t tail;
    int32_t njobs;
    /* what fi_note_node told: the node's class number (-1: not told), and while it is out
     * of the index whether it takes new work and its free key and memory now */
    int32_t number;
    int32_t usable;
    int32_t oncomp; /* 0: not told */
    int32_t oroom;
    int64_t *okey;
    int64_t omemory;
} record;

/* An id of up to this many bytes is kept in its entry; a longer one is copied apart. */
#define ENTRY_ID_INLINE 16
/* How many device kinds an entry counts (a job on a node of more is replayed in Python). */
#define ENTRY_DEVICES 4
/* The widest free key fi_replay's shadow holds (a wider one is replayed in Python). */
#define REPLAY_WIDTH 16

/* One running job on one node: the node's slot, the job's cores and memory there, whether
 * fi_release_entry may release it alone (no devices, pinned cores, ports or exclusivity),
 * its neighbours in its node's list (-1: none; `next` links the free entries too). */
typedef struct {
    int32_t slot; /* -1: a free entry */
    int32_t prev;
    int32_t next;
    int32_t plain;
    int64_t cores;
    int64_t memory;
    int32_t usage; /* the caller's number for the job's usage on the node (NodeIndex's table) */
    int32_t sibling; /* the job's next entry (on its next node), -1: none */
    int32_t ndev;    /* device counts by the class's kinds (-1: more kinds than `dev` holds) */
    int64_t dev[ENTRY_DEVICES];
    int32_t len; /* the job's id: `len` bytes, in `small` when they fit, else in `id` */
    char *id;
    char small[ENTRY_ID_INLINE];
} job_entry;

struct fi_book {
    int32_t count;
    record *records;
    job_entry *entries;
    int32_t nentries; /* entries ever made (free ones included) */
    int32_t entry_room;
    int32_t free_entry; /* head of the free entries, -1: none */
    int32_t *shadow_of; /* fi_replay's scratch: slot -> its shadow (-1), `shadow_room` long */
    int32_t shadow_room;
    int64_t changes;    /* placements and releases made in C (NodeIndex.usage_changes) */
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

fi_book *fi_book_new(void) {
    fi_book *book = calloc(1, sizeof(fi_book));
    if (book != NULL)
        book->free_entry = -1;
    return book;
}

void fi_book_free(fi_book *book) {
    if (book == NULL)
        return;
    for (int32_t i = 0; i < book->count; i++) {
        free(book->records[i].key);
        free(book->records[i].okey);
    }
    free(book->shadow_of);
    free(book->records);
    for (int32_t e = 0; e < book->nentries; e++)
        if (book->entries[e].slot >= 0)
            free(book->entries[e].id);
    free(book->entries);
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
    cls->changes++;
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
    cls->changes++;
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
        for (int32_t i = book->count; i < count; i++) {
            records[i].head = records[i].tail = -1;
            records[i].number = -1;
        }
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
                 double end, const char *id, int32_t len, int32_t usage) {
    where[0] = n;
    where[1] = where[2] = where[3] = -1;
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
        book->changes++;
        /* the need's device counts: a job with none may be released by fi_release_entry */
        int plain = 1;
        for (int i = 0; i < classes[position]->ncomp - 1; i++)
            plain &= needs[position][i] == 0;
        where[3] = fi_entry_add(book, slot, cores, memory, plain, usage, id, len);
        if (where[3] < 0)
            return -4;
        fi_entry_devices(book, where[3], needs[position], classes[position]->ncomp - 1);
        if (ends != NULL && fi_end_add(ends, numbers[position], end, id, len, where[3]) != 0)
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

int32_t fi_place_nodes(fi_book *book, fi_class *const *classes, const int64_t *const *needs,
                       int32_t n, int32_t nneed, int64_t cores, int64_t memory,
                       const int32_t *avoid, int32_t navoid, fi_ends *ends,
                       const int32_t *numbers, double end, const char *id, int32_t len,
                       int32_t usage, int32_t *slots, int32_t *entries) {
    /* the nodes first, as the Python search lists them before any moves */
    int32_t found = fi_choose(book, classes, needs, n, memory, 0, slots, nneed);
    if (found < nneed)
        return found;
    for (int32_t i = 0; i < nneed; i++) {
        for (int32_t k = 0; k < navoid; k++) {
            if (avoid[k] == slots[i])
                return -3;
        }
    }
    int32_t position = 0, listed = -1;
    for (int32_t i = 0; i < nneed; i++) {
        int32_t slot = slots[i];
        /* the node's class among the plan's: the listing goes class by class in order */
        const fi_class *cls = book->records[slot].cls;
        while (position < n && classes[position] != cls)
            position++;
        int32_t e = entries[i] = fi_entry_add(book, slot, cores, memory, 1, usage, id, len);
        if (e < 0)
            return -1;
        /* the need's device counts are zeros: what the replay gives back of the entry */
        fi_entry_devices(book, e, needs[position], cls->ncomp - 1);
        if (i > 0)
            fi_entry_chain(book, entries[i - 1], e);
        book->changes++;
        if (shift(book, slot, -memory, NULL, 0, -cores, 1) != 0)
            return -4 - i;
        if (position != listed) {
            listed = position;
            if (fi_end_add(ends, numbers[position], end, id, len, entries[0]) != 0)
                return -1;
        }
    }
    return nneed;
}

int32_t fi_place_whole(fi_book *book, fi_class *const *classes, const int64_t *const *caps,
                       const int64_t *memories, const int32_t *usages, int32_t n,
                       const int32_t *avoid, int32_t navoid, fi_ends *ends,
                       const int32_t *numbers, double end, const char *id, int32_t len,
                       int64_t *where) {
    int32_t position = 0;
    while (position < n && classes[position]->idle_head < 0)
        position++;
    if (position == n)
        return -1;
    int32_t slot = classes[position]->idle_head;
    for (int32_t k = 0; k < navoid; k++) {
        if (avoid[k] == slot)
            return -3;
    }
    const fi_class *cls = classes[position];
    int ncomp = cls->ncomp;
    const int64_t *cap = caps[position];
    int64_t memory = memories[position];
    int32_t e = fi_entry_add(book, slot, cap[ncomp - 1], memory, 0, usages[position], id, len);
    if (e < 0)
        return -4;
    fi_entry_devices(book, e, cap, ncomp - 1);
    record *r = book->records + slot;
    /* the key and memory it was indexed under stay in its record */
    fi_drop(book, slot);
    int64_t small[REPLAY_WIDTH];
    int64_t *key = ncomp <= REPLAY_WIDTH ? small : malloc(sizeof(int64_t) * (size_t)ncomp);
    if (key == NULL)
        return -4;
    for (int i = 0; i < ncomp; i++)
        key[i] = r->key[i] - cap[i];
    fi_note_node(book, slot, numbers[position], 1, key, ncomp, r->memory - memory);
    where[0] = position;
    where[1] = e;
    where[2] = key[ncomp - 1];
    where[3] = r->memory - memory;
    if (key != small)
        free(key);
    book->changes++;
    if (fi_end_add(ends, numbers[position], end, id, len, e) != 0)
        return -4;
    return slot;
}

int fi_release_whole(fi_book *book, int32_t e, fi_ends *ends, int32_t number, double end,
                     fi_class *cls, int64_t rank) {
    if (e < 0 || e >= book->nentries || book->entries[e].slot < 0)
        return 1;
    job_entry *j = book->entries + e;
    int32_t slot = j->slot;
    record *r = book->records + slot;
    int ncomp = cls->ncomp;
    if (r->cls != NULL || r->oncomp != ncomp || j->ndev != ncomp - 1)
        return 1;
    int64_t small[REPLAY_WIDTH];
    int64_t *key = ncomp <= REPLAY_WIDTH ? small : malloc(sizeof(int64_t) * (size_t)ncomp);
    if (key == NULL)
        return 1;
    for (int i = 0; i < ncomp - 1; i++)
        key[i] = r->okey[i] + j->dev[i];
    key[ncomp - 1] = r->okey[ncomp - 1] + j->cores;
    int64_t memory = r->omemory + j->memory;
    /* unlisted by the entry's copy of the id, before the entry (and a long copy) goes */
    int unlisted = fi_end_remove(ends, number, end, j->id != NULL ? j->id : j->small, j->len) != 0;
    fi_entry_remove(book, e);
    book->changes++;
    int lost = fi_put(book, slot, cls, key, memory, rank, r->njobs) != 0;
    if (key != small)
        free(key);
    if (!lost)
        fi_note_node(book, slot, number, 1, NULL, 0, 0);
    return -(lost + 2 * unlisted);
}

int fi_release_nodes(fi_book *book, int32_t e, fi_ends *ends, const int32_t *numbers, int32_t n,
                     double end) {
    if (e < 0 || e >= book->nentries || book->entries[e].slot < 0)
        return 1;
    for (int32_t at = e; at >= 0; at = book->entries[at].sibling) {
        const job_entry *j = book->entries + at;
        if (j->slot < 0 || !j->plain || book->records[j->slot].cls == NULL)
            return 1;
    }
    const job_entry *first = book->entries + e;
    const char *id = first->id != NULL ? first->id : first->small;
    int unlisted = 0, lost = 0;
    /* unlisted by the first entry's copy of the id, before the entry (and its copy) goes */
    for (int32_t k = 0; k < n; k++)
        unlisted |= fi_end_remove(ends, numbers[k], end, id, first->len) != 0;
    int32_t at = e;
    while (at >= 0) {
        job_entry *j = book->entries + at;
        int32_t slot = j->slot, next = j->sibling;
        int64_t cores = j->cores, memory = j->memory;
        fi_entry_remove(book, at);
        book->changes++;
        lost |= shift(book, slot, memory, NULL, 0, cores, -1) != 0;
        at = next;
    }
    return -(lost + 2 * unlisted);
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

int64_t fi_class_changes(const fi_class *cls) { return cls->changes; }

int64_t fi_book_changes(const fi_book *book) { return book->changes; }

int32_t fi_entry_add(fi_book *book, int32_t slot, int64_t cores, int64_t memory, int32_t plain,
                     int32_t usage, const char *id, int32_t len) {
    char *copy = NULL;
    if (len > ENTRY_ID_INLINE) {
        copy = malloc((size_t)len);
        if (copy == NULL)
            return -1;
        memcpy(copy, id, (size_t)len);
    }
    record *r = record_of(book, slot);
    if (r == NULL) {
        free(copy);
        return -1;
    }
    int32_t e = book->free_entry;
    if (e >= 0) {
        book->free_entry = book->entries[e].next;
    } else {
        if (book->nentries == book->entry_room) {
            int32_t room = book->entry_room ? book->entry_room * 2 : 1024;
            job_entry *entries = realloc(book->entries, sizeof(job_entry) * (size_t)room);
            if (entries == NULL) {
                free(copy);
                return -1;
            }
            book->entries = entries;
            book->entry_room = room;
        }
        e = book->nentries++;
    }
    job_entry *j = book->entries + e;
    *j = (job_entry){slot, r->tail, -1, plain, cores, memory, usage, -1, 0, {0}, len, copy, {0}};
    if (copy == NULL && len > 0)
        memcpy(j->small, id, (size_t)len);
    if (r->tail >= 0)
        book->entries[r->tail].next = e;
    else
        r->head = e;
    r->tail = e;
    r->njobs++;
    return e;
}

int32_t fi_entry_remove(fi_book *book, int32_t e) {
    if (e < 0 || e >= book->nentries || book->entries[e].slot < 0)
        return -1;
    job_entry *j = book->entries + e;
    int32_t slot = j->slot;
    record *r = book->records + slot;
    if (j->prev >= 0)
        book->entries[j->prev].next = j->next;
    else
        r->head = j->next;
    if (j->next >= 0)
        book->entries[j->next].prev = j->prev;
    else
        r->tail = j->prev;
    r->njobs--;
    free(j->id);
    j->id = NULL;
    j->slot = -1;
    j->next = book->free_entry;
    book->free_entry = e;
    return slot;
}

int32_t fi_entry_count(const fi_book *book, int32_t slot) {
    return slot >= 0 && slot < book->count ? book->records[slot].njobs : 0;
}

int32_t fi_entries(const fi_book *book, int32_t slot, int32_t *out, int32_t room) {
    int32_t written = 0;
    if (slot < 0 || slot >= book->count)
        return 0;
    for (int32_t e = book->records[slot].head; e >= 0 && written < room; e = book->entries[e].next)
        out[written++] = e;
    return written;
}

int64_t fi_free_cores(const fi_book *book, int32_t slot) {
    const record *r = book->records + slot;
    return r->key[r->cls->ncomp - 1];
}

int64_t fi_free_memory(const fi_book *book, int32_t slot) { return book->records[slot].memory; }

int fi_release_entry(fi_book *book, int32_t e, fi_ends *ends, int32_t number, double end) {
    if (e < 0 || e >= book->nentries || book->entries[e].slot < 0)
        return 1;
    job_entry *j = book->entries + e;
    int32_t slot = j->slot;
    if (!j->plain || book->records[slot].cls == NULL)
        return 1;
    int64_t cores = j->cores, memory = j->memory;
    /* unlisted by the entry's copy of the id, before the entry (and a long copy) goes */
    int unlisted = fi_end_remove(ends, number, end, j->id != NULL ? j->id : j->small, j->len) != 0;
    fi_entry_remove(book, e);
    book->changes++;
    int lost = shift(book, slot, memory, NULL, 0, cores, -1) != 0;
    return -(lost + 2 * unlisted);
}

int fi_release_devices(fi_book *book, int32_t e, fi_ends *ends, int32_t number, double end) {
    if (e < 0 || e >= book->nentries || book->entries[e].slot < 0)
        return 1;
    job_entry *j = book->entries + e;
    int32_t slot = j->slot;
    const fi_class *cls = book->records[slot].cls;
    if (cls == NULL || j->ndev != cls->ncomp - 1)
        return 1;
    int64_t cores = j->cores, memory = j->memory;
    int64_t devices[ENTRY_DEVICES];
    memcpy(devices, j->dev, sizeof devices);
    /* unlisted by the entry's copy of the id, before the entry (and a long copy) goes */
    int unlisted = fi_end_remove(ends, number, end, j->id != NULL ? j->id : j->small, j->len) != 0;
    fi_entry_remove(book, e);
    book->changes++;
    int lost = shift(book, slot, memory, devices, 1, cores, -1) != 0;
    return -(lost + 2 * unlisted);
}

int64_t fi_key_at(const fi_book *book, int32_t slot, int32_t at) {
    return book->records[slot].key[at];
}

const int64_t *fi_class_changes_at(const fi_class *cls) { return &cls->changes; }

int32_t fi_node_state(const fi_book *book, int32_t slot, int64_t *out) {
    const record *r = book->records + slot;
    if (r->cls != NULL) {
        out[0] = r->key[r->cls->ncomp - 1];
        out[1] = r->memory;
    }
    return r->njobs;
}

const char *fi_entry_id(const fi_book *book, int32_t e, int32_t *len) {
    const job_entry *j = book->entries + e;
    *len = j->len;
    return j->id != NULL ? j->id : j->small;
}

int32_t fi_entry_usage(const fi_book *book, int32_t e) { return book->entries[e].usage; }

int32_t fi_entry_find(const fi_book *book, int32_t slot, const char *id, int32_t len) {
    if (slot < 0 || slot >= book->count)
        return -1;
    for (int32_t e = book->records[slot].head; e >= 0; e = book->entries[e].next) {
        const job_entry *j = book->entries + e;
        if (j->len == len && memcmp(j->id != NULL ? j->id : j->small, id, (size_t)len) == 0)
            return e;
    }
    return -1;
}

int fi_note_node(fi_book *book, int32_t slot, int32_t number, int32_t usable,
                 const int64_t *key, int32_t ncomp, int64_t memory) {
    record *r = record_of(book, slot);
    if (r == NULL)
        return -1;
    r->number = number;
    if (key == NULL)
        return 0;
    if (r->oroom < ncomp) {
        int64_t *room = realloc(r->okey, sizeof(int64_t) * (size_t)ncomp);
        if (room == NULL) {
            r->oncomp = 0; /* not told: a replay meeting the node is made in Python */
            return -1;
        }
        r->okey = room;
        r->oroom = ncomp;
    }
    memcpy(r->okey, key, sizeof(int64_t) * (size_t)ncomp);
    r->oncomp = ncomp;
    r->omemory = memory;
    r->usable = usable;
    return 0;
}

void fi_entry_devices(fi_book *book, int32_t e, const int64_t *devices, int32_t n) {
    job_entry *j = book->entries + e;
    if (n > ENTRY_DEVICES) {
        j->ndev = -1;
        return;
    }
    j->ndev = n;
    for (int32_t i = 0; i < n; i++)
        j->dev[i] = devices[i];
}

void fi_entry_chain(fi_book *book, int32_t e, int32_t next) { book->entries[e].sibling = next; }

static int compare_ints(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One node's state in a replay: its free key, free memory and running jobs. */
typedef struct {
    int32_t slot;
    int32_t ncomp;
    int32_t running;
    int64_t memory;
    int64_t key[REPLAY_WIDTH];
} shadow_state;

/* A question's fitting nodes (slots), in the order they came. */
typedef struct {
    int32_t count;
    int32_t room;
    int32_t *slots;
} fitting_set;

static int fitting_has(const fitting_set *set, int32_t slot) {
    for (int32_t i = 0; i < set->count; i++)
        if (set->slots[i] == slot)
            return 1;
    return 0;
}

static int fitting_add(fitting_set *set, int32_t slot) {
    if (set->count == set->room) {
        int32_t room = set->room ? set->room * 2 : 8;
        int32_t *slots = realloc(set->slots, sizeof(int32_t) * (size_t)room);
        if (slots == NULL)
            return -1;
        set->slots = slots;
        set->room = room;
    }
    set->slots[set->count++] = slot;
    return 0;
}

int fi_replay(fi_book *book, const fi_ends *ends, int32_t nasks, const int32_t *ask_number,
              const int32_t *asked_by, const int64_t *const *asked_key, int32_t nqueries,
              const int64_t *memory, const int32_t *exclusive, const int32_t *needed,
              const int32_t *seed_start, const int32_t *seeds, double *starts) {
    int rc = -1;
    /* the questions grouped by class: class c's are ask_query[ask_start[c]..ask_start[c+1]]
     * (with their keys in ask_key), the classes in the order they were first asked */
    int32_t nclasses = 0;
    int32_t *numbers = malloc(sizeof(int32_t) * (size_t)(nasks ? nasks : 1));
    int32_t *ask_start = calloc((size_t)nasks + 2, sizeof(int32_t));
    int32_t *ask_query = malloc(sizeof(int32_t) * (size_t)(nasks ? nasks : 1));
    const int64_t **ask_key = malloc(sizeof(int64_t *) * (size_t)(nasks ? nasks : 1));
    int32_t *class_of = malloc(sizeof(int32_t) * (size_t)(nasks ? nasks : 1));
    if (numbers == NULL || ask_start == NULL || ask_query == NULL || ask_key == NULL ||
        class_of == NULL) {
        free(numbers);
        free(ask_start);
        free(ask_query);
        free(ask_key);
        free(class_of);
        return -1;
    }
    for (int32_t i = 0; i < nasks; i++) {
        int32_t c = 0;
        while (c < nclasses && numbers[c] != ask_number[i])
            c++;
        if (c == nclasses)
            numbers[nclasses++] = ask_number[i];
        class_of[i] = c;
        ask_start[c + 1]++;
    }
    for (int32_t c = 0; c < nclasses; c++)
        ask_start[c + 1] += ask_start[c];
    {
        /* placed by a counting sort (each class's questions in the order asked) */
        int32_t *fill = calloc((size_t)(nclasses ? nclasses : 1), sizeof(int32_t));
        if (fill == NULL) {
            free(numbers);
            free(ask_start);
            free(ask_query);
            free(ask_key);
            free(class_of);
            return -1;
        }
        for (int32_t i = 0; i < nasks; i++) {
            int32_t c = class_of[i];
            int32_t at = ask_start[c] + fill[c]++;
            ask_query[at] = asked_by[i];
            ask_key[at] = asked_key[i];
        }
        free(fill);
    }
    free(class_of);
    fitting_set *fitting = calloc((size_t)(nqueries ? nqueries : 1), sizeof(fitting_set));
    int32_t *class_open = calloc((size_t)(nclasses ? nclasses : 1), sizeof(int32_t));
    int32_t *cursors = calloc((size_t)(nclasses ? nclasses : 1), sizeof(int32_t));
    /* the classes walked: those with a question open (a class answered is walked no more) */
    int32_t *walked = malloc(sizeof(int32_t) * (size_t)(nclasses ? nclasses : 1));
    int32_t nwalked = nclasses;
    int64_t room = 256;
    int32_t *heads = malloc(sizeof(int32_t) * (size_t)room);
    int32_t nshadows = 0, shadow_room = 64;
    shadow_state *shadows = malloc(sizeof(shadow_state) * (size_t)shadow_room);
    if (fitting == NULL || class_open == NULL || cursors == NULL || walked == NULL ||
        heads == NULL || shadows == NULL)
        goto done;
    memcpy(walked, numbers, sizeof(int32_t) * (size_t)nclasses);
    if (book->shadow_room < book->count) {
        int32_t *map = realloc(book->shadow_of, sizeof(int32_t) * (size_t)book->count);
        if (map == NULL)
            goto done;
        for (int32_t i = book->shadow_room; i < book->count; i++)
            map[i] = -1;
        book->shadow_of = map;
        book->shadow_room = book->count;
    }
    int32_t open = nqueries;
    for (int32_t q = 0; q < nqueries; q++) {
        starts[q] = NAN;
        for (int32_t i = seed_start[q]; i < seed_start[q + 1]; i++)
            if (!fitting_has(fitting + q, seeds[i]) && fitting_add(fitting + q, seeds[i]) != 0)
                goto done;
    }
    for (int32_t c = 0; c < nclasses; c++)
        class_open[c] = ask_start[c + 1] - ask_start[c];
    rc = 0;
    while (open > 0) {
        double end;
        int64_t count = fi_ends_next_entries(ends, walked, nwalked, cursors, &end, heads, room);
        if (count == -1)
            break;
        if (count < -1) {
            room = -3 - count;
            int32_t *grown = realloc(heads, sizeof(int32_t) * (size_t)room);
            if (grown == NULL) {
                rc = -1;
                goto done;
            }
            heads = grown;
            continue;
        }
        /* a job listed under several of the classes once */
        qsort(heads, (size_t)count, sizeof(int32_t), compare_ints);
        for (int64_t h = 0; h < count && open > 0; h++) {
            if (h && heads[h] == heads[h - 1])
                continue;
            if (heads[h] < 0) {
                rc = 1;
                goto done;
            }
            for (int32_t e = heads[h]; e >= 0; e = book->entries[e].sibling) {
                const job_entry *j = book->entries + e;
                if (j->slot < 0) {
                    rc = 1;
                    goto done;
                }
                const record *r = book->records + j->slot;
                int32_t c = 0;
                while (c < nclasses && numbers[c] != r->number)
                    c++;
                if (c == nclasses || !class_open[c])
                    continue;
                if (r->cls == NULL && !r->usable)
                    continue;
                int32_t at = book->shadow_of[j->slot];
                if (at < 0) {
                    int32_t ncomp = r->cls != NULL ? r->cls->ncomp : r->oncomp;
                    if (ncomp == 0 || ncomp > REPLAY_WIDTH) {
                        rc = 1;
                        goto done;
                    }
                    if (nshadows == shadow_room) {
                        shadow_room *= 2;
                        shadow_state *grown =
                            realloc(shadows, sizeof(shadow_state) * (size_t)shadow_room);
                        if (grown == NULL) {
                            rc = -1;
                            goto done;
                        }
                        shadows = grown;
                    }
                    at = book->shadow_of[j->slot] = nshadows++;
                    shadow_state *made = shadows + at;
                    made->slot = j->slot;
                    made->ncomp = ncomp;
                    made->running = r->njobs;
                    made->memory = r->cls != NULL ? r->memory : r->omemory;
                    memcpy(made->key, r->cls != NULL ? r->key : r->okey,
                           sizeof(int64_t) * (size_t)ncomp);
                }
                shadow_state *state = shadows + at;
                int32_t ncomp = state->ncomp;
                if (j->ndev != ncomp - 1) {
                    rc = 1; /* devices not counted by this class's kinds */
                    goto done;
                }
                state->key[ncomp - 1] += j->cores;
                state->memory += j->memory;
                for (int32_t i = 0; i < j->ndev; i++)
                    state->key[i] += j->dev[i];
                state->running--;
                for (int32_t i = ask_start[c]; i < ask_start[c + 1]; i++) {
                    int32_t q = ask_query[i];
                    if (!isnan(starts[q]) || fitting_has(fitting + q, j->slot))
                        continue;
                    if (exclusive[q]) {
                        if (state->running)
                            continue;
                    } else {
                        if (state->memory < memory[q])
                            continue;
                        const int64_t *need = ask_key[i];
                        int covered = 1;
                        for (int32_t k = 0; k < ncomp && covered; k++)
                            covered = state->key[k] >= need[k];
                        if (!covered)
                            continue;
                    }
                    if (fitting_add(fitting + q, j->slot) != 0) {
                        rc = -1;
                        goto done;
                    }
                    if (fitting[q].count >= needed[q]) {
                        starts[q] = end;
                        open--;
                        /* the classes it asked about have one question fewer open */
                        for (int32_t d = 0; d < nclasses; d++) {
                            for (int32_t k = ask_start[d]; k < ask_start[d + 1]; k++)
                                if (ask_query[k] == q)
                                    class_open[d]--;
                            if (class_open[d])
                                continue;
                            /* no question left on the class: its ends are walked no more */
                            for (int32_t w = 0; w < nwalked; w++) {
                                if (walked[w] != numbers[d])
                                    continue;
                                memmove(walked + w, walked + w + 1,
                                        sizeof(int32_t) * (size_t)(nwalked - w - 1));
                                memmove(cursors + w, cursors + w + 1,
                                        sizeof(int32_t) * (size_t)(nwalked - w - 1));
                                nwalked--;
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
done:
    if (rc != 0)
        for (int32_t q = 0; q < nqueries; q++)
            starts[q] = NAN;
    if (shadows != NULL)
        for (int32_t i = 0; i < nshadows; i++)
            book->shadow_of[shadows[i].slot] = -1;
    if (fitting != NULL)
        for (int32_t q = 0; q < nqueries; q++)
            free(fitting[q].slots);
    free(fitting);
    free(class_open);
    free(cursors);
    free(walked);
    free(heads);
    free(numbers);
    free(ask_start);
    free(ask_query);
    free(ask_key);
    free(shadows);
    return rc;
}
