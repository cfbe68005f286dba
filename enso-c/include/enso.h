/*
 * enso.h: the C interface to the Ensō application library (libenso_c).
 *
 * Attach to a running emulated NIC (`nic-emu run --name NAME`), allocate
 * pipes, receive batches of frames, send them back in place or from TX
 * pipes. See enso-c/README.md.
 *
 * Conventions:
 *  - Functions return ENSO_OK (0), or a non-negative count or pipe handle,
 *    on success and a negative ENSO_ERR_* code on failure.
 *    enso_strerror() names a code; enso_last_error() gives the message of
 *    the calling thread's last failure.
 *  - A device handle (enso_device_t *) is used by one thread at a time
 *    (it may be handed to another thread between calls). Open one device
 *    handle per thread; pipes belong to the handle that allocated them.
 *  - Pipe handles are non-negative ints. RX and RX/TX pipes and TX pipes
 *    are distinct ranges: a handle of the wrong kind or of another device
 *    gives ENSO_ERR_BAD_HANDLE. Null pointers give ENSO_ERR_INVALID.
 *  - Using a device handle after enso_device_close() is undefined, as with
 *    free().
 *
 * This header is written by hand; enso-c/tests/header.rs checks it against
 * the library's definitions (functions, structures, constants).
 */
#ifndef ENSO_H
#define ENSO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. */
#define ENSO_OK 0
/* A null pointer, a string that is not UTF-8, or a value out of range. */
#define ENSO_ERR_INVALID (-1)
/* A pipe handle this device did not allocate, or of the wrong kind. */
#define ENSO_ERR_BAD_HANDLE (-2)
/* Nothing to do now: no pipe has data (enso_next_pipe_with_data). */
#define ENSO_ERR_AGAIN (-3)
/* The device refused the attachment or could not be reached. */
#define ENSO_ERR_ATTACH (-4)
/* Device options that cannot work. */
#define ENSO_ERR_OPTIONS (-5)
/* Mapping shared memory failed. */
#define ENSO_ERR_IO (-6)
/* No more RX (or RX/TX) pipes: the device's pipe ids after the handle's
 * are another application's or past the device's 8192. */
#define ENSO_ERR_NO_PIPES (-7)
/* Not returned: TX pipes are allocated while the handle's memory has room
 * (ENSO_ERR_NO_MEMORY once it has none). */
#define ENSO_ERR_NO_TX_PIPES (-8)
/* The device has no such port. */
#define ENSO_ERR_NO_PORT (-9)
/* The handle's DMA region has no room left. */
#define ENSO_ERR_NO_MEMORY (-10)
/* More bytes than were received (and not yet freed or sent). */
#define ENSO_ERR_TOO_MANY_BYTES (-11)
/* A byte count that is not a multiple of 64. */
#define ENSO_ERR_UNALIGNED (-12)
/* Bytes of this pipe are still being sent. */
#define ENSO_ERR_IN_FLIGHT (-13)
/* More bytes than a TX pipe holds. */
#define ENSO_ERR_TOO_LARGE (-14)
/* Sending more than the last enso_tx_buf reserved. */
#define ENSO_ERR_NOT_RESERVED (-15)
/* Batch bytes that are not frames, or a frame that cannot be written. */
#define ENSO_ERR_MALFORMED (-16)
/* The device stopped taking register writes or completing sends. */
#define ENSO_ERR_STALLED (-17)
/* The device is gone (stopped, or its process exited). */
#define ENSO_ERR_GONE (-18)
/* A bug in the library; close the device (it refuses further calls). */
#define ENSO_ERR_INTERNAL (-19)
/* The NIC's answers to configuration calls (bind, unbind, fallback,
 * timestamping, rate limits), which wait for the NIC's answer: */
/* refused: an argument out of range, or a pipe not enabled; */
#define ENSO_ERR_REFUSED (-40)
/* the flow table has no room for the flow (the rule is not installed); */
#define ENSO_ERR_TABLE_FULL (-41)
/* the application holds as many rules as the NIC allows one (2048); */
#define ENSO_ERR_QUOTA (-42)
/* the flow's rule belongs to another application; */
#define ENSO_ERR_NOT_OWNER (-43)
/* no rule is bound for the flow (unbind). */
#define ENSO_ERR_NOT_BOUND (-44)

/* Timestamp formats (enso_set_timestamping_as, enso_rtt_ns). */
#define ENSO_TS_NATIVE 0
#define ENSO_TS_ENSO 1
/* Ensō's default timestamp offset (its kDefaultRttOffset). */
#define ENSO_DEFAULT_RTT_OFFSET 18

