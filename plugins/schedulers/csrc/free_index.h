/* The default scheduler's free-capacity index in C (see plugins/schedulers/node_index.py).
 *
 * A class of interchangeable nodes keeps, per *free key* (free count of each device kind, then
 * free cores), the sorted entries (free memory, rank) of its indexed nodes; the keys are kept
 * sorted. A *book* remembers, per node slot, the class, key and entry a node is indexed under,
 * so a placement or release moves a node by its slot alone. Ranks are the nodes' places in
 * node-id order (the Python side maps a rank back to its node); slots are small dense ints.
 *
 * The book also keeps how many jobs run on each indexed node, and each class its *idle* nodes
 * (indexed, no job running) in the order they became idle, so that placing and releasing a
 * job moves its node, counts the job and keeps the idle list in one call (fi_shift, fi_place).
 *
 * The section between the cffi-cdef markers is the interface cffi compiles against
 * (plugins/schedulers/build_ffi.py); it is the one copy of it.
 */
#ifndef FUZZBALL_FREE_INDEX_H
#define FUZZBALL_FREE_INDEX_H

#include <stdint.h>

/* cffi-cdef-begin */
typedef struct fi_class fi_class;
typedef struct fi_book fi_book;
typedef struct fi_ends fi_ends; /* running jobs' ends: see below */

/* A class index whose free keys have `ncomp` components (device kinds + 1); NULL when out of
 * memory. */
fi_class *fi_class_new(int ncomp);
void fi_class_free(fi_class *cls);
/* How many nodes are indexed in `cls`, and under how many distinct free keys. */
int64_t fi_class_count(const fi_class *cls);
int32_t fi_class_nkeys(const fi_class *cls);

fi_book *fi_book_new(void);
void fi_book_free(fi_book *book);

/* Index node `slot` in `cls` under free key `key` (cls's ncomp components) with `memory` free,
 * rank `rank` and `jobs` jobs running (0: it joins the class's idle nodes, last), first taking
 * it out of wherever it was indexed. 0, or -1 when out of memory (the node is then out of the
 * index). */
int fi_put(fi_book *book, int32_t slot, fi_class *cls, const int64_t *key, int64_t memory,
           int64_t rank, int32_t jobs);
/* Move indexed node `slot` by `memory` and `cores` (added to its free memory and to its key's
 * last component) and count `jobs` more jobs on it (1 placed, -1 released, 0): a node whose
 * count falls to 0 joins its class's idle nodes last, one whose count leaves 0 leaves them.
 * 0; -1 when out of memory or the slot is not indexed (the node is then out of the index). */
int fi_shift(fi_book *book, int32_t slot, int64_t memory, int64_t cores, int32_t jobs);
/* fi_shift for a job with devices: add `delta` (the class's ncomp components, the cores last)
 * to the node's free key, `memory` to its free memory, and count `jobs` more jobs, in one move
 * (as taking the node out and putting it back under its new key would, the idle list
 * included). 0; -1 as fi_shift's. */
int fi_shift_key(fi_book *book, int32_t slot, int64_t memory, const int64_t *delta,
                 int32_t jobs);
/* Take node `slot` out of the index (nothing when it is not in it). */
void fi_drop(fi_book *book, int32_t slot);
/* How many of `cls`'s indexed nodes run no job. */
int64_t fi_idle_count(const fi_class *cls);
/* `cls`'s idle nodes' slots, in the order they became idle: writes at most `room` slots to
 * `out`, resuming from `cursor` (one int, -1 to start; updated), and returns how many it wrote
 * (fewer than `room`: the walk is over). The index must not change during a walk. */
int32_t fi_idle(const fi_book *book, const fi_class *cls, int32_t *cursor, int32_t *out,
                int32_t room);
/* Place a job of one node, `cores` cores (each need's last component) and `memory`, on the
 * best fit of a plan's classes (`classes`, `needs` their needs as free keys, `n` of them, a
 * need's device counts first), trying them in order from position `start`: the first class
 * with room gives fi_first_fit's node. That node is moved as fi_shift_key(slot, -memory,
 * -need, 1) would (its need's device counts and cores taken off) and its slot returned, unless it is one of the `navoid` slots of `avoid` (kept for a
 * reservation): then nothing moves and -2 is returned. -1 when no class from `start` has room;
 * -3 when out of memory moving the node (it is then out of the index, as after fi_shift's -1).
 * `where` (four ints) gets the position of the first class from `start` with room (`n` when
 * none), that of the class the node is in, the node's slot (-1 and -1 when none) and the
 * job's new entry (fi_entry_add's with `usage`, `id` and `len`, plain when the need has no
 * devices; -4 when none).
 * With `ends` not NULL, the job (id `id`, `len` bytes) is listed there as running until
 * `end` on the class's number (`numbers`, one per class, as `classes`), as fi_end_add
 * would: -4 when out of memory doing so (the node moved all the same; nothing listed). */
