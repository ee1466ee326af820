//! Analytical write amplification of greedy cleaning under uniform random
//! writes (Desnoyers, "Analytic Modeling of SSD Write Performance", SYSTOR
//! 2012), used to validate the simulator and shown next to its results.
//!
//! With `T` physical and `U` logical pages, `α = T/U` (= 1 + OP with OP as
//! `(T − U)/U`), `A_LRU(α) = α / (α + W0(−α·e^(−α)))`, and greedy cleaning
//! with `Np` pages per block is `A = A_LRU(k·α)/k` with `k = 1 + 1/(2·Np)`.

/// Principal branch of the Lambert W function for `x ∈ [−1/e, 0]` (the only
/// range the model needs), by Halley iteration; `NaN` outside it.
pub fn lambert_w0_neg(x: f64) -> f64 {
    let branch = -(-1.0f64).exp();
    if !(branch..=0.0).contains(&x) {
        return f64::NAN;
    }
    if x == 0.0 {
        return 0.0;
    }
    if x - branch < 1e-300 {
        return -1.0;
    }
    // Start from the branch-point series near −1/e, from x itself near 0.
    let mut w = if x < -0.25 {
        let p = (2.0 * (std::f64::consts::E * x + 1.0)).sqrt();
        -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p
    } else {
        x * (1.0 - x)
    };
    for _ in 0..64 {
        let ew = w.exp();
        let f = w * ew - x;
        let d = ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0);
        if d == 0.0 || !d.is_finite() {
            break;
        }
        let next = w - f / d;
        if (next - w).abs() <= 1e-15 * (1.0 + w.abs()) {
            return next;
        }
        w = next;
    }
    w
}

/// Write amplification of LRU (FIFO) cleaning at `α = T/U > 1`.
pub fn lru_waf(alpha: f64) -> f64 {
    alpha / (alpha + lambert_w0_neg(-alpha * (-alpha).exp()))
}

/// Write amplification of greedy cleaning with over-provisioning `op`
/// (`(physical − logical)/logical`) and `pages_per_block` pages per block.
pub fn greedy_waf(op: f64, pages_per_block: u32) -> f64 {
    let alpha = 1.0 + op;
    let k = 1.0 + 1.0 / (2.0 * f64::from(pages_per_block));
    lru_waf(k * alpha) / k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambert_w_inverts_w_exp_w() {
        let mut x = -(-1.0f64).exp() + 1e-12;
        while x < 0.0 {
            let w = lambert_w0_neg(x);
            assert!((-1.0..=0.0).contains(&w), "x {x} w {w}");
            assert!((w * w.exp() - x).abs() < 1e-12, "x {x} w {w}");
            x += 0.0123;
        }
        assert_eq!(lambert_w0_neg(-(-1.0f64).exp()), -1.0);
        assert!(lambert_w0_neg(0.5).is_nan());
    }

    #[test]
    fn greedy_waf_falls_with_op_and_beats_lru() {
        let mut last = f64::INFINITY;
        for op in [0.05, 0.07, 0.11, 0.28, 0.5, 1.0] {
            let g = greedy_waf(op, 384);
            assert!(g > 1.0 && g < last, "op {op}: {g}");
            assert!(g <= lru_waf(1.0 + op) + 1e-9, "op {op}");
            last = g;
        }
        // As α grows, LRU tends to 1 + 1/(α−1)·(small): both tend to 1.
        assert!(greedy_waf(10.0, 384) < 1.01);
    }
}
