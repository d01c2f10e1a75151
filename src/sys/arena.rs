//! The allocator: an arena in .bss in front of the system's. musl's malloc maps and unmaps pages
//! eagerly, so the few hundred small allocations of lastcall's start-up cost dozens of mmap and
//! munmap calls; from the arena they cost a few instructions, and only the pages they touch
//! become resident. When the arena is full, allocations go to the system allocator.
//!
//! Blocks up to `MAX_CLASS` bytes come in power-of-two sizes, and a freed one goes on its size's
//! free list for the next allocation of that size, so start-up's temporaries (strings built and
//! dropped) reuse the same few pages. A larger block is cut
//! from the top, and freeing it gives its room back only if nothing was cut after it.
//!
//! May import: nothing from the crate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The smallest block: room for a free list's link, and the alignment every block has.
const MIN_CLASS: usize = 16;
/// The largest block kept on a free list.
const MAX_CLASS: usize = 4096;
/// The free lists: one per power of two from `MIN_CLASS` to `MAX_CLASS`.
const CLASSES: usize = (MAX_CLASS / MIN_CLASS).trailing_zeros() as usize + 1;

/// `N` bytes of memory for lastcall's allocations, then the system allocator.
#[repr(C, align(4096))]
pub struct Arena<const N: usize> {
    /// First, so that it shares its page with the first blocks, not one of its own.
    state: UnsafeCell<State>,
    /// Held while `state` or a free block's link is read or written. lastcall has one thread and
    /// no signal handler, so it is never contended there; the lock makes the arena sound anyway.
    locked: AtomicBool,
    memory: UnsafeCell<Memory<N>>,
}

/// The arena's bytes, aligned as every block is.
#[repr(C, align(16))]
struct Memory<const N: usize>([u8; N]);

struct State {
    /// Offset of the first byte never handed out.
    next: usize,
    /// Each class's first free block (offset + 1; 0 for none). A free block's first word holds
    /// the next one's, the same way.
    free: [usize; CLASSES],
}

// SAFETY: `state`, and the links in free blocks, are only reached while holding `locked`; every
// other byte of `memory` belongs to the one caller that was handed its block.
unsafe impl<const N: usize> Sync for Arena<N> {}

/// The block size for `layout`: a power of two, at least `MIN_CLASS`; None above `MAX_CLASS`.
fn class_size(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(MIN_CLASS).checked_next_power_of_two()?;
    (size <= MAX_CLASS).then_some(size)
}

fn class_index(size: usize) -> usize {
    (size / MIN_CLASS).trailing_zeros() as usize
}

impl<const N: usize> Arena<N> {
    pub const fn new() -> Arena<N> {
        Arena {
            state: UnsafeCell::new(State { next: 0, free: [0; CLASSES] }),
            locked: AtomicBool::new(false),
            memory: UnsafeCell::new(Memory([0; N])),
        }
    }

    fn base(&self) -> *mut u8 {
        self.memory.get().cast()
    }

    /// The offset of `ptr` in the arena, if it is one of the arena's.
    fn offset_of(&self, ptr: *mut u8) -> Option<usize> {
        let offset = (ptr as usize).wrapping_sub(self.base() as usize);
        (offset < N).then_some(offset)
    }

    /// Runs `f` on the state, holding the lock.
    fn with<R>(&self, f: impl FnOnce(&mut State, *mut u8) -> R) -> R {
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held, so no one else reaches the state until it is released below.
        let result = f(unsafe { &mut *self.state.get() }, self.base());
        self.locked.store(false, Ordering::Release);
        result
    }

    /// A block for `layout`: its offset, or None when the arena has no room.
    fn claim(&self, layout: Layout) -> Option<usize> {
        let class = class_size(layout);
        self.with(|state, base| {
            // A free block is only sure to be MIN_CLASS-aligned.
            if let (Some(size), true) = (class, layout.align() <= MIN_CLASS) {
                let head = state.free[class_index(size)];
                if head != 0 {
                    let offset = head - 1;
                    // SAFETY: a free block of at least MIN_CLASS bytes, 16-aligned, inside the
                    // arena, whose first word is its link (written by `release`); the lock is held.
                    state.free[class_index(size)] = unsafe { base.add(offset).cast::<usize>().read() };
                    return Some(offset);
                }
            }
            let align = layout.align().max(MIN_CLASS);
            let start = (base as usize).checked_add(state.next)?.checked_add(align - 1)? & !(align - 1);
            let start = start - base as usize;
            let end = start.checked_add(class.unwrap_or(layout.size()))?;
            if end > N {
                return None;
            }
            state.next = end;
            Some(start)
        })
    }

