/* Loading a cgroup_skb program written as raw instructions (see bpf_asm.h). */
#include <errno.h>
#include <stdint.h>

#include "bpf_asm.h"
#include "fbrt_internal.h"

int fbrt_bpf_load_cgroup_skb(const struct bpf_insn *program, int count,
                             enum bpf_attach_type type, const char *name,
                             struct fbrt_error *err) {
    char log[2048];
    log[0] = '\0';
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_SKB;
    attr.expected_attach_type = type;
    attr.insns = (uint64_t)(uintptr_t)program;
    attr.insn_cnt = (uint32_t)count;
    attr.license = (uint64_t)(uintptr_t)"GPL";
    strncpy(attr.prog_name, name, sizeof(attr.prog_name) - 1);
    int prog = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (prog >= 0)
        return prog;
    int e = errno;
    attr.log_buf = (uint64_t)(uintptr_t)log;
    attr.log_size = sizeof(log);
    attr.log_level = 1;
    int again = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (again >= 0)
        close(again);
    if (again >= 0 || errno == ENOSPC)
        log[0] = '\0'; /* no telling log: the first outcome stands */
    log[200] = '\0';
    for (char *c = log; *c; c++)
        if (*c == '\n')
            *c = ' ';
    return fbrt_fail(err, e, "bpf BPF_PROG_LOAD cgroup_skb/%s %s (verifier: %s)",
                     type == BPF_CGROUP_INET_INGRESS ? "ingress" : "egress", name,
                     log[0] ? log : "no log");
}
