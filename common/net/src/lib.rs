//! Outbound HTTP for Argos's unprivileged daemons, behind one SSRF guard: a URL's host is
//! resolved and every address checked ([`ssrf::refused`]) before a connection is made, the
//! connection is pinned to the addresses checked (a second lookup cannot answer
//! differently), no proxy is used, and a redirect is never followed blindly: [`get`]
//! checks each hop as it checked the first.
#![forbid(unsafe_code)]

pub mod ssrf;
pub mod text;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Why an outbound request was not made or did not complete.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The guard refused it (the URL, an address, a redirect): nothing was sent there.
    #[error("{0}")]
    Refused(String),
    /// It was tried and failed (resolution, connection, timeout, the peer's answer).
    #[error("{0}")]
    Failed(String),
}

/// Checks a URL an outbound request may name: http or https, a host, no credentials in it.
pub fn check_url(raw: &str) -> Result<url::Url, NetError> {
    let u = url::Url::parse(raw).map_err(|e| NetError::Refused(format!("not a URL: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(NetError::Refused(format!(
            "the scheme {:?} is not http or https",
            u.scheme()
        )));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(NetError::Refused("the URL has no host".into()));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(NetError::Refused(
            "the URL carries credentials (user:password@); send them otherwise".into(),
        ));
    }
    Ok(u)
}

/// Resolves a URL's host and checks every address it has; answers the addresses to pin.
/// `local` lifts the refusal of non-public ranges (never of metadata addresses); `hint`
/// is added to a refusal `local` would have lifted, saying how to allow it.
pub async fn resolve(url: &url::Url, local: bool, hint: &str) -> Result<Vec<SocketAddr>, NetError> {
    let host = url
        .host_str()
        .ok_or_else(|| NetError::Refused("the URL has no host".into()))?;
    let port = url.port_or_known_default().unwrap_or(80);
    // A literal address in brackets resolves as itself.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| NetError::Failed(format!("resolving {host}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(NetError::Failed(format!("{host} has no address")));
    }
    for a in &addrs {
        if let Some(why) = ssrf::refused(a.ip(), local) {
            let liftable = !local && ssrf::refused(a.ip(), true).is_none() && !hint.is_empty();
            let hint = if liftable {
                format!(" ({hint})")
            } else {
                String::new()
            };
            return Err(NetError::Refused(format!(
                "{host} resolves to {}, {why}{hint}",
                a.ip()
            )));
        }
    }
    Ok(addrs)
}

/// An HTTP client for one host: its connections pinned to `addrs` (already checked), no
/// redirect followed, no proxy, no idle connection kept.
pub fn pinned_client(
    host: &str,
    addrs: &[SocketAddr],
    connect_timeout: Duration,
) -> Result<reqwest::Client, NetError> {
    // TLS with ring's primitives, one provider for the process (installed once).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .resolve_to_addrs(host, addrs)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(connect_timeout)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| NetError::Failed(format!("HTTP client: {e}")))
}

/// Whether `u`'s host is in an admin's allow list of `host` or `host:port` entries (a
/// bare host allows every port; `[v6]:port` for IPv6 with a port).
pub fn listed(allow: &[String], u: &url::Url) -> bool {
    let Some(host) = u.host_str() else {
        return false;
    };
    let bare = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_string();
    allow.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        // `host:port`, `[v6]:port`, or a bare host (an unbracketed IPv6 address has colons).
        let (name, port) = match entry.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => (h, p.parse::<u16>().ok()),
            _ => (entry.as_str(), None),
        };
        bare(name) == bare(&host.to_ascii_lowercase())
            && port.is_none_or(|p| Some(p) == u.port_or_known_default())
    })
}

