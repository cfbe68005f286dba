/*
 * socket_echo: an echo server written with Ensō's socket calls, in C.
 *
 *   socket_echo DEVICE DIR SECONDS
 *
 * Attaches to the standalone device DEVICE in directory DIR (as made by
 * `nic-emu run --name DEVICE --dir DIR`), makes one fallback socket (it
 * receives every frame no binding steers elsewhere), and sends every frame
 * it receives back in place: recv_select(), then send() of the received
 * bytes, as Ensō's socket examples do. Test frames of the NIC's generator
 * (payload starting with "EGEN") get their echo byte incremented first,
 * which the generator checks. After SECONDS it lets its sends complete and
 * prints one JSON line: {"frames":...,"echoed":...,"other":...,...}.
 *
 * Build from the repository root (see enso-c/README.md):
 *   cargo build --release -p enso-c
 *   cc enso-c/examples/socket_echo.c -Ienso-c/include \
 *      target/release/libenso_c.a -lpthread -ldl -lm -o socket_echo
 */
#define _POSIX_C_SOURCE 200809L

#include <enso.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int code) {
    fprintf(stderr, "socket_echo: %s: %s (%s)\n", what, enso_strerror(code), enso_last_error());
    return 1;
}

/* Offset of the test payload of a generator frame, or 0 if `f` is not one. */
static size_t test_payload(const uint8_t *f, size_t len) {
    size_t p;
    if (len < 14)
        return 0;
    switch ((f[12] << 8) | f[13]) {
    case 0x0800: p = 14 + 20 + 8; break; /* IPv4/UDP */
    case 0x86dd: p = 14 + 40 + 8; break; /* IPv6/UDP */
    case 0x88b6: p = 14; break;          /* raw test frame */
    default: return 0;
    }
    if (len < p + 17 || memcmp(f + p, "EGEN", 4) != 0)
        return 0;
    return p;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DEVICE DIR SECONDS\n", argv[0]);
        return 2;
    }
    char *end;
    errno = 0;
    double seconds = strtod(argv[3], &end);
    if (errno != 0 || *end != '\0' || !(seconds >= 0) || seconds > 1e6) {
        fprintf(stderr, "socket_echo: SECONDS must be a number of seconds, not '%s'\n", argv[3]);
        return 2;
    }

    enso_sockets_t *socks = NULL;
    int rc = enso_sockets_open(argv[1], argv[2], &socks);
    if (rc < 0)
        return fail("attaching", rc);
    int sock = enso_socket(socks, 1);
    if (sock < 0) {
        fail("socket", sock);
        enso_sockets_close(socks);
        return 1;
    }

    uint64_t frames = 0, echoed = 0, other = 0, bytes = 0, idle = 0, batches = 0, done = 0;
    double start = now_s(), stop = start + seconds;
    int status = 0;
    for (;;) {
        enso_batch_t batch;
        int s = enso_recv_select(socks, &batch);
        if (s == ENSO_ERR_AGAIN) {
            if ((++idle & 1023) == 0 && now_s() >= stop)
                break;
            continue;
        }
        if (s < 0) {
            status = fail("recv_select", s);
            break;
        }
        uint8_t *f;
        size_t len;
        while ((rc = enso_batch_next(&batch, &f, &len)) == 1) {
            size_t pay = test_payload(f, len);
            if (pay != 0) {
                f[pay + 16]++;
                echoed++;
            } else {
                other++;
            }
            frames++;
        }
        if (rc < 0) {
            status = fail("reading the batch", rc);
            break;
        }
        bytes += batch.len;
        rc = enso_socket_send_zc(socks, s, batch.len);
        if (rc < 0) {
            status = fail("send", rc);
            break;
        }
        rc = enso_get_completions(socks);
        if (rc < 0) {
            status = fail("get_completions", rc);
            break;
        }
        done += (uint64_t)rc;
        if ((++batches & 63) == 0 && now_s() >= stop)
            break;
    }
    double elapsed = now_s() - start;

    /* Let the sends complete (closing discards what the NIC has not sent):
     * until no completion came for 200 ms, or at most 2 s. */
    double drain_until = now_s() + 2.0, quiet_since = now_s();
    while (status == 0 && now_s() < drain_until && now_s() - quiet_since < 0.2) {
        rc = enso_get_completions(socks);
        if (rc < 0) {
            status = fail("get_completions", rc);
            break;
        }
        if (rc > 0) {
            done += (uint64_t)rc;
            quiet_since = now_s();
        }
    }
    rc = enso_socket_shutdown(socks, sock);
    if (rc < 0 && status == 0)
        status = fail("shutdown", rc);
    enso_sockets_close(socks);

    printf("{\"frames\":%llu,\"echoed\":%llu,\"other\":%llu,\"bytes\":%llu,"
           "\"sends_completed\":%llu,\"seconds\":%.3f}\n",
           (unsigned long long)frames, (unsigned long long)echoed, (unsigned long long)other,
           (unsigned long long)bytes, (unsigned long long)done, elapsed);
    return status;
}
