/*
 * echo: the echo server of the Ensō microbenchmarks, in C.
 *
 *   echo DEVICE DIR SECONDS
 *
 * Attaches to the standalone device DEVICE in directory DIR (as made by
 * `nic-emu run --name DEVICE --dir DIR`), allocates one RX/TX fallback pipe
 * on port 0, and sends every frame it receives back in place. Test frames
 * of the NIC's generator (IPv4/UDP, IPv6/UDP or raw, payload starting with
 * "EGEN") get their echo byte incremented first (byte 16 of the payload:
 * byte 58 of an IPv4/UDP frame), which the generator checks; other frames
 * go back unchanged. After SECONDS it waits for its sends to complete and
 * prints one JSON line: {"frames":...,"echoed":...,"other":...,...}.
 *
 * Build from the repository root (see enso-c/README.md):
 *   cargo build --release -p enso-c
 *   cc enso-c/examples/echo.c -Ienso-c/include target/release/libenso_c.a \
 *      -lpthread -ldl -lm -o echo
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
    fprintf(stderr, "echo: %s: %s (%s)\n", what, enso_strerror(code), enso_last_error());
    return 1;
}

/* Offset of the test payload of a generator frame, or 0 if `f` is not one
 * (the rule of nic_emu::testframe::TestFrames::peek). */
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
        fprintf(stderr, "echo: SECONDS must be a number of seconds, not '%s'\n", argv[3]);
        return 2;
    }

    enso_device_options_t opts;
    enso_device_options_default(&opts);
    opts.pipes = 1;
    opts.tx_pipes = 0;
    enso_device_t *dev = NULL;
    int rc = enso_device_open(argv[1], argv[2], &opts, &dev);
    if (rc < 0)
        return fail("attaching", rc);
    int pipe = enso_rxtx_pipe_alloc(dev, 0, 1);
    if (pipe < 0) {
        fail("allocating the pipe", pipe);
        enso_device_close(dev);
        return 1;
    }

    uint64_t frames = 0, echoed = 0, other = 0, bytes = 0, idle = 0, batches = 0;
    double start = now_s(), stop = start + seconds;
    int status = 0;
    for (;;) {
        int p = enso_next_pipe_with_data(dev);
        if (p == ENSO_ERR_AGAIN) {
            /* Look at the clock (and whether the device is still there)
             * only now and then while idle, and every 64 batches. */
            if ((++idle & 63) == 0) {
                /* Nothing for a while: sleep until the NIC has something
                 * (at most 1 ms, so the clock is still looked at). */
                rc = enso_wait(dev, 1000);
                if (rc < 0) {
                    status = fail("waiting", rc);
                    break;
                }
            }
            if ((idle & 1023) == 0) {
                if (now_s() >= stop)
                    break;
                rc = enso_device_check_alive(dev);
                if (rc < 0) {
                    status = fail("device", rc);
                    break;
                }
            }
            continue;
        }
        if (p < 0) {
            status = fail("polling", p);
            break;
        }
        enso_batch_t batch;
        rc = enso_recv(dev, p, &batch);
        if (rc < 0) {
            status = fail("receiving", rc);
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
        rc = enso_send_and_free(dev, p, batch.len, 0);
        if (rc < 0) {
            status = fail("sending", rc);
            break;
        }
        if ((++batches & 63) == 0 && now_s() >= stop)
            break;
    }
    double elapsed = now_s() - start;

    /* Let the sends complete: closing discards what the NIC has not sent. */
    double drain_until = now_s() + 2.0;
    while (status == 0 && enso_tx_in_flight(dev) > 0 && now_s() < drain_until) {
        rc = enso_reap_completions(dev);
        if (rc < 0) {
            status = fail("completing sends", rc);
            break;
        }
    }
    int left = enso_tx_in_flight(dev);
    enso_device_close(dev);

    printf("{\"frames\":%llu,\"echoed\":%llu,\"other\":%llu,\"bytes\":%llu,"
           "\"seconds\":%.3f,\"mpps\":%.3f,\"unsent\":%d}\n",
           (unsigned long long)frames, (unsigned long long)echoed, (unsigned long long)other,
           (unsigned long long)bytes, elapsed, elapsed > 0 ? (double)frames / elapsed / 1e6 : 0.0,
           left < 0 ? 0 : left);
    return status;
}
