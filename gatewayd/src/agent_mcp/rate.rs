//! `/mcp`'s request rates: per API token (`gateway.mcp_requests_per_s`) and per user over
//! all their tokens (`gateway.mcp_requests_per_user_s`: a user who makes many tokens does
//! not multiply what they may make the gateway hold). rmcp keeps each answered request's
//! messages for a late resume ([`COMPLETED_TTL`]); with the rates bounded, what one user
//! can pin that way is bounded too (rate × TTL answers), however many sessions and tokens
//! they hold. A request over either rate is answered 429 with `Retry-After`.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter, clock::Clock as _};

/// How long rmcp keeps an answered request's messages for a client that resumes its
/// stream (`Last-Event-ID`): enough for a reconnect, not rmcp's minute.
pub const COMPLETED_TTL: Duration = Duration::from_secs(2);

/// One keyed rate: so many requests per second per key, with bursts of two seconds'
/// worth; none when the setting is 0.
struct Keyed {
    limiter: Option<DefaultKeyedRateLimiter<i64>>,
    per_s: u64,
    setting: &'static str,
    whose: &'static str,
}

impl Keyed {
    fn new(per_s: u64, setting: &'static str, whose: &'static str) -> Keyed {
        let limiter = NonZeroU32::new(u32::try_from(per_s).unwrap_or(u32::MAX)).map(|n| {
            let burst = n.saturating_mul(NonZeroU32::new(2).expect("2 is not 0"));
            RateLimiter::keyed(Quota::per_second(n).allow_burst(burst))
        });
        Keyed {
            limiter,
            per_s,
            setting,
            whose,
        }
    }

    fn take(&self, key: i64) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }

    fn forget_idle(&self) {
        if let Some(l) = &self.limiter {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }
}

/// A request over a rate: how long to wait, and what to say.
#[derive(Debug)]
pub struct Over {
    pub wait: Duration,
    pub message: String,
}

/// The two rates.
pub struct Rate {
    token: Keyed,
    user: Keyed,
}

impl Rate {
    pub fn new(per_token_s: u64, per_user_s: u64) -> Rate {
        Rate {
            token: Keyed::new(per_token_s, "gateway.mcp_requests_per_s", "this token"),
            user: Keyed::new(
                per_user_s,
                "gateway.mcp_requests_per_user_s",
                "this token's user (over all their tokens)",
            ),
        }
    }

    /// Takes one request of `token`, owned by `user`, or says how long until one is
    /// allowed and which rate it is over. The token's rate is asked first, so a token
    /// hammering past its own rate takes nothing of what its user's other tokens share.
    pub fn take(&self, token: i64, user: i64) -> Result<(), Over> {
        for (rate, key) in [(&self.token, token), (&self.user, user)] {
            if let Err(wait) = rate.take(key) {
                return Err(Over {
                    wait,
                    message: format!(
                        "{} is over its request rate at /mcp ({} = {}): retry in {} ms",
                        rate.whose,
                        rate.setting,
                        rate.per_s,
                        wait.as_millis().max(1)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Forgets keys whose budget is whole again (run now and then: the tables do not grow
    /// with every token and user ever seen).
    pub fn forget_idle(&self) {
        self.token.forget_idle();
        self.user.forget_idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The third review: with the user's rate asked first, one token past its own rate
    /// still spent the user's, and the user's other tokens were refused.
    #[test]
    fn a_token_past_its_own_rate_spends_nothing_of_its_users() {
        let rate = Rate::new(5, 100);
        let refused = (0..1000).filter(|_| rate.take(1, 7).is_err()).count();
        assert!(refused > 900, "{refused}");
        assert!(rate.take(2, 7).is_ok(), "the user's other token is served");
    }

    #[test]
    fn a_token_gets_its_burst_then_waits_and_others_are_not_held() {
        let rate = Rate::new(5, 0);
        for i in 0..10 {
            assert!(rate.take(1, 7).is_ok(), "request {i} of the burst");
        }
        let over = rate.take(1, 7).expect_err("over the burst");
        assert!(
            over.wait > Duration::ZERO && over.wait <= Duration::from_millis(200),
            "{over:?}"
        );
        assert!(
            over.message.contains("this token is over")
                && over.message.contains("gateway.mcp_requests_per_s = 5"),
            "{over:?}"
        );
        assert!(rate.take(2, 7).is_ok(), "another token has its own budget");
        std::thread::sleep(over.wait);
        assert!(rate.take(1, 7).is_ok(), "allowed again after the wait");
        let unlimited = Rate::new(0, 0);
        assert!((0..10_000).all(|_| unlimited.take(1, 1).is_ok()));
    }

    /// A user's tokens share the user's rate: many tokens do not multiply it, and
    /// another user is not held.
    #[test]
    fn a_users_tokens_share_the_users_rate() {
        let rate = Rate::new(5, 8);
        // 16 in the user's burst, over 4 tokens of 4 each (within each token's 10).
        for token in 1..=4 {
            for i in 0..4 {
                assert!(rate.take(token, 7).is_ok(), "token {token}, request {i}");
            }
        }
        let over = rate
            .take(5, 7)
            .expect_err("a fifth token is over the user's rate");
        assert!(
            over.message.contains("gateway.mcp_requests_per_user_s = 8"),
            "{over:?}"
        );
        assert!(rate.take(5, 8).is_ok(), "another user has their own budget");
    }
}
