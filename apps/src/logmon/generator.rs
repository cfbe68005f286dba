//! A deterministic generator of mixed server logs.
//!
//! Lines imitate syslog (sshd, postfix, cron, kernel), nginx access and
//! error logs and apache error logs. A configurable share of lines is drawn
//! from events the built-in patterns detect; the rest are ordinary traffic,
//! including near misses (a 200 response for `/errors/404.html`, sshd's
//! "Failed to release session") that a sloppy pattern would catch. Field
//! values (addresses, users, pids, times, paths) vary, so lines differ in
//! length and content. The same seed always gives the same log.

use std::io::Write;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const USERS: &[&str] = &[
    "root", "admin", "oracle", "deploy", "ubuntu", "test", "git", "postgres", "alice", "bob",
];
const PATHS: &[&str] = &[
    "/",
    "/index.html",
    "/api/v1/items",
    "/login",
    "/static/app.js",
    "/images/logo.png",
    "/search?q=enso",
];
const PROBES: &[&str] = &[
    "/wp-login.php",
    "/phpmyadmin/index.php",
    "/.env",
    "/cgi-bin/test.cgi",
    "/admin.aspx",
    "/shell.php",
];
/// Probes for executable scripts (what apache-script-probe looks for).
const SCRIPT_PROBES: &[&str] = &[
    "/wp-login.php",
    "/phpmyadmin/index.php",
    "/cgi-bin/test.cgi",
    "/admin.aspx",
    "/shell.php",
];
const AGENTS: &[&str] = &[
    "Mozilla/5.0 (X11; Linux x86_64)",
    "curl/8.5.0",
    "Go-http-client/1.1",
    "python-requests/2.31",
];
const MONTHS: &[&str] = &[
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Share of a generated log's lines that are detectable events unless
/// another is asked for.
pub const DEFAULT_EVENT_SHARE: f64 = 0.3;

/// Generates log lines.
#[derive(Debug, Clone)]
pub struct LogGenerator {
    rng: Xoshiro256PlusPlus,
    match_share: f64,
    seconds: u64,
}

impl LogGenerator {
    /// A generator in which 30% of lines are events the built-in patterns
    /// detect.
    pub fn new(seed: u64) -> Self {
        Self::with_match_share(seed, DEFAULT_EVENT_SHARE)
    }

    /// A generator in which `match_share` (clamped to 0..=1) of the lines
    /// are detectable events.
    pub fn with_match_share(seed: u64, match_share: f64) -> Self {
        LogGenerator {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            match_share: match_share.clamp(0.0, 1.0),
            seconds: 5_000_000,
        }
    }

    /// Whole lines totalling at least `bytes` bytes.
    pub fn generate(&mut self, bytes: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes + 512);
        while out.len() < bytes {
            self.write_line(&mut out);
        }
        out
    }

    /// Appends one line, newline included.
    pub fn write_line(&mut self, out: &mut Vec<u8>) {
        self.seconds += self.rng.gen_range(0..3);
        let detectable = self.rng.gen_bool(self.match_share);
        let kind = self.rng.gen_range(0..if detectable { 11 } else { 10 });
        // Writing into a Vec cannot fail.
        let _ = if detectable {
            self.event(out, kind)
        } else {
            self.ordinary(out, kind)
        };
        out.push(b'\n');
    }

    fn ip(&mut self) -> String {
        let r = &mut self.rng;
        format!(
            "{}.{}.{}.{}",
            r.gen_range(1..224),
            r.gen::<u8>(),
            r.gen::<u8>(),
            r.gen_range(1..255)
        )
    }

    fn pick<'a>(&mut self, from: &'a [&'a str]) -> &'a str {
        from.choose(&mut self.rng).expect("non-empty list")
    }

    fn syslog_time(&self) -> String {
        let s = self.seconds;
        format!(
            "{} {:>2} {:02}:{:02}:{:02}",
            MONTHS[(s / 2_600_000 % 12) as usize],
            s / 86_400 % 28 + 1,
            s / 3600 % 24,
            s / 60 % 60,
            s % 60
        )
    }

    fn web_time(&self) -> String {
        let s = self.seconds;
        format!(
            "{:02}/{}/2024:{:02}:{:02}:{:02} +0000",
            s / 86_400 % 28 + 1,
            MONTHS[(s / 2_600_000 % 12) as usize],
            s / 3600 % 24,
            s / 60 % 60,
            s % 60
        )
    }

    fn apache_time(&self) -> String {
        let s = self.seconds;
        format!(
            "[Sun {} {:02} {:02}:{:02}:{:02}.{:06} 2024]",
            MONTHS[(s / 2_600_000 % 12) as usize],
            s / 86_400 % 28 + 1,
            s / 3600 % 24,
            s / 60 % 60,
            s % 60,
            s.wrapping_mul(7919) % 1_000_000
        )
    }

    /// A line one of the built-in patterns detects.
    fn event(&mut self, out: &mut Vec<u8>, kind: u32) -> std::io::Result<()> {
        let (t, ip, user) = (self.syslog_time(), self.ip(), self.pick(USERS));
        let pid = self.rng.gen_range(100..65_000);
        let port = self.rng.gen_range(1024..65_535);
        match kind {
            0 => {
                let method = self.pick(&["password", "publickey", "keyboard-interactive/pam"]);
                let invalid = if self.rng.gen_bool(0.4) { "invalid user " } else { "" };
                write!(out, "{t} gw sshd[{pid}]: Failed {method} for {invalid}{user} from {ip} port {port} ssh2")
            }
            1 => write!(out, "{t} gw sshd[{pid}]: Invalid user {user} from {ip} port {port}"),
            2 => write!(out, "{t} gw sshd[{pid}]: error: maximum authentication attempts exceeded for {user} from {ip} port {port} ssh2 [preauth]"),
            3 => write!(out, "{t} gw sshd[{pid}]: Did not receive identification string from {ip} port {port}"),
            4 => {
                let (wt, path, agent) = (self.web_time(), self.pick(PROBES), self.pick(AGENTS));
                let status = *[400u16, 401, 403, 404, 404, 404, 500, 502, 503].choose(&mut self.rng).expect("non-empty");
                let size = self.rng.gen_range(0..5000);
                write!(out, r#"{ip} - - [{wt}] "GET {path} HTTP/1.1" {status} {size} "-" "{agent}""#)
            }
            5 => {
                let what = match self.rng.gen_range(0..3) {
                    0 => format!(r#"user "{user}": password mismatch"#),
                    1 => format!(r#"user "{user}" was not found in "/etc/nginx/.htpasswd""#),
                    _ => "no user/password was provided for basic authentication".to_string(),
                };
                let conn = self.rng.gen_range(1..1_000_000);
                write!(out, r#"2024/03/03 12:00:00 [error] {pid}#{pid}: *{conn} {what}, client: {ip}, server: example.org, request: "GET /admin HTTP/1.1""#)
            }
            6 => {
                let (conn, excess) = (self.rng.gen_range(1..1_000_000), self.rng.gen_range(0..100_000));
                write!(out, r#"2024/03/03 12:00:00 [error] {pid}#{pid}: *{conn} limiting requests, excess: {}.{:03} by zone "api", client: {ip}, server: example.org"#, excess / 1000, excess % 1000)
            }
            7 => write!(out, "{t} mx postfix/smtpd[{pid}]: NOQUEUE: reject: RCPT from unknown[{ip}]: 554 5.7.1 <{user}@example.net>: Relay access denied; from=<x@spam.test> to=<{user}@example.net> proto=ESMTP helo=<spam.test>"),
            8 => {
                let mech = self.pick(&["LOGIN", "PLAIN", "CRAM-MD5"]);
                write!(out, "{t} mx postfix/submission/smtpd[{pid}]: warning: unknown[{ip}]: SASL {mech} authentication failed: UGFzc3dvcmQ6")
            }
            9 => {
                let at = self.apache_time();
                let (module, code, what) = match self.rng.gen_range(0..3) {
                    0 => ("auth_basic", "AH01618", format!("user {user} not found: /private")),
                    1 => ("auth_basic", "AH01617", format!("user {user}: authentication failure for \"/private\": Password Mismatch")),
                    _ => ("authz_core", "AH01630", "client denied by server configuration: /srv/secret".to_string()),
                };
                write!(out, "{at} [{module}:error] [pid {pid}:tid {port}] [client {ip}:{port}] {code}: {what}")
            }
            _ => {
                let (at, path) = (self.apache_time(), self.pick(SCRIPT_PROBES));
                write!(out, "{at} [core:error] [pid {pid}] [client {ip}:{port}] AH00128: File does not exist: /var/www/html{path}")
            }
        }
    }

    /// A line none of the built-in patterns detects.
    fn ordinary(&mut self, out: &mut Vec<u8>, kind: u32) -> std::io::Result<()> {
        let (t, ip, user) = (self.syslog_time(), self.ip(), self.pick(USERS));
        let pid = self.rng.gen_range(100..65_000);
        let port = self.rng.gen_range(1024..65_535);
        match kind {
            0 => write!(out, "{t} gw sshd[{pid}]: Accepted publickey for {user} from {ip} port {port} ssh2: ED25519 SHA256:{:016x}", self.rng.gen::<u64>()),
            1 => write!(out, "{t} gw sshd[{pid}]: pam_unix(sshd:session): session opened for user {user}(uid=1000) by (uid=0)"),
            2 => write!(out, "{t} gw sshd[{pid}]: Failed to release session: Interrupted system call"),
            3 | 4 => {
                let (wt, agent) = (self.web_time(), self.pick(AGENTS));
                let path = if kind == 3 { self.pick(PATHS) } else { "/errors/404.html" };
                let status = *[200u16, 200, 200, 204, 301, 304].choose(&mut self.rng).expect("non-empty");
                let size = self.rng.gen_range(0..50_000);
                write!(out, r#"{ip} - - [{wt}] "GET {path} HTTP/1.1" {status} {size} "-" "{agent}""#)
            }
            5 => write!(out, "{t} mx postfix/smtp[{pid}]: {:05X}: to=<{user}@example.org>, relay=mx.example.org[{ip}]:25, delay=0.{}, status=sent (250 2.0.0 Ok)", self.rng.gen_range(0..0xFFFFF), self.rng.gen_range(1..99)),
            6 => write!(out, "{t} gw CRON[{pid}]: ({user}) CMD (/usr/local/bin/backup --incremental)"),
            7 => write!(out, "{t} gw kernel: [{}.{:06}] eth0: link up, 100 Gbps, full duplex", self.seconds, pid),
            8 => {
                let at = self.apache_time();
                write!(out, "{at} [mpm_event:notice] [pid {pid}:tid {port}] AH00489: Apache/2.4.58 (Unix) configured -- resuming normal operations")
            }
            _ => write!(out, "{t} gw systemd[1]: Started session-{pid}.scope - Session {pid} of User {user}."),
        }
    }
}

/// `bytes` (or a little more) of log from `seed`, ending with a newline.
pub fn generate_log(seed: u64, bytes: usize) -> Vec<u8> {
    LogGenerator::new(seed).generate(bytes)
}
