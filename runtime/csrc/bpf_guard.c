/* Instance metadata guard: a cgroup_skb egress program written as raw BPF instructions (no
 * clang) that drops what a job sends to the addresses where clouds serve instance metadata
 * and credentials, whatever the job's network:
 *
 * - IPv4's link-local block, 169.254.0.0/16 (AWS, GCP, Azure, OCI: 169.254.169.254; AWS ECS:
 *   169.254.170.2), except DNS (TCP and UDP port 53): GCP's resolver is its metadata server,
 *   AWS's is 169.254.169.253, and a node's /etc/resolv.conf may name them;
 * - IPv6 fd00:ec2::254 (AWS) and fe80::a9fe:a9fe (OpenStack).
 *
 * The packet is read at its network header with bpf_skb_load_bytes (skb->data is there for
 * cgroup_skb); the family comes from skb->protocol, so an IPv6 socket's IPv4-mapped
 * destination is an IPv4 packet and checked as one. Return 0 drops the packet (the sender's
 * send fails with EPERM, a TCP connect times out), 1 lets it through; with BPF_F_ALLOW_MULTI
 * it runs beside metering's program, and any program's 0 drops.
 *
 * Loaded once per process and attached to each job's cgroup v2 group (the attachment goes
 * with the group). The kernel charges a program to the loader's memory cgroup (5.11 and
 * later) or to its RLIMIT_MEMLOCK (before): one program of a page, never one per job. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "bpf_asm.h"
#include "fbrt_internal.h"

#ifndef BPF_JMP32
#define BPF_JMP32 0x06
#endif

/* The IPv6 addresses dropped, in network byte order. */
static const uint8_t GUARDED_IPV6[][16] = {
    {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54}, /* fd00:ec2::254 */
    {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa9, 0xfe, 0xa9, 0xfe}, /* fe80::a9fe:a9fe */
};
#define GUARDED_IPV6_COUNT (int)(sizeof(GUARDED_IPV6) / sizeof(GUARDED_IPV6[0]))

/* Stack slots: the IPv4 header (20 bytes) or the IPv6 destination (16) at -24, the
 * transport header's destination port at -32. */
enum { STACK_HEADER = -24, STACK_PORT = -32 };

/* A jump whose target is a label placed later: its offset is patched by place(). */
struct fixup {
    int at[16];
    int count;
};

static void jump_to(struct fixup *label, int at) { label->at[label->count++] = at; }

static void place(struct bpf_insn *p, struct fixup *label, int here) {
    for (int i = 0; i < label->count; i++)
        p[label->at[i]].off = (int16_t)(here - label->at[i] - 1);
}

/* r0 = bpf_skb_load_bytes(skb in r6, OFFSET (r2, set by the caller), fp + TO, LEN). */
static int load_bytes(struct bpf_insn *p, int n, int to, int len) {
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_6, 0, 0);
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_3, BPF_REG_10, 0, 0);
    p[n++] = insn(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_3, 0, 0, to);
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_4, 0, 0, len);
    p[n++] = insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_skb_load_bytes);
    return n;
}

static int32_t word(const uint8_t *bytes) {
    uint32_t w;
    memcpy(&w, bytes, sizeof(w)); /* as the program's 32-bit load of the same bytes sees it */
    return (int32_t)w;
}

