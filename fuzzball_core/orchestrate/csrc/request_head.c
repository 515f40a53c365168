/* The endpoint proxy's request heads read and rewritten in C: see request_head.h.
 *
 * What a head's header fields become (the same rules as the Python path had before):
 * Host, FB-Authorization, Connection and Upgrade are noted (the first value of each) and not
 * passed; every Cookie header's value is kept for the key (the proxy decides the Cookie the
 * service gets); the hop-by-hop headers (RFC 9110 7.6.1), Transfer-Encoding and the
 * X-Forwarded-* the proxy sets itself are dropped; every other line is passed as it came,
 * unless the Connection header names it (then it is this hop's only).
 */
#include "request_head.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "llhttp.h"

typedef struct {
    char *bytes;
    size_t len;
    size_t cap;
} buf_t;

enum kind { K_PASS, K_DROP, K_HOST, K_TOKEN, K_COOKIE, K_CONNECTION, K_UPGRADE };

typedef struct {
    fbh_parser pub; /* first: a pointer to it is a pointer to the state */
    llhttp_t http;
    size_t max_head;
    size_t max_field;
    size_t head_size;
    int too_large;
    int has_body;
    int event;
    const char *data; /* the data fbh_execute was given, for body offsets */
    int noted_host, noted_token, noted_connection, noted_upgrade;
    buf_t url, field, value, lines, cookies, host, token, connection, upgrade, key, tail;
} state_t;

static state_t *state_of(llhttp_t *http) { return (state_t *)http->data; }

static int add(buf_t *buf, const char *at, size_t n) {
    if (buf->len + n > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 256;
        while (cap < buf->len + n) cap *= 2;
        char *bytes = realloc(buf->bytes, cap);
        if (bytes == NULL) return -1;
        buf->bytes = bytes;
        buf->cap = cap;
    }
    memcpy(buf->bytes + buf->len, at, n);
    buf->len += n;
    return 0;
}

static int add_str(buf_t *buf, const char *s) { return add(buf, s, strlen(s)); }

static int same(const char *name, size_t len, const char *lower) {
    return strlen(lower) == len && strncasecmp(name, lower, len) == 0;
}

static enum kind kind_of(const char *name, size_t len) {
    static const char *const dropped[] = {
        "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "transfer-encoding", "x-forwarded-host", "x-forwarded-proto",
        "x-forwarded-for",
    };
    if (same(name, len, "host")) return K_HOST;
    if (same(name, len, "fb-authorization")) return K_TOKEN;
    if (same(name, len, "cookie")) return K_COOKIE;
    if (same(name, len, "connection")) return K_CONNECTION;
    if (same(name, len, "upgrade")) return K_UPGRADE;
    for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
        if (same(name, len, dropped[i])) return K_DROP;
    return K_PASS;
}

/* whether the comma-separated Connection value names the header ``name`` */
static int named(const buf_t *connection, const char *name, size_t len) {
    const char *p = connection->bytes, *end = p + connection->len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *a = p, *b = stop;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
        if ((size_t)(b - a) == len && strncasecmp(a, name, len) == 0) return 1;
        p = stop + 1;
    }
    return 0;
}

/* -- llhttp's callbacks ---------------------------------------------------------------- */

static int on_message_begin(llhttp_t *http) {
    state_t *s = state_of(http);
    s->head_size = 0;
    s->too_large = 0;
    s->has_body = 0;
    s->noted_host = s->noted_token = s->noted_connection = s->noted_upgrade = 0;
    s->url.len = s->field.len = s->value.len = s->lines.len = s->cookies.len = 0;
    s->host.len = s->token.len = s->connection.len = s->upgrade.len = 0;
    return 0;
}

static int on_url(llhttp_t *http, const char *at, size_t n) {
    state_t *s = state_of(http);
    s->head_size += n;
    if (s->head_size > s->max_head) s->too_large = 1;
    if (s->too_large) return 0;
    return add(&s->url, at, n);
}

