/* eBPF metering: cgroup_skb ingress/egress programs written as raw BPF instructions (no
 * clang), counting bytes and packets per direction in a two-slot array map. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fbrt_internal.h"

/* Map slots: one {bytes, packets} pair per direction. */
enum { SLOT_INGRESS = 0, SLOT_EGRESS = 1 };

struct slot {
    uint64_t bytes;
    uint64_t packets;
};

static long sys_bpf(int cmd, union bpf_attr *attr) {
    return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    struct bpf_insn i;
    memset(&i, 0, sizeof(i));
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}

/* Program: look up the slot for this direction and atomically add skb->len and 1. */
static int build_program(struct bpf_insn *p, int map_fd, int slot) {
    int n = 0;
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0);   /* r6 = skb */
    p[n++] = insn(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, slot);         /* key on stack */
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0);  /* r2 = fp */
    p[n++] = insn(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4);          /* r2 = &key */
    p[n++] = insn(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map_fd);
    p[n++] = insn(0, 0, 0, 0, 0);                                             /* imm64 high */
    p[n++] = insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
    p[n++] = insn(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 4, 0);             /* miss: out */
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

static int load_and_attach(int map_fd, int cgroup_fd, const char *cgroup_dir, int slot,
                           struct fbrt_error *err) {
    const char *direction = slot == SLOT_INGRESS ? "ingress" : "egress";
    enum bpf_attach_type type = slot == SLOT_INGRESS ? BPF_CGROUP_INET_INGRESS
                                                     : BPF_CGROUP_INET_EGRESS;
    struct bpf_insn program[16];
    int count = build_program(program, map_fd, slot);
    char log[2048];
    log[0] = '\0';
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_SKB;
    attr.expected_attach_type = type;
    attr.insns = (uint64_t)(uintptr_t)program;
    attr.insn_cnt = (uint32_t)count;
    attr.license = (uint64_t)(uintptr_t)"GPL";
    attr.log_buf = (uint64_t)(uintptr_t)log;
    attr.log_size = sizeof(log);
    attr.log_level = 1;
    strncpy(attr.prog_name, slot == SLOT_INGRESS ? "fbrt_ingress" : "fbrt_egress",
            sizeof(attr.prog_name) - 1);
    int prog = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (prog < 0 && errno == ENOSPC) {
        /* The log buffer was too small: retry without it so the real outcome is known. */
        memset(&attr.log_buf, 0, sizeof(attr.log_buf));
        attr.log_size = 0;
        attr.log_level = 0;
        prog = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    }
    if (prog < 0) {
        int e = errno;
        log[200] = '\0';
        for (char *c = log; *c; c++)
            if (*c == '\n')
                *c = ' ';
        return fbrt_fail(err, e, "bpf BPF_PROG_LOAD cgroup_skb/%s (verifier: %s)", direction,
                         log[0] ? log : "no log");
    }
    memset(&attr, 0, sizeof(attr));
    attr.target_fd = (uint32_t)cgroup_fd;
    attr.attach_bpf_fd = (uint32_t)prog;
    attr.attach_type = type;
    attr.attach_flags = BPF_F_ALLOW_MULTI;
    int rc = 0;
    if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0)
        rc = fbrt_fail(err, errno, "bpf BPF_PROG_ATTACH cgroup_skb/%s to %s", direction,
                       cgroup_dir);
    /* Attached, the cgroup holds the program; it goes when the cgroup is removed. */
    close(prog);
    return rc;
}

int fbrt_meter_attach(const char *cgroup_dir, struct fbrt_error *err) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = sizeof(uint32_t);
    attr.value_size = sizeof(struct slot);
    attr.max_entries = 2;
    strncpy(attr.map_name, "fbrt_meter", sizeof(attr.map_name) - 1);
    int map_fd = (int)sys_bpf(BPF_MAP_CREATE, &attr);
    if (map_fd < 0)
        return fbrt_fail(err, errno, "bpf BPF_MAP_CREATE array for metering");
    int cgroup_fd = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup_fd < 0) {
        int rc = fbrt_fail(err, errno, "open cgroup v2 directory %s", cgroup_dir);
        close(map_fd);
        return rc;
    }
    int rc = load_and_attach(map_fd, cgroup_fd, cgroup_dir, SLOT_INGRESS, err);
    if (rc == 0)
        rc = load_and_attach(map_fd, cgroup_fd, cgroup_dir, SLOT_EGRESS, err);
    close(cgroup_fd);
    if (rc < 0) {
        close(map_fd);
        return rc;
    }
    return map_fd;
}

int fbrt_meter_read(int map_fd, struct fbrt_counters *out, struct fbrt_error *err) {
    struct slot slots[2];
    for (uint32_t key = 0; key < 2; key++) {
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.map_fd = (uint32_t)map_fd;
        attr.key = (uint64_t)(uintptr_t)&key;
        attr.value = (uint64_t)(uintptr_t)&slots[key];
        if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr) < 0)
            return fbrt_fail(err, errno, "bpf BPF_MAP_LOOKUP_ELEM metering slot %u", key);
    }
    out->ingress_bytes = slots[SLOT_INGRESS].bytes;
    out->ingress_packets = slots[SLOT_INGRESS].packets;
    out->egress_bytes = slots[SLOT_EGRESS].bytes;
    out->egress_packets = slots[SLOT_EGRESS].packets;
    return 0;
}
