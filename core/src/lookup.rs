//! Maps that are looked up by key and never iterated.
//!
//! Core keeps its maps ordered (`BTreeMap`, `BTreeSet`: `core/clippy.toml` forbids std's hash
//! maps), because an order that changes from run to run would change outputs. A map that is
//! only ever looked up cannot leak an order: these wrappers hold a hash map and offer no way to
//! iterate it, so the session engine's hottest tables stay hash tables (and the npm package's
//! main module stays within its size budget).

use std::borrow::Borrow;
use std::hash::Hash;

/// A hash map with lookups only: no iteration, so no order to depend on.
#[derive(Debug, Clone)]
#[allow(clippy::disallowed_types)] // Never iterated: see the module's page.
pub(crate) struct LookupMap<K, V>(std::collections::HashMap<K, V>);

impl<K: Eq + Hash, V> LookupMap<K, V> {
    pub(crate) fn new() -> Self {
        #[allow(clippy::disallowed_types)]
        LookupMap(std::collections::HashMap::new())
    }

    pub(crate) fn get<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.0.get(key)
    }

    pub(crate) fn get_mut<Q: Eq + Hash + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.0.get_mut(key)
    }

    pub(crate) fn contains_key<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.contains_key(key)
    }

    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.0.insert(key, value)
    }

    pub(crate) fn remove<Q: Eq + Hash + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.0.remove(key)
    }

    /// The value of `key`, a default one inserted first when there is none.
    pub(crate) fn or_default(&mut self, key: K) -> &mut V
    where
        V: Default,
    {
        self.0.entry(key).or_default()
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// A hash set with membership tests only: no iteration, so no order to depend on.
#[derive(Debug, Clone)]
#[allow(clippy::disallowed_types)] // Never iterated: see the module's page.
pub(crate) struct LookupSet<K>(std::collections::HashSet<K>);

impl<K: Eq + Hash> LookupSet<K> {
    pub(crate) fn new() -> Self {
        #[allow(clippy::disallowed_types)]
        LookupSet(std::collections::HashSet::new())
    }

    pub(crate) fn contains<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.contains(key)
    }

    /// Whether `key` was not there yet.
    pub(crate) fn insert(&mut self, key: K) -> bool {
        self.0.insert(key)
    }

    pub(crate) fn remove<Q: Eq + Hash + ?Sized>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.remove(key)
    }
}
