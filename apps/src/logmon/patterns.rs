//! The built-in patterns: what fail2ban-style filters look for in the logs
//! of sshd, nginx, postfix and apache. Written for this crate; each one
//! names the service and the event it detects.
//!
//! Patterns are matched against one line at a time (without its newline),
//! byte-oriented and ASCII-only (`\d`, `\s`, `\S` are ASCII classes), so a
//! line that is not UTF-8 is still scanned.

/// One named regular expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// Short identifier, `service-event`.
    pub name: &'static str,
    /// The regular expression.
    pub regex: &'static str,
}

/// An IPv4 address in a log line.
macro_rules! ip {
    () => {
        r"(?:\d{1,3}\.){3}\d{1,3}"
    };
}

/// The built-in patterns, in a fixed order (counts are reported in it).
pub const BUILTIN: &[Pattern] = &[
    Pattern {
        name: "sshd-failed-password",
        regex: concat!(
            r"sshd\[\d+\]: Failed (?:password|publickey|keyboard-interactive/pam) for (?:invalid user )?\S+ from ",
            ip!(),
            r" port \d+"
        ),
    },
    Pattern {
        name: "sshd-invalid-user",
        regex: concat!(r"sshd\[\d+\]: Invalid user \S* from ", ip!()),
    },
    Pattern {
        name: "sshd-max-auth-attempts",
        regex: concat!(
            r"sshd\[\d+\]: (?:error: )?maximum authentication attempts exceeded for (?:invalid user )?\S+ from ",
            ip!()
        ),
    },
    Pattern {
        name: "sshd-no-identification",
        regex: concat!(
            r"sshd\[\d+\]: Did not receive identification string from ",
            ip!()
        ),
    },
    Pattern {
        name: "nginx-http-error",
        regex: concat!(
            r"^",
            ip!(),
            r#" - \S+ \[[^\]]+\] "[A-Z]+ [^"]* HTTP/\d\.\d" [45]\d\d \d+"#
        ),
    },
    Pattern {
        name: "nginx-auth-failure",
        regex: concat!(
            r#"\[error\] \d+#\d+: \*\d+ (?:user "[^"]*":? (?:password mismatch|was not found in "[^"]*")|no user/password was provided for basic authentication), client: "#,
            ip!()
        ),
    },
    Pattern {
        name: "nginx-limit-req",
        regex: concat!(
            r#"\[error\] \d+#\d+: \*\d+ limiting requests, excess: [\d.]+ by zone "[^"]+", client: "#,
            ip!()
        ),
    },
    Pattern {
        name: "postfix-reject",
        regex: concat!(
            r"postfix/(?:submission/)?smtpd\[\d+\]: NOQUEUE: reject: RCPT from \S+\[",
            ip!(),
            r"\]: [45]\d\d "
        ),
    },
    Pattern {
        name: "postfix-sasl-failure",
        regex: concat!(
            r"postfix/(?:submission/)?smtpd\[\d+\]: warning: \S+\[",
            ip!(),
            r"\]: SASL (?:LOGIN|PLAIN|CRAM-MD5) authentication failed"
        ),
    },
    Pattern {
        name: "apache-auth-failure",
        regex: concat!(
            r"\[(?:auth_basic|authn_file|authz_core):error\] \[pid \d+(?::tid \d+)?\] \[client ",
            ip!(),
            r"(?::\d+)?\] AH0(?:1617|1618|1630)"
        ),
    },
    Pattern {
        name: "apache-script-probe",
        regex: concat!(
            r"\[(?:cgi|core):error\] \[pid \d+(?::tid \d+)?\] \[client ",
            ip!(),
            r"(?::\d+)?\] (?:AH02811: script not found or unable to stat|AH00128: File does not exist): \S+\.(?:php|asp|aspx|exe|pl|cgi)"
        ),
    },
];

/// The services the built-in patterns watch: the part of a pattern's name
/// before its first `-`.
pub const SERVICES: &[&str] = &["sshd", "nginx", "postfix", "apache"];

/// A service name that is not in [`SERVICES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown service {0:?} (known: sshd, nginx, postfix, apache)")]
pub struct UnknownService(pub String);