int64_t fi_place(fi_book *book, fi_class *const *classes, const int64_t *const *needs, int32_t n,
                 int32_t start, int64_t cores, int64_t memory, const int32_t *avoid,
                 int32_t navoid, int32_t *where, fi_ends *ends, const int32_t *numbers,
                 double end, const char *id, int32_t len, int32_t usage);
/* A release of a job without devices from indexed node `slot` in one call: the job (id
 * `id`, `len` bytes) is unlisted from `ends` under class `number` and `end`, as
 * fi_end_remove would, and the node moved as fi_shift(slot, memory, cores, -1) would.
 * 0; otherwise minus the sum of 1 when the move failed (fi_shift's -1: the node is out of
 * the index) and 2 when no such job was listed (the node moved all the same). */
int fi_release(fi_book *book, int32_t slot, int64_t memory, int64_t cores, fi_ends *ends,
               int32_t number, double end, const char *id, int32_t len);
/* The nodes a job of several nodes, or an exclusive one, may be placed on: every indexed
 * node with room for it over a plan's classes (`classes`, `needs` their needs as free keys,
 * `n` of them), class by class in order, and within a class in fi_fitting's order (best fit
 * first) or, for an `exclusive` job, the class's idle nodes in the order they became idle
 * (the caller knows an idle node of each class holds it). Writes at most `room` slots to
 * `out` and returns how many it wrote (fewer than `room`: every such node). */
int32_t fi_choose(const fi_book *book, fi_class *const *classes, const int64_t *const *needs,
                  int32_t n, int64_t memory, int exclusive, int32_t *out, int32_t room);
/* Place a job of `nneed` nodes (more than one, not exclusive, without devices: each need's
 * device counts are zeros) of `cores` cores and `memory` on each, on the first `nneed` nodes
 * fi_choose lists for it (not exclusive) over a plan's classes, in one call: each node moved
 * as fi_shift(slot, -memory, -cores, 1) would, an entry made for the job on each
 * (fi_entry_add's, plain, with `usage`, `id` and `len`, and its zero device counts) and the
 * entries chained in the nodes' order, and the job listed in `ends` as running until `end`
 * under the number (`numbers`, one per class, as `classes`) of each class it got a node of,
 * from its first entry. Writes the nodes' slots to `slots` and their entries to `entries`
 * (room for `nneed` each) and returns `nneed`. Nothing moves and fewer is returned (how many
 * nodes have room) when fewer than `nneed` nodes have room; nothing moves and -3 is returned
 * when one of the first `nneed` is one of the `navoid` slots of `avoid` (a reservation's:
 * the caller's search decides whether it may take the job). -1 when out of memory making an
 * entry or listing the end, -4 - i when out of memory moving the i-th node (it is then out of
 * the index, as after fi_shift's -1); the nodes before it moved and recorded. */
int32_t fi_place_nodes(fi_book *book, fi_class *const *classes, const int64_t *const *needs,
                       int32_t n, int32_t nneed, int64_t cores, int64_t memory,
                       const int32_t *avoid, int32_t navoid, fi_ends *ends,
                       const int32_t *numbers, double end, const char *id, int32_t len,
                       int32_t usage, int32_t *slots, int32_t *entries);
/* Place an exclusive job of one node on the first idle node of a plan's classes (`classes`,
 * `n` of them, in order; fi_choose's first for an exclusive job) in one call: the node taken
 * out of the index, an entry made for the job there (not plain: the node's whole capacity,
 * `caps[position]`'s cores (its last component) and `memories[position]`, usage number
 * `usages[position]`, with `caps[position]`'s device counts), the book told the node out of
 * the index with its free key and memory less that capacity (as fi_note_node(slot,
 * numbers[position], 1, ...) would) and the job listed in `ends` as running until `end`
 * under `numbers[position]` from its entry. Returns the node's slot and writes to `where`
 * (four ints) the class's position, the entry, and the node's free cores and memory now. -1 (nothing done) when no class has an
 * idle node; -3 (nothing done) when the node is one of the `navoid` slots of `avoid` (the
 * caller's search decides); -4 when out of memory making the entry or listing the end. */
