/* ember's RPC server for a device: a host uploads an exported model library, runs it on
 * inputs it sends, and gets the outputs and the time of each run back.
 *
 *   rpc_server [--host 127.0.0.1] [--port 9090] [--key-file PATH] [--idle-timeout 60]
 *              [--max-message BYTES] [--max-clients 4] [--work-dir DIR]
 *
 * The shared key comes from --key-file or EMBER_RPC_KEY; it never crosses the wire: the
 * server sends a random nonce, the client answers HMAC-SHA256(key, "ember-rpc client" ||
 * nonce) and its own nonce, the server proves itself with HMAC(key, "ember-rpc server" ||
 * client nonce). Nothing but that exchange is read before authentication (frames of at
 * most 256 bytes). Each connection is served by a forked child, so a model that crashes
 * takes only its own connection down. Frames: "EMBR" magic, u32 type, u64 length, payload
 * (little-endian); the types and layouts are those of ember/runtime/rpc.py.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__aarch64__) || defined(__arm__)
#include <sys/auxv.h>
#endif

#include "sha256.h"

#define MAGIC 0x52424d45u /* the bytes "EMBR" */
#define VERSION 1u
enum { HELLO = 1, AUTH = 2, OK = 3, ERROR = 4, UPLOAD = 5, RUN = 6, FREE = 7, INFO = 8,
       BYE = 9 };
enum { PREAUTH_LIMIT = 256, MAX_MODULES = 16, MAX_BUFFERS = 256, MAX_REPEAT = 100000 };

typedef struct {
    void *handle;
    int32_t (*run)(void **args);
    void (*set_threads)(int32_t);
    void *constants;
    int32_t arity;
    char path[512];
} module;

typedef struct {
    int fd;
    int idle_ms;
    uint64_t max_message;
    const unsigned char *key;
    size_t key_n;
    const char *work_dir;
    module modules[MAX_MODULES];
} session;

/* I/O with the idle timeout ---------------------------------------------------------- */
static int wait_readable(int fd, int ms) {
    struct pollfd p = {fd, POLLIN, 0};
    for (;;) {
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        return r; /* 0: timed out */
    }
}

/* 1: read all n bytes, 0: peer closed, -1: error, -2: timed out */
static int read_all(session *s, void *buf, uint64_t n) {
    unsigned char *p = buf;
    while (n > 0) {
        int ready = wait_readable(s->fd, s->idle_ms);
        if (ready == 0) return -2;
        if (ready < 0) return -1;
        ssize_t got = recv(s->fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n, 0);
        if (got == 0) return 0;
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += got;
        n -= (uint64_t)got;
    }
    return 1;
}

static int write_all(int fd, const void *buf, uint64_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t put = send(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n, MSG_NOSIGNAL);
        if (put < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += put;
        n -= (uint64_t)put;
    }
    return 0;
}