/* An attachment to a device (opaque). */
typedef struct EnsoDevice enso_device_t;
/* Ensō's socket calls over one device handle (enso_sockets_open()). */
typedef struct EnsoSockets enso_sockets_t;

/* Settings of a device handle; enso_device_options_default() fills in the
 * defaults. */
typedef struct enso_device_options {
    uint32_t pipes;        /* RX and RX/TX pipes (default 16, at most 65535) */
    uint32_t tx_pipes;     /* TX pipes (default 1, at most 65535) */
    uint64_t tx_pipe_size; /* bytes per TX pipe: a power of two >= 4096 */
    uint32_t tx_credits;   /* TX notifications in flight at most (>= 1) */
    int32_t prefetch;      /* -1: the device's mode, 0: off, 1: on */
} enso_device_options_t;

/* Received bytes of one pipe: `len` bytes at `data`, frames back to back
 * on 64 B boundaries. `next` is enso_batch_next()'s cursor. */
typedef struct enso_batch {
    uint8_t *data;
    size_t len;
    size_t next;
} enso_batch_t;

/* A flow rule, in host byte order (10.1.0.1 is 0x0a010001); protocol 6
 * (TCP) or 17 (UDP); zero fields are wildcards. */
typedef struct enso_flow_rule {
    uint32_t src_ip;
    uint32_t dst_ip;
    uint16_t src_port;
    uint16_t dst_port;
    uint8_t protocol;
} enso_flow_rule_t;

/* The library's counters of one device handle. */
typedef struct enso_device_stats {
    uint64_t notifications;
    uint64_t notification_polls;
    uint64_t head_writes;
    uint64_t prefetches;
    uint64_t tx_notifications;
    uint64_t completions;
    uint64_t mmio_writes;
    uint64_t bogus_notifications;
} enso_device_stats_t;

/* The NIC's counters of a port: frames and bytes each way, the port's
 * drops by cause, and the drops of the handle's pipes summed. */
typedef struct enso_port_stats {
    uint64_t rx_frames;
    uint64_t rx_bytes;
    uint64_t tx_frames;
    uint64_t tx_bytes;
    uint64_t drop_no_match;
    uint64_t drop_malformed;
    uint64_t drop_oversize;
    uint64_t drop_wire_fifo_full;
    uint64_t drop_wire;
    uint64_t tx_discarded;
    uint64_t pipe_full;
    uint64_t notif_ring_full;
    uint64_t not_udp;
} enso_port_stats_t;

/* ---- Errors and options ---- */

/* A constant string naming `code` (never NULL). */
const char *enso_strerror(int code);
/* The message of this thread's last failed call ("" if none); valid until
 * this thread's next failing call. */
const char *enso_last_error(void);
int enso_device_options_default(enso_device_options_t *opts);

/* ---- Devices ---- */

/* Attaches to the standalone device `name` in directory `dir` (NULL for
 * /dev/shm) with `opts` (NULL for the defaults); stores the handle in *out. */
int enso_device_open(const char *name, const char *dir, const enso_device_options_t *opts,
                     enso_device_t **out);
/* Detaches and frees the handle (NULL does nothing). Sends not completed
 * may be discarded: wait for enso_tx_in_flight() == 0 first. */
int enso_device_close(enso_device_t *dev);
/* The number of ports of the device. */
int enso_device_port_count(enso_device_t *dev);
/* 0 while the device is there, ENSO_ERR_GONE once it has stopped. */
int enso_device_check_alive(enso_device_t *dev);
int enso_device_stats(enso_device_t *dev, enso_device_stats_t *stats);
/* The NIC's counters of `port` (a standalone device's latest snapshot, at
 * most 200 ms old; ENSO_ERR_IO before its first). Not for the datapath. */
int enso_port_stats(enso_device_t *dev, uint32_t port, enso_port_stats_t *stats);
/* Automatic notification prefetching in enso_next_pipe_with_data(). */
int enso_set_prefetch(enso_device_t *dev, int on);

/* ---- Pipes and flow rules ---- */

/* RX pipe receiving from `port`; `fallback` non-zero: it also gets the
 * port's traffic that no flow rule matches. Returns the pipe handle. Past
 * the `pipes` option's, the handle asks the device for more pipe ids. */
int enso_rx_pipe_alloc(enso_device_t *dev, uint32_t port, int fallback);
/* As enso_rx_pipe_alloc(), for an RX/TX pipe (enso_send_and_free()). */
int enso_rxtx_pipe_alloc(enso_device_t *dev, uint32_t port, int fallback);
/* A TX pipe of tx_pipe_size bytes (past the `tx_pipes` option's while the
 * handle's memory has room). Returns the pipe handle. */