    /// Gives back the block at `offset`, made for `layout`.
    fn release(&self, offset: usize, layout: Layout) {
        self.with(|state, base| match class_size(layout) {
            Some(size) => {
                let index = class_index(size);
                // SAFETY: the block is the caller's no more, at least `size` bytes and 16-aligned
                // inside the arena: its first word can hold the link. The lock is held.
                unsafe { base.add(offset).cast::<usize>().write(state.free[index]) };
                state.free[index] = offset + 1;
            }
            // A large block: its room comes back if it is the last one cut.
            None => {
                if offset.checked_add(layout.size()) == Some(state.next) {
                    state.next = offset;
                }
            }
        })
    }

    /// Whether the block at `offset`, made for `layout`, can hold `new_size` bytes where it is;
    /// a large block that is the last one cut grows or shrinks to fit.
    fn fits_in_place(&self, offset: usize, layout: Layout, new_size: usize) -> bool {
        if new_size <= layout.size() {
            return true;
        }
        match class_size(layout) {
            // The block is the whole power of two.
            Some(size) => new_size <= size,
            None => self.with(|state, _| {
                let last = offset.checked_add(layout.size()) == Some(state.next);
                match offset.checked_add(new_size) {
                    Some(end) if last && end <= N => {
                        state.next = end;
                        true
                    }
                    _ => false,
                }
            }),
        }
    }
}

impl<const N: usize> Default for Arena<N> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every block handed out is at least `layout.size()` bytes aligned to `layout.align()`:
// the arena's (from `claim`, inside `memory`, and no two live blocks overlap: a block is either
// handed out, on one free list, or beyond `next`) or the system allocator's. Each pointer given
// back goes to whichever handed it out (`offset_of`).
unsafe impl<const N: usize> GlobalAlloc for Arena<N> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.claim(layout) {
            // Derived from the arena's own pointer, so it may reach these bytes.
            Some(offset) => self.base().wrapping_add(offset),
            // SAFETY: the caller's layout, passed on as it came (non-zero size).
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match self.offset_of(ptr) {
            Some(offset) => self.release(offset, layout),
            // SAFETY: not the arena's, so the system allocator's, with the layout it was made with.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.claim(layout) {
            Some(offset) => {
                let ptr = self.base().wrapping_add(offset);
                // SAFETY: the block was just claimed, so these bytes are ours; a reused block
                // holds its last owner's bytes.
                unsafe { ptr.write_bytes(0, layout.size()) };
                ptr
            }
            // SAFETY: as in `alloc`; the system's calloc needs no clearing here.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(offset) = self.offset_of(ptr) else {
            // SAFETY: the system allocator's block, passed on with the caller's guarantees.
            return unsafe { System.realloc(ptr, layout, new_size) };
        };
        if self.fits_in_place(offset, layout, new_size) {
            return ptr;
        }
        // SAFETY: GlobalAlloc's contract: new_size is non-zero and, rounded up to the alignment,
        // does not overflow isize, so this layout is valid.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a valid layout of non-zero size.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: the old block holds layout.size() bytes, fewer than new_size here, and the
            // new block is another, live, one: they do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
            self.release(offset, layout);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    fn next<const N: usize>(arena: &Arena<N>) -> usize {
        arena.with(|state, _| state.next)
    }