/* a piece of a header's name or value: kept while the line and the head are in bounds */
static int piece(state_t *s, buf_t *buf, const char *at, size_t n) {
    if (s->too_large) return 0;
    size_t line = s->field.len + s->value.len + n;
    if (line > s->max_field || s->head_size + line + 4 > s->max_head) {
        s->too_large = 1;
        return 0;
    }
    return add(buf, at, n);
}

static int on_header_field(llhttp_t *http, const char *at, size_t n) {
    state_t *s = state_of(http);
    return piece(s, &s->field, at, n);
}

static int on_header_value(llhttp_t *http, const char *at, size_t n) {
    state_t *s = state_of(http);
    return piece(s, &s->value, at, n);
}

static int note(int *noted, buf_t *into, const buf_t *value) {
    if (*noted) return 0; /* the first value is the one read */
    *noted = 1;
    return add(into, value->bytes, value->len);
}

static int on_header_value_complete(llhttp_t *http) {
    state_t *s = state_of(http);
    const buf_t *name = &s->field, *value = &s->value;
    int failed = 0;
    if (!s->too_large) {
        s->head_size += name->len + value->len + 4;
        switch (kind_of(name->bytes, name->len)) {
        case K_PASS:
            failed = add(&s->lines, name->bytes, name->len) || add(&s->lines, ": ", 2) ||
                     add(&s->lines, value->bytes, value->len) || add(&s->lines, "\r\n", 2);
            break;
        case K_HOST:
            failed = note(&s->noted_host, &s->host, value);
            break;
        case K_TOKEN:
            failed = note(&s->noted_token, &s->token, value);
            break;
        case K_CONNECTION:
            failed = note(&s->noted_connection, &s->connection, value);
            break;
        case K_UPGRADE:
            failed = note(&s->noted_upgrade, &s->upgrade, value);
            break;
        case K_COOKIE:
            failed = add(&s->cookies, "\n", 1) || add(&s->cookies, value->bytes, value->len);
            break;
        case K_DROP:
            break;
        }
    }
    s->field.len = s->value.len = 0;
    return failed ? -1 : 0;
}

/* the lines passed, less those the Connection header names */
static int passed_lines(state_t *s) {
    if (!s->noted_connection) return add(&s->tail, s->lines.bytes, s->lines.len);
    const char *p = s->lines.bytes, *end = p + s->lines.len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol ? eol + 1 : end;
        const char *colon = memchr(p, ':', (size_t)(next - p));
        size_t len = colon ? (size_t)(colon - p) : 0;
        if (!named(&s->connection, p, len) && add(&s->tail, p, (size_t)(next - p))) return -1;
        p = next;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *http) {
    state_t *s = state_of(http);
    int flags = 0;
    if (llhttp_should_keep_alive(http)) flags |= FBH_KEEP_ALIVE;
    if (http->upgrade) flags |= FBH_UPGRADING;
    if (http->flags & F_CHUNKED) flags |= FBH_CHUNKED;
    s->has_body = (http->flags & F_CHUNKED) ||
                  ((http->flags & F_CONTENT_LENGTH) && http->content_length > 0);
    if (!s->has_body) flags |= FBH_BODILESS;
    if (http->http_major == 1 && http->http_minor == 1) flags |= FBH_HTTP11;
    s->pub.major = http->http_major;
    s->pub.minor = http->http_minor;
    s->key.len = s->tail.len = 0;
    if (s->too_large) {
        flags |= FBH_TOO_LARGE;
    } else {
        if (s->noted_connection && named(&s->connection, "cookie", 6)) s->cookies.len = 0;
        int failed = add(&s->key, s->host.bytes, s->host.len) || add(&s->key, "\n", 1) ||
                     add(&s->key, s->url.bytes, s->url.len) || add(&s->key, "\n", 1) ||
                     add(&s->key, s->token.bytes, s->token.len) ||
                     add(&s->key, s->cookies.bytes, s->cookies.len) || passed_lines(s);
        if (!failed && (flags & FBH_CHUNKED))
            failed = add_str(&s->tail, "Transfer-Encoding: chunked\r\n");
        if (!failed && (flags & FBH_UPGRADING))
            failed = add_str(&s->tail, "Connection: Upgrade\r\nUpgrade: ") ||
                     add(&s->tail, s->upgrade.bytes, s->upgrade.len) || add(&s->tail, "\r\n", 2);
        else if (!failed && http->http_major == 1 && http->http_minor == 0 &&
                 (flags & FBH_KEEP_ALIVE))
            failed = add_str(&s->tail, "Connection: keep-alive\r\n");
        if (!failed)
            failed = add_str(&s->tail, "X-Forwarded-Host: ") ||
                     add(&s->tail, s->host.bytes, s->host.len) || add(&s->tail, "\r\n", 2);
        if (failed) return -1;
    }
    s->pub.key = s->key.bytes;
    s->pub.key_len = s->key.len;
    s->pub.tail = s->tail.bytes;
    s->pub.tail_len = s->tail.len;
    s->event = FBH_HEAD | flags << 8 | (int)http->method << 16;
    return HPE_PAUSED; /* back to Python with the head */
}

