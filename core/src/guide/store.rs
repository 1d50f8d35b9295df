//! A bounded map of owned, expiring records: the capacity and ownership rules every store shares.

use std::collections::HashMap;

use time::OffsetDateTime;
use uuid::Uuid;

use crate::{Error, limits::MAX_RECORDS};

/// A record a store can hold: it has an owner and a time after which it is gone.
pub(crate) trait Expiring {
    fn owner(&self) -> &str;
    fn expires_at(&self) -> OffsetDateTime;
}

/// Records by id, never more than the capacity once expired ones are purged.
#[derive(Debug)]
pub(crate) struct Store<V> {
    records: HashMap<Uuid, V>,
    capacity: usize,
}

impl<V: Expiring> Store<V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            records: HashMap::new(),
            capacity: capacity.clamp(1, MAX_RECORDS),
        }
    }

    /// Purges expired records, then refuses when the store is still full.
    pub(crate) fn make_room(&mut self, now: OffsetDateTime) -> Result<(), Error> {
        self.records.retain(|_, record| record.expires_at() > now);
        if self.records.len() >= self.capacity {
            return Err(Error::CapacityReached);
        }
        Ok(())
    }

    pub(crate) fn insert(&mut self, id: Uuid, record: V) {
        self.records.insert(id, record);
    }

    /// The record when it exists, is owned by `owner` and has not expired.
    pub(crate) fn owned(&self, id: Uuid, owner: &str, now: OffsetDateTime) -> Result<&V, Error> {
        let record = self
            .records
            .get(&id)
            .filter(|r| r.owner() == owner)
            .ok_or(Error::UnknownResource)?;
        if record.expires_at() <= now {
            return Err(Error::ResourceExpired);
        }
        Ok(record)
    }

    /// Like [`Store::owned`], for changing the record.
    pub(crate) fn owned_mut(
        &mut self,
        id: Uuid,
        owner: &str,
        now: OffsetDateTime,
    ) -> Result<&mut V, Error> {
        let record = self
            .records
            .get_mut(&id)
            .filter(|r| r.owner() == owner)
            .ok_or(Error::UnknownResource)?;
        if record.expires_at() <= now {
            return Err(Error::ResourceExpired);
        }
        Ok(record)
    }

    pub(crate) fn get_mut(&mut self, id: Uuid) -> Option<&mut V> {
        self.records.get_mut(&id)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.records.values()
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.records.values_mut()
    }

    pub(crate) fn clear(&mut self) {
        self.records.clear();
    }
}

/// Parses an id the way routes receive it; anything that is not a UUID is simply unknown.
pub(crate) fn parse_id(text: &str) -> Result<Uuid, Error> {
    Uuid::parse_str(text).map_err(|_| Error::UnknownResource)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rec(&'static str, OffsetDateTime);
    impl Expiring for Rec {
        fn owner(&self) -> &str {
            self.0
        }
        fn expires_at(&self) -> OffsetDateTime {
            self.1
        }
    }

    #[test]
    fn capacity_counts_only_live_records() {
        let now = OffsetDateTime::now_utc();
        let mut store = Store::new(2);
        store.insert(
            Uuid::new_v4(),
            Rec("local", now + time::Duration::seconds(10)),
        );
        store.insert(Uuid::new_v4(), Rec("local", now));
        assert_eq!(store.make_room(now), Ok(()));
        store.insert(
            Uuid::new_v4(),
            Rec("local", now + time::Duration::seconds(10)),
        );
        assert_eq!(store.make_room(now), Err(Error::CapacityReached));
    }

    #[test]
    fn ownership_then_expiry() {
        let now = OffsetDateTime::now_utc();
        let mut store = Store::new(10);
        let (live, dead) = (Uuid::new_v4(), Uuid::new_v4());
        store.insert(live, Rec("local", now + time::Duration::seconds(1)));
        store.insert(dead, Rec("local", now));
        assert!(store.owned(live, "local", now).is_ok());
        assert_eq!(
            store.owned(live, "other", now).err(),
            Some(Error::UnknownResource)
        );
        assert_eq!(
            store.owned(dead, "local", now).err(),
            Some(Error::ResourceExpired)
        );
        assert_eq!(
            store.owned(Uuid::new_v4(), "local", now).err(),
            Some(Error::UnknownResource)
        );
    }
}