int enso_tx_pipe_alloc(enso_device_t *dev);
/* Frees an RX, RX/TX or stream pipe: waits (bounded) for its sends in
 * flight and disables it at the NIC, which drops what arrives for it and
 * forgets its rules. What it held is dropped; the handle is refused until
 * an allocation gives it again. */
int enso_rx_pipe_free(enso_device_t *dev, int pipe);
/* Frees a TX pipe once what was sent from it is sent; the handle is
 * refused until an allocation gives it again. */
int enso_tx_pipe_free(enso_device_t *dev, int pipe);
/* Steers traffic matching `rule` to an RX or RX/TX pipe. Returns the NIC's
 * answer: 0, or ENSO_ERR_QUOTA (this application already holds 2048
 * rules), ENSO_ERR_TABLE_FULL, ENSO_ERR_NOT_OWNER (another application's
 * flow); a refused bind leaves nothing behind. */
int enso_bind(enso_device_t *dev, int pipe, const enso_flow_rule_t *rule);
/* Removes a rule of this application's: 0, ENSO_ERR_NOT_BOUND or
 * ENSO_ERR_NOT_OWNER. */
int enso_unbind(enso_device_t *dev, int pipe, const enso_flow_rule_t *rule);
/* Fallback pipes of `pipe`'s port chosen by round robin (rr != 0) or by
 * flow hash (rr == 0, the default); the policy is the port's. */
int enso_set_fallback_round_robin(enso_device_t *dev, int pipe, int rr);

/* ---- Receiving ---- */

/* A pipe with received data (its handle), or ENSO_ERR_AGAIN. */
int enso_next_pipe_with_data(enso_device_t *dev);
/* Everything the pipe holds and has not handed out (len may be 0). The
 * bytes are consumed, stay valid until freed or sent, and may be changed
 * in place. */
int enso_recv(enso_device_t *dev, int pipe, enso_batch_t *batch);
/* As enso_recv() without consuming; enso_confirm() consumes part. */
int enso_peek(enso_device_t *dev, int pipe, enso_batch_t *batch);
int enso_confirm(enso_device_t *dev, int pipe, size_t bytes);
/* As enso_recv(), bounded: at most max_pkts whole frames in at most
 * max_bytes bytes of the pipe (batch->len says how many); the rest stays
 * for the next receive. A frame's offset is its address from
 * enso_batch_next() minus batch->data (behind a marker flit too). */
int enso_recv_max(enso_device_t *dev, int pipe, size_t max_bytes, size_t max_pkts,
                  enso_batch_t *batch);
/* Gives the last `bytes` consumed back: the next receive returns them. */
int enso_unconsume(enso_device_t *dev, int pipe, size_t bytes);
/* Hands the first `bytes` consumed (a multiple of 64) back to the NIC. */
int enso_free(enso_device_t *dev, int pipe, size_t bytes);
int enso_free_all(enso_device_t *dev, int pipe);
/* Asks the NIC for a notification with the pipe's latest tail now. */
int enso_prefetch(enso_device_t *dev, int pipe);
/* The next frame of `batch`: 1 with *frame and *len set, 0 at the end,
 * ENSO_ERR_MALFORMED (ending the iteration) at bytes that are not a frame.
 * Frames are delimited as the Rust library's batches are: from their own
 * headers (IPv4, IPv6, ARP, 802.3) or behind a marker flit. */
int enso_batch_next(enso_batch_t *batch, uint8_t **frame, size_t *len);

/* ---- Sending ---- */

/* Sends the first `bytes` received and not yet sent of an RX/TX pipe, in
 * place, on `port`; they are freed once the NIC has sent them. */
int enso_send_and_free(enso_device_t *dev, int pipe, size_t bytes, uint32_t port);
/* Skips `bytes` received and not yet sent of an RX/TX pipe (freed in
 * order, after the sends before them). */
int enso_discard(enso_device_t *dev, int pipe, size_t bytes);
/* Reserves `len` bytes at the end of a TX pipe (waiting, bounded, for
 * room); *buf is valid until the next enso_send() of the pipe. */
int enso_tx_buf(enso_device_t *dev, int pipe, size_t len, uint8_t **buf);
/* Sends the first `len` reserved bytes on `port`. */
int enso_send(enso_device_t *dev, int pipe, size_t len, uint32_t port);
int enso_tx_space(enso_device_t *dev, int pipe, size_t *space);
/* Reclaims completed sends; returns how many completed. */
int enso_reap_completions(enso_device_t *dev);
/* Sends not yet completed by the NIC. */
int enso_tx_in_flight(enso_device_t *dev);
/* Blocks until a pipe or queue of `dev` has data or a send completes, or
 * `timeout_us` microseconds pass: 1 when there is something to take, 0
 * when not, a negative ENSO_ERR_* on error. The NIC wakes the caller; a
 * loop calls it between empty polls instead of spinning. */
