//! The simulator's one source of chance: SplitMix64 from `--seed`, and
//! the draws the models need (uniform, exponential).

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponentially distributed with mean `mean` (the gap between two
    /// arrivals of a Poisson process, or a hold time).
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// `base` spread uniformly by ± `jitter` of itself.
    pub fn spread(&mut self, base: f64, jitter: f64) -> f64 {
        base * (1.0 + jitter * (2.0 * self.unit() - 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws_and_sane_means() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = a.exp(2.0);
            assert_eq!(x, b.exp(2.0));
            assert!(x >= 0.0);
            sum += x;
        }
        let mean = sum / n as f64;
        assert!((mean - 2.0).abs() < 0.05, "mean {mean}");
        let s = a.spread(10.0, 0.5);
        assert!((5.0..=15.0).contains(&s));
    }
}
