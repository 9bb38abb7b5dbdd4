// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out queue of at most `N` small `Copy` items, stored in
//! place (no allocation: it lives inside a QP and is used in softirq).

/// A bounded FIFO; [`Fifo::push`] refuses an item when full.
#[derive(Clone, Copy)]
pub struct Fifo<T: Copy, const N: usize> {
    slots: [Option<T>; N],
    /// Slot of the oldest item.
    head: usize,
    len: usize,
}

impl<T: Copy, const N: usize> Default for Fifo<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy, const N: usize> Fifo<T, N> {
    /// An empty queue.
    pub const fn new() -> Self {
        Self {
            slots: [None; N],
            head: 0,
            len: 0,
        }
    }

    /// Items queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether all `N` slots hold an item.
    pub fn is_full(&self) -> bool {
        self.len >= N
    }

    /// The slot of the item `n` places after the oldest.
    fn slot(&self, n: usize) -> usize {
        // `head < N` and `n <= N`, so the sum cannot overflow.
        match N {
            0 => 0,
            _ => (self.head + n) % N,
        }
    }

    /// Appends `item`; gives it back if the queue is full.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.is_full() {
            return Err(item);
        }
        let at = self.slot(self.len);
        match self.slots.get_mut(at) {
            Some(slot) => {
                *slot = Some(item);
                self.len += 1;
                Ok(())
            }
            None => Err(item),
        }
    }

    /// The oldest item.
    pub fn front(&self) -> Option<&T> {
        if self.is_empty() {
            return None;
        }
        self.slots.get(self.head).and_then(Option::as_ref)
    }

    /// The oldest item, to change in place.
    pub fn front_mut(&mut self) -> Option<&mut T> {
        if self.is_empty() {
            return None;
        }
        self.slots.get_mut(self.head).and_then(Option::as_mut)
    }

    /// The item `n` places after the oldest.
    pub fn get_mut(&mut self, n: usize) -> Option<&mut T> {
        if n >= self.len {
            return None;
        }
        let at = self.slot(n);
        self.slots.get_mut(at).and_then(Option::as_mut)
    }

    /// The newest item.
    pub fn back_mut(&mut self) -> Option<&mut T> {
        let last = self.len.checked_sub(1)?;
        let at = self.slot(last);
        self.slots.get_mut(at).and_then(Option::as_mut)
    }

    /// Removes and returns the oldest item.
    pub fn pop(&mut self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let item = self.slots.get_mut(self.head).and_then(Option::take);
        self.head = self.slot(1);
        self.len -= 1;
        item
    }

    /// Drops every item.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps the `keep` oldest items and drops the rest.
    pub fn truncate(&mut self, keep: usize) {
        while self.len > keep {
            let at = self.slot(self.len - 1);
            if let Some(slot) = self.slots.get_mut(at) {
                *slot = None;
            }
            self.len -= 1;
        }
    }

    /// The items, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).filter_map(move |n| self.slots.get(self.slot(n)).and_then(Option::as_ref))
    }
}