    #[test]
    fn blocks_are_aligned_and_disjoint_and_freed_ones_are_reused() {
        let arena: Box<Arena<8192>> = Box::default();
        // SAFETY (all unsafe calls below): valid non-zero layouts, and each pointer goes back
        // with the layout it was made with.
        unsafe {
            let a = arena.alloc(layout(3, 1));
            let b = arena.alloc(layout(8, 8));
            let c = arena.alloc(layout(1, 64));
            let d = arena.alloc(layout(5000, 8));
            for p in [a, b, c, d] {
                assert!(arena.offset_of(p).is_some());
            }
            assert_eq!(c as usize % 64, 0);
            let mut spans = [(a as usize, 3), (b as usize, 8), (c as usize, 1), (d as usize, 5000)];
            spans.sort();
            assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "{spans:?}");
            a.write_bytes(1, 3);
            b.write_bytes(2, 8);
            c.write(3);
            d.write_bytes(4, 5000);
            assert_eq!((*a, *b.add(7), *c, *d.add(4999)), (1, 2, 3, 4));
            // A freed block serves the next allocation of its size.
            arena.dealloc(b, layout(8, 8));
            assert_eq!(arena.alloc(layout(16, 8)), b);
            // The last large block's room comes back.
            let end = next(&arena);
            arena.dealloc(d, layout(5000, 8));
            assert!(next(&arena) < end);
            arena.dealloc(a, layout(3, 1));
            arena.dealloc(b, layout(16, 8));
            arena.dealloc(c, layout(1, 64));
        }
    }

    #[test]
    fn a_reused_block_still_has_the_alignment_asked_for() {
        let arena: Box<Arena<8192>> = Box::default();
        // SAFETY: as above.
        unsafe {
            let _pad = arena.alloc(layout(16, 16));
            let a = arena.alloc(layout(32, 16));
            arena.dealloc(a, layout(32, 16));
            let b = arena.alloc(layout(32, 32));
            assert_eq!(b as usize % 32, 0);
        }
    }

    #[test]
    fn a_full_arena_hands_over_to_the_system() {
        let arena: Box<Arena<256>> = Box::default();
        // SAFETY: as above.
        unsafe {
            let small = arena.alloc(layout(200, 8));
            let big = arena.alloc(layout(100, 8));
            assert!(arena.offset_of(small).is_some());
            assert!(arena.offset_of(big).is_none(), "did not fit, so the system's");
            big.write_bytes(7, 100);
            arena.dealloc(big, layout(100, 8));
            let huge = arena.alloc(layout(1 << 20, 16));
            assert!(!huge.is_null() && arena.offset_of(huge).is_none());
            arena.dealloc(huge, layout(1 << 20, 16));
            arena.dealloc(small, layout(200, 8));
        }
    }

    #[test]
    fn realloc_keeps_the_contents_wherever_the_block_goes() {
        let arena: Box<Arena<16384>> = Box::default();
        // SAFETY: as above.
        unsafe {
            let a = arena.alloc(layout(16, 8));
            a.copy_from_nonoverlapping(b"0123456789abcdef".as_ptr(), 16);
            // Within its power of two: in place.
            let a2 = arena.realloc(a, layout(16, 8), 16);
            assert_eq!(a2, a);
            // Past it: moved, with its contents.
            let a3 = arena.realloc(a2, layout(16, 8), 100);
            assert_ne!(a3, a2);
            assert_eq!(std::slice::from_raw_parts(a3, 16), b"0123456789abcdef");
            // Shrinking stays in place.
            assert_eq!(arena.realloc(a3, layout(100, 8), 20), a3);
            // A large last block grows where it is.
            let big = arena.realloc(a3, layout(20, 8), 5000);
            assert_eq!(std::slice::from_raw_parts(big, 16), b"0123456789abcdef");
            assert_eq!(arena.realloc(big, layout(5000, 8), 6000), big);
            // Past the arena's end: to the system, contents kept.
            let a4 = arena.realloc(big, layout(6000, 8), 1 << 16);
            assert!(arena.offset_of(a4).is_none());
            assert_eq!(std::slice::from_raw_parts(a4, 16), b"0123456789abcdef");
            // And the system's block is realloc'd by the system.
            let a5 = arena.realloc(a4, layout(1 << 16, 8), 1 << 17);
            assert_eq!(std::slice::from_raw_parts(a5, 16), b"0123456789abcdef");
            arena.dealloc(a5, layout(1 << 17, 8));
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_even_when_reused() {
        let arena: Box<Arena<1024>> = Box::default();
        // SAFETY: as above.
        unsafe {
            let a = arena.alloc(layout(32, 1));
            a.write_bytes(0xff, 32);
            arena.dealloc(a, layout(32, 1));
            let z = arena.alloc_zeroed(layout(32, 1));
            assert_eq!(z, a, "reused");
            assert!(std::slice::from_raw_parts(z, 32).iter().all(|&b| b == 0));
            arena.dealloc(z, layout(32, 1));
        }
    }

    #[test]
    fn threads_never_share_a_block() {
        static ARENA: Arena<65536> = Arena::new();
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut intact = true;
                    for round in 0..50 {
                        let mut mine = Vec::new();
                        for i in 0..20 {
                            let size = 8 + (i * 24 + round) % 200;
                            // SAFETY: as above.
                            let p = unsafe { ARENA.alloc(layout(size, 8)) };
                            // SAFETY: `size` bytes just handed to this thread.
                            unsafe { p.write_bytes(t, size) };
                            mine.push((p as usize, size));
                        }
                        std::thread::yield_now();
                        for (p, size) in mine {
                            // SAFETY: written by this thread alone, `size` bytes.
                            intact &= unsafe { std::slice::from_raw_parts(p as *const u8, size) }.iter().all(|&b| b == t);
                            // SAFETY: handed out above with this layout.
                            unsafe { ARENA.dealloc(p as *mut u8, layout(size, 8)) };
                        }
                    }
                    intact
                })
            })
            .collect();
        assert!(threads.into_iter().all(|t| t.join().unwrap()));
    }
}