static int build_guard(struct bpf_insn *p) {
    struct fixup drop = {.count = 0}, allow = {.count = 0}, ipv6 = {.count = 0},
                 port = {.count = 0};
    int n = 0;
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0); /* r6 = skb */
    p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_6,
                  offsetof(struct __sk_buff, protocol), 0);
    jump_to(&ipv6, n);
    p[n++] = insn(BPF_JMP32 | BPF_JEQ | BPF_K, BPF_REG_2, 0, 0, htons(ETH_P_IPV6));
    jump_to(&allow, n);
    p[n++] = insn(BPF_JMP32 | BPF_JNE | BPF_K, BPF_REG_2, 0, 0, htons(ETH_P_IP));

    /* IPv4: the header; an unreadable one is dropped (the stack built it: never seen) */
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, 0);
    n = load_bytes(p, n, STACK_HEADER, 20);
    jump_to(&drop, n);
    p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 0, 0);
    p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_1, BPF_REG_10, STACK_HEADER + 16, 0);
    p[n++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_1, 0, 0, (int32_t)htonl(0xffff0000));
    jump_to(&allow, n);
    p[n++] = insn(BPF_JMP32 | BPF_JNE | BPF_K, BPF_REG_1, 0, 0, (int32_t)htonl(0xa9fe0000));
    /* to the link-local block: TCP or UDP to port 53 passes, everything else is dropped */
    p[n++] = insn(BPF_LDX | BPF_MEM | BPF_B, BPF_REG_1, BPF_REG_10, STACK_HEADER + 9, 0);
    jump_to(&port, n);
    p[n++] = insn(BPF_JMP32 | BPF_JEQ | BPF_K, BPF_REG_1, 0, 0, IPPROTO_TCP);
    jump_to(&drop, n);
    p[n++] = insn(BPF_JMP32 | BPF_JNE | BPF_K, BPF_REG_1, 0, 0, IPPROTO_UDP);
    place(p, &port, n);
    p[n++] = insn(BPF_LDX | BPF_MEM | BPF_B, BPF_REG_2, BPF_REG_10, STACK_HEADER, 0);
    p[n++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0x0f); /* IHL, in words */
    p[n++] = insn(BPF_ALU | BPF_LSH | BPF_K, BPF_REG_2, 0, 0, 2);
    p[n++] = insn(BPF_ALU | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, 2); /* the destination port */
    n = load_bytes(p, n, STACK_PORT, 2);
    jump_to(&drop, n);
    p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 0, 0);
    p[n++] = insn(BPF_LDX | BPF_MEM | BPF_H, BPF_REG_1, BPF_REG_10, STACK_PORT, 0);
    jump_to(&allow, n);
    p[n++] = insn(BPF_JMP32 | BPF_JEQ | BPF_K, BPF_REG_1, 0, 0, htons(53));
    jump_to(&drop, n);
    p[n++] = insn(BPF_JA | BPF_JMP, 0, 0, 0, 0);

    /* IPv6: the destination address, compared word by word with each guarded one */
    place(p, &ipv6, n);
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, 24);
    n = load_bytes(p, n, STACK_HEADER, 16);
    jump_to(&drop, n);
    p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 0, 0);
    for (int a = 0; a < GUARDED_IPV6_COUNT; a++) {
        struct fixup next = {.count = 0};
        for (int w = 0; w < 4; w++) {
            p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_1, BPF_REG_10,
                          (int16_t)(STACK_HEADER + 4 * w), 0);
            jump_to(&next, n);
            p[n++] = insn(BPF_JMP32 | BPF_JNE | BPF_K, BPF_REG_1, 0, 0,
                          word(GUARDED_IPV6[a] + 4 * w));
        }
        jump_to(&drop, n);
        p[n++] = insn(BPF_JA | BPF_JMP, 0, 0, 0, 0);
        place(p, &next, n);
    }
    place(p, &allow, n);
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
    p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    place(p, &drop, n);
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
    p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    return n;
}

/* The process's program, loaded by the first check or attach that needs it (a failed load
 * is tried again by the next). */
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static int guard_prog = -1;

static int guard_program(struct fbrt_error *err) {
    pthread_mutex_lock(&guard_lock);
    int prog = guard_prog;
    if (prog < 0) {
        struct bpf_insn program[96];
        int count = build_guard(program);
        prog = fbrt_bpf_load_cgroup_skb(program, count, BPF_CGROUP_INET_EGRESS,
                                        "fbrt_md_guard", err);
        if (prog >= 0)
            guard_prog = prog;
    }
    pthread_mutex_unlock(&guard_lock);
    return prog;
}

/* One test packet: an Ethernet header (the test run takes a frame) and an IP header with
 * the transport header's ports after it. */
struct probe {
    const char *what;
    int ipv6;
    uint8_t daddr[16];
    uint8_t proto;
    uint16_t dport;
    int verdict;
};

