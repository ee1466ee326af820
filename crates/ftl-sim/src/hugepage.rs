//! Large flat maps backed by transparent huge pages where the kernel allows
//! it: the maps are hit at random on every write, and 2 MiB pages keep the
//! TLB from missing on nearly every access. Elsewhere (or if the kernel
//! refuses) these are plain `Vec`s.

/// Below this size the TLB is not the bottleneck and nothing is advised.
const MIN_BYTES: usize = 8 << 20;
const HUGE: usize = 2 << 20;

/// `vec![value; n]`, with the allocation advised to use huge pages before
/// it is first touched.
pub fn filled_vec<T: Copy>(n: usize, value: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    let bytes = n * std::mem::size_of::<T>();
    if bytes >= MIN_BYTES {
        advise_huge(v.as_mut_ptr().cast::<u8>(), bytes);
    }
    v.resize(n, value);
    v
}

#[cfg(target_os = "linux")]
fn advise_huge(ptr: *mut u8, bytes: usize) {
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: [start, end) lies inside the capacity of a live allocation
        // we own; MADV_HUGEPAGE only changes how the kernel backs those pages,
        // never their contents or validity. A failure is harmless and ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_ptr: *mut u8, _bytes: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn filled_vec_is_filled() {
        let v = super::filled_vec(5 << 20, 7u32);
        assert_eq!(v.len(), 5 << 20);
        assert!(v.iter().all(|&x| x == 7));
        assert_eq!(super::filled_vec(3, 1u8), vec![1, 1, 1]);
    }
}
