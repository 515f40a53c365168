/* The endpoint proxy's request heads read and rewritten in C (fuzzball_core.orchestrate._head).
 *
 * llhttp (vendored, unmodified, in llhttp/) parses a client connection's bytes; its callbacks
 * here collect what the proxy needs of a head without a call into Python per header field:
 * the key its route and token are read from (Host, target, FB-Authorization, cookies), and
 * the header lines the service gets (hop-by-hop headers, those the proxy sets, the token and
 * Cookie left out; Transfer-Encoding, Connection, Upgrade and X-Forwarded-Host written
 * anew). fbh_execute stops at each head's end, at each piece of a body and at the end of a
 * message with a body, so Python handles one event per call.
 *
 * The section between the cffi-cdef markers is the module's whole interface (its cdef).
 */
#ifndef FUZZBALL_REQUEST_HEAD_H
#define FUZZBALL_REQUEST_HEAD_H

#include <stddef.h>

/* cffi-cdef-begin */
/* events fbh_execute returns in its low byte */
#define FBH_MORE 0    /* every byte was parsed: more must come */
#define FBH_HEAD 1    /* a head is complete: key, tail; pos is where it ended */
#define FBH_BODY 2    /* body bytes: data[body_start:body_start + body_len] */
#define FBH_END 3     /* a message with a body ended */
#define FBH_UPGRADE 4 /* the bytes from pos on are no longer HTTP (an upgrade or CONNECT) */
#define FBH_ERROR 5   /* not HTTP: reason says why */
/* a head's flags, bits 8-15 of what fbh_execute returns with FBH_HEAD */
#define FBH_KEEP_ALIVE 1
#define FBH_UPGRADING 2
#define FBH_CHUNKED 4
#define FBH_BODILESS 8  /* the message ends with its head (no body announced) */
#define FBH_TOO_LARGE 16 /* the head is over the limits: key and tail are not whole */
#define FBH_HTTP11 32   /* HTTP/1.1 (else major and minor say) */
/* llhttp's method number is in bits 16-23 */

typedef struct fbh_parser {
    /* where parsing stopped in the data last given (feed the rest from there) */
    size_t pos;
    /* FBH_HEAD: "Host\nTARGET\nFB-Authorization" then "\nCOOKIE" for each Cookie header
       (the first value of each; absent and empty alike) */
    const char *key;
    size_t key_len;
    /* FBH_HEAD: the header lines the service gets after its Host (and Cookie, the
       proxy's to decide), ending with X-Forwarded-Host; no blank line */
    const char *tail;
    size_t tail_len;
    int major;
    int minor;
    /* FBH_BODY: offset and size in the data last given */
    size_t body_start;
    size_t body_len;
    /* FBH_ERROR */
    const char *reason;
    /* the parser's own state */
    void *state;
} fbh_parser;

/* A parser of a client connection's requests: heads over max_head bytes (request-target and
   header lines) or with a header line (name and value) over max_field are flagged
   FBH_TOO_LARGE; NULL when out of memory. */
fbh_parser *fbh_new(size_t max_head, size_t max_field);
void fbh_free(fbh_parser *parser);
/* Parse data[pos:len]; returns an event (FBH_*) with its flags and method as above. */
int fbh_execute(fbh_parser *parser, const char *data, size_t len, size_t pos);
/* llhttp's name of a method number ("GET"; "" for a number it has none for) */
const char *fbh_method_name(int method);
/* cffi-cdef-end */

#endif
