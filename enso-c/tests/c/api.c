/*
 * Calls every function of enso.h from C without a device: null pointers,
 * a device that does not exist, frames written with enso_write_frame and
 * walked with enso_batch_next. Built with -Wall -Wextra -Werror -pedantic
 * by tests/header.rs, which also checks that every function is called here.
 */
#include <enso.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                                                   \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "api.c:%d: expected %s\n", __LINE__, #cond);              \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#define EXPECT_CODE(call, code)                                                        \
    do {                                                                               \
        int got_ = (call);                                                             \
        if (got_ != (code)) {                                                          \
            fprintf(stderr, "api.c:%d: %s gave %d (%s), expected %d\n", __LINE__, #call, \
                    got_, enso_strerror(got_), (code));                                 \
            failures++;                                                                \
        }                                                                              \
    } while (0)

/* A 64 B IPv4/UDP frame (total length 50: 14 + 50 = 64 bytes). */
static void ipv4_frame(uint8_t *f, uint8_t tag) {
    memset(f, 0, 64);
    f[12] = 0x08;
    f[13] = 0x00;
    f[14] = 0x45;
    f[17] = 50;    /* IPv4 total length */
    f[22] = 64;    /* TTL */
    f[23] = 17;    /* UDP */
    f[38] = 0;
    f[39] = 30;    /* UDP length */
    f[63] = tag;
}