static int write_file(int fd, const unsigned char *p, uint64_t n) {
    while (n > 0) {
        ssize_t put = write(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n);
        if (put < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += put;
        n -= (uint64_t)put;
    }
    return 0;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static int send_frame(int fd, uint32_t type, const void *a, uint64_t a_n, const void *b,
                      uint64_t b_n) {
    unsigned char head[16];
    put32(head, MAGIC);
    put32(head + 4, type);
    put64(head + 8, a_n + b_n);
    if (write_all(fd, head, 16) || write_all(fd, a, a_n)) return -1;
    return b_n ? write_all(fd, b, b_n) : 0;
}

static int send_error(int fd, const char *message) {
    return send_frame(fd, ERROR, message, strlen(message), NULL, 0);
}

/* A payload reader that refuses to run past the end ---------------------------------- */
typedef struct {
    const unsigned char *p;
    uint64_t left;
    int bad;
} cursor;

static uint32_t take32(cursor *c) {
    if (c->bad || c->left < 4) { c->bad = 1; return 0; }
    uint32_t v = get32(c->p);
    c->p += 4;
    c->left -= 4;
    return v;
}
static uint64_t take64(cursor *c) {
    if (c->bad || c->left < 8) { c->bad = 1; return 0; }
    uint64_t v = get64(c->p);
    c->p += 8;
    c->left -= 8;
    return v;
}
static const unsigned char *take(cursor *c, uint64_t n) {
    if (c->bad || c->left < n) { c->bad = 1; return NULL; }
    const unsigned char *at = c->p;
    c->p += n;
    c->left -= n;
    return at;
}

/* Requests ------------------------------------------------------------------------------ */
static int handle_upload(session *s, const unsigned char *data, uint64_t n) {
    int slot = -1;
    for (int i = 0; i < MAX_MODULES; i++)
        if (!s->modules[i].handle) { slot = i; break; }
    if (slot < 0) return send_error(s->fd, "too many modules loaded; free one first");
    module *m = &s->modules[slot];
    snprintf(m->path, sizeof m->path, "%s/ember-rpc-XXXXXX.so", s->work_dir);
    int fd = mkstemps(m->path, 3);
    if (fd < 0) return send_error(s->fd, "cannot create a file for the module");
    int failed = write_file(fd, data, n) != 0;
    close(fd);
    if (failed) {
        unlink(m->path);
        return send_error(s->fd, "cannot write the module to disk");
    }
    m->handle = dlopen(m->path, RTLD_NOW | RTLD_LOCAL);
    unlink(m->path); /* mapped now; nothing left behind */
    if (!m->handle) {
        char message[600];
        snprintf(message, sizeof message, "cannot load the module: %s", dlerror());
        return send_error(s->fd, message);
    }
    m->run = (int32_t(*)(void **))dlsym(m->handle, "ember_model_run");
    m->set_threads = (void (*)(int32_t))dlsym(m->handle, "ember_set_num_threads");
    m->constants = dlsym(m->handle, "ember_constants");
    const int32_t *arity = dlsym(m->handle, "ember_model_arity");
    const char *meta = dlsym(m->handle, "ember_metadata");
    const uint64_t *meta_n = dlsym(m->handle, "ember_metadata_size");
    if (!m->run || !m->set_threads || !m->constants || !arity || !meta || !meta_n) {
        dlclose(m->handle);
        m->handle = NULL;
        return send_error(s->fd, "not an ember library: its entry points are missing");
    }
    m->arity = *arity;
    unsigned char id[4];
    put32(id, (uint32_t)slot);
    return send_frame(s->fd, OK, id, 4, meta, *meta_n);
}

static module *find_module(session *s, uint32_t id) {
    return id < MAX_MODULES && s->modules[id].handle ? &s->modules[id] : NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *aligned(uint64_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n ? (size_t)n : 64) == 0 ? p : NULL;
}

/* RUN: u32 module, u32 threads, u32 repeat, u32 inputs, u32 outputs, u64 workspace bytes,
 * each input (u64 bytes, data), each output's u64 bytes.
 * OK: u32 outputs, each (u64 bytes, data), u32 repeat, repeat f64 seconds. */
static int handle_run(session *s, const unsigned char *data, uint64_t n) {
    cursor c = {data, n, 0};
    uint32_t id = take32(&c), threads = take32(&c), repeat = take32(&c);
    uint32_t n_in = take32(&c), n_out = take32(&c);
    uint64_t workspace_n = take64(&c);
    if (c.bad) return send_error(s->fd, "malformed RUN request: header cut short");
    module *m = find_module(s, id);
    if (!m) return send_error(s->fd, "RUN: no such module");
    if (n_in > MAX_BUFFERS || n_out > MAX_BUFFERS || n_in + n_out + 2 != (uint32_t)m->arity)
        return send_error(s->fd, "RUN: the input and output counts do not match the model");
    if (repeat < 1 || repeat > MAX_REPEAT) return send_error(s->fd, "RUN: bad repeat count");
    if (workspace_n > s->max_message) return send_error(s->fd, "RUN: workspace too large");
    void *args[2 * MAX_BUFFERS + 2];
    uint64_t out_n[MAX_BUFFERS];
    uint64_t total_out = 0;
    int status = 0;
    for (uint32_t i = 0; i < n_in; i++) {
        uint64_t size = take64(&c);
        const unsigned char *bytes = take(&c, size);
        if (c.bad) return send_error(s->fd, "malformed RUN request: an input is cut short");
        args[i] = (void *)bytes;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        out_n[i] = take64(&c);
        total_out += out_n[i];
    }
    if (c.bad || c.left != 0) return send_error(s->fd, "malformed RUN request: bad length");
    if (total_out > s->max_message) return send_error(s->fd, "RUN: outputs too large");
    /* inputs sit unaligned inside the frame: copy each to 64-byte aligned memory */
    void *owned[2 * MAX_BUFFERS + 1] = {0};
    uint32_t n_owned = 0;
    cursor again = {data + 28, n - 28, 0};
    for (uint32_t i = 0; i < n_in; i++) {
        uint64_t size = take64(&again);
        void *copy = aligned(size);
        if (!copy) { status = -1; break; }
        memcpy(copy, take(&again, size), (size_t)size);
        args[i] = owned[n_owned++] = copy;
    }
    for (uint32_t i = 0; i < n_out && status == 0; i++) {
        if (!(args[n_in + i] = owned[n_owned++] = aligned(out_n[i]))) status = -1;
    }
    void *workspace = status == 0 ? aligned(workspace_n) : NULL;
    if (!workspace) status = -1;
    owned[n_owned++] = workspace;
    double *seconds = status == 0 ? malloc(sizeof(double) * repeat) : NULL;
    int result = 0;
    if (status != 0 || !seconds) {
        result = send_error(s->fd, "RUN: out of memory");
    } else {
        args[n_in + n_out] = workspace;
        args[n_in + n_out + 1] = m->constants;
        m->set_threads(threads ? (int32_t)threads : (int32_t)sysconf(_SC_NPROCESSORS_ONLN));
        int32_t code = 0;
        for (uint32_t r = 0; r < repeat && code == 0; r++) {
            double start = now();
            code = m->run(args);
            seconds[r] = now() - start;
        }
        if (code != 0) {
            result = send_error(s->fd, "RUN: the model returned an error status");
        } else {
            uint64_t size = 4 + 4 + 8 * (uint64_t)repeat;
            for (uint32_t i = 0; i < n_out; i++) size += 8 + out_n[i];
            unsigned char head[16], word[8];
            put32(head, MAGIC);
            put32(head + 4, OK);
            put64(head + 8, size);
            put32(word, n_out);
            result = write_all(s->fd, head, 16) || write_all(s->fd, word, 4);
            for (uint32_t i = 0; i < n_out && !result; i++) {
                put64(word, out_n[i]);
                result = write_all(s->fd, word, 8) || write_all(s->fd, args[n_in + i], out_n[i]);
            }
            put32(word, repeat);
            result = result || write_all(s->fd, word, 4);
            for (uint32_t r = 0; r < repeat && !result; r++) {
                uint64_t bits;
                memcpy(&bits, &seconds[r], 8);
                put64(word, bits);
                result = write_all(s->fd, word, 8);
            }
        }
    }
    free(seconds);
    for (uint32_t i = 0; i < n_owned; i++) free(owned[i]);
    return result;
}

static int handle_free(session *s, const unsigned char *data, uint64_t n) {
    module *m = n == 4 ? find_module(s, get32(data)) : NULL;
    if (!m) return send_error(s->fd, "FREE: no such module");
    /* the slot is free again, but the library stays mapped until the connection ends:
     * its thread pool's workers wait inside its code, and unmapping it would crash them */
    m->handle = NULL;
    return send_frame(s->fd, OK, NULL, 0, NULL, 0);
}

/* INFO: "machine=<uname -m>\ncpus=<n>\nflags=<Linux CPU flags>" */
static int handle_info(session *s) {
    static char text[8192];
    struct utsname u;
    uname(&u);
    int at = snprintf(text, sizeof text, "machine=%s\ncpus=%ld\nflags=", u.machine,
                      sysconf(_SC_NPROCESSORS_ONLN));
#if defined(__aarch64__) || defined(__arm__)
    /* the kernel's (and qemu's) HWCAP bits, named as /proc/cpuinfo names them */
#if defined(__aarch64__)
    static const char *names[] = {"fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2",
                                  "crc32", "atomics", "fphp", "asimdhp", "cpuid", "asimdrdm",
                                  "jscvt", "fcma", "lrcpc", "dcpop", "sha3", "sm3", "sm4",
                                  "asimddp", "sha512", "sve", "asimdfhm"};
#else
    static const char *names[] = {"swp", "half", "thumb", "26bit", "fastmult", "fpa", "vfp",
                                  "edsp", "java", "iwmmxt", "crunch", "thumbee", "neon",
                                  "vfpv3", "vfpv3d16", "tls", "vfpv4", "idiva", "idivt",
                                  "vfpd32", "lpae", "evtstrm"};
#endif
    unsigned long caps = getauxval(AT_HWCAP);
    for (unsigned i = 0; i < sizeof names / sizeof names[0] && at < (int)sizeof text - 16; i++)
        if (caps >> i & 1) at += snprintf(text + at, sizeof text - (size_t)at, "%s ", names[i]);
#else
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) == 0 && strchr(line, ':')) {
            at += snprintf(text + at, sizeof text - (size_t)at, "%s", strchr(line, ':') + 2);
            break;
        }
    }
    if (f) fclose(f);
