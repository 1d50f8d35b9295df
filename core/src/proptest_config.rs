//! The one configuration of core's property tests: a fixed case count and seed per property
//! (reproducible runs, no flakes) that `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override for a
//! longer run (docs/security.md), and no failure files: a failure found becomes an example test.

use proptest::test_runner::{Config, RngSeed};

/// `default_cases` cases from `seed`, unless the environment asks for others.
pub(crate) fn config(seed: u64, default_cases: u32) -> Config {
    // `default()` is what reads PROPTEST_CASES and PROPTEST_RNG_SEED.
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(seed);
    }
    config.failure_persistence = None;
    config
}