int32_t fi_place_whole(fi_book *book, fi_class *const *classes, const int64_t *const *caps,
                       const int64_t *memories, const int32_t *usages, int32_t n,
                       const int32_t *avoid, int32_t navoid, fi_ends *ends,
                       const int32_t *numbers, double end, const char *id, int32_t len,
                       int64_t *where);
/* Release the one-node job of entry `e` from a node out of the index that the book was told
 * (fi_note_node) and that goes back into the index under class `cls` (number `number`) with
 * rank `rank`: the job (by its entry's id) unlisted from `ends` under `number` and `end`, the
 * entry forgotten and the node put back in the index (fi_put's) under its told free key and
 * memory plus the entry's cores, memory and device counts, counting the jobs left on it.
 * 1 (nothing done) when the entry is not live, its node is indexed or was not told, or its
 * device counts are not known; else 0 or minus the sum of 1 when putting the node back failed
 * (it stays out of the index) and 2 when the job was not listed so. */
int fi_release_whole(fi_book *book, int32_t e, fi_ends *ends, int32_t number, double end,
                     fi_class *cls, int64_t rank);
/* Release a job of several nodes from its first entry `e` (its entries chained as
 * fi_entry_chain made them) in one call when every entry of the chain is plain and its node
 * indexed: the job (by the first entry's id) unlisted from `ends` under each of the `n`
 * class numbers `numbers` with `end`, every entry forgotten and its node moved as
 * fi_shift(slot, memory, cores, -1) would. 1 (nothing done) when an entry is not live, not
 * plain or on a node out of the index; else 0 or minus the sum of 1 when a move failed (that
 * node is out of the index) and 2 when the job was not listed under one of the numbers. */
int fi_release_nodes(fi_book *book, int32_t e, fi_ends *ends, const int32_t *numbers, int32_t n,
                     double end);
/* 1 when node `slot` is indexed, else 0. */
int fi_indexed(const fi_book *book, int32_t slot);
/* Give indexed nodes new ranks, keeping every list's order: set each slot's new rank with
 * fi_rank_set (which leaves the lists alone), then fi_class_rerank every class. */
void fi_rank_set(fi_book *book, int32_t slot, int64_t rank);
void fi_class_rerank(fi_class *cls, const fi_book *book);

/* The rank of the best-fitting node for a need of `need` (ncomp components) and `memory`:
 * the first free key, in key order, whose leading component is at least need's and whose
 * others are too, then the least free memory at least `memory` there (ties: least rank).
 * -1 when no node has room. */
int64_t fi_first_fit(const fi_class *cls, const int64_t *need, int64_t memory);
/* Every node with room for the need, in fi_first_fit's order: writes at most `room` ranks
 * to `out`, resuming from `cursor` (two ints, -1 and -1 to start; updated), and returns how many
 * it wrote (fewer than `room`: the walk is over). */
int32_t fi_fitting(const fi_class *cls, const int64_t *need, int64_t memory, int32_t *cursor,
                   int64_t *out, int32_t room);
/* A survey's walk of `cls` for a need of `need` (ncomp components) and `memory`. Every
 * indexed node without room is counted under what it lacks first: in `lacking` (ncomp + 1
 * counts, set here), index ncomp - 1 for the cores, i for device kind i, ncomp for memory
 * (a node short of cores counts there alone; one short of a device kind counts under
 * memory when it lacks memory too). The ranks of the nodes with room go to `with_room`
 * (room for fi_class_count ranks), least key, then least memory first; their number is
 * returned. The node closest to having room without having it (least score, then least
 * rank; the score sums the shortfall of each component as a fraction of the need) goes to
 * `closest` (ncomp + 2: its free key, free memory and rank; rank -1 when every node has
 * room) and its score to `score`. */
int32_t fi_scan(const fi_class *cls, const int64_t *need, int64_t memory, int64_t *lacking,
                int64_t *with_room, int64_t *closest, double *score);