#endif
    if (at >= (int)sizeof text) at = (int)sizeof text - 1;
    return send_frame(s->fd, OK, text, (uint64_t)at, NULL, 0);
}

/* Authentication: nothing else is read until the peer proves it has the key */
static int authenticate(session *s) {
    unsigned char nonce[32], head[16], body[PREAUTH_LIMIT], mac[32], hello[36];
    int urandom = open("/dev/urandom", O_RDONLY);
    if (urandom < 0 || read(urandom, nonce, 32) != 32) return -1;
    close(urandom);
    put32(hello, VERSION);
    memcpy(hello + 4, nonce, 32);
    if (send_frame(s->fd, HELLO, hello, 36, NULL, 0)) return -1;
    int r = read_all(s, head, 16);
    if (r == -2) return send_error(s->fd, "idle timeout"), -1;
    if (r != 1) return -1;
    uint64_t n = get64(head + 8);
    if (get32(head) != MAGIC || get32(head + 4) != AUTH || n != 64 || n > PREAUTH_LIMIT)
        return send_error(s->fd, "authentication required: expected an AUTH frame"), -1;
    if (read_all(s, body, n) != 1) return -1;
    ember_hmac_sha256(s->key, s->key_n, "ember-rpc client", 16, nonce, 32, mac);
    unsigned char diff = 0;
    for (int i = 0; i < 32; i++) diff |= mac[i] ^ body[i]; /* constant time */
    if (diff) return send_error(s->fd, "authentication failed"), -1;
    ember_hmac_sha256(s->key, s->key_n, "ember-rpc server", 16, body + 32, 32, mac);
    return send_frame(s->fd, OK, mac, 32, NULL, 0);
}