int enso_wait(enso_device_t *dev, uint64_t timeout_us);
/* Writes a frame into `out` as a TX pipe needs it (behind a marker flit if
 * no header states its length); returns the bytes used (a multiple of
 * 64), or ENSO_ERR_MALFORMED (nothing written). */
int enso_write_frame(uint8_t *out, size_t out_len, const uint8_t *frame, size_t frame_len);

/* ---- Per-port settings ----
 * Each application's own: they apply to the frames this application sends
 * on the port and to the frames the port writes into this application's
 * pipes, never to another application's, and end when it detaches. */

/* Timestamping: offset 0..60 stamps sent frames with their send time and
 * received ones with the round-trip time (ns, 32 bits) at that byte;
 * a negative offset turns it off. */
int enso_set_timestamping(enso_device_t *dev, uint32_t port, int offset);
/* As enso_set_timestamping(), in format ENSO_TS_ENSO (the real NIC's:
 * big-endian 5 ns cycles, as Ensō's get_pkt_rtt reads) or ENSO_TS_NATIVE
 * (little-endian nanoseconds). */
int enso_set_timestamping_as(enso_device_t *dev, uint32_t port, int offset, int format);
/* The round-trip time (ns) a port wrote into a received frame at `offset`
 * in `format`, into *rtt_ns; ENSO_ERR_INVALID if the frame is too short. */
int enso_rtt_ns(const uint8_t *frame, size_t len, size_t offset, int format, uint64_t *rtt_ns);
/* What this application sends on the port: bursts of `num` flits every
 * `den` cycles of 200 MHz; 0/0 removes the limit. */
int enso_set_rate_limit(enso_device_t *dev, uint32_t port, uint32_t num, uint32_t den);

/* More of the device. */
/* The handle of an RX/TX pipe with data, in notification order (RX-only
 * pipes are passed over and stay ready), or ENSO_ERR_AGAIN. */
int enso_next_rxtx_pipe_with_data(enso_device_t *dev);
/* The MAC address of `port` into mac[0..6]. */
int enso_port_mac(enso_device_t *dev, uint32_t port, uint8_t *mac);
/* A stream pipe on `port`: UDP payloads back to back, byte by byte
 * (enso_recv() gives the bytes, enso_free() takes any count). */
int enso_stream_pipe_alloc(enso_device_t *dev, uint32_t port, int fallback);

/* Ensō's socket calls. A socket is an RX/TX pipe on port 0; it receives
 * raw frames, each on a 64 B boundary. */
/* Attaches to device `name` in `dir` (NULL: /dev/shm), room for 64 sockets. */
int enso_sockets_open(const char *name, const char *dir, enso_sockets_t **out);
int enso_sockets_close(enso_sockets_t *s);
/* socket(): returns the socket (>= 0). */
int enso_socket(enso_sockets_t *s, int fallback);
/* bind(): UDP to ip:port (host byte order; 0 is a wildcard) goes to sock. */
int enso_socket_bind(enso_sockets_t *s, int sock, uint32_t ip, uint16_t port);
/* recv(): copies whole frames into buf and frees them; returns bytes. */
int enso_socket_recv(enso_sockets_t *s, int sock, uint8_t *buf, size_t len);
/* recv_zc(): the frames in place; free or send them later. */
int enso_socket_recv_zc(enso_sockets_t *s, int sock, enso_batch_t *batch);
/* recv_select(): the next socket with frames (returned) and its frames,
 * or ENSO_ERR_AGAIN. */
int enso_recv_select(enso_sockets_t *s, enso_batch_t *batch);
/* free_enso_pipe(): hands back the first len bytes taken from sock. */
int enso_socket_free(enso_sockets_t *s, int sock, size_t len);
/* send() of received bytes, in place on port 0; freed once sent. */
int enso_socket_send_zc(enso_sockets_t *s, int sock, size_t len);
/* send() of frames elsewhere (copied into the handle's TX pipe). */
int enso_socket_send(enso_sockets_t *s, int sock, const uint8_t *frames, size_t len);
/* get_completions(): sends completed since the last call. */
int enso_get_completions(enso_sockets_t *s);
/* shutdown(): unbinds, hands back what the socket holds, frees its pipe. */
int enso_socket_shutdown(enso_sockets_t *s, int sock);

#ifdef __cplusplus
}
#endif

#endif /* ENSO_H */