/* Running jobs' expected ends, per node class (csrc/end_times.c): what a replay walks.
 *
 * Per class number (a small int >= 0, the Python NodeClass.number), the distinct ends
 * ascending, and per end its jobs in id order (the order of Python's str: ids are given as
 * UTF-8 bytes, compared bytewise). The store copies each id it is given and owns the copy
 * until the job is removed (a removed job's copy may stay, unseen, until its end's bucket
 * is compacted or emptied); the caller's buffers are only read during a call. The store is
 * not safe to use from several threads at once, and a walk (fi_ends_next) must not
 * interleave with additions or removals (fi_ends is declared at the top). */

/* An empty store; NULL when out of memory. Freed (with every copy it holds) by
 * fi_ends_free. */
fi_ends *fi_ends_new(void);
void fi_ends_free(fi_ends *ends);
/* The job of id `id` (`len` bytes) runs until `end` on nodes of class `number`. 0; -1 when
 * out of memory or `number` is negative (nothing added). */
int fi_end_add(fi_ends *ends, int32_t number, double end, const char *id, int32_t len,
               int32_t entry);
/* The job of id `id` listed under class `number` with `end` no longer runs. 0; -1 when no
 * such job is listed. */
int fi_end_remove(fi_ends *ends, int32_t number, double end, const char *id, int32_t len);
/* One step of a walk over the classes `numbers` (`n` of them) in end order: `cursors` (n
 * ints, 0 to start; advanced) say where each class's walk stands. Writes the next end to
 * `end` and the ids of its jobs, in id order and a job listed under several of the classes
 * once, to `out`, each followed by a NUL byte, their lengths to `lengths` (room for `room`
 * ints), their number to `jobs` and to `plain` 1 when no id holds a NUL byte (else 0: only
 * `lengths` tell them apart); returns the bytes written. -1 when every class is walked; -2
 * when out of memory; -3 - k when `out` may have room for fewer than the k bytes (for these
 * two, nothing advanced: ask again with `room` at least k). */
int64_t fi_ends_next(const fi_ends *ends, const int32_t *numbers, int32_t n, int32_t *cursors,
                     double *end, char *out, int32_t *lengths, int64_t room, int32_t *jobs,
                     int32_t *plain);
/* How many jobs are listed under class `number`. */
int64_t fi_ends_count(const fi_ends *ends, int32_t number);
/* The running jobs' entries (csrc/free_index.c): one per job and node, numbered by the book
 * (numbers of released entries are used again), listed per node oldest first. */
/* A new entry for job `id` (`len` bytes, copied) of `cores` and `memory` on node `slot`
 * (`plain`: fi_release_entry may release it alone; `usage`: the caller's number for the
 * job's usage there, kept as it is); its number, or -1 when out of memory. */
int32_t fi_entry_add(fi_book *book, int32_t slot, int64_t cores, int64_t memory, int32_t plain,
                     int32_t usage, const char *id, int32_t len);
/* A live entry's id (its length to `len`; valid until the entry is forgotten) and usage
 * number; the entry of node `slot` whose id is `id` (`len` bytes), or -1. */
const char *fi_entry_id(const fi_book *book, int32_t e, int32_t *len);
int32_t fi_entry_usage(const fi_book *book, int32_t e);
int32_t fi_entry_find(const fi_book *book, int32_t slot, const char *id, int32_t len);
/* Forget entry `e` (the index is left as it is); its slot, or -1 when no such entry. */
int32_t fi_entry_remove(fi_book *book, int32_t e);
/* How many entries node `slot` has, and (at most `room` of) their numbers, oldest first. */
int32_t fi_entry_count(const fi_book *book, int32_t slot);
int32_t fi_entries(const fi_book *book, int32_t slot, int32_t *out, int32_t room);
/* An indexed node's free cores (its key's last component) and free memory. */
int64_t fi_free_cores(const fi_book *book, int32_t slot);
int64_t fi_free_memory(const fi_book *book, int32_t slot);
/* Component `at` of the key node `slot` was last indexed under (kept when it left). */
int64_t fi_key_at(const fi_book *book, int32_t slot, int32_t at);
/* Release plain entry `e` on an indexed node in one call: the entry forgotten, the job (by
 * the id its entry keeps) unlisted from `ends` under `number` and `end`, the node moved as
 * fi_shift(slot, memory, cores, -1) would. 1 (nothing done) when the entry is not plain or
 * its node is not indexed; else fi_release's 0 or negative sum. */
