//! The delays between attempts to connect again (a daemon's watch of another, an MCP
//! server's connection): doubling from a first delay to a most, started over once a
//! connection is made. The delays are backon's; the loops that wait on them stay each
//! daemon's own, since what a connection does and when it gives up differ.

use std::time::Duration;

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder};

/// Back-off for a connection kept for a daemon's life.
#[derive(Debug)]
pub struct Backoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
    most: Duration,
}

impl Backoff {
    /// Delays doubling from `first` up to `most`, for ever.
    pub fn new(first: Duration, most: Duration) -> Backoff {
        let builder = ExponentialBuilder::default()
            .with_min_delay(first)
            .with_max_delay(most)
            .without_max_times();
        Backoff {
            delays: builder.build(),
            builder,
            most,
        }
    }

    /// A connection was made: the next failure waits the first delay again.
    pub fn reset(&mut self) {
        self.delays = self.builder.build();
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        self.delays.next().unwrap_or(self.most)
    }

    /// Sleeps the next delay.
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_to_the_most_and_start_over_after_a_connection() {
        let mut b = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        // In whole milliseconds: backon multiplies in floating point.
        let seen: Vec<u128> = (0..7).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(seen, [200, 400, 800, 1600, 3200, 5000, 5000]);
        b.reset();
        assert_eq!(b.next_delay().as_millis(), 200);
    }
}
