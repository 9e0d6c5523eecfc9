//! `/mcp`'s request rate per API token (`gateway.mcp_requests_per_s`). rmcp keeps each
//! answered request's messages for a late resume ([`COMPLETED_TTL`]); with the rate
//! bounded, what one token can pin that way is bounded too (rate × TTL answers), however
//! many sessions it holds. A token over its rate is answered 429 with `Retry-After`.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter, clock::Clock as _};

/// How long rmcp keeps an answered request's messages for a client that resumes its
/// stream (`Last-Event-ID`): enough for a reconnect, not rmcp's minute.
pub const COMPLETED_TTL: Duration = Duration::from_secs(2);

/// Requests per second per token, with bursts of two seconds' worth; none when the
/// setting is 0.
pub struct Rate {
    limiter: Option<DefaultKeyedRateLimiter<i64>>,
    per_s: u64,
}

impl Rate {
    pub fn new(per_s: u64) -> Rate {
        let limiter = NonZeroU32::new(u32::try_from(per_s).unwrap_or(u32::MAX)).map(|n| {
            let burst = n.saturating_mul(NonZeroU32::new(2).expect("2 is not 0"));
            RateLimiter::keyed(Quota::per_second(n).allow_burst(burst))
        });
        Rate { limiter, per_s }
    }

    /// Takes one request of `token`, or says how long until one is allowed.
    pub fn take(&self, token: i64) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check_key(&token)
            .map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }

    /// The refusal for a request over the rate.
    pub fn refusal(&self, wait: Duration) -> String {
        format!(
            "this token is over its request rate at /mcp (gateway.mcp_requests_per_s = {}): retry in {} ms",
            self.per_s,
            wait.as_millis().max(1)
        )
    }

    /// Forgets tokens whose budget is whole again (run now and then: the table does not
    /// grow with every token ever seen).
    pub fn forget_idle(&self) {
        if let Some(l) = &self.limiter {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gets_its_burst_then_waits_and_others_are_not_held() {
        let rate = Rate::new(5);
        for i in 0..10 {
            assert!(rate.take(1).is_ok(), "request {i} of the burst");
        }
        let wait = rate.take(1).expect_err("over the burst");
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(200),
            "{wait:?}"
        );
        assert!(
            rate.refusal(wait)
                .contains("gateway.mcp_requests_per_s = 5")
        );
        assert!(rate.take(2).is_ok(), "another token has its own budget");
        std::thread::sleep(wait);
        assert!(rate.take(1).is_ok(), "allowed again after the wait");
        let unlimited = Rate::new(0);
        assert!((0..10_000).all(|_| unlimited.take(1).is_ok()));
    }
}
