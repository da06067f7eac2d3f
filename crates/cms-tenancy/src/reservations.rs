//! Names being created right now, so that concurrent creates of one name do
//! the costly work (a tenant's secrets) once and the others answer at once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The names of creates in flight on this server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reservations(Arc<Mutex<HashSet<String>>>);

/// A name held until the create that holds it ends.
#[derive(Debug)]
pub(crate) struct Reservation {
    names: Reservations,
    name: String,
}

impl Reservations {
    /// Holds `name`, or `None` when another create holds it.
    pub(crate) fn reserve(&self, name: &str) -> Option<Reservation> {
        let mut names = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        names.insert(name.to_string()).then(|| Reservation { names: self.clone(), name: name.to_string() })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.names.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_held_once_until_released() {
        let names = Reservations::default();
        let held = names.reserve("a").expect("free");
        assert!(names.reserve("a").is_none());
        assert!(names.reserve("b").is_some());
        drop(held);
        assert!(names.reserve("a").is_some());
    }
}
