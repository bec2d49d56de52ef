//! The fast random numbers behind ids made on every request (order, invoice, event and
//! e-mail ids, lease tokens), kept apart across `fork()`.
//!
//! rand's thread generator is a CSPRNG seeded from the OS once per thread, and a forked
//! child carries a copy of its parent's state: a preloading server's workers (gunicorn
//! `--preload`, `multiprocessing` with fork) all drew the same "random" ids and broke one
//! another's writes with duplicate keys (rand 0.9 no longer reseeds on fork, as 0.8 did).
//! Here each thread's generator remembers the process it was seeded in, and one drawn
//! from in another process reseeds from the OS first. Secrets (API keys, webhook
//! secrets) are drawn from the OS directly and never pass through here.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::SeedableRng;

thread_local! {
    /// This thread's generator and the process id it was seeded in. No destructor: the
    /// generator owns nothing, so a C host's threads are left with nothing to clean up.
    static GENERATOR: RefCell<Option<(u32, StdRng)>> = const { RefCell::new(None) };
}

/// Runs `draw` with this thread's generator, seeded from the OS in this process.
pub(crate) fn with_generator<T>(draw: impl FnOnce(&mut StdRng) -> T) -> T {
    let process = std::process::id();
    GENERATOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_some_and(|(seeded_in, _)| *seeded_in != process) {
            *slot = None;
        }
        let (_, generator) = slot.get_or_insert_with(|| (process, StdRng::from_os_rng()));
        draw(generator)
    })
}

/// A random value of a type rand can draw uniformly (`u32`, `u64`, `u128`...).
pub(crate) fn random<T>() -> T
where
    rand::distr::StandardUniform: rand::distr::Distribution<T>,
{
    with_generator(rand::Rng::random)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generator_seeded_in_another_process_is_reseeded_before_it_draws() {
        // What a forked child finds: its parent's generator, same state, under its own pid.
        let parent_state = StdRng::from_os_rng();
        let mut inherited = parent_state.clone();
        GENERATOR.with(|cell| *cell.borrow_mut() = Some((std::process::id().wrapping_add(1), parent_state)));
        let drawn: u128 = random();
        assert_ne!(drawn, rand::Rng::random::<u128>(&mut inherited), "drew the parent's next value");
        let seeded_in = GENERATOR.with(|cell| cell.borrow().as_ref().map(|(pid, _)| *pid));
        assert_eq!(seeded_in, Some(std::process::id()));
        // Within one process it keeps its state: two draws differ.
        assert_ne!(random::<u128>(), random::<u128>());
    }
}
