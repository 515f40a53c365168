/* Writing eBPF programs as raw instructions (no clang, no libbpf): the bpf() system call and
 * one instruction's encoding, shared by metering (bpf_meter.c) and the instance metadata
 * guard (bpf_guard.c). */
#ifndef FBRT_BPF_ASM_H
#define FBRT_BPF_ASM_H

#include <linux/bpf.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline long sys_bpf(int cmd, union bpf_attr *attr) {
    return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static inline struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off,
                                   int32_t imm) {
    struct bpf_insn i;
    memset(&i, 0, sizeof(i));
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}

struct fbrt_error;

/* Load the cgroup_skb program of COUNT instructions for TYPE (ingress or egress) under NAME
 * (at most 15 characters); returns its descriptor, or -errno with ERR naming NAME and the
 * start of the verifier's log. The log is asked for only when the load failed without it
 * (writing it cost about a third of the verifier's time). */
int fbrt_bpf_load_cgroup_skb(const struct bpf_insn *program, int count,
                             enum bpf_attach_type type, const char *name,
                             struct fbrt_error *err);

#endif
