//! A task's webhook trigger: `POST /hooks/{task}` at the gateway, checked here. Two modes:
//!
//! - `token`: 32 random bytes (base64url), shown once; kept as their keyed hash under
//!   jobd's key and compared in constant time. The caller sends it as a bearer token.
//! - `hmac`: a 32-byte signing secret, shown once, kept sealed under jobd's key (bound to
//!   the task). The caller sends `X-Argos-Timestamp` (Unix seconds) and
//!   `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of `"{timestamp}.{raw body}"`;
//!   a timestamp more than 5 minutes off is refused, and a signature already taken within
//!   that window is a replay.
//!
//! Refusals say only "unauthorized", whichever part failed: a caller learns nothing about
//! which tasks exist. Pure but for the clock, which is an argument.

use argos_store::key::Key;
use base64::Engine as _;
use hmac::{Hmac, Mac as _};
use sha2::Sha256;

/// How far a signed delivery's timestamp may be from jobd's clock.
pub const WINDOW_MS: i64 = 5 * 60 * 1000;
/// The key's domains.
const TOKEN: &str = "task-webhook-token";
const SECRET: &str = "task-webhook-hmac";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Token,
    Hmac,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Token => "token",
            Mode::Hmac => "hmac",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "token" => Some(Mode::Token),
            "hmac" => Some(Mode::Hmac),
            _ => None,
        }
    }
}

/// A new secret: 32 random bytes, base64url without padding.
pub fn new_secret() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the kernel's random numbers");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// The secret as kept: a token's keyed hash; an HMAC secret sealed to its task.
pub fn stored(key: &Key, task_id: &str, mode: Mode, secret: &str) -> String {
    match mode {
        Mode::Token => key.tag(TOKEN, secret.as_bytes()),
        Mode::Hmac => key.seal(SECRET, task_id.as_bytes(), secret.as_bytes()),
    }
}

/// What a delivery presented.
#[derive(Debug, Default, Clone)]
pub struct Presented<'a> {
    pub token: &'a str,
    pub signature: &'a str,
    pub timestamp: &'a str,
    pub body: &'a [u8],
}

/// A delivery that passed: for a signed one, the signature to remember until it leaves
/// the window.
#[derive(Debug, Clone, PartialEq)]
pub enum Passed {
    Token,
    Signed {
        signature: String,
        expires_at_ms: i64,
    },
}

/// Checks a delivery to task `task_id` whose webhook is `mode` with `stored` secret.
pub fn check(
    key: &Key,
    task_id: &str,
    mode: Mode,
    stored: &str,
    p: &Presented<'_>,
    now_ms: i64,
) -> Option<Passed> {
    match mode {
        Mode::Token => (!p.token.is_empty() && key.verify(TOKEN, p.token.as_bytes(), stored))
            .then_some(Passed::Token),
        Mode::Hmac => {
            let secret = key.open(SECRET, task_id.as_bytes(), stored)?;
            let at_s: i64 = p.timestamp.trim().parse().ok()?;
            let at_ms = at_s.checked_mul(1000)?;
            if (now_ms - at_ms).abs() > WINDOW_MS {
                return None;
            }
            let hex = p.signature.trim().strip_prefix("sha256=")?;
            let want = hex::decode(hex).ok().filter(|w| w.len() == 32)?;
            mac(&secret, p.timestamp.trim(), p.body)
                .verify_slice(&want)
                .ok()?;
            Some(Passed::Signed {
                signature: hex.to_ascii_lowercase(),
                expires_at_ms: at_ms + WINDOW_MS,
            })
        }
    }
}

/// The HMAC-SHA256 of `"{timestamp}.{body}"` under `secret`: what a webhook's sender
/// signs, and what a follow-up's delivery is signed with.
fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(timestamp.as_bytes());
    m.update(b".");
    m.update(body);
    m
}

/// The signature in `X-Hub-Signature-256`: `sha256=` and the hex of [`mac`].
pub fn signature(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(mac(secret, timestamp, body).finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::from_bytes([7; 32])
    }

    #[test]
    fn a_token_passes_only_itself() {
        let k = key();
        let secret = new_secret();
        assert_eq!(secret.len(), 43);
        let kept = stored(&k, "t1", Mode::Token, &secret);
        assert!(!kept.contains(&secret));
        fn with(token: &str) -> Presented<'_> {
            Presented {
                token,
                ..Default::default()
            }
        }
        assert_eq!(
            check(&k, "t1", Mode::Token, &kept, &with(&secret), 0),
            Some(Passed::Token)
        );
        assert_eq!(check(&k, "t1", Mode::Token, &kept, &with("x"), 0), None);
        assert_eq!(check(&k, "t1", Mode::Token, &kept, &with(""), 0), None);
        let other = Key::from_bytes([8; 32]);
        assert_eq!(
            check(&other, "t1", Mode::Token, &kept, &with(&secret), 0),
            None
        );
    }

    #[test]
    fn a_signature_binds_its_timestamp_body_task_and_window() {
        let k = key();
        let secret = new_secret();
        let kept = stored(&k, "t1", Mode::Hmac, &secret);
        let now = 1_800_000_000_000;
        let ts = (now / 1000).to_string();
        let body = br#"{"ref":"main"}"#;
        let sig = signature(secret.as_bytes(), &ts, body);
        let p = |sig: &str, ts: &str, body: &'static [u8]| Presented {
            signature: sig.to_string().leak(),
            timestamp: ts.to_string().leak(),
            body,
            ..Default::default()
        };
        let ok = check(&k, "t1", Mode::Hmac, &kept, &p(&sig, &ts, body), now).unwrap();
        assert!(
            matches!(ok, Passed::Signed { expires_at_ms, .. } if expires_at_ms == now + WINDOW_MS)
        );
        // Another body, another timestamp with the same signature, another task (the
        // sealed secret does not open), a stale or future timestamp, a malformed header.
        assert!(check(&k, "t1", Mode::Hmac, &kept, &p(&sig, &ts, b"{}"), now).is_none());
        let later = (now / 1000 + 1).to_string();
        assert!(check(&k, "t1", Mode::Hmac, &kept, &p(&sig, &later, body), now).is_none());
        assert!(check(&k, "t2", Mode::Hmac, &kept, &p(&sig, &ts, body), now).is_none());
        assert!(
            check(
                &k,
                "t1",
                Mode::Hmac,
                &kept,
                &p(&sig, &ts, body),
                now + WINDOW_MS + 1000
            )
            .is_none()
        );
        assert!(
            check(
                &k,
                "t1",
                Mode::Hmac,
                &kept,
                &p(&sig, &ts, body),
                now - WINDOW_MS - 1000
            )
            .is_none()
        );
        assert!(check(&k, "t1", Mode::Hmac, &kept, &p(&sig[7..], &ts, body), now).is_none());
        assert!(check(&k, "t1", Mode::Hmac, &kept, &p("sha256=zz", &ts, body), now).is_none());
    }
}