/// POSTs `body` to a URL through the guard, with `headers`, within `timeout`; answers
/// the status. A redirect is not followed (it is the answer), and the answer's body is
/// not read.
pub async fn post(
    raw: &str,
    local: bool,
    hint: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<u16, NetError> {
    let url = check_url(raw)?;
    let addrs = resolve(&url, local, hint).await?;
    let host = url.host_str().unwrap_or_default().to_string();
    let client = pinned_client(&host, &addrs, timeout)?;
    let mut req = client.post(url).timeout(timeout).body(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let r = req
        .send()
        .await
        .map_err(|e| NetError::Failed(format!("{e}")))?;
    Ok(r.status().as_u16())
}

/// How far a [`get`] may go.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The whole request, redirects and body included.
    pub timeout: Duration,
    /// The most of a body read; a longer one is cut there (and says so).
    pub max_body: usize,
    /// Redirects followed, each checked as the first URL was.
    pub max_redirects: usize,
}

/// What a [`get`] brought back.
#[derive(Debug)]
pub struct Fetched {
    /// The URL that answered (after redirects).
    pub url: url::Url,
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// The body was longer than [`Limits::max_body`].
    pub truncated: bool,
}

/// GETs a URL through the guard. `local(url)` says whether a non-public address is
/// allowed for that URL (an admin's allow list); every redirect's target is checked again
/// (scheme, credentials, addresses, `local`) before it is requested, and is local only
/// when the first URL was too.
pub async fn get(
    raw: &str,
    local: &(dyn Fn(&url::Url) -> bool + Sync),
    hint: &str,
    limits: &Limits,
) -> Result<Fetched, NetError> {
    let deadline = Instant::now() + limits.timeout;
    let mut url = check_url(raw)?;
    // A redirect reaches a local destination only from a local start: a public page
    // cannot send the fetch into an allowed internal host.
    let started_local = local(&url);
    for hop in 0..=limits.max_redirects {
        let addrs = resolve(&url, started_local && local(&url), hint).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        let client = pinned_client(url.host_str().unwrap_or_default(), &addrs, left)?;
        let mut r = tokio::time::timeout(
            left,
            client
                .get(url.clone())
                .header(
                    reqwest::header::ACCEPT,
                    "text/html, text/plain, application/json, text/*;q=0.9, */*;q=0.1",
                )
                .send(),
        )
        .await
        .map_err(|_| NetError::Failed(format!("no answer within {:?}", limits.timeout)))?
        .map_err(|e| NetError::Failed(format!("{url}: {}", without_url(&e))))?;
        let status = r.status();
        if status.is_redirection()
            && let Some(to) = r.headers().get(reqwest::header::LOCATION)
        {
            if hop == limits.max_redirects {
                return Err(NetError::Failed(format!(
                    "more than {} redirects",
                    limits.max_redirects
                )));
            }
            let to = to
                .to_str()
                .ok()
                .and_then(|t| url.join(t).ok())
                .ok_or_else(|| {
                    NetError::Failed(format!("{url} redirects to an unreadable location"))
                })?;
            url = check_url(to.as_str())
                .map_err(|e| NetError::Refused(format!("{url} redirects to {to}: {e}")))?;
            continue;
        }
        let content_type = r
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = Vec::new();
        let mut truncated = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, r.chunk())
                .await
                .map_err(|_| {
                    NetError::Failed(format!("the body did not end within {:?}", limits.timeout))
                })?
                .map_err(|e| NetError::Failed(format!("reading the body: {}", without_url(&e))))?;
            let Some(chunk) = chunk else { break };
            let room = limits.max_body - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        return Ok(Fetched {
            url,
            status: status.as_u16(),
            content_type,
            body,
            truncated,
        });
    }
    Err(NetError::Failed("too many redirects".into()))
}

