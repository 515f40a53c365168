/* eBPF metering: cgroup_skb ingress/egress programs written as raw BPF instructions (no
 * clang), counting bytes and packets per direction into cgroup-local storage.
 *
 * The two programs and their storage maps are loaded once per process and attached to each
 * job's cgroup; the kernel gives every attachment storage of its own (keyed by the cgroup's
 * id and the attach type), so a job's counters are its own. Loading per job (a map and two
 * programs through the verifier, each freed again after an RCU grace period) was the
 * largest kernel item of the agent's CPU per job of an array (bpf_prog_load about 5 % of its
 * samples, more than the clone). */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bpf_asm.h"
#include "fbrt_internal.h"

#ifndef BPF_MAP_TYPE_CGROUP_STORAGE
#define BPF_MAP_TYPE_CGROUP_STORAGE 19
#endif

/* Directions: one program, one storage map and one {bytes, packets} pair each. */
enum { SLOT_INGRESS = 0, SLOT_EGRESS = 1 };

struct slot {
    uint64_t bytes;
    uint64_t packets;
};

/* Program: this attachment's storage (never NULL), then atomically add skb->len and 1. */
static int build_program(struct bpf_insn *p, int map_fd) {
    int n = 0;
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0);   /* r6 = skb */
    p[n++] = insn(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map_fd);
    p[n++] = insn(0, 0, 0, 0, 0);                                             /* imm64 high */
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, 0);           /* flags */
    p[n++] = insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_local_storage);
    p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_1, BPF_REG_6,
                  offsetof(struct __sk_buff, len), 0);
    p[n++] = insn(BPF_STX | BPF_DW | BPF_ATOMIC, BPF_REG_0, BPF_REG_1,
                  offsetof(struct slot, bytes), BPF_ADD);
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, 1);
    p[n++] = insn(BPF_STX | BPF_DW | BPF_ATOMIC, BPF_REG_0, BPF_REG_1,
                  offsetof(struct slot, packets), BPF_ADD);
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);           /* allow */
    p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    return n;
}

static const char *direction_name(int slot) { return slot == SLOT_INGRESS ? "ingress" : "egress"; }

static enum bpf_attach_type attach_type(int slot) {
    return slot == SLOT_INGRESS ? BPF_CGROUP_INET_INGRESS : BPF_CGROUP_INET_EGRESS;
}

/* Load one direction's program over MAP_FD; returns its fd or -errno with ERR filled. */
static int load_program(int map_fd, int slot, struct fbrt_error *err) {
    struct bpf_insn program[16];
    int count = build_program(program, map_fd);
    return fbrt_bpf_load_cgroup_skb(program, count, attach_type(slot),
                                    slot == SLOT_INGRESS ? "fbrt_ingress" : "fbrt_egress", err);
}

/* The process's programs and their storage maps, loaded by the first attach that needs them
 * (a failed load is tried again by the next). */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static int shared_loaded;
static int shared_map[2] = {-1, -1};
static int shared_prog[2] = {-1, -1};

static int load_shared_locked(struct fbrt_error *err) {
    if (shared_loaded)
        return 0;
    int map[2] = {-1, -1}, prog[2] = {-1, -1}, rc = 0;
    for (int slot = 0; slot < 2 && rc == 0; slot++) {
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.map_type = BPF_MAP_TYPE_CGROUP_STORAGE;
        attr.key_size = sizeof(struct bpf_cgroup_storage_key);
        attr.value_size = sizeof(struct slot);
        attr.max_entries = 0; /* storage comes with each attachment */
        strncpy(attr.map_name, slot == SLOT_INGRESS ? "fbrt_meter_in" : "fbrt_meter_out",
                sizeof(attr.map_name) - 1);
        map[slot] = (int)sys_bpf(BPF_MAP_CREATE, &attr);
        if (map[slot] < 0)
            rc = fbrt_fail(err, errno, "bpf BPF_MAP_CREATE cgroup storage for metering");
        else if ((prog[slot] = load_program(map[slot], slot, err)) < 0)
            rc = prog[slot];
    }
    if (rc < 0) {
        for (int slot = 0; slot < 2; slot++) {
            if (prog[slot] >= 0)
                close(prog[slot]);
            if (map[slot] >= 0)
                close(map[slot]);
        }
        return rc;
    }
    memcpy(shared_map, map, sizeof(map));
    memcpy(shared_prog, prog, sizeof(prog));
    shared_loaded = 1;
    return 0;
}

int fbrt_meter_attach(const char *cgroup_dir, struct fbrt_error *err) {
    pthread_mutex_lock(&shared_lock);
    int rc = load_shared_locked(err);
    pthread_mutex_unlock(&shared_lock);
    if (rc < 0)
        return rc;
    int cgroup_fd = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup_fd < 0)
        return fbrt_fail(err, errno, "open cgroup v2 directory %s", cgroup_dir);
    for (int slot = 0; slot < 2 && rc == 0; slot++) {
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.target_fd = (uint32_t)cgroup_fd;
        attr.attach_bpf_fd = (uint32_t)shared_prog[slot];
        attr.attach_type = attach_type(slot);
        attr.attach_flags = BPF_F_ALLOW_MULTI;
        /* Attached, the cgroup holds the program and its storage; they go with the cgroup. */
        if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0)
            rc = fbrt_fail(err, errno, "bpf BPF_PROG_ATTACH cgroup_skb/%s to %s",
                           direction_name(slot), cgroup_dir);
    }
    if (rc < 0) {
        close(cgroup_fd);
        return rc;
    }
    return cgroup_fd;
}

int fbrt_meter_read(int cgroup_fd, struct fbrt_counters *out, struct fbrt_error *err) {
    struct stat st;
    if (fstat(cgroup_fd, &st) < 0)
        return fbrt_fail(err, errno, "stat the metered cgroup");
    struct slot slots[2];
    for (int slot = 0; slot < 2; slot++) {
        /* A cgroup's id is its directory's inode number (kernfs, 64-bit). */
        struct bpf_cgroup_storage_key key;
        memset(&key, 0, sizeof(key));
        key.cgroup_inode_id = (uint64_t)st.st_ino;
        key.attach_type = attach_type(slot);
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.map_fd = (uint32_t)shared_map[slot];
        attr.key = (uint64_t)(uintptr_t)&key;
        attr.value = (uint64_t)(uintptr_t)&slots[slot];
        if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr) < 0)
            return fbrt_fail(err, errno, "bpf BPF_MAP_LOOKUP_ELEM metering %s",
                             direction_name(slot));
    }
    out->ingress_bytes = slots[SLOT_INGRESS].bytes;
    out->ingress_packets = slots[SLOT_INGRESS].packets;
    out->egress_bytes = slots[SLOT_EGRESS].bytes;
    out->egress_packets = slots[SLOT_EGRESS].packets;
    return 0;
}