static int on_body(llhttp_t *http, const char *at, size_t n) {
    state_t *s = state_of(http);
    if (n == 0) return 0;
    s->pub.body_start = (size_t)(at - s->data);
    s->pub.body_len = n;
    s->event = FBH_BODY;
    return HPE_PAUSED;
}

static int on_message_complete(llhttp_t *http) {
    state_t *s = state_of(http);
    if (!s->has_body) return 0; /* Python took it as ended with its head */
    s->event = FBH_END;
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* -- the interface ----------------------------------------------------------------------- */

fbh_parser *fbh_new(size_t max_head, size_t max_field) {
    state_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    llhttp_init(&s->http, HTTP_REQUEST, &settings);
    s->http.data = s;
    s->max_head = max_head;
    s->max_field = max_field;
    s->pub.state = s;
    return &s->pub;
}

void fbh_free(fbh_parser *parser) {
    if (parser == NULL) return;
    state_t *s = parser->state;
    buf_t *bufs[] = {&s->url,  &s->field, &s->value,      &s->lines,   &s->cookies, &s->host,
                     &s->token, &s->connection, &s->upgrade, &s->key, &s->tail};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]->bytes);
    free(s);
}

const char *fbh_method_name(int method) {
    /* llhttp_method_name aborts on a number it does not know */
    switch (method) {
#define FBH_METHOD(NUM, NAME, STRING) \
    case NUM:                         \
        return #STRING;
        HTTP_ALL_METHOD_MAP(FBH_METHOD)
#undef FBH_METHOD
    default:
        return "";
    }
}

int fbh_execute(fbh_parser *parser, const char *data, size_t len, size_t pos) {
    state_t *s = parser->state;
    llhttp_errno_t err = llhttp_get_errno(&s->http);
    if (err == HPE_PAUSED) {
        llhttp_resume(&s->http);
    } else if (err == HPE_PAUSED_UPGRADE) {
        parser->pos = pos;
        return FBH_UPGRADE;
    } else if (err != HPE_OK) {
        parser->pos = pos;
        parser->reason = llhttp_get_error_reason(&s->http);
        return FBH_ERROR;
    }
    s->data = data;
    err = llhttp_execute(&s->http, data + pos, len - pos);
    if (err == HPE_OK) {
        parser->pos = len;
        return FBH_MORE;
    }
    const char *stopped = llhttp_get_error_pos(&s->http);
    parser->pos = stopped ? (size_t)(stopped - data) : len;
    if (err == HPE_PAUSED) return s->event;
    if (err == HPE_PAUSED_UPGRADE) return FBH_UPGRADE;
    parser->reason = llhttp_get_error_reason(&s->http);
    if (parser->reason == NULL) parser->reason = "invalid request";
    return FBH_ERROR;
}