/// reqwest's error without the URL it repeats (the caller names it once).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(u) = e.url() {
        s = s
            .replace(&format!(" ({u})"), "")
            .replace(&format!(" for url ({u})"), "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn a_url_whose_host_is_private_is_refused_unless_local() {
        let u = url::Url::parse("http://127.0.0.1:9/mcp").unwrap();
        let e = resolve(&u, false, "mark it local")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("loopback") && e.contains("(mark it local)"),
            "{e}"
        );
        assert_eq!(resolve(&u, true, "").await.unwrap()[0].port(), 9);
        let m = url::Url::parse("http://169.254.169.254/latest/meta-data").unwrap();
        let e = resolve(&m, false, "mark it local")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata") && !e.contains("mark it"), "{e}");
        assert!(resolve(&m, true, "").await.is_err());
        let v6 = url::Url::parse("http://[::1]:8/").unwrap();
        assert!(resolve(&v6, false, "").await.is_err());
        assert!(resolve(&v6, true, "").await.is_ok());
    }

    #[test]
    fn urls_other_than_plain_http_are_refused() {
        for bad in [
            "file:///etc/passwd",
            "gopher://example.com/",
            "http://user:pw@example.com/",
            "not a url",
            "https://",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        assert!(check_url("https://example.com/a?b=c").is_ok());
    }

    /// A loopback HTTP server answering each connection with the next of `answers`.
    async fn server(answers: Vec<String>) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        tokio::spawn(async move {
            for a in answers {
                let (mut s, _) = l.accept().await.unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(a.as_bytes()).await;
                let _ = s.shutdown().await;
            }
        });
        base
    }

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_secs(5),
            max_body: 64,
            max_redirects: 3,
        }
    }

    #[tokio::test]
    async fn a_redirect_is_checked_again_and_a_body_is_cut_at_its_cap() {
        let base = server(vec![
            "HTTP/1.1 302 Found\r\nlocation: /next\r\ncontent-length: 0\r\n\r\n".into(),
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\n{}",
                "x".repeat(100)
            ),
        ])
        .await;
        let f = get(&format!("{base}/start"), &|_| true, "", &limits())
            .await
            .unwrap();
        assert_eq!(f.status, 200);
        assert_eq!(f.url.path(), "/next");
        assert_eq!(f.body.len(), 64);
        assert!(f.truncated);
        // Allowed for the first URL only: the redirect to the same host is checked too,
        // with what the allow rule says of its URL.
        let base = server(vec![
            "HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/latest\r\ncontent-length: 0\r\n\r\n".into(),
        ])
        .await;
        let e = get(&format!("{base}/"), &|_| true, "", &limits())
            .await
            .unwrap_err();
        assert!(
            matches!(e, NetError::Refused(_)) && e.to_string().contains("metadata"),
            "{e}"
        );
        let base = server(vec![
            "HTTP/1.1 301 Moved\r\nlocation: file:///etc/shadow\r\ncontent-length: 0\r\n\r\n"
                .into(),
        ])
        .await;
        let e = get(&format!("{base}/"), &|_| true, "", &limits())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("scheme"), "{e}");
        let e = get(&format!("{base}/"), &|_| false, "allow it", &limits())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
    }
}

#[cfg(test)]
mod listed_tests {
    use super::listed;

    #[test]
    fn an_allow_entry_names_a_host_or_a_host_and_port() {
        let u = |s: &str| url::Url::parse(s).unwrap();
        let l = |e: &str, url: &str| listed(&[e.to_string()], &u(url));
        assert!(l("127.0.0.1", "http://127.0.0.1:8080/"));
        assert!(l("127.0.0.1:8080", "http://127.0.0.1:8080/x"));
        assert!(!l("127.0.0.1:8081", "http://127.0.0.1:8080/"));
        assert!(l("wiki.internal", "https://WIKI.internal/page"));
        assert!(l("wiki.internal:443", "https://wiki.internal/page"));
        assert!(!l("wiki.internal", "https://wiki.internal.evil.example/"));
        assert!(l("[::1]:9000", "http://[::1]:9000/"));
        assert!(!l("[::1]:9000", "http://[::1]:9001/"));
        assert!(!listed(&[], &u("http://127.0.0.1/")));
    }
}