static void serve(session *s) {
    if (authenticate(s) != 0) return;
    for (;;) {
        unsigned char head[16];
        int r = read_all(s, head, 16);
        if (r == -2) {
            send_error(s->fd, "idle timeout");
            return;
        }
        if (r != 1) return;
        uint32_t type = get32(head + 4);
        uint64_t n = get64(head + 8);
        if (get32(head) != MAGIC) {
            send_error(s->fd, "malformed frame: bad magic");
            return; /* the stream cannot be resynchronized */
        }
        if (n > s->max_message) {
            char message[128];
            snprintf(message, sizeof message, "frame of %llu bytes exceeds the limit of %llu",
                     (unsigned long long)n, (unsigned long long)s->max_message);
            send_error(s->fd, message);
            return;
        }
        unsigned char *body = malloc(n ? (size_t)n : 1);
        if (!body) {
            send_error(s->fd, "out of memory");
            return;
        }
        r = read_all(s, body, n);
        int failed = r != 1;
        if (r == -2) send_error(s->fd, "idle timeout");
        if (!failed) {
            switch (type) {
            case UPLOAD: failed = handle_upload(s, body, n); break;
            case RUN: failed = handle_run(s, body, n); break;
            case FREE: failed = handle_free(s, body, n); break;
            case INFO: failed = handle_info(s); break;
            case BYE: failed = 1; break;
            default: failed = send_error(s->fd, "malformed frame: unknown type"); break;
            }
        }
        free(body);
        if (failed) return;
    }
}