static const struct probe PROBES[] = {
    {"TCP to 169.254.169.254:80", 0, {169, 254, 169, 254}, IPPROTO_TCP, 80, 0},
    {"UDP to 169.254.170.2:80", 0, {169, 254, 170, 2}, IPPROTO_UDP, 80, 0},
    {"UDP to 169.254.169.254:53", 0, {169, 254, 169, 254}, IPPROTO_UDP, 53, 1},
    {"TCP to 192.0.2.1:80", 0, {192, 0, 2, 1}, IPPROTO_TCP, 80, 1},
    {"TCP to [fd00:ec2::254]:80", 1, {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, 0x54},
     IPPROTO_TCP, 80, 0},
    {"TCP to [fe80::a9fe:a9fe]:80", 1, {0xfe, 0x80, [12] = 0xa9, 0xfe, 0xa9, 0xfe},
     IPPROTO_TCP, 80, 0},
    {"TCP to [2001:db8::1]:80", 1, {0x20, 0x01, 0x0d, 0xb8, [15] = 1}, IPPROTO_TCP, 80, 1},
};

static int probe_frame(const struct probe *probe, uint8_t *frame) {
    memset(frame, 0, 128);
    int l3 = ETH_HLEN, l4;
    uint16_t type = htons(probe->ipv6 ? ETH_P_IPV6 : ETH_P_IP);
    memcpy(frame + 12, &type, 2);
    if (probe->ipv6) {
        frame[l3] = 0x60;
        frame[l3 + 5] = 20; /* payload length */
        frame[l3 + 6] = probe->proto;
        frame[l3 + 7] = 64;
        memcpy(frame + l3 + 24, probe->daddr, 16);
        l4 = l3 + 40;
    } else {
        frame[l3] = 0x45;
        frame[l3 + 3] = 40; /* total length */
        frame[l3 + 8] = 64;
        frame[l3 + 9] = probe->proto;
        memcpy(frame + l3 + 16, probe->daddr, 4);
        l4 = l3 + 20;
    }
    uint16_t port = htons(probe->dport);
    memcpy(frame + l4 + 2, &port, 2);
    return l4 + 20;
}

int fbrt_guard_check(struct fbrt_error *err) {
    int prog = guard_program(err);
    if (prog < 0)
        return prog;
    for (size_t i = 0; i < sizeof(PROBES) / sizeof(PROBES[0]); i++) {
        uint8_t frame[128];
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.test.prog_fd = (uint32_t)prog;
        attr.test.data_in = (uint64_t)(uintptr_t)frame;
        attr.test.data_size_in = (uint32_t)probe_frame(&PROBES[i], frame);
        attr.test.repeat = 1;
        if (sys_bpf(BPF_PROG_TEST_RUN, &attr) < 0)
            return fbrt_fail(err, errno, "bpf BPF_PROG_TEST_RUN of the metadata guard (%s)",
                             PROBES[i].what);
        if ((int)attr.test.retval != PROBES[i].verdict)
            return fbrt_fail(err, EPROTO, "the metadata guard %s a packet %s",
                             PROBES[i].verdict ? "drops" : "lets through", PROBES[i].what);
    }
    return 0;
}

int fbrt_guard_attach(const char *cgroup_dir, struct fbrt_error *err) {
    int prog = guard_program(err);
    if (prog < 0)
        return prog;
    int cgroup_fd = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup_fd < 0)
        return fbrt_fail(err, errno, "open cgroup v2 directory %s", cgroup_dir);
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.target_fd = (uint32_t)cgroup_fd;
    attr.attach_bpf_fd = (uint32_t)prog;
    attr.attach_type = BPF_CGROUP_INET_EGRESS;
    attr.attach_flags = BPF_F_ALLOW_MULTI;
    /* Attached, the cgroup holds the program; it goes with the cgroup. */
    int rc = 0;
    if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0)
        rc = fbrt_fail(err, errno, "bpf BPF_PROG_ATTACH cgroup_skb/egress metadata guard to %s",
                       cgroup_dir);
    close(cgroup_fd);
    return rc;
}
