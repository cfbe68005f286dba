//! The control socket's server: one thread accepts connections, and one
//! thread per connection attaches its client and holds the attachment.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use enso_abi::control::ExtendRequest;

use super::{
    AttachInfo, Cmd, ControlCells, ControlLimits, ControlRequest, ControlResponse, NicControl,
    NicError, CMD_TIMEOUT,
};

impl NicControl {
    /// Grants attached application `req.app_id` more pipe ids
    /// ([`crate::Engine::extend`]); its attachment as it now stands.
    pub fn extend(&self, req: ExtendRequest) -> Result<AttachInfo, NicError> {
        self.extend_within(req, CMD_TIMEOUT)
    }

    /// As [`NicControl::extend`], waiting at most `wait` for the engine.
    /// Pipe ids the engine grants after that stay the application's
    /// (reserved, disabled) until it detaches.
    fn extend_within(&self, req: ExtendRequest, wait: Duration) -> Result<AttachInfo, NicError> {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Cmd::With(Box::new(move |e| {
                let _ = tx.send(e.extend(&req));
            })))
            .map_err(|_| NicError::DeviceStopped)?;
        match rx.recv_timeout(wait) {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(NicError::AttachTimeout(wait.as_millis())),
        }
    }
}

pub(super) fn serve(
    l: UnixListener,
    ctl: NicControl,
    stop: Arc<AtomicBool>,
    limits: ControlLimits,
) {
    let cells = ctl.cells.clone();
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                // Only this thread adds to `open`; a client's guard takes
                // away. A count, nothing is read because of it: Relaxed.
                if cells.open.load(Ordering::Relaxed) >= limits.max_connections {
                    ControlCells::bump(&cells.refused_busy);
                    refuse(
                        &s,
                        &format!(
                            "device busy: {} control connections open, the most it serves",
                            limits.max_connections
                        ),
                    );
                    continue;
                }
                cells.open.fetch_add(1, Ordering::Relaxed);
                let guard = OpenConnection(cells.clone());
                let (ctl, limits) = (ctl.clone(), limits.clone());
                let spawned = std::thread::Builder::new()
                    .name("nic-emu-client".into())
                    .stack_size(CLIENT_STACK)
                    .spawn(move || {
                        let _guard = guard;
                        ControlCells::bump(&ctl.cells.connections);
                        client(&s, &ctl, &limits);
                    });
                if spawned.is_err() {
                    // The closure (and its guard and socket) was dropped.
                    ControlCells::bump(&cells.refused_busy);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => wait_readable(&l, ACCEPT_POLL),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// How often the control thread looks at the stop flag while no one
/// connects: the longest a stop waits for it.
const ACCEPT_POLL: Duration = Duration::from_millis(50);

/// Sleeps until `l` has a connection to accept or `timeout` passes
/// (an idle device's control thread sleeps instead of polling).
fn wait_readable(l: &UnixListener, timeout: Duration) {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call; the listener
    // outlives it. Errors (EINTR) only end the wait early.
    unsafe {
        libc::poll(&mut fds, 1, timeout.as_millis() as libc::c_int);
    }
}

/// Stack of a control connection's thread (it parses one short line and
/// waits).
const CLIENT_STACK: usize = 256 << 10;

/// One open control connection; dropping it (the thread ended, or never
/// started) frees its place.
struct OpenConnection(Arc<ControlCells>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers a connection that is not served with one error line, without
/// waiting: a new connection's send buffer is empty.
fn refuse(s: &UnixStream, why: &str) {
    let line = answer_line(&ControlResponse::Error(why.to_string()));
    // SAFETY: `s` is an open socket and `line` a live buffer of the length
    // given; MSG_DONTWAIT keeps it from blocking, MSG_NOSIGNAL from raising
    // SIGPIPE if the client has gone.
    let _ = unsafe {
        libc::send(
            s.as_raw_fd(),
            line.as_ptr().cast(),
            line.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

fn answer_line(resp: &ControlResponse) -> Vec<u8> {
    let mut out = serde_json::to_vec(resp).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Sends `line` whole, within the socket's send timeout; false if the
/// client has gone or did not take it in time. Never raises SIGPIPE (an
/// application may embed the device and not ignore it).
fn send_line(s: &UnixStream, mut line: &[u8]) -> bool {
    while !line.is_empty() {
        // SAFETY: as in `refuse`; the send blocks at most for the socket's
        // send timeout.
        let n = unsafe {
            libc::send(
                s.as_raw_fd(),
                line.as_ptr().cast(),
                line.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        line = &line[n as usize..];
    }
    true
}

/// Longest control request accepted (bytes, newline included).
const MAX_REQUEST: usize = 64 << 10;

/// What reading a request came to.
enum Request {
    /// A whole line, its newline included.
    Line(Vec<u8>),
    /// The client closed the connection (or it failed).
    Closed,
    /// More than [`MAX_REQUEST`] bytes without a newline.
    TooLong,
    /// No whole request within the request timeout.
    TimedOut,
}

/// Reads the next request line from `s`. Bytes read past it stay in
/// `pending` for the next call. `idle_ok`: the client holds an attachment,
/// so it may send nothing for as long as it likes; the timeout starts at
/// its first byte. Otherwise it starts now.
fn read_request(
    s: &UnixStream,
    pending: &mut Vec<u8>,
    idle_ok: bool,
    timeout: Duration,
) -> Request {
    let mut deadline = (!idle_ok || !pending.is_empty()).then(|| Instant::now() + timeout);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = pending.iter().position(|&b| b == b'\n') {
            if i >= MAX_REQUEST {
                return Request::TooLong;
            }
            let rest = pending.split_off(i + 1);
            return Request::Line(std::mem::replace(pending, rest));
        }
        if pending.len() >= MAX_REQUEST {
            return Request::TooLong;
        }
        let wait = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Request::TimedOut,
            },
        };
        if s.set_read_timeout(wait).is_err() {
            return Request::Closed;
        }
        match (&mut &*s).read(&mut chunk) {
            Ok(0) => return Request::Closed,
            Ok(n) => {
                pending.extend_from_slice(&chunk[..n]);
                deadline.get_or_insert_with(|| Instant::now() + timeout);
            }
            // The receive timeout ran out (the loop checks the deadline).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Request::Closed,
        }
    }
}

/// One client connection: attach, then hold the attachment until the client
/// closes the connection (or its process exits), then detach. A client
/// that does not complete a request in time is told so and cut off; an
/// attachment whose answer it does not take is undone.
fn client(s: &UnixStream, ctl: &NicControl, limits: &ControlLimits) {
    let _ = s.set_nonblocking(false);
    if s.set_write_timeout(Some(limits.answer_timeout)).is_err() {
        return;
    }
    let mut pending = Vec::new();
    let mut attached = Vec::new();
    loop {
        // A request is one short JSON line; a client that sends more without
        // a newline gets an error and is cut off, rather than growing this
        // buffer without bound. The line is read as bytes: one that is not
        // UTF-8 is a bad request like any other, not a broken connection.
        let line = match read_request(
            s,
            &mut pending,
            !attached.is_empty(),
            limits.request_timeout,
        ) {
            Request::Line(l) => l,
            Request::Closed => break,
            Request::TooLong => {
                let why = format!("request longer than {MAX_REQUEST} bytes");
                send_line(s, &answer_line(&ControlResponse::Error(why)));
                break;
            }
            Request::TimedOut => {
                ControlCells::bump(&ctl.cells.request_timeouts);
                let why = format!(
                    "no complete request within {} ms; closing the connection",
                    limits.request_timeout.as_millis()
                );
                send_line(s, &answer_line(&ControlResponse::Error(why)));
                break;
            }
        };
        let request = std::str::from_utf8(&line)
            .map_err(|e| format!("bad request: not UTF-8: {e}"))
            .and_then(|l| {
                serde_json::from_str::<ControlRequest>(l.trim())
                    .map_err(|e| format!("bad request: {e}"))
            });
        let extending = matches!(request, Ok(ControlRequest::Extend(_)));
        let resp = match request {
            Ok(ControlRequest::Attach(req)) => {
                match ctl.attach_within(req, limits.answer_timeout) {
                    Ok(info) => {
                        attached.push(info.app_id);
                        ControlResponse::Attached(info)
                    }
                    Err(e) => ControlResponse::Error(e.to_string()),
                }
            }
            // Only for an application this connection attached: closing
            // it detaches that one.
            Ok(ControlRequest::Extend(req)) if attached.contains(&req.app_id) => {
                match ctl.extend_within(req, limits.answer_timeout) {
                    Ok(info) => ControlResponse::Attached(info),
                    Err(e) => ControlResponse::Error(e.to_string()),
                }
            }
            Ok(ControlRequest::Extend(req)) => ControlResponse::Error(format!(
                "application {} was not attached through this connection",
                req.app_id
            )),
            Err(e) => ControlResponse::Error(e),
        };
        if !send_line(s, &answer_line(&resp)) {
            // Nobody knows of the attachment it announced: undone below.
            if matches!(resp, ControlResponse::Attached(_)) && !extending {
                ControlCells::bump(&ctl.cells.undelivered);
            }
            break;
        }
    }
    for id in attached {
        ctl.detach(id);
    }
}