/* Setup --------------------------------------------------------------------------------- */
static int usage(const char *message) {
    fprintf(stderr, "rpc_server: %s\nusage: rpc_server [--host ADDR] [--port N] "
            "[--key-file PATH] [--idle-timeout SECONDS] [--max-message BYTES] "
            "[--max-clients N] [--work-dir DIR]\n(the key: --key-file or EMBER_RPC_KEY)\n",
            message);
    return 2;
}

static unsigned char key_storage[4096];

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *key_file = NULL;
    long port = 9090, idle = 60, max_clients = 4;
    session s = {0};
    s.max_message = 1ull << 30;
    s.work_dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) return usage("every option takes a value");
        i++;
        if (!strcmp(arg, "--host")) host = value;
        else if (!strcmp(arg, "--port")) port = strtol(value, NULL, 10);
        else if (!strcmp(arg, "--key-file")) key_file = value;
        else if (!strcmp(arg, "--idle-timeout")) idle = strtol(value, NULL, 10);
        else if (!strcmp(arg, "--max-message")) s.max_message = strtoull(value, NULL, 10);
        else if (!strcmp(arg, "--max-clients")) max_clients = strtol(value, NULL, 10);
        else if (!strcmp(arg, "--work-dir")) s.work_dir = value;
        else return usage("unknown option");
    }
    if (port < 0 || port > 65535 || idle < 1 || max_clients < 1 || s.max_message < 64)
        return usage("bad option value");
    if (key_file) {
        FILE *f = fopen(key_file, "rb");
        if (!f) return usage("cannot read the key file");
        s.key_n = fread(key_storage, 1, sizeof key_storage, f);
        fclose(f);
        while (s.key_n && (key_storage[s.key_n - 1] == '\n' || key_storage[s.key_n - 1] == '\r'))
            s.key_n--;
    } else if (getenv("EMBER_RPC_KEY")) {
        s.key_n = strlen(getenv("EMBER_RPC_KEY"));
        if (s.key_n > sizeof key_storage) s.key_n = sizeof key_storage;
        memcpy(key_storage, getenv("EMBER_RPC_KEY"), s.key_n);
    }
    if (s.key_n < 8) return usage("a shared key of at least 8 bytes is required");
    s.key = key_storage;
    s.idle_ms = (int)(idle * 1000);

    int listener = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in address = {0};
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)port);
    if (listener < 0 || inet_pton(AF_INET, host, &address.sin_addr) != 1)
        return usage("bad --host (expected an IPv4 address)");
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, length) || listen(listener, 8) ||
        getsockname(listener, (struct sockaddr *)&address, &length)) {
        perror("rpc_server: cannot listen");
        return 1;
    }
    printf("ember rpc_server listening on %s:%d\n", host, ntohs(address.sin_port));
    fflush(stdout);
    long children = 0;
    for (;;) {
        while (children > 0 && waitpid(-1, NULL, WNOHANG) > 0) children--;
        int fd = accept(listener, NULL, NULL);
        if (fd < 0) continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (children >= max_clients) {
            while (children > 0 && waitpid(-1, NULL, WNOHANG) > 0) children--;
            if (children >= max_clients) {
                send_error(fd, "server busy: too many clients");
                close(fd);
                continue;
            }
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(listener);
            s.fd = fd;
            serve(&s);
            close(fd);
            _exit(0);
        }
        if (pid > 0) children++;
        close(fd);
    }
}