int fi_release_entry(fi_book *book, int32_t e, fi_ends *ends, int32_t number, double end);
/* Release entry `e` of a one-node job with devices on an indexed node in one call: the job
 * (by the id its entry keeps) unlisted from `ends` under `number` and `end`, the entry
 * forgotten and the node moved as fi_shift_key(slot, memory, the entry's device counts and
 * cores, -1) would. 1 (nothing done) when the entry is not live, its node is not indexed or
 * its device counts are not known; else 0 or minus the sum of 1 when the move failed (the
 * node is out of the index) and 2 when the job was not listed so. */
int fi_release_devices(fi_book *book, int32_t e, fi_ends *ends, int32_t number, double end);
/* Entries inserted in or removed from the class's lists (a move counts two), and the
 * placements and releases the book made itself. */
int64_t fi_class_changes(const fi_class *cls);
int64_t fi_book_changes(const fi_book *book);
/* Where the class's count of changes lives (as long as the class does): read without a call. */
const int64_t *fi_class_changes_at(const fi_class *cls);
/* Node `slot`'s running jobs (returned) and, when it is indexed, its free cores and free
 * memory (to `out`, two ints): a replay's first look at a node in one call. */
int32_t fi_node_state(const fi_book *book, int32_t slot, int64_t *out);
/* The node's class number, and for a node out of the index whether it takes new work and
 * its free key (`ncomp` components) and free memory as they are now (`key` NULL for an
 * indexed node: the index has them); what fi_replay reads of a node. */
int fi_note_node(fi_book *book, int32_t slot, int32_t number, int32_t usable,
                 const int64_t *key, int32_t ncomp, int64_t memory);
/* Entry `e`'s device counts by its node's class's device kinds (`n` of them; a job without
 * devices has none), and the job's next entry on another node (its entries chained in the
 * order of its nodes: fi_replay gives back each). */
void fi_entry_devices(fi_book *book, int32_t e, const int64_t *devices, int32_t n);
void fi_entry_chain(fi_book *book, int32_t e, int32_t next);
/* The estimated starts' replay in one call (timeline.replay_ends for questions of start
 * only): the running jobs listed in `ends` under the classes asked about are given back,
 * end by end ascending, to a shadow of their nodes (the nodes that take new work), and
 * question q (of `nqueries`) is answered at the end when `needed[q]` nodes have room: its
 * seeded nodes (`seeds[seed_start[q]..seed_start[q + 1]]`, slots) and those gaining room,
 * for an exclusive one (`exclusive[q]`) by running nothing, else by `memory[q]` and its
 * request key on the node's class. Ask i (of `nasks`) is question `asked_by[i]`'s on class
 * number `ask_number[i]`, with the request key `asked_key[i]` (the class's width).
 * `starts[q]` gets the end, or NAN when unanswered. 0; 1 when a job or node is not
 * recorded for it (nothing answered: the caller replays in Python); -1 when out of
 * memory. */
int fi_replay(fi_book *book, const fi_ends *ends, int32_t nasks, const int32_t *ask_number,
              const int32_t *asked_by, const int64_t *const *asked_key, int32_t nqueries,
              const int64_t *memory, const int32_t *exclusive, const int32_t *needed,
              const int32_t *seed_start, const int32_t *seeds, double *starts);
/* A run of queued one-node jobs placed by one call (the pass's walk over its queue in C;
 * plugins/schedulers/csrc/place_run.c). A table of the queue's shapes, by a 64-bit key each
 * (Python's id of the shape object), says for each what the walk does with its jobs: pass
 * over them (the shape is settled for the pass), place them by fi_place over the shape's
 * plan (set by fi_run_set), or stop there and hand the job back (no entry, or blocked). */
typedef struct fi_run fi_run;
fi_run *fi_run_new(void);
void fi_run_free(fi_run *run);
/* How many shapes the table holds. */
int32_t fi_run_count(const fi_run *run);
/* Forget every shape (their plans' arrays may be gone). */
void fi_run_clear(fi_run *run);
/* Jobs of shape `key` are placed by fi_place over the plan's arrays (`classes`, `needs`, `n`
 * of them, `numbers`; kept alive by the caller until fi_run_clear), `cores` and `memory`, the
 * usage number `usage`, the plan's number `plan` (its slot in the walk's `full`); the shape's
 * flags are kept. 0; -1 when out of memory. */
