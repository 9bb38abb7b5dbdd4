// SPDX-License-Identifier: GPL-2.0

//! Index arithmetic of the rings shared with user space (the rxe queue
//! layout): a power-of-two number of slots of a power-of-two size, indices
//! stored masked, one slot always left empty so that full and empty differ.
//!
//! Indices read from memory user space can write are untrusted:
//! [`RingGeometry::check_index`] admits only values the ABI can produce.

/// Why a ring cannot be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingError {
    /// No entries asked for.
    ZeroCapacity,
    /// More entries (or bytes) than allowed.
    TooLarge,
    /// An element size of zero or over 1 MiB.
    BadElementSize,
}

/// Largest element size accepted.
const MAX_ELEM_SIZE: u32 = 1 << 20;

/// The shape of a ring, kept in kernel memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingGeometry {
    log2_slots: u32,
    log2_elem_size: u32,
}

impl RingGeometry {
    /// The smallest ring holding `capacity` entries of `elem_size` bytes.
    pub fn new(capacity: u32, elem_size: u32, max_capacity: u32) -> Result<Self, RingError> {
        if capacity == 0 {
            return Err(RingError::ZeroCapacity);
        }
        if capacity > max_capacity {
            return Err(RingError::TooLarge);
        }
        if elem_size == 0 || elem_size > MAX_ELEM_SIZE {
            return Err(RingError::BadElementSize);
        }
        let slots = capacity
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(RingError::TooLarge)?;
        let elem = elem_size
            .checked_next_power_of_two()
            .ok_or(RingError::BadElementSize)?;
        let geometry = Self {
            log2_slots: slots.trailing_zeros(),
            log2_elem_size: elem.trailing_zeros(),
        };
        // The data area must be addressable with 32-bit offsets too.
        if geometry.log2_slots + geometry.log2_elem_size >= 32 {
            return Err(RingError::TooLarge);
        }
        Ok(geometry)
    }

    /// Slots in the ring.
    pub const fn slots(&self) -> u32 {
        1 << self.log2_slots
    }

    /// Entries the ring holds at once.
    pub const fn capacity(&self) -> u32 {
        self.slots() - 1
    }

    /// Mask that reduces an index to a slot.
    pub const fn index_mask(&self) -> u32 {
        self.slots() - 1
    }

    /// Bytes per slot.
    pub const fn elem_size(&self) -> u32 {
        1 << self.log2_elem_size
    }

    /// log2 of [`Self::elem_size`].
    pub const fn log2_elem_size(&self) -> u32 {
        self.log2_elem_size
    }

    /// Bytes of all slots.
    pub const fn data_bytes(&self) -> usize {
        (self.slots() as usize) << self.log2_elem_size
    }

    /// Byte offset of the slot `index` (masked) names.
    pub fn slot_offset(&self, index: u32) -> usize {
        ((index & self.index_mask()) as usize) << self.log2_elem_size
    }

    /// The index after `index`.
    pub fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.index_mask()
    }

    /// The index before `index`.
    pub fn prev(&self, index: u32) -> u32 {
        index.wrapping_sub(1) & self.index_mask()
    }

    /// Entries between `consumer` and `producer`.
    pub fn used(&self, producer: u32, consumer: u32) -> u32 {
        producer.wrapping_sub(consumer) & self.index_mask()
    }

    /// Entries that may still be produced.
    pub fn free(&self, producer: u32, consumer: u32) -> u32 {
        self.capacity() - self.used(producer, consumer)
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self, producer: u32, consumer: u32) -> bool {
        self.used(producer, consumer) == 0
    }

    /// Whether nothing more can be produced.
    pub fn is_full(&self, producer: u32, consumer: u32) -> bool {
        self.used(producer, consumer) == self.capacity()
    }

    /// An index read from user-writable memory, if the ABI could have
    /// stored it (it stores indices masked).
    pub fn check_index(&self, raw: u32) -> Option<u32> {
        (raw <= self.index_mask()).then_some(raw)
    }

    /// How many new entries a producer index `producer` (read from
    /// user-writable memory) announces, given that the kernel has taken
    /// the entries up to `fetched` and those from `consumer` on are still
    /// in flight (taken, not yet completed). `None` if the producer laps
    /// the consumer: it claims more than the ring holds beside the
    /// entries in flight, i.e. it points back into them, and taking its
    /// entries would overwrite slots still in use.
    pub fn new_entries(&self, producer: u32, fetched: u32, consumer: u32) -> Option<u32> {
        let in_flight = self.used(fetched, consumer);
        let new = self.used(producer, fetched);
        // `used` is at most the mask, which is the capacity: no underflow.
        (new <= self.capacity() - in_flight).then_some(new)
    }

    /// Whether `count` queued entries fit this ring.
    pub fn fits(&self, count: u32) -> bool {
        count <= self.capacity()
    }
}
