//! The statistics of the table: percentiles, paired bootstrap intervals for the ratios, and the
//! turn order that keeps contenders from always following the same one.
//!
//! May import: nothing of the benchmark's own.

/// The 95% interval of each non-peer's ratio to the best peer at percentile `p`, by bootstrap
/// over rounds: every init had one turn per round (a signal, a reaping run), so sample `k` of
/// each init comes from the same stretch of the run, and resampling rounds keeps that pairing.
/// Shows whether a ratio of, say, 0.99 means anything. None for the peers.
pub fn bootstrap_ratio_cis(samples: &[Vec<f64>], peers: &[bool], p: f64) -> Vec<Option<(f64, f64)>> {
    (0..samples.len()).map(|i| if peers[i] { None } else { bootstrap_ratio_ci(samples, peers, p, i) }).collect()
}

pub fn bootstrap_ratio_ci(samples: &[Vec<f64>], peers: &[bool], p: f64, ours: usize) -> Option<(f64, f64)> {
    let rounds = samples.iter().map(Vec::len).min()?;
    if !peers.contains(&true) || rounds < 10 {
        return None;
    }
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut ratios = Vec::new();
    let mut scratch = vec![0.0; rounds];
    let mut picks = vec![0usize; rounds];
    for _ in 0..400 {
        for pick in picks.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *pick = (x % rounds as u64) as usize;
        }
        let mut at = |init: &[f64]| {
            for (slot, &k) in scratch.iter_mut().zip(&picks) {
                *slot = init[k];
            }
            let i = ((rounds as f64 - 1.0) * p).round() as usize;
            *scratch.select_nth_unstable_by(i, |a, b| a.total_cmp(b)).1
        };
        let ours = at(&samples[ours]);
        let best = samples.iter().zip(peers).filter(|(_, &peer)| peer).map(|(s, _)| at(s)).fold(f64::INFINITY, f64::min);
        ratios.push(ours / best);
    }
    let ratios = sorted(ratios);
    Some((percentile(&ratios, 0.025), percentile(&ratios, 0.975)))
}

/// A permutation of 0..n that changes from turn to turn, so that no init always follows the same
/// one (xorshift, seeded by the turn).
pub fn turn_order(n: usize, turn: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = (turn as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}