int main(void) {
    /* Errors and options. */
    EXPECT(strcmp(enso_strerror(ENSO_OK), "success") == 0);
    EXPECT(strcmp(enso_strerror(12345), "unknown error code") == 0);
    EXPECT(enso_last_error() != NULL);
    enso_device_options_t opts;
    EXPECT_CODE(enso_device_options_default(&opts), ENSO_OK);
    EXPECT(opts.pipes == 16 && opts.tx_pipes == 1 && opts.prefetch == -1);
    EXPECT(opts.tx_pipe_size == 2u << 20 && opts.tx_credits == 500);
    EXPECT_CODE(enso_device_options_default(NULL), ENSO_ERR_INVALID);
    EXPECT(strstr(enso_last_error(), "null") != NULL);

    /* Opening. */
    enso_device_t *dev = NULL;
    EXPECT_CODE(enso_device_open(NULL, NULL, NULL, &dev), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_device_open("x", NULL, NULL, NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_device_open("../x", "/tmp", NULL, &dev), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_device_open("no-such-device-for-api-c", "/tmp", NULL, &dev),
                ENSO_ERR_ATTACH);
    EXPECT(strlen(enso_last_error()) > 0);
    opts.prefetch = 7;
    EXPECT_CODE(enso_device_open("x", "/tmp", &opts, &dev), ENSO_ERR_OPTIONS);
    EXPECT(dev == NULL);
    EXPECT_CODE(enso_device_close(NULL), ENSO_OK);

    /* Every device call refuses a null device. */
    enso_batch_t b;
    enso_flow_rule_t rule = {0x0a010001, 0, 0, 5000, 17};
    enso_device_stats_t st;
    uint8_t *p = NULL;
    size_t n = 0;
    EXPECT_CODE(enso_device_port_count(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_device_check_alive(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_device_stats(NULL, &st), ENSO_ERR_INVALID);
    enso_port_stats_t ps;
    EXPECT_CODE(enso_port_stats(NULL, 0, &ps), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_set_prefetch(NULL, 1), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_rx_pipe_alloc(NULL, 0, 1), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_rxtx_pipe_alloc(NULL, 0, 1), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_tx_pipe_alloc(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_rx_pipe_free(NULL, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_tx_pipe_free(NULL, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_bind(NULL, 0, &rule), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_unbind(NULL, 0, &rule), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_set_fallback_round_robin(NULL, 0, 1), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_next_pipe_with_data(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_recv(NULL, 0, &b), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_peek(NULL, 0, &b), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_recv_max(NULL, 0, 4096, 8, &b), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_confirm(NULL, 0, 64), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_unconsume(NULL, 0, 64), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_free(NULL, 0, 64), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_free_all(NULL, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_prefetch(NULL, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_send_and_free(NULL, 0, 64, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_discard(NULL, 0, 64), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_tx_buf(NULL, 0, 64, &p), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_send(NULL, 0, 64, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_tx_space(NULL, 0, &n), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_reap_completions(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_tx_in_flight(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_wait(NULL, 1000), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_set_timestamping(NULL, 0, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_set_rate_limit(NULL, 0, 744, 1000), ENSO_ERR_INVALID);
    uint8_t mac[6];
    EXPECT_CODE(enso_next_rxtx_pipe_with_data(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_port_mac(NULL, 0, mac), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_stream_pipe_alloc(NULL, 0, 1), ENSO_ERR_INVALID);

    /* Every socket call refuses a null handle. */
    enso_sockets_t *socks = NULL;
    EXPECT_CODE(enso_sockets_open("no-such-device-for-api-c", "/tmp", &socks), ENSO_ERR_ATTACH);
    EXPECT(socks == NULL);
    EXPECT_CODE(enso_sockets_close(NULL), ENSO_OK);
    EXPECT_CODE(enso_socket(NULL, 1), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_socket_bind(NULL, 0, 0x0a000001, 7), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_socket_recv(NULL, 0, mac, sizeof mac), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_socket_recv_zc(NULL, 0, &b), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_recv_select(NULL, &b), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_socket_free(NULL, 0, 64), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_socket_send_zc(NULL, 0, 64), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_socket_send(NULL, 0, mac, sizeof mac), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_get_completions(NULL), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_socket_shutdown(NULL, 0), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_set_timestamping_as(NULL, 0, ENSO_DEFAULT_RTT_OFFSET, ENSO_TS_ENSO),
                ENSO_ERR_INVALID);

    /* Round-trip times: Ensō's format is big-endian 5 ns cycles. */
    uint8_t ts[24] = {0};
    uint64_t rtt = 0;
    ts[ENSO_DEFAULT_RTT_OFFSET + 3] = 7;
    EXPECT_CODE(enso_rtt_ns(ts, sizeof ts, ENSO_DEFAULT_RTT_OFFSET, ENSO_TS_ENSO, &rtt), ENSO_OK);
    EXPECT(rtt == 35);
    EXPECT_CODE(enso_rtt_ns(ts, sizeof ts, 18, ENSO_TS_NATIVE, &rtt), ENSO_OK);
    EXPECT(rtt == 7ull << 24);
    EXPECT_CODE(enso_rtt_ns(ts, 21, 18, ENSO_TS_ENSO, &rtt), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_rtt_ns(ts, sizeof ts, 18, 5, &rtt), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_rtt_ns(NULL, 0, 0, ENSO_TS_ENSO, &rtt), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_rtt_ns(ts, sizeof ts, 18, ENSO_TS_ENSO, NULL), ENSO_ERR_INVALID);

    /* Frames into a stream, and back out of it as a batch. */
    uint8_t stream[64 * 8], frame[64];
    size_t at = 0;
    for (uint8_t i = 0; i < 3; i++) {
        ipv4_frame(frame, i);
        int used = enso_write_frame(stream + at, sizeof stream - at, frame, sizeof frame);
        EXPECT_CODE(used, 64);
        at += 64;
    }
    /* An opaque frame of 100 bytes: a marker flit, then two flits. */
    uint8_t raw[100];
    memset(raw, 0x5a, sizeof raw);
    raw[12] = 0x88;
    raw[13] = 0xb6;
    EXPECT_CODE(enso_write_frame(stream + at, 64, raw, sizeof raw), ENSO_ERR_MALFORMED);
    EXPECT_CODE(enso_write_frame(stream + at, sizeof stream - at, raw, sizeof raw), 192);
    at += 192;
    EXPECT_CODE(enso_write_frame(NULL, 64, frame, sizeof frame), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_write_frame(stream, sizeof stream, frame, 10), ENSO_ERR_MALFORMED);

    b.data = stream;
    b.len = at;
    b.next = 0;
    size_t lens[8];
    int count = 0, rc;
    while ((rc = enso_batch_next(&b, &p, &n)) == 1 && count < 8) {
        lens[count] = n;
        if (count < 3)
            EXPECT(p == stream + 64 * count && p[63] == count);
        else
            EXPECT(p == stream + 64 * 4 && memcmp(p, raw, sizeof raw) == 0);
        count++;
    }
    EXPECT_CODE(rc, 0);
    EXPECT(count == 4 && lens[0] == 64 && lens[3] == 100);
    EXPECT_CODE(enso_batch_next(&b, &p, &n), 0);
    EXPECT_CODE(enso_batch_next(NULL, &p, &n), ENSO_ERR_INVALID);
    EXPECT_CODE(enso_batch_next(&b, NULL, &n), ENSO_ERR_INVALID);

    /* Garbage stops the iteration with an error, once. */
    memset(stream, 0xff, 128);
    b.len = 128;
    b.next = 0;
    EXPECT_CODE(enso_batch_next(&b, &p, &n), ENSO_ERR_MALFORMED);
    EXPECT_CODE(enso_batch_next(&b, &p, &n), 0);
    /* An empty batch yields nothing, whatever its pointer. */
    b.data = NULL;
    b.len = 0;
    b.next = 0;
    EXPECT_CODE(enso_batch_next(&b, &p, &n), 0);
    b.len = 64;
    EXPECT_CODE(enso_batch_next(&b, &p, &n), ENSO_ERR_INVALID);

    if (failures) {
        fprintf(stderr, "api: %d failures\n", failures);
        return 1;
    }
    printf("api: ok\n");
    return 0;
}