/// The built-in patterns of `services` (all of them for an empty list), in
/// [`BUILTIN`] order.
pub fn builtin_for<S: AsRef<str>>(services: &[S]) -> Result<Vec<Pattern>, UnknownService> {
    for s in services {
        if !SERVICES.contains(&s.as_ref()) {
            return Err(UnknownService(s.as_ref().to_string()));
        }
    }
    Ok(BUILTIN
        .iter()
        .copied()
        .filter(|p| {
            services.is_empty()
                || services
                    .iter()
                    .any(|s| p.name.split('-').next() == Some(s.as_ref()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::bytes::RegexBuilder;

    /// One line that each pattern must catch, and near misses that none may.
    #[test]
    fn each_pattern_catches_its_event_and_nothing_else() {
        let hits: [(&str, &str); 11] = [
            ("sshd-failed-password", "Mar  3 14:07:21 gw sshd[2231]: Failed password for invalid user admin from 203.0.113.9 port 52144 ssh2"),
            ("sshd-invalid-user", "Mar  3 14:07:20 gw sshd[2231]: Invalid user admin from 203.0.113.9 port 52144"),
            ("sshd-max-auth-attempts", "Mar  3 14:07:29 gw sshd[2231]: error: maximum authentication attempts exceeded for root from 198.51.100.3 port 4022 ssh2 [preauth]"),
            ("sshd-no-identification", "Mar  3 14:08:01 gw sshd[2290]: Did not receive identification string from 192.0.2.77 port 61000"),
            ("nginx-http-error", r#"198.51.100.23 - - [03/Mar/2024:14:07:21 +0000] "GET /wp-login.php HTTP/1.1" 404 153 "-" "curl/8.0""#),
            ("nginx-auth-failure", r#"2024/03/03 14:07:21 [error] 811#811: *4411 user "bob": password mismatch, client: 192.0.2.5, server: example.org, request: "GET /admin HTTP/1.1""#),
            ("nginx-limit-req", r#"2024/03/03 14:07:21 [error] 811#811: *4412 limiting requests, excess: 10.520 by zone "api", client: 192.0.2.6, server: example.org"#),
            ("postfix-reject", "Mar  3 14:07:21 mx postfix/smtpd[9100]: NOQUEUE: reject: RCPT from unknown[203.0.113.50]: 554 5.7.1 <spam@example.com>: Relay access denied; from=<a@b> to=<c@d> proto=ESMTP helo=<x>"),
            ("postfix-sasl-failure", "Mar  3 14:07:21 mx postfix/submission/smtpd[9101]: warning: unknown[203.0.113.51]: SASL LOGIN authentication failed: UGFzc3dvcmQ6"),
            ("apache-auth-failure", "[Sun Mar 03 14:07:21.123456 2024] [auth_basic:error] [pid 3321:tid 140001] [client 192.0.2.44:50110] AH01618: user carol not found: /private"),
            ("apache-script-probe", "[Sun Mar 03 14:07:21.123456 2024] [core:error] [pid 3321] [client 192.0.2.45:50111] AH00128: File does not exist: /var/www/html/shell.php"),
        ];
        let misses = [
            "Mar  3 14:07:21 gw sshd[2231]: Accepted publickey for deploy from 10.1.2.3 port 50022 ssh2: ED25519 SHA256:abc",
            "Mar  3 14:07:21 gw sshd[2231]: Failed to release session: Interrupted system call",
            r#"198.51.100.23 - - [03/Mar/2024:14:07:21 +0000] "GET /errors/404.html HTTP/1.1" 200 512 "-" "Mozilla/5.0""#,
            "Mar  3 14:07:21 mx postfix/smtp[9102]: 4F2A1: to=<x@example.org>, relay=mx.example.org[192.0.2.9]:25, status=sent (250 ok)",
            "[Sun Mar 03 14:07:21.123456 2024] [mpm_event:notice] [pid 1:tid 1] AH00489: Apache/2.4.58 configured -- resuming normal operations",
            "",
        ];
        let compile = |p: &Pattern| RegexBuilder::new(p.regex).unicode(false).build().unwrap();
        let all: Vec<_> = BUILTIN.iter().map(compile).collect();
        assert_eq!(hits.len(), BUILTIN.len());
        for (name, line) in hits {
            let matched: Vec<&str> = BUILTIN
                .iter()
                .zip(&all)
                .filter(|(_, re)| re.is_match(line.as_bytes()))
                .map(|(p, _)| p.name)
                .collect();
            assert_eq!(matched, [name], "{line}");
        }
        for line in misses {
            assert!(all.iter().all(|re| !re.is_match(line.as_bytes())), "{line}");
        }
    }

    #[test]
    fn services_select_their_patterns() {
        assert_eq!(builtin_for::<&str>(&[]).unwrap(), BUILTIN);
        let mut total = 0;
        for s in SERVICES {
            let v = builtin_for(&[s]).unwrap();
            assert!(!v.is_empty(), "{s}");
            assert!(v.iter().all(|p| p.name.starts_with(&format!("{s}-"))));
            total += v.len();
        }
        assert_eq!(total, BUILTIN.len(), "every pattern belongs to one service");
        assert_eq!(builtin_for(&["sshd", "apache"]).unwrap().len(), 6);
        assert_eq!(
            builtin_for(&["ftp"]).unwrap_err(),
            UnknownService("ftp".into())
        );
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = BUILTIN.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BUILTIN.len());
    }
}