int fi_run_set(fi_run *run, uint64_t key, fi_class *const *classes, const int64_t *const *needs,
               int32_t n, const int32_t *numbers, int64_t cores, int64_t memory, int32_t usage,
               int32_t plan);
/* Flag shape `key` (1: settled, passed over; 2: blocked, settled at its next job; 8: refused,
 * settled at its next job the reservation guards; 0: none, an entry all the same), an entry
 * made when it has none. 0; -1 when out of memory. */
int fi_run_flag(fi_run *run, uint64_t key, int32_t flag);
/* Take `flags` off every shape. */
void fi_run_unflag(fi_run *run, int32_t flags);
/* The queue the walk reads: per position (the scheduler's copy of the queue, in its order)
 * the job's shape key, its expected runtime (NAN for none) and its id's bytes (copied). */
typedef struct fi_queue fi_queue;
fi_queue *fi_queue_new(void);
void fi_queue_free(fi_queue *queue);
int32_t fi_queue_count(const fi_queue *queue);
/* A job at `position` (0 .. count: the ones from there move up one). 0; -1 when out of
 * memory (nothing changed). */
int fi_queue_insert(fi_queue *queue, int32_t position, uint64_t shape, double runtime,
                    const char *id, int32_t len);
/* `n` jobs behind the last: their shape keys, runtimes and ids (`ids` the bytes back to back,
 * `lengths` each one's length). 0; -1 when out of memory (those appended before it kept). */
int fi_queue_extend(fi_queue *queue, int32_t n, const uint64_t *shapes, const double *runtimes,
                    const char *ids, const int32_t *lengths);
/* Flag each of the `n` shapes `keys` as fi_run_flag does. 0; -1 when out of memory. */
int fi_run_flag_many(fi_run *run, const uint64_t *keys, int32_t n, int32_t flag);
/* The job at `position` leaves (the ones after it move down one). */
void fi_queue_delete(fi_queue *queue, int32_t position);
/* The jobs at `positions` (`n` of them, ascending) leave, the others keeping their order. */
void fi_queue_drop(fi_queue *queue, const int32_t *positions, int32_t n);
/* What the walks of `run` work on until bound again: the book, the ends store, the queue,
 * the plans' counts of leading classes without room (`full`, by plan number) and where a
 * walk writes (`out` and `settled`, room for `room` jobs each; `stop`, seven ints). */
void fi_run_bind(fi_run *run, fi_book *book, fi_ends *ends, const fi_queue *queue,
                 int32_t *full, int32_t *out, int32_t *settled, int32_t room, int32_t *stop);
/* Walk the bound queue from position `from`: a settled shape's job is passed over; a blocked
 * shape's (or a refused one's that the reservation guards: `guard` and expected to end after
 * `start`, see below) settles it: its position and whether the reservation guards it are
 * written to `settled` (two ints), and the shape's later jobs are passed over; a placed shape's is placed by fi_place (its end `now` + runtime, INFINITY for none; `avoid`,
 * `navoid` kept off when `guard` is set and the job is expected to end after `start` or has
 * no expected end, or `start` is INFINITY), and the plan's `full` raised to the first class
 * with room as the Python pass does; any other job stops the walk. Each placed job writes
 * five ints to `out`: its position, node slot, entry, plan number and the position of its
 * class in the plan (at most `room` jobs: the walk stops before the next). Returns how many
 * were placed; `stop` gets the position the walk stopped at (the queue's count at its end),
 * fi_place's return and `where` for the job there when a placement was tried (it failed:
 * nothing placed), else -5, and how many jobs settled shapes (`stop[6]`). */
int32_t fi_place_run(fi_run *run, int32_t from, double now, int guard, double start,
                     const int32_t *avoid, int32_t navoid);
/* cffi-cdef-end */

/* The live jobs' first entries at the least next end of the classes `numbers` (their
 * `cursors` advanced past it), to `out`: how many (a job under several classes once per
 * class), -1 when no end is left, -3 - needed when `room` is too small (nothing moved). */
int64_t fi_ends_next_entries(const fi_ends *ends, const int32_t *numbers, int32_t n,
                             int32_t *cursors, double *end, int32_t *out, int64_t room);

#endif
